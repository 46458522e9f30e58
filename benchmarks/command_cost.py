"""What one ``tailmiss`` command costs: wall, user and system time, page faults and peak RSS (GNU time), by phase.

Three modes.

* ``-- ARGS``: runs ``python -m tailmiss ARGS`` in a fresh empty folder (so nothing is cached), under
  ``/usr/bin/time -v``, once per ``--repeat``, and prints one JSON line per run. ``--checkout DIR`` runs
  another checkout's package instead (e.g. a ``git worktree`` of an earlier commit).
* ``--readme``: what a newcomer gets. Clones the commit ``--commit`` (default ``HEAD``) of this repository
  into a fresh folder, reads the README's set-up command there (the first ``bash`` block under ``## Set-up``:
  ``pip install ... && pip install -e . && tailmiss repro --quick``), runs its ``pip`` part in a fresh virtual
  environment (timed once, printed as the ``install`` line) and times the rest verbatim from the clone's root,
  with the environment's ``bin`` first on ``PATH`` as after ``activate``.
* ``--readme --vs REV``: the same for two commits side by side, A B A B ... (``--repeat`` pairs), so that the
  host's speed and load cancel in the ratios A/B; the last line gives each figure's median and the median of
  the pairwise ratios.

``--venvs DIR`` keeps the virtual environments in ``DIR`` (one per commit, made on first use) and reuses
them: ``pip install -e .`` then re-points the package at the fresh clone and installs nothing else.

Each run of the README mode sets ``TAILMISS_TIMINGS`` (see :mod:`tailmiss.experiments.pool`) and prints
its phases: ``startup`` (interpreter and imports, to the command's first phase), ``llm pool`` (every
pool job, side by side), ``figures`` and ``report`` with the simulations and bridge comparisons inside
them taken out and shown apart, and the pool's jobs summed by kind (SFT runs, RL runs and the rest: CPU
seconds in the worker). For a commit that writes no timings, the pool's jobs are read from its log
(``...: finished in X s``, wall seconds inside the worker).

Usage::

    python benchmarks/command_cost.py -- repro --quick --no-progress
    python benchmarks/command_cost.py --checkout /tmp/old -- repro --quick --no-progress
    python benchmarks/command_cost.py --keep /tmp/sft -- llm sft --preset multisolution-sft-quick --no-progress
    python benchmarks/command_cost.py --setup /tmp/sft -- llm train --init runs/llm/multisolution-sft-quick \\
        --preset multisolution-grpo-quick --no-progress
    python benchmarks/command_cost.py --readme                        # HEAD, fresh clone and environment
    python benchmarks/command_cost.py --readme --commit HEAD --vs a0db5c2 --repeat 2 --venvs /tmp/venvs

``--keep DIR`` runs in DIR and leaves it there (with ``--readme``: copies each run's ``runs/quick``, its log and
timings to ``DIR/<commit>-<run>``); ``--setup DIR`` copies DIR's contents into the fresh folder first (a trained
SFT run, say), so that only the command itself is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMINGS_ENV = "TAILMISS_TIMINGS"  # tailmiss.experiments.pool.TIMINGS_ENV (not imported: any commit is measured)

_FIELDS = {
    "wall_s": r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)",
    "user_s": r"User time \(seconds\): (\S+)",
    "sys_s": r"System time \(seconds\): (\S+)",
    "minor_faults": r"Minor \(reclaiming a frame\) page faults: (\d+)",
    "major_faults": r"Major \(requiring I/O\) page faults: (\d+)",
    "peak_rss_mb": r"Maximum resident set size \(kbytes\): (\d+)",
    "exit": r"Exit status: (\d+)",
}
_FINISHED = re.compile(r"^(?P<label>.+): finished in (?P<s>[0-9.]+) s(?: on .+)?$", re.M)


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
    out["cpu_s"] = round(out["user_s"] + out["sys_s"], 2)
    out["sys_over_user"] = round(out["sys_s"] / max(out["user_s"], 1e-9), 3)
    return out


def timed(command: list[str], cwd: Path, env: dict) -> tuple[dict, str]:
    """Run ``command`` under ``/usr/bin/time -v`` in ``cwd``: its numbers and its stderr."""
    with tempfile.TemporaryDirectory(prefix="tailmiss-time-") as tmp:
        report = Path(tmp) / "time-v.txt"
        full = ["/usr/bin/time", "-v", "-o", str(report), *command]
        done = subprocess.run(full, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        numbers = parse_time_v(report.read_text())
    if done.returncode:
        numbers["stderr_tail"] = done.stderr[-2000:]
    return numbers, done.stderr


def run_once(args: list[str], folder: Path, checkout: Path | None) -> dict:
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    return timed([sys.executable, "-m", "tailmiss", *args], folder, env)[0]


# -- phases -------------------------------------------------------------------------------------------------------


def _kind(label: str) -> str:
    if label.startswith("SFT "):
        return "sft"
    if label.startswith("simulation") or label.startswith("bridge"):
        return label.split()[0]
    return "rl" if label.startswith("[") else "other"


def phases(records: list[dict], launched: float, main_pid: int | None = None) -> dict:
    """Per-phase wall and CPU seconds from the ``TAILMISS_TIMINGS`` lines of one command started at ``launched``.

    The main process's phases ``simulation`` and ``bridge`` are taken out of the phase they ran inside
    (``figures``, ``report``) and summed apart; pool jobs (run in workers, or in the main process with one job)
    are summed by kind.
    """
    mine = [r for r in records if not r.get("worker")]
    if main_pid is None and mine:
        main_pid = min(mine, key=lambda r: r["start"])["pid"]
    top = [r for r in mine if r["pid"] == main_pid and r["phase"] not in ("job", "simulation", "bridge")]
    inner = [r for r in mine if r["pid"] == main_pid and r["phase"] in ("simulation", "bridge")]
    out: dict = {}
    if records:
        out["startup"] = {"wall_s": round(min(r["start"] for r in records) - launched, 2)}
    for r in top:
        nested = [x for x in inner if r["start"] <= x["start"] and x["end"] <= r["end"]]
        out[r["phase"]] = {
            "wall_s": round(r["wall_s"] - sum(x["wall_s"] for x in nested), 2),
            "cpu_s": round(r["cpu_s"] - sum(x["cpu_s"] for x in nested), 2),
            "peak_rss_mb": r["peak_rss_mb"],
        }
    for name in ("simulation", "bridge"):
        part = [x for x in inner if x["phase"] == name]
        if part:
            out[name + "s (main process)"] = {
                "wall_s": round(sum(x["wall_s"] for x in part), 2),
                "cpu_s": round(sum(x["cpu_s"] for x in part), 2),
                "count": len(part),
                "peak_rss_mb": max(x["peak_rss_mb"] for x in part),
            }
    jobs = [r for r in records if r["phase"] == "job"]
    longest = sorted(jobs, key=lambda j: -j["cpu_s"])[:8]
    if longest:
        out["longest jobs (CPU s)"] = [[j["label"], j["cpu_s"]] for j in longest]
    for kind in ("sft", "rl", "simulation", "bridge", "other"):
        part = [j for j in jobs if _kind(j["label"]) == kind]
        if part:
            out[f"jobs: {kind}"] = {
                "count": len(part),
                "wall_s": round(sum(j["wall_s"] for j in part), 2),
                "cpu_s": round(sum(j["cpu_s"] for j in part), 2),
                "peak_rss_mb": max(j["peak_rss_mb"] for j in part),
                "longest": max(part, key=lambda j: j["cpu_s"])["label"],
            }
    return out


def logged_jobs(stderr: str) -> dict:
    """Pool jobs from the log (wall seconds inside the worker), by kind, for commits that write no timings."""
    out: dict = {}
    for found in _FINISHED.finditer(stderr):
        kind = "jobs (log): " + _kind(found["label"])
        entry = out.setdefault(kind, {"count": 0, "wall_s": 0.0})
        entry["count"] += 1
        entry["wall_s"] = round(entry["wall_s"] + float(found["s"]), 2)
    return out


# -- the README's command from a fresh clone ---------------------------------------------------------------------


def readme_command(readme: str) -> tuple[list[str], list[str]]:
    """The set-up command of a README: its ``pip`` commands and the commands after them (the timed part)."""
    section = readme.split("## Set-up", 1)[-1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    if block is None:
        raise ValueError("no ```bash block under '## Set-up' in the README")
    commands = [c.strip() for c in block.group(1).strip().split("&&")]
    install = [c for c in commands if c.startswith("pip ")]
    rest = [c for c in commands if not c.startswith("pip ")]
    if not rest or commands[: len(install)] != install:
        raise ValueError(f"expected 'pip ... && ... && COMMAND', got {block.group(1).strip()!r}")
    return install, rest


def clone(commit: str, into: Path) -> Path:
    """A fresh clone of this repository at ``commit`` in ``into/tailmiss``."""
    target = into / "tailmiss"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(REPO), str(target)], check=True)
    subprocess.run(["git", "-C", str(target), "checkout", "--quiet", "--detach", commit], check=True)
    return target


def _venv_env(venv: Path) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    return env


def install(install_cmds: list[str], source: Path, venv: Path) -> dict:
    """Run the README's ``pip`` commands in ``source`` inside ``venv`` (made first if missing): wall seconds."""
    made = not (venv / "bin" / "python").exists()
    started = time.perf_counter()
    if made:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    for command in install_cmds:
        subprocess.run(shlex.split(command), cwd=source, env=_venv_env(venv), check=True, stdout=subprocess.DEVNULL)
    return {"new_venv": made, "install_wall_s": round(time.perf_counter() - started, 1)}


