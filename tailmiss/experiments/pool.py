"""Many small runs at once: one single-threaded process per core instead of several threads per tiny matmul.

The CPU models of this package (0.1M parameters) gain little from a second
intra-op thread and lose much when threads contend on a busy machine, while
the runs of a sweep are independent. :func:`run_jobs` therefore trains a list
of :class:`Job` s (SFT runs, derived table policies, RL runs, final
evaluations) on a pool of ``jobs`` spawned processes with ``threads`` intra-op
threads each, starting a job once the jobs it ``needs`` are done. Every job is
the same function of its config whichever process runs it, so a sweep gives
the same runs as one process training them in turn (with the same thread
count). With ``jobs = 1`` the jobs run in this process, in order. With
``RunOptions(executor="ray")`` the same jobs run as Ray tasks instead, on a
cluster or on this machine (:mod:`tailmiss.experiments.ray_pool`).

Ctrl-C stops the workers at once (they ignore SIGINT; the main process
terminates them): checkpoints and result folders are written atomically, so
rerunning the command resumes.

What each job and each :func:`phase` of a command costs (wall and CPU seconds,
peak memory) goes, one JSON line each, to the file that ``$TAILMISS_TIMINGS``
names, when it names one (``benchmarks/command_cost.py`` reads it).
"""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass

import torch

from tailmiss.experiments.jobs import STATE_WORDS, TIMINGS_ENV, Job, job_order, phase, usable_cores
from tailmiss.options import RunOptions
from tailmiss.store import UnitState, unit_clock

__all__ = [
    "Job",
    "Schedule",
    "STATE_WORDS",
    "TIMINGS_ENV",
    "phase",
    "run_jobs",
    "train_all",
    "usable_cores",
    "default_jobs",
]


def default_jobs(device, pending: int) -> int:
    """Worker processes for ``pending`` jobs: one per usable core on the CPU, one process on an accelerator."""
    if pending < 2 or (device is not None and torch.device(device).type != "cpu"):
        return 1
    return min(usable_cores(), pending)


