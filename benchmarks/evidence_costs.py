"""What the runs of LLM sweeps cost, from the evidence archive's records (nothing is trained).

    python benchmarks/evidence_costs.py narrowing-plateau narrowing-endpoint

prints, per sweep, its RL runs (archived / all), their CPU-seconds as each unit's record gives them (the CPU time of
the process that made it), the CPU-hours, and the same by arm; ``--json`` prints the same as JSON. A run the archive
does not hold, or holds without a CPU time, is counted apart.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def sweep_costs(name: str, root: Path | None = None) -> dict:
    """Runs and CPU-seconds of sweep preset ``name`` from the archive at ``root`` (default: the checkout's)."""
    from tailmiss import archive
    from tailmiss.experiments.presets import llm_sweep

    sweep = llm_sweep(name)
    arms: dict[str, dict] = {}
    for variant, _seed, cfg in sweep.runs():
        arm = arms.setdefault(variant.label, {"runs": 0, "archived": 0, "cpu_s": 0.0, "unknown": 0})
        arm["runs"] += 1
        unit = archive.find(Path("runs/llm") / cfg.name, root)
        if unit is None:
            continue
        arm["archived"] += 1
        if unit.cpu_s is None:
            arm["unknown"] += 1
        else:
            arm["cpu_s"] += unit.cpu_s
    total = {k: sum(a[k] for a in arms.values()) for k in ("runs", "archived", "cpu_s", "unknown")}
    return {"sweep": name, "seeds": list(sweep.seeds), **total, "arms": arms}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", nargs="+", help="LLM sweep presets (tailmiss llm sweep --help lists them)")
    parser.add_argument("--evidence", type=Path, default=None, help="the evidence archive (default: the checkout's)")
    parser.add_argument("--json", action="store_true", help="print the costs as JSON")
    args = parser.parse_args(argv)
    try:
        rows = [sweep_costs(name, args.evidence) for name in args.sweeps]
    except ValueError as exc:
        parser.exit(2, f"error: {exc}\n")
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for r in rows:
        unknown = f", {r['unknown']} without a CPU time" if r["unknown"] else ""
        print(
            f"{r['sweep']}: {r['archived']}/{r['runs']} runs archived, {r['cpu_s']:,.0f} CPU-s "
            f"({r['cpu_s'] / 3600:.2f} CPU-h){unknown}; seeds {min(r['seeds'])}-{max(r['seeds'])}"
        )
        for label, a in r["arms"].items():
            mean = a["cpu_s"] / max(a["archived"] - a["unknown"], 1)
            print(f"  {label}: {a['archived']}/{a['runs']} runs, {a['cpu_s']:,.0f} CPU-s ({mean:,.0f} per run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
