"""The pool's jobs as Ray tasks: a sweep, a ladder or the report's runs on a Ray cluster, or on one machine.

:func:`run_on_ray` turns each :class:`~tailmiss.experiments.pool.Job` into one
Ray task that asks for one CPU (and one GPU when the runs go to CUDA). The
tasks of the jobs it ``needs`` are passed to it as arguments, so Ray itself
starts it once they are done (and rebuilds a lost one's result first). A task
moves to the command's working folder, reads its run folder (a finished run is
reused, a partial one resumed), sets the intra-op thread count and calls the
job's function: the same function of its config as in the local pool, so the
runs are the same bit for bit with the same ``threads``. A finished run whose
needs are finished too is reused here, without a task, as the local pool does
(a rerun of a cached sweep neither imports nor starts Ray).

Faults: a task whose worker process or node is lost is retried by Ray (up to
:data:`RETRIES` times); it starts again from the top, finds its run folder
partial and resumes from its last checkpoint. Checkpoints and result folders
are written atomically, so no unit is ever half-written. A job that raises (a
bad config, say) is not retried: its exception is raised here, once, and every
other task of the command is cancelled; Ctrl-C cancels them the same way.

The result store must be at the same path on every node (a shared
filesystem): tasks write run folders there and later tasks read them.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Sequence

import torch

from tailmiss.experiments.jobs import STATE_WORDS, TIMINGS_ENV, Job, job_order, phase, usable_cores
from tailmiss.options import RunOptions
from tailmiss.store import UnitState, unit_clock

__all__ = ["RETRIES", "run_on_ray"]

RETRIES = 3
"""How many times Ray runs a task again after its worker process or node died (a job's own exception: never)."""

_MISSING = "--executor ray needs Ray: pip install 'tailmiss[ray]'"


def _ray():
    try:
        import ray
    except ImportError:
        raise ValueError(_MISSING) from None
    return ray


def _wants_gpu(device) -> bool:
    """Whether each task asks Ray for a GPU: the runs go to CUDA (``None``: when this process sees one)."""
    if device is None:
        return torch.cuda.is_available()
    return torch.device(device).type == "cuda"


def _connect(ray, options: RunOptions, cpus: int) -> None:
    """Join the cluster ``options`` names (else ``$RAY_ADDRESS``) or start a local Ray with ``cpus`` CPUs.

    A Ray already initialised in this process (by an earlier pool of the same command, or by the caller) is used as
    is; Ray ends it when the process exits (``ray.shutdown()`` ends it sooner).
    """
    if ray.is_initialized():
        return
    address = options.ray_address or os.environ.get("RAY_ADDRESS")
    quiet = {"logging_level": logging.WARNING, "log_to_driver": True}
    if address:
        ray.init(address=address, **quiet)
        options.say(f"ray: joined the cluster at {address}")
    else:
        ray.init(address="local", num_cpus=cpus, include_dashboard=False, **quiet)
        options.say(f"ray: started a local Ray with {cpus} CPU(s) for this command")


def _task(fn, args, state, options: RunOptions, label: str, doing: str, threads: int, where: dict, *needs):
    """One job inside a Ray worker: (value, seconds, log lines, node, skipped). ``needs``: the values of the jobs it
    waited on (unused: passing them is how Ray knows the order)."""
    import ray

    cwd = where["cwd"]
    if not os.path.isdir(cwd):
        raise ValueError(
            f"node {socket.gethostname()} does not see the folder {cwd!r}: with --executor ray the command's folder "
            "and the result store must be on a filesystem every node mounts at the same path"
        )
    os.chdir(cwd)  # relative store paths mean what they mean to the command
    torch.set_num_threads(threads)  # the local pool's thread policy
    node = f"{socket.gethostname()} ({ray.get_runtime_context().get_node_id()[:8]})"
    lines: list[str] = []
    found = state() if state is not None else "missing"
    lines.append(f"{label}: {STATE_WORDS.get(found, doing)}")
    if found is UnitState.FRESH:
        return None, 0.0, lines, node, True
    before = os.environ.pop(TIMINGS_ENV, None)
    if where["timings"]:
        os.environ[TIMINGS_ENV] = where["timings"]
    started = time.perf_counter()
    try:
        with phase("job", label=label, worker=True, node=node, executor="ray"), unit_clock():
            value = fn(*args, options=options.replace(progress=False, log=lines.append))
    finally:
        os.environ.pop(TIMINGS_ENV, None)
        if before is not None:
            os.environ[TIMINGS_ENV] = before
    return value, time.perf_counter() - started, lines, node, False


def _raised(ray, exc: BaseException) -> BaseException:
    """What to raise for a failed task: the job's own exception (its message, no remote traceback) when it raised."""
    if isinstance(exc, ray.exceptions.RayTaskError) and isinstance(getattr(exc, "cause", None), Exception):
        return exc.cause
    return exc


def run_on_ray(jobs: Sequence[Job], workers: int, options: RunOptions, description: str = "runs") -> dict:
    """Run ``jobs`` as Ray tasks, each after the jobs it ``needs``; return ``{key: fn's return value}``.

    Parameters
    ----------
    jobs : sequence of Job
        The jobs (:func:`tailmiss.experiments.pool.run_jobs`'s); their functions and arguments must pickle.
    workers : int
        The Ray started on this machine, when neither ``options.ray_address`` nor ``$RAY_ADDRESS`` names a
        cluster and no Ray runs in this process yet, gets ``max(workers, options.jobs)`` CPUs (``options.jobs``
        ``None``: one per usable core), so later pools of the same command fit too. A cluster's own resources
        decide how many tasks run at once.
    options : RunOptions
        ``threads`` intra-op threads per task; ``device`` decides whether a task asks for a GPU; ``log`` gets each
        job's lines (start state, what it decided, ``finished in ... s on <node>``) as it ends.
    description : str
        The progress bar's text.

    Returns
    -------
    dict
        ``{job key: value}``; ``None`` for a finished run that was reused.
    """
    order = job_order(jobs)
    bar = None
    if options.progress:
        from tailmiss.options import ProgressBar

        bar = ProgressBar(total=len(order), description=f"{description} on Ray")
    try:
        return _run(order, options, max(int(workers), options.jobs or usable_cores()), bar)
    finally:
        if bar is not None:
            bar.close()


def _run(order: list[Job], options: RunOptions, cpus: int, bar) -> dict:
    sent = options.replace(log=None, progress=False)  # the caller's log may not pickle; a task collects its lines
    timings = os.environ.get(TIMINGS_ENV)
    where = {"cwd": os.getcwd(), "timings": os.path.abspath(timings) if timings else None}
    resources = {"num_cpus": 1, "num_gpus": 1 if _wants_gpu(options.device) else 0}
    ray = task = None
    results: dict = {}
    waiting: dict = {}
    refs: dict = {}

    def finish(job: Job, value) -> None:
        results[job.key] = value
        if bar is not None:
            bar.update(1)

    try:
        for job in order:
            label = job.label or job.key
            if all(n in results for n in job.needs) and job.state is not None and job.state() is UnitState.FRESH:
                # as in the local pool: a finished run whose needs are settled is reused here, without a task
                options.say(f"{label}: {STATE_WORDS[UnitState.FRESH]}")
                finish(job, None)
                continue
            if task is None:  # Ray (imported, joined or started) only when there is work
                ray = _ray()
                _connect(ray, options, cpus)
                task = ray.remote(_task)
            needs = [refs[n] for n in job.needs if n in refs]
            refs[job.key] = task.options(**resources, max_retries=RETRIES, retry_exceptions=False, name=label).remote(
                job.fn, job.args, job.state, sent, label, job.doing, options.threads, where, *needs
            )
            waiting[refs[job.key]] = job
        while waiting:
            done, _ = ray.wait(list(waiting), num_returns=1)
            for ref in done:
                job = waiting.pop(ref)
                try:
                    value, seconds, lines, node, skipped = ray.get(ref)
                except Exception as exc:
                    raise _raised(ray, exc) from None
                for line in lines:
                    options.say(line)
                if not skipped:
                    options.say(f"{job.label or job.key}: finished in {seconds:.1f} s on {node}")
                finish(job, value)
    except BaseException:
        for ref in waiting:  # this command's tasks only: queued ones are dropped, running ones killed
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: S110 - a task that ended meanwhile cannot be cancelled
                pass
        raise
    return results
