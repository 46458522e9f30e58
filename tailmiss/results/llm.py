"""Small-transformer results: the cached sweeps behind F-GRPO Tables 1, 2 and 4 in miniature, and their training.

Each family's sweep (:func:`tailmiss.llm.sweep.run_sweep`) is cached under
``ctx.llm_cache``: the quick sweeps in quick mode, otherwise the full ones (for
the maze, ``maze-nsweep-cpu``, the largest sweep two CPU cores afford; the
paper-scale ``maze-nsweep`` is a GPU job).
"""

from __future__ import annotations

from collections.abc import Iterable

from tailmiss.results.context import Context
from tailmiss.results.ladder import LADDERS, resolve_ladder

__all__ = ["SWEEPS", "resolve_sweep", "sweep_result", "train_llm"]

SWEEPS = {
    "nsweep": ("multisolution-nsweep", "multisolution-nsweep-quick"),
    "objectives": ("multisolution-objectives", "multisolution-objectives-quick"),
    "maze": ("maze-nsweep-cpu", "maze-nsweep-quick"),
}
"""Data source per sweep family: (full sweep, quick sweep)."""


def resolve_sweep(family: str, ctx: Context):
    """The sweep of ``family`` (``"nsweep"``, ``"objectives"``, ``"maze"``): ``ctx.llm_sweeps``' or the preset."""
    from tailmiss.llm.presets import llm_sweep

    if ctx.llm_sweeps is not None and family in ctx.llm_sweeps:
        return ctx.llm_sweeps[family]
    full, quick = SWEEPS[family]
    return llm_sweep(quick if ctx.quick else full)


def sweep_result(family: str, ctx: Context):
    """The finished sweep of ``family``, run or loaded (a :class:`~tailmiss.llm.sweep.SweepResult`)."""
    from tailmiss.llm.sweep import run_sweep

    return run_sweep(resolve_sweep(family, ctx), ctx.llm_cache, **ctx.llm_options())


def train_llm(families: Iterable[str], ctx: Context) -> None:
    """Train every run of the LLM sweep and ladder ``families`` together on ``ctx.jobs`` processes.

    With ``ctx.jobs == 1`` nothing happens here: each result trains its own
    runs in this process when it is first asked for. Otherwise the SFT runs,
    derived policies and RL runs of all the families go to one pool, so that no
    core idles between one sweep and the next; the figures and the report then
    find them done.
    """
    from tailmiss.llm.pool import train_all

    wanted = list(dict.fromkeys(families))
    if ctx.jobs == 1 or not wanted:
        return
    unknown = [f for f in wanted if f not in SWEEPS and f not in LADDERS]
    if unknown:
        raise ValueError(f"unknown LLM family {unknown[0]!r}; known: {', '.join([*SWEEPS, *LADDERS])}")
    workloads = [resolve_sweep(f, ctx) if f in SWEEPS else resolve_ladder(f, ctx) for f in wanted]
    train_all(workloads, ctx.llm_cache, ctx.device, ctx.jobs, 1, ctx.progress, ctx.reuse_stale, ctx.log)