def newcomer_run(commit: str, venvs: Path | None, keep: Path | None = None) -> dict:
    """Clone ``commit``, install it as its README says and time the README's command; the numbers and phases.

    ``keep``: copy what the command wrote under ``runs/`` (the report and figures, not the run folders' models)
    and the timings there."""
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", commit], capture_output=True, text=True, check=True)
    sha = sha.stdout.strip()
    with tempfile.TemporaryDirectory(prefix="tailmiss-newcomer-") as tmp:
        source = clone(sha, Path(tmp))
        install_cmds, commands = readme_command((source / "README.md").read_text())
        venv = (venvs / sha[:12]) if venvs is not None else Path(tmp) / "venv"
        setup = install(install_cmds, source, venv)
        env = _venv_env(venv)
        timings = Path(tmp) / "timings.jsonl"
        env[TIMINGS_ENV] = str(timings)
        out = {"commit": sha[:12], "command": " && ".join(commands), **setup}
        for command in commands:
            launched = time.time()
            numbers, stderr = timed(shlex.split(command), source, env)
            out.update(numbers)
            records = [json.loads(line) for line in timings.read_text().splitlines()] if timings.exists() else []
            out["phases"] = phases(records, launched) if records else logged_jobs(stderr)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            if (source / "runs" / "quick").is_dir():
                shutil.copytree(source / "runs" / "quick", keep / "quick", dirs_exist_ok=True)
            (keep / "stderr.txt").write_text(stderr)
            if timings.exists():
                shutil.copy(timings, keep / "timings.jsonl")
    return out


