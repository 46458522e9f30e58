"""The shared simulator on the narrowing task against the trainer's shared rung: seconds per run.

The simulator runs the shared rung's law (``tailmiss.experiments.shared_bridge.simulate_rung``: 64 prompts × 1,001
actions, 16 prompts a step, N = 8, 200 steps, γ = 0 and 1) on 20 seeds, in one process at 1 and at 2 torch threads,
three times each (the best is reported); the trainer's seconds per run are read from the shared rung's run folders
(``meta.json``, ``elapsed_s``, each one process of one thread). The ladder must have been trained under ``--root``:

    tailmiss llm sweep --preset narrowing-ladder-shared --root runs/llm --jobs 2 --no-progress
    python benchmarks/shared_rung_sim.py --root runs/llm
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("runs/llm"), help="where the shared ladder was trained")
    parser.add_argument("--ladder", default="narrowing-ladder-shared", help="a ladder preset with one shared rung")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    from tailmiss.experiments.presets import ladder_preset
    from tailmiss.experiments.shared_bridge import SIM_SEEDS, shared_rung, simulate_rung

    ladder = ladder_preset(args.ladder)
    _, sweep = shared_rung(ladder)
    trained = [json.loads((args.root / cfg.name / "meta.json").read_text()) for _, _, cfg in sweep.runs()]
    per_run = sorted(m["elapsed_s"] for m in trained)
    print(f"trainer: {len(per_run)} runs, {per_run[len(per_run) // 2]:.2f} s per run (median; one thread each)")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        best = float("inf")
        for _ in range(args.repeats):
            started = time.perf_counter()
            result = simulate_rung(ladder, args.root, seeds=SIM_SEEDS)
            best = min(best, time.perf_counter() - started)
        runs = result.sim.num_runs
        print(
            f"simulator, {threads} thread(s): {runs} runs in {best:.2f} s (best of {args.repeats}), "
            f"{best / runs:.3f} s per run, {result.meta['action_updates_per_s']:.3g} action-updates/s"
        )


if __name__ == "__main__":
    main()
