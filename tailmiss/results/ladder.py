"""Ladder results: the cached ladders (F-GRPO Fig. 2's regimes from the simulator's policy to the transformer).

Data come from :func:`tailmiss.llm.ladder.run_ladder` (the ``ladder`` preset, or
``ladder-quick`` in quick mode; ``ctx.llm_sweeps["ladder"]`` overrides it).
"""

from __future__ import annotations

from tailmiss.results.context import Context

__all__ = ["LADDERS", "resolve_ladder", "ladder_result"]

LADDERS = {
    "ladder": ("ladder", "ladder-quick"),
    "ladder-budget": ("ladder-budget", "ladder-budget-quick"),
    "ladder-hard": ("ladder-hard", "ladder-hard-quick"),
}
"""Data source per ladder family: (full ladder, quick ladder)."""


def resolve_ladder(family: str, ctx: Context):
    """The ladder of ``family`` (``"ladder"``, ``"ladder-budget"``, ``"ladder-hard"``).

    ``ctx.llm_sweeps[family]``, when given, replaces the preset (e.g. a small ladder in a notebook or a test).
    """
    from tailmiss.llm.presets import ladder_preset

    if ctx.llm_sweeps is not None and family in ctx.llm_sweeps:
        return ctx.llm_sweeps[family]
    full, quick = LADDERS[family]
    return ladder_preset(quick if ctx.quick else full)


def ladder_result(ctx: Context, family: str = "ladder"):
    """The ladder of ``family``, run or loaded from the cache (a :class:`~tailmiss.llm.ladder.LadderResult`)."""
    from tailmiss.llm.ladder import run_ladder

    return run_ladder(resolve_ladder(family, ctx), ctx.llm_cache, **ctx.llm_options())
