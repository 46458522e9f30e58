"""Time and peak memory of `tailmiss diagnose` on a 2 M-row log, and its start-up time on an empty one.

    python benchmarks/diagnose_large.py [--steps 2000] [--prompts 125] [--group-size 8] [--repeat 1]

Writes, in a temporary folder, a JSONL log in the form ``TailMissCallback`` writes (step, prompt_id,
rollout, reward, correct, focal_weight; ~120 bytes a row; the default shape is 2000 steps x 125 prompts
x 8 rollouts = 2 M rows, ~240 MB), then runs ``python -m tailmiss diagnose`` on it in a child process and
reports the child's wall time and peak resident memory (its own ``ru_maxrss``, from ``os.wait4``), with
pyarrow's JSON reader (pyarrow comes with the ``[trl]`` extra) and as without pyarrow, the time the
command takes to refuse an empty file (imports included: what a user waits for), and the time it takes to
refuse a bad setting or destination on the large log (checked before the log is read).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROW = '{{"step": {s}, "prompt_id": "{p}", "rollout": {k}, "reward": {r}, "correct": {c}, "focal_weight": {w!r}}}\n'


def write_log(path: Path, steps: int, prompts: int, group_size: int, seed: int = 0) -> int:
    """A log of ``steps x prompts`` groups of ``group_size``; each group's success rate drawn from Beta(1, 1)."""
    rng = np.random.default_rng(seed)
    ids = [f"{(p * 2654435761) % 16**12:012x}" for p in range(prompts)]
    with open(path, "w") as fh:
        for step in range(1, steps + 1):
            q = rng.uniform(size=prompts)
            correct = rng.uniform(size=(prompts, group_size)) < q[:, None]
            weight = np.sqrt(1.0 - correct.mean(axis=1))
            rows = []
            for p in range(prompts):
                w = float(weight[p])
                for k in range(group_size):
                    c = bool(correct[p, k])
                    rows.append(ROW.format(s=step, p=ids[p], k=k, r=float(c), c="true" if c else "false", w=w))
            fh.write("".join(rows))
    return steps * prompts * group_size


WITHOUT_PYARROW = "import sys; sys.modules['pyarrow'] = None; from tailmiss.cli import main; main()"
"""The command as it runs where pyarrow is not installed (the JSONL log is then read block by block)."""


def run_child(args: list[str], pyarrow: bool = True) -> tuple[float, float, int, str]:
    """Wall seconds, peak RSS (MB), exit code and stderr of ``python -m tailmiss ARGS`` in a child process."""
    command = ["-m", "tailmiss"] if pyarrow else ["-c", WITHOUT_PYARROW]
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *command, *args], stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage: its peak, not the largest so far
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return seconds, usage.ru_maxrss / 1024, proc.returncode, err.read().decode()  # ru_maxrss: KB on Linux


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--prompts", type=int, default=125)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1, help="runs of the large log (the best time is kept)")
    ns = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "empty.jsonl").write_text("")
        starts = [run_child(["diagnose", str(tmp / "empty.jsonl"), "--out", str(tmp / "e")])[0] for _ in range(3)]
        log = tmp / "rollouts.jsonl"
        started = time.perf_counter()
        rows = write_log(log, ns.steps, ns.prompts, ns.group_size)
        print(f"wrote {rows:,} rows, {log.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - started:.1f} s")
        print(f"refusing an empty file: {min(starts):.2f} s (best of 3; {', '.join(f'{s:.2f}' for s in starts)})")
        bad = {
            "--out /proc/x (not writable)": ["--out", "/proc/tailmiss-x"],
            "--rho 1.5": ["--rho", "1.5"],
            "--gamma -1": ["--gamma", "-1"],
            "--budget 1": ["--budget", "1"],
        }
        for what, args in bad.items():
            runs = [run_child(["diagnose", str(log), *args]) for _ in range(3)]
            if any(r[2] != 2 for r in runs):
                raise SystemExit(f"{what} was not refused: {runs[0][3]}")
            print(f"refusing {what} on the large log: {min(r[0] for r in runs):.2f} s (best of 3)")
        for pyarrow in (True, False):
            runs = [
                run_child(["diagnose", str(log), "--out", str(tmp / "out"), "--json"], pyarrow)
                for _ in range(ns.repeat)
            ]
            failed = [r for r in runs if r[2] != 0]
            if failed:
                raise SystemExit(failed[0][3])
            reader = "with pyarrow's JSON reader" if pyarrow else "without pyarrow (blocks of lines)"
            print(
                f"diagnose on {rows:,} rows, {reader}: {min(r[0] for r in runs):.1f} s "
                f"(runs: {', '.join(f'{r[0]:.1f}' for r in runs)}), peak RSS {max(r[1] for r in runs):.0f} MB"
            )


if __name__ == "__main__":
    main()
