"""The rules that pick the first look's lengths, applied: the quick simulation, group-size sweep and narrowing ladder.

Each rule is written beside its preset before the runs it judges (``tailmiss/sim/presets.py`` above
``fgrpo-fig2-quick``; ``tailmiss/experiments/presets.py`` above ``_N_SWEEP``;
``tailmiss/experiments/narrowing_presets.py`` above ``narrowing-ladder-quick``). Both read one long run of
a seed the first look never shows (seed 1; the first look shows seed 0) at each candidate length: the rate is
constant and the draws are counter-based (the simulator) or scoring draws nothing (the transformer), so the first
steps of a long run are those of a shorter one. ``--verify`` also runs the picked length on its own and prints the
largest difference from the long run's values at that step (0 when the prefix argument holds).

    python benchmarks/first_look_pick.py sim [--verify]
    python benchmarks/first_look_pick.py nsweep --root runs/llm [--verify]
    python benchmarks/first_look_pick.py ladder --root runs/llm

Each prints one row per candidate length with what its conditions read, then the pick.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

SIM_LENGTHS = (250, 500, 750, 1000)
NSWEEP_LENGTHS = (20, 40, 60)
LADDER_LENGTHS = (20, 40, 60)
PICK_SEED = 1


def _sim_config(steps: int):
    from tailmiss.sim import preset

    return preset("fgrpo-fig2-quick").replace(steps=steps, seeds=(PICK_SEED,), log_every=10)


def sim_rows(history: pd.DataFrame, lengths=SIM_LENGTHS) -> list[dict]:
    """The simulation rule's reading at each length (one seed: values, no means to take)."""
    rows = []
    for steps in lengths:
        at = history[history["step"] == steps]
        m0 = at[at["gamma"] == 0.0].set_index("group_size")["retained_mass"].sort_index()
        m1 = at[at["gamma"] == 1.0].set_index("group_size")["retained_mass"].sort_index()
        lo, hi = m0.index.min(), m0.index.max()
        zone = m0[(m0 < 0.5) & (m0.index > lo) & (m0.index < hi)].index
        lift = m1 - m0
        inside = float(lift[lift.index.isin(zone)].mean()) if len(zone) else float("nan")
        outside = float(lift[~lift.index.isin(zone)].mean())
        ends = bool(m0[lo] >= 0.9 and m0[hi] >= 0.9)
        rows.append(
            {
                "steps": steps,
                "M_ret N=2": float(m0[lo]),
                "M_ret N=max": float(m0[hi]),
                "zone II": ",".join(str(int(n)) for n in zone) or "none",
                "lift inside": inside,
                "lift outside": outside,
                "qualifies": ends and len(zone) > 0 and inside > outside,
            }
        )
    return rows


def _nsweep(steps: int):
    from tailmiss.experiments.presets import llm_sweep

    sweep = llm_sweep("multisolution-nsweep-quick")
    rl = sweep.rl.replace(name=f"first-look-pick-{sweep.rl.name}-t{steps}", steps=steps)
    return sweep.replace(name=f"first-look-pick-nsweep-t{steps}", rl=rl, seeds=(PICK_SEED,))


def nsweep_rows(histories: dict[tuple[float, int], pd.DataFrame], lengths=NSWEEP_LENGTHS) -> list[dict]:
    """The group-size sweep rule's reading at each length; ``histories[(gamma, N)]`` is a run's ``history.csv``."""
    rows = []

    def at(gamma, n, col, steps):
        frame = histories[(gamma, n)]
        return float(frame.loc[frame["step"] == steps, col].iloc[0])

    for steps in lengths:
        rise = at(0.0, 32, "mu_pos", steps) - at(0.0, 2, "mu_pos", steps)
        fall = at(0.0, 2, "rare_hit_at_256", steps) - at(0.0, 32, "rare_hit_at_256", steps)
        keeps = at(0.5, 8, "retained_mass", steps) - at(0.0, 8, "retained_mass", steps)
        rows.append(
            {
                "steps": steps,
                "pass@1 N=32 - N=2": rise,
                "rare hit@256 N=2 - N=32": fall,
                "M_ret F-GRPO - GRPO N=8": keeps,
                "qualifies": rise >= 0.02 and fall >= 0.05 and keeps > 0,
            }
        )
    return rows


def ladder_rows(typed: dict[str, pd.DataFrame], lengths=LADDER_LENGTHS) -> list[dict]:
    """The quick ladder rule's reading at each length; ``typed[rung kind]`` is the rung's runs by prompt type."""
    rows = []
    for steps in lengths:
        change = {}
        for kind, frame in typed.items():
            part = frame[(frame["label"] == "GRPO N=8") & (frame["type"] == "minority")].set_index("step")
            change[kind] = float(part.loc[steps, "pass256"] - part.loc[0, "pass256"])
        keep = all(change[k] >= -0.01 for k in ("table", "factorized"))
        rows.append(
            {
                "steps": steps,
                **{f"minority {k}": v for k, v in change.items()},
                "qualifies": change["transformer"] <= -0.05 and keep,
            }
        )
    return rows


