"""Compute the units derived from LLM runs with two versions of the code, from the same runs, and compare them.

The units the store derives from LLM runs (sweep results, the bridge, the scores by prompt type, the shared rung's
simulation: :data:`tailmiss._fingerprint.SCOPES`' ``llm`` plus each unit type's own ``Scope``) take the trainer's
modules into their fingerprints, so a restructuring of ``tailmiss/llm`` that keeps every number
(``benchmarks/trainer_equivalence.py``) also changes theirs. This script is the evidence for declaring those scopes
equivalent too (:data:`tailmiss._fingerprint.EQUIVALENT`):

1. two copies of ``--runs`` (hard links) lose every derived unit, keeping the runs, the SFT models and the
   simulations;
2. in each, one version of the code (``--old`` and ``--new``: checkouts, put first on ``PYTHONPATH``) computes the
   first look's derived units (``tailmiss repro --quick --no-figures``: the quick sweeps' results, the transformer's
   bridge, the ladders' results and the shared rung's simulation) and, on the narrowing study's quick sweep, its
   scores by prompt type (:func:`tailmiss.studies.narrowing.data.final_by_type`) and one attribution of GRPO and
   F-GRPO γ = 1 (:func:`tailmiss.experiments.attribution.run_attribution`, one batch at the final and SFT models),
   from the same runs (the new code must already declare the trainer equivalent, or it trains them again);
3. every derived unit both computed is compared file by file, byte for byte (its ``meta.json`` without the times
   and the code fingerprint, at any depth, which differ by design: a run missing from ``--runs`` is trained by
   each side, and a sweep result records its runs' seconds).

The record (``--out``, JSON) gives, per derived scope, the old and new fingerprints and each unit's comparison.

    python benchmarks/derived_equivalence.py --old ../main --new . --runs runs --prime \\
        --out benchmarks/trainer_equivalence/derived-<new llm fingerprint>.json

``--prime`` first lets the old code compute in ``--runs`` what the commands read and it lacks: each side would
otherwise train or build those inputs itself, and a checkpoint records the code that wrote it, so a start's
digest (the shared rung's simulation records it) would differ by design.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_NARROWING = """
from tailmiss.experiments.attribution import run_attribution
from tailmiss.experiments.presets import workload
from tailmiss.options import RunOptions
from tailmiss.studies.narrowing.data import final_by_type
quick, options = workload("narrowing-quick"), RunOptions(progress=False)
final_by_type(quick, "runs/llm", options=options)
run_attribution(quick, "runs/llm", ("GRPO N=8", "F-GRPO γ=1 N=8"), quick.seeds[:1], 1, 1, options)
"""
_VOLATILE = ("made", "elapsed_s", "total_elapsed_s", "provenance", "created", "host", "time")
"""``meta.json`` keys, at any depth, that record when, where and by which code a unit (or a run it read) was made,
not what it holds: a sweep result records its runs' seconds, which differ where each side trained a missing run."""


