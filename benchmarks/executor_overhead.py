"""What the executor itself costs per job: the local process pool against Ray, on jobs that do nothing.

Runs ``--jobs`` no-op jobs (each returns at once; every fourth needs the one before it, as RL runs need their SFT
run) through :func:`tailmiss.experiments.pool.run_jobs` with the local pool and with Ray on this machine, each with
``--workers`` processes / CPUs, ``--repeat`` times, in fresh processes. Prints one JSON line per run: the wall seconds
of the pool call (for Ray, starting the local Ray is timed apart as ``start_s``) and seconds per job. A real run's
cost is the job's own time plus this overhead.

Usage::

    python benchmarks/executor_overhead.py                      # 400 jobs, 1 and 2 workers, 3 repeats
    python benchmarks/executor_overhead.py --jobs 1000 --workers 2 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def _nothing(i: int, options=None) -> int:
    return i


def _one(executor: str, jobs: int, workers: int) -> dict:
    from tailmiss.experiments.pool import Job, run_jobs
    from tailmiss.options import RunOptions

    todo = [
        Job(f"j{i}", _nothing, (i,), needs=(f"j{i - 1}",) if i % 4 and i else ()) for i in range(jobs)
    ]  # chains of four
    options = RunOptions(progress=False, executor=executor, jobs=workers)
    start_s = 0.0
    if executor == "ray":
        import ray

        t0 = time.perf_counter()
        ray.init(address="local", num_cpus=workers, include_dashboard=False, logging_level="warning")
        start_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    results = run_jobs(todo, workers, options)
    wall = time.perf_counter() - t0
    assert len(results) == jobs
    return {
        "executor": executor,
        "workers": workers,
        "jobs": jobs,
        "start_s": round(start_s, 3),
        "wall_s": round(wall, 3),
        "s_per_job": round(wall / jobs, 5),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", nargs=3, metavar=("EXECUTOR", "JOBS", "WORKERS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        executor, jobs, workers = args.child
        print(json.dumps(_one(executor, int(jobs), int(workers))))
        return
    for _ in range(args.repeat):
        for workers in args.workers:
            for executor in ("local", "ray"):
                cmd = [sys.executable, __file__, "--child", executor, str(args.jobs), str(workers)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                print(out.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
