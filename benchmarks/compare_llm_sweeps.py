"""Compare two results of one LLM sweep (e.g. made by two versions of the code): per run label, the seed means of
the final metrics and their difference in units of its standard error over the seeds.

Usage::

    python benchmarks/compare_llm_sweeps.py OLD/multisolution-nsweep NEW/multisolution-nsweep

Each argument is a sweep result folder (``final.csv``). For every label (SFT excluded) and metric it prints the
two means ± sd over seeds and ``z = (new - old) / sqrt(sd_old^2 / n_old + sd_new^2 / n_new)``; the last line
gives the largest |z| and how many comparisons exceed 2 and 3. Runs are matched by label and seed, so a
difference also shows when the code changed only the low bits of a run.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

METRICS = ("mu_pos", "retained_mass", "dnll_rare", "exact_pass_at_256", "rare_pass_at_256", "tau_ratio")


def compare(old: pd.DataFrame, new: pd.DataFrame, metrics=METRICS) -> pd.DataFrame:
    """One row per (label, metric): means, sds, seeds and z."""
    rows = []
    for label in [x for x in old["label"].unique() if x != "SFT"]:
        a, b = old[old["label"] == label], new[new["label"] == label]
        if b.empty:
            continue
        for metric in [m for m in metrics if m in a and m in b]:
            x, y = a[metric].dropna(), b[metric].dropna()
            se = math.sqrt(
                (x.var(ddof=1) if len(x) > 1 else 0.0) / len(x) + (y.var(ddof=1) if len(y) > 1 else 0.0) / len(y)
            )
            diff = y.mean() - x.mean()
            rows.append(
                {
                    "label": label,
                    "metric": metric,
                    "old": f"{x.mean():.4f} ± {x.std(ddof=1) if len(x) > 1 else 0.0:.4f}",
                    "new": f"{y.mean():.4f} ± {y.std(ddof=1) if len(y) > 1 else 0.0:.4f}",
                    "seeds": f"{len(x)}/{len(y)}",
                    "z": diff / se if se > 0 else (0.0 if diff == 0 else math.inf),
                }
            )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    args = parser.parse_args()
    table = compare(pd.read_csv(args.old / "final.csv"), pd.read_csv(args.new / "final.csv"))
    with pd.option_context("display.width", 160, "display.max_rows", 500):
        print(table.to_string(index=False, float_format=lambda v: f"{v:+.2f}"))
    z = table["z"].abs()
    print(
        f"max |z| = {z.max():.2f} over {len(z)} comparisons; |z| > 2: {int((z > 2).sum())}, > 3: {int((z > 3).sum())}"
    )


if __name__ == "__main__":
    main()