def _summary(runs: dict[str, list[dict]]) -> dict:
    keys = ("wall_s", "cpu_s", "user_s", "sys_s", "peak_rss_mb", "minor_faults")
    out: dict = {}
    for name, rows in runs.items():
        out[name] = {k: statistics.median(r[k] for r in rows) for k in keys}
    if len(runs) == 2:
        (a, rows_a), (b, rows_b) = runs.items()
        out[f"ratio {a}/{b}"] = {
            k: round(statistics.median(x[k] / y[k] for x, y in zip(rows_a, rows_b)), 3) for k in keys
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", type=Path, help="run this checkout's tailmiss (PYTHONPATH)")
    parser.add_argument("--repeat", type=int, default=1, help="runs (with --vs: pairs)")
    parser.add_argument(
        "--keep", type=Path, help="run in this folder and keep it (one repeat); --readme: keep each run's report there"
    )
    parser.add_argument("--setup", type=Path, help="copy this folder's contents into the fresh folder first")
    parser.add_argument("--readme", action="store_true", help="the README's set-up command from a fresh clone")
    parser.add_argument("--commit", default="HEAD", help="with --readme: the commit to clone (default HEAD)")
    parser.add_argument("--vs", help="with --readme: a second commit, run alternately with --commit")
    parser.add_argument("--venvs", type=Path, help="with --readme: keep and reuse one virtual environment per commit")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then the tailmiss arguments")
    ns = parser.parse_args()
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    if not Path("/usr/bin/time").exists():
        parser.error("needs GNU time at /usr/bin/time (apt-get install time)")
    if ns.readme:
        if args:
            parser.error("--readme runs the README's command: give no tailmiss arguments")
        commits = [ns.commit] + ([ns.vs] if ns.vs else [])
        runs: dict[str, list[dict]] = {c: [] for c in commits}
        for i in range(ns.repeat):
            for commit in commits:
                keep = ns.keep / f"{commit}-{i + 1}" if ns.keep is not None else None
                result = newcomer_run(commit, ns.venvs, keep)
                runs[commit].append(result)
                print(json.dumps({"run": i + 1, **result}), flush=True)
        if ns.repeat > 1 or ns.vs:
            print(json.dumps({"summary": _summary(runs)}), flush=True)
        return
    if not args:
        parser.error("give the tailmiss arguments after -- (or --readme)")
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