def _run_ladder(root: Path, jobs: int) -> None:
    from tailmiss.experiments.ladder import run_ladder
    from tailmiss.experiments.presets import ladder_preset
    from tailmiss.experiments.sweep import per_prompt_evals
    from tailmiss.options import RunOptions
    from tailmiss.studies.narrowing.data import _minority, by_type

    lad = ladder_preset("narrowing-ladder-quick")
    lad = lad.replace(
        name="first-look-pick-narrowing-ladder",
        rl=lad.rl.replace(name=f"first-look-pick-{lad.rl.name}", steps=max(LADDER_LENGTHS)),
        seeds=(PICK_SEED,),
    )
    result = run_ladder(lad, root, RunOptions(jobs=jobs, progress=False))
    typed = {
        rung.split("-")[0]: by_type(per_prompt_evals(r.config, root), _minority(r.config))
        for rung, r in result.sweeps.items()
    }
    _print(ladder_rows(typed), max(LADDER_LENGTHS))


def _print(rows: list[dict], default: int) -> int:
    frame = pd.DataFrame(rows)
    with pd.option_context("display.width", 200):
        print(frame.round(4).to_string(index=False))
    chosen = frame[frame["qualifies"]]
    pick = int(chosen["steps"].min()) if len(chosen) else default
    print("pick:", pick if len(chosen) else f"none qualifies: {default}")
    return pick


def _run_sim(verify: bool) -> None:
    from tailmiss.sim import simulate

    long = simulate(_sim_config(max(SIM_LENGTHS)), progress=False)
    pick = _print(sim_rows(long.history), max(SIM_LENGTHS))
    if verify and pick != max(SIM_LENGTHS):
        short = simulate(_sim_config(pick), progress=False).final.set_index(["group_size", "gamma"])
        ref = long.history[long.history["step"] == pick].set_index(["group_size", "gamma"])
        cols = [c for c in short.columns if c not in ("run", "seed", "step")]
        diff = np.nanmax(np.abs(short[cols].to_numpy(float) - ref.loc[short.index, cols].to_numpy(float)))
        print(f"verify: a {pick}-step run against the long run at step {pick}: largest difference {diff:.3g}")


def _histories(sweep, root: Path) -> dict[tuple[float, int], pd.DataFrame]:
    return {
        (v.gamma, v.group_size): pd.read_csv(root / cfg.name / "history.csv")
        for v, _seed, cfg in sweep.runs()
        if not v.tag
    }


def _run_nsweep(root: Path, jobs: int, verify: bool) -> None:
    from tailmiss.experiments.sweep import run_sweep
    from tailmiss.options import RunOptions

    options = RunOptions(jobs=jobs, progress=False)
    long = _nsweep(max(NSWEEP_LENGTHS))
    run_sweep(long, root, options)
    histories = _histories(long, root)
    pick = _print(nsweep_rows(histories), max(NSWEEP_LENGTHS))
    if verify and pick != max(NSWEEP_LENGTHS):
        short = _nsweep(pick)
        run_sweep(short, root, options)
        diff = 0.0
        for key, frame in _histories(short, root).items():
            ref = histories[key].set_index("step").loc[frame["step"]]
            cols = [c for c in ("mu_pos", "retained_mass", "rare_hit_at_256", "exact_pass_at_256") if c in frame]
            diff = max(diff, float(np.nanmax(np.abs(frame[cols].to_numpy(float) - ref[cols].to_numpy(float)))))
        print(f"verify: {pick}-step runs against the long runs' first {pick} steps: largest difference {diff:.3g}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    runs = argparse.ArgumentParser(add_help=False)
    runs.add_argument("--root", type=Path, default=Path("runs/llm"), help="where the runs are (or go)")
    runs.add_argument("--jobs", type=int, default=2, help="processes that train side by side")
    sub = parser.add_subparsers(dest="what", required=True)
    sim = sub.add_parser("sim", help="fgrpo-fig2-quick's length")
    sim.add_argument("--verify", action="store_true")
    nsw = sub.add_parser("nsweep", parents=[runs], help="multisolution-nsweep-quick's length")
    nsw.add_argument("--verify", action="store_true")
    sub.add_parser("ladder", parents=[runs], help="narrowing-ladder-quick's length")
    args = parser.parse_args(argv)
    if args.what == "sim":
        _run_sim(args.verify)
    elif args.what == "ladder":
        _run_ladder(args.root, args.jobs)
    else:
        _run_nsweep(args.root, args.jobs, args.verify)


if __name__ == "__main__":
    main()
