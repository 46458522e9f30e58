"""Compare two saved results of the same simulation config: do the final numbers agree within seed noise?

Used when a change alters the random stream (same law, other draws): for every ``(N, γ)`` it prints the
seed-mean final ``q_pos`` and ``retained_mass`` of both results, their difference, and that difference in
units of its standard error (the seeds' standard deviations of the two results pooled; seeds of one result are
independent runs, and the two results use different draws). ``|z| < 3`` everywhere is what "moved only within
seed noise" means here.

Usage::

    python benchmarks/compare_sim_results.py OLD_DIR NEW_DIR [--metrics q_pos retained_mass]
"""

from __future__ import annotations

import argparse

import numpy as np

from tailmiss.sim import SimResult


def compare(old: SimResult, new: SimResult, metrics) -> list[dict]:
    """One row per (group size, γ, metric): both seed means, difference and z-score."""
    if old.config.replace(name="x") != new.config.replace(name="x"):
        raise ValueError("the two results come from different configs")
    rows = []
    a, b = old.final, new.final
    for (n, gamma), sa in a.groupby(["group_size", "gamma"]):
        sb = b[(b["group_size"] == n) & (b["gamma"] == gamma)]
        for m in metrics:
            xa, xb = sa[m].to_numpy(), sb[m].to_numpy()
            se = np.sqrt(xa.var(ddof=1) / len(xa) + xb.var(ddof=1) / len(xb)) if len(xa) > 1 else np.nan
            diff = xb.mean() - xa.mean()
            rows.append(
                {
                    "N": int(n),
                    "gamma": float(gamma),
                    "metric": m,
                    "old": xa.mean(),
                    "new": xb.mean(),
                    "diff": diff,
                    "z": diff / se if se > 0 else (0.0 if diff == 0 else np.inf),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--metrics", nargs="+", default=["q_pos", "retained_mass"])
    args = parser.parse_args()
    rows = compare(SimResult.load(args.old), SimResult.load(args.new), args.metrics)
    print(f"{'N':>7} {'γ':>4} {'metric':<14} {'old':>8} {'new':>8} {'diff':>9} {'z':>6}")
    for r in rows:
        print(
            f"{r['N']:>7} {r['gamma']:>4g} {r['metric']:<14} {r['old']:8.4f} {r['new']:8.4f} {r['diff']:+9.4f} "
            f"{r['z']:+6.2f}"
        )
    z = np.array([abs(r["z"]) for r in rows if np.isfinite(r["z"])])
    print(f"max |z| = {z.max():.2f} over {len(z)} comparisons; |z| > 3: {int((z > 3).sum())}")


if __name__ == "__main__":
    main()
