"""What one ``tailmiss`` command costs: wall, user and system time, page faults and peak RSS (GNU time).

Runs ``python -m tailmiss ARGS`` in a fresh empty folder (so nothing is cached), under
``/usr/bin/time -v``, once per ``--repeat``, and prints one JSON line per run. ``--checkout DIR``
runs another checkout's package instead (e.g. a ``git worktree`` of an earlier commit), which
gives before/after numbers side by side in one session.

Usage::

    python benchmarks/command_cost.py -- repro --quick --no-progress
    python benchmarks/command_cost.py --checkout /tmp/old -- repro --quick --no-progress
    python benchmarks/command_cost.py --keep /tmp/sft -- llm sft --preset multisolution-sft-quick --no-progress
    python benchmarks/command_cost.py --setup /tmp/sft -- llm train --init runs/llm/multisolution-sft-quick \\
        --preset multisolution-grpo-quick --no-progress

``--keep DIR`` runs in DIR and leaves it there; ``--setup DIR`` copies DIR's contents into the fresh
folder first (a trained SFT run, say), so that only the command itself is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_FIELDS = {
    "wall_s": r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)",
    "user_s": r"User time \(seconds\): (\S+)",
    "sys_s": r"System time \(seconds\): (\S+)",
    "minor_faults": r"Minor \(reclaiming a frame\) page faults: (\d+)",
    "major_faults": r"Major \(requiring I/O\) page faults: (\d+)",
    "peak_rss_mb": r"Maximum resident set size \(kbytes\): (\d+)",
    "exit": r"Exit status: (\d+)",
}


def _seconds(clock: str) -> float:
    parts = [float(p) for p in clock.split(":")]
    return sum(p * 60**i for i, p in enumerate(reversed(parts)))


def parse_time_v(text: str) -> dict:
    """The numbers of a ``/usr/bin/time -v`` report."""
    out: dict = {}
    for key, pattern in _FIELDS.items():
        found = re.search(pattern, text)
        if found is None:
            raise ValueError(f"no {key!r} in the time report")
        value = found.group(1)
        if key == "wall_s":
            out[key] = round(_seconds(value), 2)
        elif key == "peak_rss_mb":
            out[key] = round(int(value) / 1024, 1)
        else:
            out[key] = float(value) if key.endswith("_s") else int(value)
    out["sys_over_user"] = round(out["sys_s"] / max(out["user_s"], 1e-9), 3)
    return out


def run_once(args: list[str], folder: Path, checkout: Path | None) -> dict:
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    report = folder / ".time-v.txt"
    command = ["/usr/bin/time", "-v", "-o", str(report), sys.executable, "-m", "tailmiss", *args]
    done = subprocess.run(command, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    numbers = parse_time_v(report.read_text())
    if done.returncode:
        numbers["stderr_tail"] = done.stderr[-2000:]
    return numbers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", type=Path, help="run this checkout's tailmiss (PYTHONPATH)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it (one repeat)")
    parser.add_argument("--setup", type=Path, help="copy this folder's contents into the fresh folder first")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then the tailmiss arguments")
    ns = parser.parse_args()
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    if not args:
        parser.error("give the tailmiss arguments after --")
    if not Path("/usr/bin/time").exists():
        parser.error("needs GNU time at /usr/bin/time (apt-get install time)")
    for i in range(ns.repeat if ns.keep is None else 1):
        folder = ns.keep if ns.keep is not None else Path(tempfile.mkdtemp(prefix="tailmiss-cost-"))
        folder.mkdir(parents=True, exist_ok=True)
        if ns.setup is not None:
            shutil.copytree(ns.setup, folder, dirs_exist_ok=True)
        try:
            numbers = run_once(args, folder, ns.checkout)
        finally:
            if ns.keep is None:
                shutil.rmtree(folder, ignore_errors=True)
        checkout = str(ns.checkout) if ns.checkout else "this checkout"
        print(json.dumps({"command": "tailmiss " + " ".join(args), "checkout": checkout, "run": i + 1, **numbers}))


if __name__ == "__main__":
    main()
