"""The shared rung's learning rate, by the ladder's calibration rule, applied.

The rule (written above ``_LADDER_RL`` in ``tailmiss/experiments/presets.py`` for every rung, and here before the
shared rung's runs): one calibration run per candidate rate on the learning ladder's setup (``multisolution-sft``,
a fixed pool of 16 prompts, 4 per step, 100 steps), GRPO N = 8, γ = 0, seed 0, Adam (weight decay 0). The rate is
the candidate whose final Q_pos on the pool lies in [0.85, 0.95] (from about 0.7) and is closest to 0.9; with
none in the band, the closest to 0.9 overall, said so. Never read from an N shape or from the narrowing task.

    python benchmarks/shared_rung_lr.py --root runs/llm --jobs 2

Prints one row per candidate (start and final Q_pos on the pool and on held-out prompts) and the pick.
"""

from __future__ import annotations

import argparse

GRID = (0.003, 0.01, 0.03, 0.1)
BAND = (0.85, 0.95)
TARGET = 0.9


def calibration_ladder():
    """The calibration runs as one ladder: a shared rung per candidate rate, N = 8, γ = 0, seed 0."""
    from tailmiss.experiments.ladder import Ladder, Rung
    from tailmiss.experiments.presets import LADDERS

    learning = LADDERS["ladder"]
    rungs = tuple(Rung("shared", "adamw", lr) for lr in GRID)
    return Ladder("shared-rung-lr", learning.sft, learning.rl, rungs, (8,), gammas=(0.0,), seeds=(0,))


def pick(rows: list[dict]) -> tuple[float, bool]:
    """The rule's pick from rows with ``lr`` and ``final`` (pool Q_pos): (rate, whether it lies in the band)."""
    inside = [r for r in rows if BAND[0] <= r["final"] <= BAND[1]]
    best = min(inside or rows, key=lambda r: (abs(r["final"] - TARGET), r["lr"]))
    return best["lr"], bool(inside)


def main() -> None:
    from tailmiss.experiments.ladder import run_ladder
    from tailmiss.options import RunOptions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="runs/llm")
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args()
    result = run_ladder(calibration_ladder(), args.root, RunOptions(jobs=args.jobs, progress=False))
    h = result.history
    rows = []
    for lr, g in h.groupby("lr"):
        pool, held = g[g["set"] == "pool"].sort_values("step"), g[g["set"] == "heldout"].sort_values("step")
        rows.append(
            dict(
                lr=float(lr),
                start=float(pool["q_pos"].iloc[0]),
                final=float(pool["q_pos"].iloc[-1]),
                held_start=float(held["q_pos"].iloc[0]),
                held_final=float(held["q_pos"].iloc[-1]),
            )
        )
    print(f"{'lr':>7} {'pool Q_pos start':>17} {'final':>7} {'held-out start':>15} {'final':>7}")
    for r in rows:
        print(f"{r['lr']:>7g} {r['start']:>17.4f} {r['final']:>7.4f} {r['held_start']:>15.4f} {r['held_final']:>7.4f}")
    lr, inside = pick(rows)
    print(f"pick: lr {lr:g}" + ("" if inside else " (none in the band: the closest to 0.9)"))


if __name__ == "__main__":
    main()
