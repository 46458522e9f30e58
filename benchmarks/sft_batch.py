"""What one SFT step's data costs: drawing the prompts, and the batch built by arrays against the per-prompt loop.

For each SFT preset named (default: the three transformer SFT models of the first look), draws ``--steps`` steps'
prompts as ``tailmiss.llm.sft`` does and builds each batch twice from the same seed: with the task's
``sft_batch`` (array operations) and with the base class's loop of ``sft_answer`` (one ``Generator.choice`` per
prompt). Checks the two are equal and prints milliseconds per step for each, one JSON line per preset.

    python benchmarks/sft_batch.py
    python benchmarks/sft_batch.py --presets narrowing-sft-str0.5-quick --steps 500
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from tailmiss.experiments.presets import LADDERS, LLM_PRESETS, LLM_SWEEPS
from tailmiss.llm.tasks.base import Task

DEFAULT = ("multisolution-sft-quick", "multisolution-hard-sft-quick", "narrowing-sft-str0.5-quick")


def _sft_config(name: str):
    """The SFT config named ``name``: an SFT preset, or the SFT model of a sweep or a ladder."""
    named = {c.name: c for c in (*(s.sft for s in LLM_SWEEPS.values()), *(lad.sft for lad in LADDERS.values()))}
    named.update({k: v for k, v in LLM_PRESETS.items() if hasattr(v, "batch_size")})
    if name not in named:
        raise SystemExit(f"no SFT preset named {name!r}")
    return named[name]


def measure(name: str, steps: int) -> dict:
    cfg = _sft_config(name)
    task, size = cfg.task, cfg.batch_size
    started = time.perf_counter()
    batches = [task.prompts("train", size, seed=s) for s in range(steps)]
    prompts_s = time.perf_counter() - started
    started = time.perf_counter()
    arrays = [task.sft_batch(p, np.random.default_rng(s)) for s, p in enumerate(batches)]
    arrays_s = time.perf_counter() - started
    started = time.perf_counter()
    looped = [Task.sft_batch(task, p, np.random.default_rng(s)) for s, p in enumerate(batches)]
    loop_s = time.perf_counter() - started
    same = all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(arrays, looped))
    return {
        "preset": name,
        "batch": size,
        "steps": steps,
        "prompts_ms": round(1e3 * prompts_s / steps, 3),
        "arrays_ms": round(1e3 * arrays_s / steps, 3),
        "loop_ms": round(1e3 * loop_s / steps, 3),
        "speed_up": round(loop_s / arrays_s, 1),
        "same": same,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", default=list(DEFAULT))
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.presets:
        print(json.dumps(measure(name, args.steps)))


if __name__ == "__main__":
    main()
