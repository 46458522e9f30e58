"""The end point's seed count: the rule of ``tailmiss/studies/narrowing/end_point_seeds.py`` applied to the plateau
runs (seeds 10-14) the evidence archive holds.

    python benchmarks/end_point_seeds.py

reads the archived ``narrowing-plateau`` sweep result (nothing is trained), prints per pair the measured paired sds
of the end points' pass@1 and pass@256, the measured pass@256 difference, the seeds each wanted test needs and the
powers at the count, then the count and the fresh seeds it asks for (``--json``: the same as JSON). The preset
``narrowing-endpoint`` trains those seeds; ``tests/test_power.py`` checks that its seeds are this count.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tailmiss.studies.narrowing.data import archived_history
from tailmiss.studies.narrowing.end_point_seeds import END_POINT_MOST_SEEDS, END_POINT_POWER, end_point_seeds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evidence", type=Path, default=None, help="the evidence archive (default: the checkout's)")
    parser.add_argument("--json", action="store_true", help="print the count as JSON")
    args = parser.parse_args(argv)
    history = archived_history("narrowing-plateau", args.evidence)
    if history is None:
        parser.error("the evidence archive does not hold the narrowing-plateau sweep result at the preset's config")
    count = end_point_seeds(history)
    rows, most = [], f"more than {END_POINT_MOST_SEEDS}"
    for p in count.pairs:
        p1, p256 = count.power_at(p)
        rows.append(
            {
                "pair": f"{p.a} − {p.b}",
                "seeds_measured": p.seeds,
                "sd_pass1": p.sd_pass1,
                "diff_pass256": p.diff_pass256,
                "sd_pass256": p.sd_pass256,
                "need_pass1": p.need_pass1 or most,
                "need_pass256": (p.need_pass256 or most) if p.asks_pass256 else "not asked",
                "power_pass1": p1,
                "power_pass256": p256,
            }
        )
    if args.json:
        print(json.dumps({"pairs": rows, "count": count.count, "reached": count.reached, "seeds": count.seeds}))
        return 0
    for r in rows:
        p256 = "—" if r["power_pass256"] is None else f"{r['power_pass256']:.3f}"
        print(
            f"{r['pair']:<42} sd pass@1 {r['sd_pass1']:.4f}  pass@256 {r['diff_pass256']:+.4f} (sd "
            f"{r['sd_pass256']:.4f})  seeds for pass@1 {r['need_pass1']}, pass@256 {r['need_pass256']}  "
            f"power at the count {r['power_pass1']:.3f} / {p256}"
        )
    reach = "every wanted power reached" if count.reached else f"power {END_POINT_POWER} not reached by every test"
    print(f"count: {count.count} fresh seeds ({count.seeds[0]}-{count.seeds[-1]}); {reach}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