def _init_worker(threads: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process decides what Ctrl-C stops
    torch.set_num_threads(threads)


def _timed(fn, args, options: RunOptions, label: str):
    started, lines = time.perf_counter(), []
    # one bar over the jobs, drawn by the main process; the log lines travel back with the result
    with phase("job", label=label, worker=True, node=socket.gethostname()), unit_clock():
        value = fn(*args, options=options.replace(progress=False, log=lines.append))
    return value, time.perf_counter() - started, lines


@dataclass(frozen=True)
class Schedule:
    """When a pool stops starting jobs, and what it does as each ends (:func:`run_jobs`).

    Attributes
    ----------
    until : float or None
        A ``time.monotonic()`` time: a job is started only if it is expected to end by then (the jobs running at
        that time finish; the others are left, and :func:`run_jobs` returns without them).
    cost : callable or None
        ``cost(job)``: the seconds it is expected to take (None or absent: unknown, counted as 0).
    on_finish : callable or None
        ``on_finish(job, value)`` in this process as each job ends or is found done (e.g. to archive its unit).
    """

    until: float | None = None
    cost: Callable[[Job], float | None] | None = None
    on_finish: Callable[[Job, object], None] | None = None

    def allows(self, job: Job) -> bool:
        """Whether ``job`` may start now."""
        if self.until is None:
            return True
        seconds = (self.cost(job) if self.cost is not None else None) or 0.0
        return time.monotonic() + seconds <= self.until


def run_jobs(
    jobs: Sequence[Job],
    workers: int = 1,
    options: RunOptions = RunOptions(),
    description: str = "runs",
    schedule: Schedule | None = None,
) -> dict:
    """Run ``jobs`` respecting their ``needs``; return ``{key: fn's return value}`` (``None`` for skipped ones).

    ``workers > 1`` runs them on that many spawned processes, each with
    ``options.threads`` intra-op threads: whenever a process is free it takes the first job in list order whose
    needs are done (so list the jobs that others wait on first, and fillers last);
    ``workers = 1`` runs them here, in list order as far as their needs allow,
    with their own progress bars. A job's exception is raised here after the
    other workers are stopped. ``options.log`` gets one line per job as it starts
    (training, resuming, done, reused) and, with workers, as it finishes.

    With ``options.executor == "ray"`` every job is a Ray task instead
    (:func:`tailmiss.experiments.ray_pool.run_on_ray`; ``workers``: the CPUs of the Ray started for it when no
    cluster is named). Unless ``options.stack`` is 1, RL runs that can train together do, as stacks
    (:func:`tailmiss.experiments.stacking.stacked_jobs`); their values come back under each run's key.

    A ``schedule`` (:class:`Schedule`; local pools only) stops starting jobs at a time and calls back as each ends;
    the jobs it left are absent from the result.
    """
    job_order(jobs)  # distinct keys, known needs, no cycle: checked before any job starts
    schedule = schedule or Schedule()
    if options.executor == "ray" and schedule != Schedule():
        raise ValueError("a time budget runs on this machine's pool: use --executor local")
    members: dict = {}
    if options.stack != 1 and (options.stack is not None or _accelerated(options.device)):
        from tailmiss.experiments.stacking import stacked_jobs

        jobs, members = stacked_jobs(jobs, workers, options.stack)
    return _unstacked(_run_jobs(jobs, workers, options, description, schedule), members)


def _accelerated(device) -> bool:
    """Whether runs go to an accelerator, where stacks are the default (on the CPU a stack of the narrowing
    study's runs measured no faster than one run per process: ``benchmarks/llm_stack.py``)."""
    if device is None:
        return torch.cuda.is_available()
    return torch.device(device).type != "cpu"


def _unstacked(results: dict, members: dict) -> dict:
    """``results`` with each stack job's value (its runs' folders, or None) under its runs' own keys."""
    for key, keys in members.items():
        value = results.pop(key, None)
        results.update(zip(keys, value if value is not None else [None] * len(keys)))
    return results


def _run_jobs(jobs: Sequence[Job], workers: int, options: RunOptions, description: str, schedule: Schedule) -> dict:
    if options.executor == "ray":
        from tailmiss.experiments.ray_pool import run_on_ray

        return run_on_ray(jobs, workers, options, description)
    bar = None
    if options.progress and workers > 1:
        from tailmiss.options import ProgressBar

        bar = ProgressBar(total=len(jobs), description=f"{description} on {workers} processes")
    queue = _Queue(list(jobs), options.say, bar, schedule)
    before = torch.get_num_threads()
    try:
        if workers <= 1:
            torch.set_num_threads(options.threads)  # the same thread policy as the workers'
            while queue.pending:
                batch = queue.ready(1)  # job_order refused cycles: while jobs wait, one is ready, unless out of time
                if not batch:
                    break
                for job in batch:
                    with phase("job", label=job.label or job.key, worker=False, node=socket.gethostname()):
                        with unit_clock():
                            value = job.fn(*job.args, options=options)
                    queue.finish(job, value)
            return queue.results
        _run_pool(queue.pending, workers, options, queue.ready, queue.finish)
        return queue.results
    finally:
        torch.set_num_threads(before)
        if bar is not None:
            bar.close()


class _Queue:
    """The jobs not started yet, the results of those done, and the progress bar they advance."""

    def __init__(self, pending: list[Job], say, bar, schedule: Schedule | None = None) -> None:
        self.pending, self.say, self.bar = pending, say, bar
        self.schedule = schedule or Schedule()
        self.results: dict = {}

    def ready(self, most: int) -> list[Job]:
        """Up to ``most`` pending jobs whose needs are met, in list order, announced and taken off the list;
        finished runs are skipped (which may ready more jobs); none once the schedule's time is out."""
        out: list[Job] = []
        skipped = True
        while skipped and len(out) < most:
            skipped = False
            for job in [j for j in self.pending if all(n in self.results for n in j.needs)]:
                if not self.schedule.allows(job):
                    continue
                self.pending.remove(job)
                state = job.state() if job.state is not None else UnitState.MISSING
                self.say(f"{job.label or job.key}: {STATE_WORDS.get(state, job.doing)}")
                if state is UnitState.FRESH:
                    self.finish(job, None)
                    skipped = True
                    continue
                out.append(job)
                if len(out) == most:  # announce a job just before it starts
                    return out
        return out

    def finish(self, job: Job, value) -> None:
        """Record ``job``'s result, tell the schedule and advance the bar."""
        self.results[job.key] = value
        if self.schedule.on_finish is not None:
            self.schedule.on_finish(job, value)
        if self.bar is not None:
            self.bar.update(1)


def _run_pool(pending: list[Job], workers: int, options: RunOptions, ready, finish) -> None:
    import multiprocessing

    say = options.say
    sent = options.replace(log=None)  # the caller's log may not pickle; each worker collects its lines
    running: dict[Future, Job] = {}
    context = multiprocessing.get_context("spawn")  # fork after torch has started threads can deadlock
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker, initargs=(options.threads,))
    try:
        while True:
            for job in ready(workers - len(running)):  # no queue: a free process takes the first ready job
                running[pool.submit(_timed, job.fn, job.args, sent, job.label or job.key)] = job
            if not running:  # with no cycle (job_order), nothing runs only when nothing is left
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                job = running.pop(future)
                value, seconds, lines = future.result()  # a worker's exception is raised here
                for line in lines:
                    say(line)
                say(f"{job.label or job.key}: finished in {seconds:.1f} s")
                finish(job, value)
    except BaseException:
        for process in list(getattr(pool, "_processes", {}).values()):  # stop runs in flight now, not at their end
            process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def train_all(
    workloads: Sequence,
    root,
    options: RunOptions = RunOptions(),
    extra: Sequence[Job] = (),
    schedule: Schedule | None = None,
) -> dict:
    """Train every run of several sweeps and ladders together (each has ``jobs(root, options)``).

    Runs shared by two workloads (the same run folder) are trained once; the
    SFT runs go first and each RL run starts as soon as its starting point is
    ready. ``extra`` jobs (simulations, say) follow them in the list: a free process takes them when no run is
    ready. ``options.jobs``: worker processes (``None``: :func:`default_jobs`; 1: here, one run after another).
    ``schedule``: :func:`run_jobs`'s.
    """
    unique: dict[str, Job] = {}
    for workload in workloads:
        for job in workload.jobs(root, options):
            unique.setdefault(job.key, job)
    for job in extra:
        unique.setdefault(job.key, job)
    todo = list(unique.values())
    workers = default_jobs(options.device, len(todo)) if options.jobs is None else options.jobs
    return run_jobs(todo, max(1, min(workers, len(todo))), options, schedule=schedule)
