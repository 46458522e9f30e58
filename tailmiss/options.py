"""How work runs, as one value: :class:`~tailmiss.options.RunOptions` (device, processes, threads, progress, log,
cache reuse, executor).

Every runner that computes or reuses a cached unit (a simulation, an LLM run,
a sweep, a ladder, the bridge) takes one ``RunOptions`` instead of six loose
arguments, so that callers cannot pass them in different orders and a new
option reaches every runner at once. None of these settings changes a result's
numbers: they say where and how the work is done and what is said about it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from tailmiss._checks import check_bool, check_choice, check_int

__all__ = ["ProgressBar", "RunOptions", "EXECUTORS"]

EXECUTORS = ("local", "ray")
"""Where a pool of jobs runs (:func:`tailmiss.experiments.pool.run_jobs`): this machine's process pool, or Ray."""


@dataclass(frozen=True)
class RunOptions:
    """Where and how runs are computed; none of it changes their numbers.

    Attributes
    ----------
    device : str or None
        Torch device (``None``: CUDA when available, else the CPU).
    jobs : int or None
        Processes that train LLM runs side by side (``None``: one per usable CPU
        core; 1: in the calling process).
    threads : int
        Torch threads per process.
    progress : bool
        Show progress bars.
    log : callable or None
        Receives one line per cache decision (reused, stale, damaged, resumed).
    reuse_stale : bool
        Reuse cached results made by other code (with a warning naming the
        difference) instead of computing them again.
    executor : {"local", "ray"}
        Where a pool of jobs runs: ``"local"``, this machine's process pool;
        ``"ray"``, one Ray task per job (:mod:`tailmiss.experiments.ray_pool`).
    ray_address : str or None
        With ``executor="ray"``: the Ray cluster to join (``None``: ``$RAY_ADDRESS``, else a Ray started for the
        pool on this machine with ``jobs`` CPUs).
    stack : int or None
        RL runs a pool trains together as one stack (:mod:`tailmiss.experiments.stacking`), at most; 1 trains
        every run alone. ``None``: on an accelerator, compatible runs split evenly over the workers (at most 32
        per stack); on the CPU every run alone (a stack measured no faster there). A run's numbers are the same
        either way.
    """

    device: str | None = None
    jobs: int | None = 1
    threads: int = 1
    progress: bool = True
    log: Callable[[str], None] | None = None
    reuse_stale: bool = False
    executor: str = "local"
    ray_address: str | None = None
    stack: int | None = None

    def __post_init__(self) -> None:
        if self.jobs is not None:
            check_int("jobs", self.jobs, 1)
        check_int("threads", self.threads, 1)
        if self.stack is not None:
            check_int("stack", self.stack, 1)
        check_bool("progress", self.progress)
        check_bool("reuse_stale", self.reuse_stale)
        check_choice("executor", self.executor, EXECUTORS)
        if self.ray_address is not None:
            if not isinstance(self.ray_address, str) or not self.ray_address.strip():
                raise ValueError(f"ray_address must be a non-empty string or None, got {self.ray_address!r}")
            if self.executor != "ray":
                raise ValueError(f"ray_address {self.ray_address!r} needs executor='ray', got {self.executor!r}")
        if self.log is not None and not callable(self.log):
            raise ValueError(f"log must be callable or None, got {type(self.log).__name__}")

    def say(self, message: str) -> None:
        """Send ``message`` to :attr:`log` (nothing without one)."""
        if self.log is not None:
            self.log(message)

    def replace(self, **changes) -> RunOptions:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)


class ProgressBar:
    """``update(n)`` / ``close()`` progress bar over a known number of items, on stderr (rich, imported at first
    use)."""

    def __init__(self, total: int, description: str):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._task = self._progress.add_task(description, total=total)
        self._progress.start()

    def update(self, advance: int = 1) -> None:
        self._progress.update(self._task, advance=advance)

    def close(self) -> None:
        self._progress.stop()
