"""The shared-parameter simulator's cost against the table simulator on the same rows.

Action-updates per second = rows × actions × steps / wall time, where a row is one (run, prompt): the shared
simulator's 8 prompts per run are 8 rows, and the table simulator is given the same rows as 8 runs per (N, γ)
(seeds ``row_seed(0, x)``, so that both draw the same numbers of actions from the same streams). The difference is
what sharing costs: the logits ``Φ̃ Θ`` each step and the chain rule back to Θ (one-hot prompt features: an add and a
sum over prompts; random features: two matrix products), and Adam over ``features × actions`` instead of
``prompts × actions`` values.

Usage::

    python benchmarks/sim_shared.py                        # 131,072 actions, N in {8, 8192, 131072}, 20 steps
    python benchmarks/sim_shared.py --device cuda --steps 50
"""

from __future__ import annotations

import argparse
import time

import torch

from tailmiss.sim import SimConfig, simulate
from tailmiss.sim.shared import SharedSimConfig, row_seed, simulate_shared


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=131_072)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--group-sizes", type=int, nargs="+", default=[8, 8192, 131072])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=2, help="timings per variant; the fastest is printed")
    args = parser.parse_args()

    sim = SimConfig(
        name="bench-shared",
        num_actions=args.actions,
        num_correct=10_000,
        group_sizes=tuple(args.group_sizes),
        gammas=(0.0, 1.0),
        seeds=(0,),
        steps=args.steps,
        log_every=10,
    )
    p = args.prompts
    variants = {
        "table (one row per run)": lambda: simulate(
            sim.replace(seeds=tuple(row_seed(0, x) for x in range(p))), device=args.device, progress=False
        ),
        "shared, one-hot, no bias": lambda: simulate_shared(
            SharedSimConfig(sim=sim, num_prompts=p, minority_prompts=0, train_bias=False),
            device=args.device,
            progress=False,
        ),
        "shared, one-hot + bias": lambda: simulate_shared(
            SharedSimConfig(sim=sim, num_prompts=p, minority_prompts=p // 4), device=args.device, progress=False
        ),
        "shared, 4 random features + bias": lambda: simulate_shared(
            SharedSimConfig(sim=sim, num_prompts=p, minority_prompts=p // 4, prompt_features="random", prompt_dim=4),
            device=args.device,
            progress=False,
        ),
    }
    rows = len(args.group_sizes) * 2 * p
    print(
        f"{rows} rows ({len(args.group_sizes)} N x 2 gamma x {p} prompts) x {args.actions:,} actions x "
        f"{args.steps} steps on {args.device}, {torch.get_num_threads()} threads, torch {torch.__version__}"
    )
    base = None
    for name, run in variants.items():
        wall = min(_timed(run) for _ in range(args.repeat))
        rate = rows * args.actions * args.steps / wall
        base = base or wall
        print(
            f"{name:<34} {wall:7.2f} s  {1e3 * wall / args.steps:8.1f} ms/step  {rate:.3g} action-updates/s  "
            f"{wall / base:.2f}x the table's time"
        )


if __name__ == "__main__":
    main()
