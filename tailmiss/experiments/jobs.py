"""What the pools run: a :class:`~tailmiss.experiments.jobs.Job`, their order
(:func:`~tailmiss.experiments.jobs.job_order`), the log's words and :func:`~tailmiss.experiments.jobs.phase` timing.

The local process pool (:mod:`tailmiss.experiments.pool`) and the Ray executor
(:mod:`tailmiss.experiments.ray_pool`) share these, so a job means the same and is timed the same on either.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter

from tailmiss.store import UnitState

__all__ = ["Job", "STATE_WORDS", "TIMINGS_ENV", "job_order", "phase", "usable_cores"]

TIMINGS_ENV = "TAILMISS_TIMINGS"
"""The environment variable naming the file that :func:`phase` appends its JSON lines to (unset: nothing is written)."""


def _usage() -> tuple[float, float, dict]:
    """Now (epoch seconds), CPU seconds of this process and its reaped children, and their peak RSS (MB)."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    return time.time(), cpu, {"peak_rss_mb": own.ru_maxrss / 1024, "children_peak_rss_mb": kids.ru_maxrss / 1024}


@contextmanager
def phase(name: str, **fields) -> Iterator[None]:
    """Time the body as phase ``name``: with ``$TAILMISS_TIMINGS`` set, append one JSON line to that file.

    The line holds ``name``, ``fields``, the process id, start and end (epoch
    seconds), ``wall_s``, ``cpu_s`` (user + system of this process and of the
    children it reaped meanwhile, e.g. a process pool shut down inside the
    body), ``peak_rss_mb`` (this process's largest resident set so far) and
    ``children_peak_rss_mb`` (the largest of its reaped children's). Phases may nest and overlap; each line is one
    ``write`` in append mode, so processes can share the file.
    """
    path = os.environ.get(TIMINGS_ENV)
    if not path:
        yield
        return
    start, cpu, _ = _usage()
    try:
        yield
    finally:
        end, cpu_end, rss = _usage()
        record = {"phase": name, **fields, "pid": os.getpid(), "start": round(start, 3), "end": round(end, 3)}
        record.update(wall_s=round(end - start, 3), cpu_s=round(cpu_end - cpu, 3))
        record.update({k: round(v, 1) for k, v in rss.items()})
        with open(path, "a") as fh:
            fh.write(json.dumps(record) + "\n")


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Job:
    """One unit of work: ``fn(*args, options=...)``, a module-level function (so that a spawned process can run it)
    given the caller's :class:`~tailmiss.options.RunOptions`; it shows its own progress bar only when run in this
    process and says what it decides through ``options.log`` (a worker's lines are printed by the main process when
    the job ends).

    ``key`` names it for ``needs`` (the keys of the jobs that must finish
    first) and in the returned results; ``label`` is what the log says;
    ``state`` tells what its run folder holds (:data:`tailmiss.experiments.cached.STATES`)
    once the job is ready, i.e. after the jobs it needs: ``UnitState.FRESH`` skips it; ``doing`` is what the log says
    when it starts from nothing (a simulation is not "training").
    """

    key: str
    fn: Callable
    args: tuple = ()
    needs: tuple[str, ...] = ()
    label: str = ""
    state: Callable[[], str] | None = field(default=None, compare=False)
    doing: str = "training"


STATE_WORDS = {
    UnitState.FRESH: "done, reused",
    UnitState.PARTIAL: "resuming",
    UnitState.REUSED_STALE: "done by other code, reused (--reuse-stale)",
}
"""What the log says of a run folder's state when its job starts (anything else: ``"training"``)."""


def job_order(jobs: Sequence[Job]) -> list[Job]:
    """``jobs`` with every job after the jobs it needs, in list order where the needs allow.

    Both pools check their jobs with it before any job starts. Raises ``ValueError`` naming the keys when two jobs
    share a key, a job needs a key no job has, or jobs wait on each other (a cycle).
    """
    keys = [j.key for j in jobs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"job keys must be distinct, got {sorted(k for k in set(keys) if keys.count(k) > 1)}")
    missing = sorted({n for j in jobs for n in j.needs} - set(keys))
    if missing:
        raise ValueError(f"jobs need unknown job(s) {', '.join(map(repr, missing))}")
    index = {key: i for i, key in enumerate(keys)}
    sorter = TopologicalSorter({job.key: job.needs for job in jobs})
    try:
        sorter.prepare()
    except CycleError as exc:
        raise ValueError(f"jobs wait on each other: {', '.join(exc.args[1])}") from None
    out: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=index.__getitem__)
        out += ready
        sorter.done(*ready)
    by_key = dict(zip(keys, jobs))
    return [by_key[k] for k in out]
