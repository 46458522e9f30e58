"""Stacked RL runs (tailmiss.experiments.run_stack) against the one-run pool, side by side on the same cores, and equal.

The runs are those of a named sweep at one group size (default: the narrowing study's N = 8 arms, GRPO and F-GRPO
γ = 0.5 and 1, plus its controls' low-LR arm), optionally shortened (``--steps``, ``--sft-steps``: say so beside
any number quoted). Both ways start from one SFT model trained first (not timed):

* **one-run pool**: ``--workers`` processes (spawned, one torch thread each), one ``train_rl`` per run;
* **stacks**: the same runs split into ``--workers`` stacks of equal size (``train_rl_stack``), one per process.

Wall and CPU seconds (this process's reaped children) of each, their ratios, and whether every run's
``history.csv``, ``prompt_evals.npz`` and weights came out identical. Prints a table and writes ``--out`` (JSON).

    python benchmarks/llm_stack.py --steps 40 --sft-steps 300 --seeds 0 1 --out /tmp/llm_stack.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def _init() -> None:
    import torch

    torch.set_num_threads(1)


def _one(cfg, init, out) -> None:
    from tailmiss.llm.train import train_rl

    train_rl(cfg, init, out, device="cpu", progress=False)


def _stack(cfgs, inits, outs) -> None:
    from tailmiss.experiments.run_stack import train_rl_stack

    train_rl_stack(cfgs, inits, outs, device="cpu", progress=False)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(workers: int, calls: list) -> tuple[float, float]:
    import multiprocessing

    cpu, start = _children_cpu(), time.perf_counter()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init) as pool:
        for future in [pool.submit(fn, *args) for fn, *args in calls]:
            future.result()
    return time.perf_counter() - start, _children_cpu() - cpu


def _runs(sweep_name: str, group_size: int, controls: str | None, steps: int | None, seeds):
    from tailmiss.experiments.presets import LLM_SWEEPS

    sweeps = [LLM_SWEEPS[sweep_name]] + ([LLM_SWEEPS[controls]] if controls else [])
    out = []
    for sweep in sweeps:
        for variant, seed, cfg in sweep.runs():
            if cfg.group_size != group_size or (seeds and seed not in seeds):
                continue
            if sweep is not sweeps[0] and variant.method != "grpo":  # the controls: low-LR only (GRPO, other lr)
                continue
            if sweep is not sweeps[0] and not any(k.startswith("optim.") for k, _ in variant.overrides):
                continue
            out.append(cfg.replace(steps=steps) if steps else cfg)
    return sweeps[0].sft, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", default="narrowing")
    parser.add_argument("--controls", default="narrowing-controls", help="a sweep whose low-LR arms join ('' none)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--seeds", type=int, nargs="*", default=None)
    parser.add_argument("--steps", type=int, default=None, help="shorten every RL run to this many steps")
    parser.add_argument("--sft-steps", type=int, default=None, help="shorten the SFT model's training")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from tailmiss.experiments.run_stack import stack_key
    from tailmiss.llm.sft import train_sft
    from tailmiss.store import file_sha256

    sft_cfg, cfgs = _runs(args.sweep, args.group_size, args.controls or None, args.steps, args.seeds)
    if args.sft_steps:
        sft_cfg = sft_cfg.replace(steps=args.sft_steps, eval_every=args.sft_steps, checkpoint_every=args.sft_steps)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        init = train_sft(sft_cfg, root / "sft", device="cpu", progress=False)
        keys = {stack_key(c, init) for c in cfgs}
        if None in keys or len(keys) != 1:
            raise SystemExit(f"these {len(cfgs)} runs do not share one stack key")
        one = [(_one, c, init, root / "one" / c.name) for c in cfgs]
        wall_one, cpu_one = _timed(args.workers, one)
        chunks = [cfgs[k :: args.workers] for k in range(args.workers)]
        stacks = [(_stack, ch, [init] * len(ch), [root / "stack" / c.name for c in ch]) for ch in chunks if ch]
        wall_stack, cpu_stack = _timed(args.workers, stacks)
        same = {}
        for c in cfgs:
            a, b = root / "one" / c.name, root / "stack" / c.name
            files = ["history.csv"] + (["prompt_evals.npz"] if (a / "prompt_evals.npz").is_file() else [])
            ok = all(file_sha256(a / f) == file_sha256(b / f) for f in files)
            wa = torch.load(a / "checkpoint.pt", map_location="cpu", weights_only=True)["model"]
            wb = torch.load(b / "checkpoint.pt", map_location="cpu", weights_only=True)["model"]
            same[c.name] = ok and all(torch.equal(wa[k], wb[k]) for k in wa)
    record = {
        "runs": [c.name for c in cfgs],
        "rl_steps": cfgs[0].steps,
        "sft_steps": sft_cfg.steps,
        "workers": args.workers,
        "cores": len(os.sched_getaffinity(0)),
        "torch": torch.__version__,
        "one_run_pool": {"wall_s": round(wall_one, 1), "cpu_s": round(cpu_one, 1)},
        "stacks": {"wall_s": round(wall_stack, 1), "cpu_s": round(cpu_stack, 1), "sizes": [len(ch) for ch in chunks]},
        "speedup_wall": round(wall_one / wall_stack, 2),
        "speedup_cpu": round(cpu_one / cpu_stack, 2),
        "identical": same,
    }
    print(
        f"{len(cfgs)} runs ({args.sweep}, N = {args.group_size}), {cfgs[0].steps} RL steps, SFT {sft_cfg.steps} "
        f"steps, {args.workers} workers on {record['cores']} cores"
    )
    print("| way | wall | CPU |\n|---|---|---|")
    print(f"| one-run pool | {wall_one:.1f} s | {cpu_one:.1f} s |")
    print(f"| {len(stacks)} stacks of {record['stacks']['sizes']} | {wall_stack:.1f} s | {cpu_stack:.1f} s |")
    print(
        f"speed-up: wall {record['speedup_wall']}x, CPU {record['speedup_cpu']}x; "
        f"identical runs: {sum(same.values())} of {len(same)}"
    )
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
