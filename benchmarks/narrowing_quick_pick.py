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
setting and the pick.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

STOPS = (40, 60, 80, 100, 140, 200)
SEEDS = (1, 2)


def _sweep(sft_steps: int):
    from tailmiss.experiments.presets import workload
    from tailmiss.experiments.sweep_config import LLMSweep, Variant

    study = workload("narrowing")
    sft = study.sft
    if sft_steps != sft.steps:
        sft = sft.replace(name=f"narrowing-sft-str0.5-s{sft_steps}", steps=sft_steps)
    rl = study.rl.replace(name=f"nq-search-s{sft_steps}", steps=max(STOPS), checkpoint_every=100)
    variants = (Variant("grpo", 0.0, 8), Variant("grpo", 0.0, 8, tag="lr3e-4", overrides={"optim.lr": 3e-4}))
    return LLMSweep(f"nq-search-s{sft_steps}", sft, rl, variants, seeds=SEEDS)


def _rows(sweep, root: Path) -> list[dict]:
    from tailmiss.experiments.sweep import per_prompt_evals
    from tailmiss.studies.narrowing.data import _minority, by_type

    sft_s = json.loads((root / sweep.sft.name / "meta.json").read_text())["elapsed_s"]
    typed = by_type(per_prompt_evals(sweep, root), _minority(sweep))
    rows = []
    for variant, seed, cfg in sweep.runs():
        rl_s = json.loads((root / cfg.name / "meta.json").read_text())["elapsed_s"]
        run = typed[(typed["label"] == variant.label) & (typed["seed"] == seed)]
        at = {kind: run[run["type"] == kind].set_index("step") for kind in ("all", "minority", "rest")}
        for stop in STOPS:
            fall = {kind: float(at[kind].loc[0, "pass256"] - at[kind].loc[stop, "pass256"]) for kind in at}
            sft256 = float(at["all"].loc[0, "pass256"])
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
                    "cost_s": sft_s + 3 * rl_s * stop / cfg.steps,
                    "qualifies": sft256 <= 0.99 and fall["all"] >= 0.05 and fall["minority"] > fall["rest"],
                }
            )
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sft-steps", type=int, nargs="+", default=[1000, 3000], help="the grid's SFT lengths")
    parser.add_argument("--root", type=Path, default=Path("runs/llm"), help="where the runs are (or go)")
    parser.add_argument("--jobs", type=int, default=2, help="processes that train side by side")
    args = parser.parse_args(argv)

    from tailmiss.experiments.sweep import run_sweep
    from tailmiss.options import RunOptions

    rows = []
    for steps in args.sft_steps:
        sweep = _sweep(steps)
        run_sweep(sweep, args.root, RunOptions(jobs=args.jobs, progress=False))
        rows += _rows(sweep, args.root)
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