def _scope(unit: Path) -> tuple[str, str] | None:
    """``(scope, fingerprint)`` of a derived unit's ``meta.json`` (None for a run, an SFT model or no unit)."""
    try:
        meta = json.loads((unit / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    code = (meta.get("provenance") or {}).get("code") or {}
    scope = code.get("scope")
    return None if scope in (None, "llm") else (scope, code.get("fingerprint"))


def _copy(runs: Path, into: Path) -> None:
    """``runs``' ``llm`` and ``sim`` folders hard-linked into ``into/runs``, without the derived units."""
    for part in ("llm", "sim"):
        if (runs / part).is_dir():
            subprocess.run(["cp", "-al", str(runs / part), str(into / "runs" / part)], check=True)
    for unit in (into / "runs" / "llm").iterdir():
        if unit.is_dir() and _scope(unit) is not None:
            shutil.rmtree(unit)


def _compute(code: Path, where: Path, log) -> float:
    """The derived units of the first look and of the quick narrowing sweep, by the code in ``code``."""
    env = {**os.environ, "PYTHONPATH": str(code.resolve())}
    started = time.perf_counter()
    commands = [
        [sys.executable, "-m", "tailmiss", "repro", "--quick", "--no-figures", "--no-progress", "--jobs", "1",
         "--cache", "runs/sim", "--out", "quick/paper_repro.md"],
        [sys.executable, "-c", _NARROWING],
    ]  # fmt: skip
    for command in commands:
        done = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True)
        log.write(done.stdout + done.stderr)
        if done.returncode:
            raise SystemExit(f"{' '.join(command[1:4])} failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.perf_counter() - started


def _kept(value):
    """``value`` without the :data:`_VOLATILE` keys of any dict in it."""
    if isinstance(value, dict):
        return {k: _kept(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_kept(v) for v in value]
    return value


def _same_meta(a: Path, b: Path) -> bool:
    old, new = (json.loads(p.read_text()) for p in (a, b))
    return _kept(old) == _kept(new)


def compare(old_root: Path, new_root: Path) -> list[dict]:
    """Each derived unit of ``old_root`` against the one of the same name in ``new_root``."""
    out = []
    for unit in sorted(old_root.iterdir()):
        found = _scope(unit)
        if found is None:
            continue
        twin = new_root / unit.name
        files = sorted(p.relative_to(unit).as_posix() for p in unit.rglob("*") if p.is_file())
        row = {"unit": unit.name, "scope": found[0], "replaces": found[1], "fingerprint": (_scope(twin) or ("", ""))[1]}
        for name in files:
            if name == "meta.json":
                row[name] = (twin / name).is_file() and _same_meta(unit / name, twin / name)
            else:
                row[name] = (twin / name).is_file() and (unit / name).read_bytes() == (twin / name).read_bytes()
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="checkout of the replaced code")
    parser.add_argument("--new", type=Path, required=True, help="checkout of the newer code")
    parser.add_argument("--runs", type=Path, default=Path("runs"), help="the runs both compute from")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--prime",
        action="store_true",
        help="first let the old code compute, in --runs, what the commands read and --runs lacks "
        "(runs, SFT models, derived policies: a checkpoint records the code that wrote it), so both sides read the "
        "same inputs",
    )
    args = parser.parse_args()
    if args.prime:  # in a folder of its own: a checkout as the working folder would shadow PYTHONPATH (python -m)
        with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as log:
            (Path(tmp) / "runs").symlink_to(args.runs.resolve())
            print(f"primed in {_compute(args.old, Path(tmp), log):.1f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        sides = {"old": Path(tmp) / "old", "new": Path(tmp) / "new"}
        seconds = {}
        with open(Path(tmp) / "log.txt", "w") as log:
            for side, where in sides.items():
                (where / "runs").mkdir(parents=True)
                _copy(args.runs.resolve(), where)
                seconds[side] = round(_compute(getattr(args, side), where, log), 1)
                print(f"{side} code: derived units computed in {seconds[side]} s", flush=True)
        results = compare(sides["old"] / "runs" / "llm", sides["new"] / "runs" / "llm")
    scopes: dict[str, dict] = {}
    for row in results:
        entry = scopes.setdefault(row["scope"], {"replaces": row["replaces"], "fingerprint": row["fingerprint"]})
        entry.setdefault("units", []).append(row["unit"])
        checks = [v for k, v in row.items() if isinstance(v, bool)]
        entry["all_same"] = entry.get("all_same", True) and bool(checks) and all(checks)
        flags = [k for k, v in row.items() if v is False]
        print(f"{row['scope']:16} {row['unit']}: {'same' if not flags else 'DIFFERS: ' + ', '.join(flags)}")
    record = {
        "scopes": scopes,
        "all_same": bool(scopes) and all(s["all_same"] for s in scopes.values()),
        "seconds": seconds,
        "results": results,
    }
    from tailmiss.io import atomic_write

    with atomic_write(args.out) as f:
        f.write(json.dumps(record, indent=1) + "\n")
    print(f"all same: {record['all_same']}; written {args.out}")
    sys.exit(0 if record["all_same"] else 1)


if __name__ == "__main__":
    main()
