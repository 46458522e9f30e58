"""The grid behind ``narrowing-quick`` and the rule that picked its setting (the first look's narrowing regime).

The rule and its grid are written in ``tailmiss/experiments/narrowing_presets.py`` (module docstring, "The quick
preset's rule"), before any of these runs: an SFT model of the narrowing task (the study's recipe) for each of
``--sft-steps``; from it GRPO N = 8 with the study's RL recipe at lr 1e-4 and 3e-4 for 200 steps, RL seeds 1 and 2
(the first look shows seed 0); each run read at 40, 60, 80, 100, 140 and 200 steps. A setting qualifies when on each
seed the SFT model's held-out pass@256 is at most 0.99, GRPO's falls by at least 0.05, and the minority's falls
further than the rest's; the rule takes the qualifying setting of least cost (the SFT model's training seconds plus
three times the RL seconds up to the stop, from the runs' ``meta.json``).

    python benchmarks/narrowing_quick_pick.py --sft-steps 1000 --root runs/llm

trains what is missing into ``--root`` (two processes by default) and prints one row per run and stop, then one per
setting and the pick. ``--amended`` applies the amended rule (same module docstring): SFT models of 250, 500 and
1000 steps, lr 3e-4 and 1e-3, 40-step runs scored every 10 steps and read at 10, 20, 30 and 40, the fourth condition
(pass@1 up by at least 0.05) and a cost of the SFT seconds plus four times the RL seconds.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

SEEDS = (1, 2)
GRIDS = {
    # the first rule: lr 1e-4 and 3e-4, 200-step runs read at six stops, the cost of three RL arms
    "first": dict(
        name="nq-search", lrs=(None, 3e-4), stops=(40, 60, 80, 100, 140, 200), eval_every=None, arms=3, min_rise=None
    ),
    # the amended rule: below the first grid's corner, the cost of the first look's four arms, pass@1 up by 0.05
    "amended": dict(name="nq-amended", lrs=(3e-4, 1e-3), stops=(10, 20, 30, 40), eval_every=10, arms=4, min_rise=0.05),
}


def _sweep(sft_steps: int, grid: dict):
    from tailmiss.experiments.presets import workload
    from tailmiss.experiments.sweep_config import LLMSweep, Variant

    study = workload("narrowing")
    sft = study.sft
    if sft_steps != sft.steps:
        sft = sft.replace(name=f"narrowing-sft-str0.5-s{sft_steps}", steps=sft_steps)
    name = f"{grid['name']}-s{sft_steps}"
    rl = study.rl.replace(name=name, steps=max(grid["stops"]), checkpoint_every=100)
    if grid["eval_every"]:
        rl = rl.replace(eval_every=grid["eval_every"])
    variants = tuple(
        Variant("grpo", 0.0, 8, tag=f"lr{lr:.0e}".replace("e-0", "e-"), overrides={"optim.lr": lr})
        if lr
        else Variant("grpo", 0.0, 8)
        for lr in grid["lrs"]
    )
    return LLMSweep(name, sft, rl, variants, seeds=SEEDS)


def _rows(sweep, root: Path, grid: dict) -> list[dict]:
    from tailmiss.experiments.sweep import per_prompt_evals
    from tailmiss.studies.narrowing.data import _minority, by_type

    sft_s = json.loads((root / sweep.sft.name / "meta.json").read_text())["elapsed_s"]
    typed = by_type(per_prompt_evals(sweep, root), _minority(sweep))
    rows = []
    for variant, seed, cfg in sweep.runs():
        rl_s = json.loads((root / cfg.name / "meta.json").read_text())["elapsed_s"]
        run = typed[(typed["label"] == variant.label) & (typed["seed"] == seed)]
        at = {kind: run[run["type"] == kind].set_index("step") for kind in ("all", "minority", "rest")}
        for stop in grid["stops"]:
            fall = {kind: float(at[kind].loc[0, "pass256"] - at[kind].loc[stop, "pass256"]) for kind in at}
            sft256 = float(at["all"].loc[0, "pass256"])
            rise = float(at["all"].loc[stop, "mu_pos"] - at["all"].loc[0, "mu_pos"])
            qualifies = sft256 <= 0.99 and fall["all"] >= 0.05 and fall["minority"] > fall["rest"]
            if grid["min_rise"] is not None:
                qualifies = qualifies and rise >= grid["min_rise"]
            rows.append(
                {
                    "sft_steps": sweep.sft.steps,
                    "lr": cfg.optim.lr,
                    "seed": seed,
                    "stop": stop,
                    "sft_pass256": sft256,
                    "fall": fall["all"],
                    "fall_minority": fall["minority"],
                    "fall_rest": fall["rest"],
                    "pass1": float(at["all"].loc[stop, "mu_pos"]),
                    "pass1_rise": rise,
                    "cost_s": sft_s + grid["arms"] * rl_s * stop / cfg.steps,
                    "qualifies": qualifies,
                }
            )
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sft-steps", type=int, nargs="+", help="SFT lengths (1000 3000; amended 250 500 1000)")
    parser.add_argument("--amended", action="store_true", help="the amended rule's grid and conditions")
    parser.add_argument("--root", type=Path, default=Path("runs/llm"), help="where the runs are (or go)")
    parser.add_argument("--jobs", type=int, default=2, help="processes that train side by side")
    args = parser.parse_args(argv)

    from tailmiss.experiments.sweep import run_sweep
    from tailmiss.options import RunOptions

    grid = GRIDS["amended" if args.amended else "first"]
    rows = []
    for steps in args.sft_steps or ((250, 500, 1000) if args.amended else (1000, 3000)):
        sweep = _sweep(steps, grid)
        run_sweep(sweep, args.root, RunOptions(jobs=args.jobs, progress=False))
        rows += _rows(sweep, args.root, grid)
    runs = pd.DataFrame(rows)
    settings = (
        runs.groupby(["sft_steps", "lr", "stop"])
        .agg(qualifies=("qualifies", "all"), cost_s=("cost_s", "mean"), fall=("fall", "mean"))
        .reset_index()
    )
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        for frame in (runs, settings):
            print(frame.round(3).assign(lr=frame["lr"].map("{:g}".format)).to_string(index=False))
            print()
    chosen = settings[settings["qualifies"]].sort_values("cost_s")
    print("pick:", chosen.iloc[0].to_dict() if len(chosen) else "none qualifies")


if __name__ == "__main__":
    main()
