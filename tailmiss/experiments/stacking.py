"""The pools' run stacks: RL run jobs that can train together (:mod:`tailmiss.experiments.run_stack`) as one job.

:func:`stacked_jobs` groups the RL run jobs of a job list (:func:`tailmiss.experiments.cached.cached_rl`) that wait
on the same jobs, start from the same SFT run folder and share the settings a stack shares
(``tailmiss.experiments.run_stack.SHARED``; no dynamic sampling, no reward transform that reads
log-probabilities), and
replaces each group by jobs of :func:`cached_rl_stack`, each training up to a stack's size of them. A run trains
the same bit for bit alone or in any stack, so a stack is only a way of running the jobs: the local pool and Ray
take it like any job, and a run's folder, cache decision and resume are those of the run alone.

The stack's size: ``RunOptions.stack`` runs at most, or (``None``, on an accelerator) the group split evenly over the
workers, at most :data:`STACK_MOST` runs; 1 trains every run alone, and so does ``None`` on the CPU, where a stack
of the narrowing study's N = 8 runs measured no faster than one run per process (``benchmarks/llm_stack.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from tailmiss.experiments.jobs import Job
from tailmiss.llm.config import RLConfig
from tailmiss.options import RunOptions
from tailmiss.store import UnitState

__all__ = ["STACK_MOST", "stack_size", "stacked_jobs", "cached_rl_stack"]

STACK_MOST = 32
"""The most runs one stack takes when the size is picked (``RunOptions.stack=None``): past a few dozen runs of the
0.1M-parameter model a step's tensors stop fitting the caches of one core, and smaller stacks balance the workers."""


def stack_size(runs: int, workers: int, most: int | None) -> int:
    """Runs per stack for a group of ``runs`` compatible runs on ``workers`` workers (``most``: the user's cap)."""
    if most is not None:
        return max(1, most)
    return max(1, min(STACK_MOST, math.ceil(runs / max(1, workers))))


def _group(job: Job):
    """What a run job must share with others to stack (None: it trains alone)."""
    from tailmiss.experiments.run_stack import SHARED

    if getattr(job.fn, "__name__", "") != "cached_rl" or len(job.args) != 3 or not isinstance(job.args[0], RLConfig):
        return None
    cfg, init, _ = job.args
    if cfg.dynamic_sampling or cfg.reward_transform is not None:
        return None
    return (job.needs, str(Path(init)), tuple(getattr(cfg, k) for k in SHARED))


def stacked_jobs(jobs: Sequence[Job], workers: int, most: int | None) -> tuple[list[Job], dict[str, tuple[str, ...]]]:
    """``jobs`` with compatible RL run jobs merged into stack jobs, and ``{stack job key: its runs' job keys}``.

    A stack job takes the place of its first run in the list; jobs that needed one of its runs need the stack.
    """
    groups: dict = {}
    for job in jobs:
        key = _group(job)
        if key is not None:
            groups.setdefault(key, []).append(job)
    first_of: dict[str, Job] = {}
    members: dict[str, tuple[str, ...]] = {}
    merged: set[str] = set()
    for group in groups.values():
        size = stack_size(len(group), workers, most)
        if size < 2 or len(group) < 2:
            continue
        for start in range(0, len(group), size):
            part = group[start : start + size]
            if len(part) < 2:
                continue
            key = f"stack:{part[0].key}+{len(part) - 1}"
            label = f"{len(part)} stacked runs: {part[0].label or part[0].key} .. {part[-1].label or part[-1].key}"
            items = tuple((job.fn, job.args, job.state) for job in part)
            first_of[part[0].key] = Job(key, cached_rl_stack, (items,), needs=part[0].needs, label=label)
            members[key] = tuple(job.key for job in part)
            merged.update(members[key])
    owner = {k: stack for stack, keys in members.items() for k in keys}
    out = []
    for job in jobs:
        if job.key in first_of:
            out.append(first_of[job.key])
        elif job.key not in merged:
            needs = tuple(dict.fromkeys(owner.get(n, n) for n in job.needs))
            out.append(
                job if needs == job.needs else Job(job.key, job.fn, job.args, needs, job.label, job.state, job.doing)
            )
    return out, members


def cached_rl_stack(items: Sequence[tuple], options: RunOptions = RunOptions()) -> list[Path]:
    """Each run job ``(fn, (cfg, init, root), state)`` of ``items`` (``fn`` is
    :func:`~tailmiss.experiments.cached.cached_rl`, ``state`` its :func:`~tailmiss.experiments.cached.run_state`)
    done as ``fn`` does it: the runs to train from nothing train as one stack
    (:func:`tailmiss.experiments.run_stack.train_rl_stack`); finished runs are reused; the others (partial, stale,
    another config, or a lone run) go through ``fn`` one by one. Returns the run folders."""
    from tailmiss.experiments.run_stack import stack_key, train_rl_stack

    fresh, alone, keys = [], [], set()
    for fn, (cfg, init, root), state in items:
        found = state() if state is not None else UnitState.MISSING
        key = stack_key(cfg, init) if found is UnitState.MISSING else None
        if key is not None:
            fresh.append((fn, (cfg, init, root)))
            keys.add(key)
        elif found not in (UnitState.FRESH, UnitState.REUSED_STALE):
            alone.append((fn, (cfg, init, root)))
    if len(fresh) == 1 or len(keys) > 1:
        alone, fresh = fresh + alone, []  # one run, or SFT runs of other shapes: each alone
    if fresh:
        options.say(f"training {len(fresh)} runs as one stack: {', '.join(a[0].name for _, a in fresh)}")
        train_rl_stack(
            [cfg for _, (cfg, _, _) in fresh],
            [init for _, (_, init, _) in fresh],
            [Path(root) / cfg.name for _, (cfg, _, root) in fresh],
            device=options.device,
            progress=options.progress,
        )
    for fn, args in alone:
        fn(*args, options=options)
    return [Path(root) / cfg.name for _, (cfg, _, root), _ in items]
