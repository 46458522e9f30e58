"""Small-transformer results: the cached sweeps behind F-GRPO Tables 1, 2 and 4 in miniature, the ladders from the
simulator's policy to the transformer, and their training.

Each family is cached under ``ctx.llm_cache``: the quick sweep or ladder in quick
mode, otherwise the full one (for the maze, ``maze-nsweep-cpu``, the largest
sweep two CPU cores afford; the paper-scale ``maze-nsweep`` is a GPU job).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tailmiss.studies.context import Context

__all__ = [
    "SWEEPS",
    "SETTINGS_FAMILIES",
    "LADDERS",
    "resolve_family",
    "full_preset",
    "sweep_result",
    "ladder_result",
    "train_llm",
    "sweeps_data",
]


def _quick_suffixed(*names: str) -> dict[str, tuple[str, str]]:
    """Families whose quick version is their preset's name with ``-quick``."""
    return {name: (name, f"{name}-quick") for name in names}


_FRONTIER = ("narrowing-ladder-frontier", "narrowing-ladder-frontier-low")
SETTINGS_FAMILIES = ("narrowing-settings-str0.25", "narrowing-settings-share0.1", "narrowing-settings-share0.5")
"""The narrowing study's runs at three other settings of the task
(:data:`tailmiss.experiments.narrowing_presets.SETTINGS`), pending until the archive holds them all."""

SWEEPS = {
    "nsweep": ("multisolution-nsweep", "multisolution-nsweep-quick"),
    "objectives": ("multisolution-objectives", "multisolution-objectives-quick"),
    "maze": ("maze-nsweep-cpu", "maze-nsweep-quick"),
    # the protocol ladder's training rungs (F-GRPO Table 5 reached one ingredient at a time)
    **_quick_suffixed("protocol-today", "protocol-difficulty", "protocol-on-policy", "paper-protocol"),
    # F-GRPO Table 3's controls and Tables 6-7's gamma sensitivity on the paper's protocol
    **_quick_suffixed("paper-protocol-controls", "paper-protocol-gamma"),
    # the narrowing regime: the search, the study, its controls and the task's controls; the quick version of the
    # study is one sweep (``narrowing-quick``), which stands for every family in quick mode
    **{
        name: (name, "narrowing-quick")
        for name in (
            "narrowing-search-str0.25",
            "narrowing-search-str0.5",
            "narrowing-search-str1",
            "narrowing-controls",
            "narrowing-visible",
            "narrowing-none",
            "narrowing",
        )
    },
    # the frontier's arms to their plateau: no quick version (the first look quotes the archived answer)
    "narrowing-plateau": ("narrowing-plateau", None),
    # the end point on the fresh seeds the seed rule set
    "narrowing-endpoint": ("narrowing-endpoint", None),
    # the counterfactual pool: the study's GRPO and F-GRPO γ = 1 trained without the minority's prompts
    "narrowing-counterfactual": ("narrowing-counterfactual", None),
    # the frontier and end point at three other settings of the task (pending: read once the archive holds them)
    **{name: (name, None) for name in SETTINGS_FAMILIES},
}
"""Sweep families: (full sweep, quick sweep)."""
LADDERS = {
    **_quick_suffixed("ladder", "ladder-budget", "ladder-hard", "narrowing-ladder", "narrowing-ladder-shared"),
    # the shared rung's N shape and frontier: no quick version (the first look leaves them out)
    **{name: (name, None) for name in ("narrowing-ladder-shared-n", *_FRONTIER)},
}
"""Ladder families: (full ladder, quick ladder, or None where the first look reads none)."""


def resolve_family(family: str, ctx: Context):
    """The sweep or ladder of ``family``: ``ctx.llm_sweeps[family]`` when given (e.g. a small one in a notebook or a
    test), else its quick or full preset; None in quick mode for a family that has no quick version."""
    from tailmiss.experiments.presets import workload

    if ctx.llm_sweeps is not None and family in ctx.llm_sweeps:
        return ctx.llm_sweeps[family]
    presets = {**SWEEPS, **LADDERS}
    if family not in presets:
        raise ValueError(f"unknown LLM family {family!r}; known: {', '.join(presets)}")
    full, quick = presets[family]
    name = quick if ctx.quick else full
    return None if name is None else workload(name)


def full_preset(name: str) -> str | None:
    """The full preset whose quick variant is ``name`` (an LLM sweep or ladder of :data:`SWEEPS` / :data:`LADDERS`,
    or a simulation preset), ``None`` for any other name."""
    from tailmiss.sim.presets import PRESETS

    pairs = {quick: full for full, quick in (*SWEEPS.values(), *LADDERS.values()) if quick is not None}
    pairs.update({f"{n}-quick": n for n in PRESETS if f"{n}-quick" in PRESETS})
    return pairs.get(name)


def sweeps_data(families, ctx: Context, per_prompt_from) -> dict:
    """Histories, per-prompt evaluations (of the families ``per_prompt_from``), preset names and the mode of the
    sweep ``families``, run or loaded: the fields of :class:`~tailmiss.studies.protocol.data.ProtocolData` and
    :class:`~tailmiss.studies.controls.data.ControlsData`."""
    from tailmiss.experiments.sweep import per_prompt_evals

    results = {f: sweep_result(f, ctx) for f in families}
    per_prompt: dict = {}
    for family in per_prompt_from:
        per_prompt.update(per_prompt_evals(results[family].config, ctx.llm_cache))
    return dict(
        histories={f: r.history for f, r in results.items()},
        per_prompt=per_prompt,
        names={f: r.config.name for f, r in results.items()},
        quick=ctx.quick,
    )


def sweep_result(family: str, ctx: Context):
    """The finished sweep of ``family``, run or loaded (a :class:`~tailmiss.experiments.sweep.SweepResult`)."""
    from tailmiss.experiments.sweep import run_sweep

    return run_sweep(resolve_family(family, ctx), ctx.llm_cache, ctx.options)


def ladder_result(ctx: Context, family: str = "ladder"):
    """The ladder of ``family``, run or loaded (a :class:`~tailmiss.experiments.ladder.LadderResult`)."""
    from tailmiss.experiments.ladder import run_ladder

    return run_ladder(resolve_family(family, ctx), ctx.llm_cache, ctx.options)


def train_llm(families: Iterable[str], ctx: Context, extra: Sequence = ()) -> None:
    """Train every run of the LLM sweep and ladder ``families`` together on ``ctx.options.jobs`` processes.

    With one job nothing happens here: each result trains its own runs in
    this process when it is first asked for. Otherwise the SFT runs, derived
    policies and RL runs of all the families go to one pool, so that no core
    idles between one sweep and the next; the figures and the report then find
    them done. ``extra`` pool jobs (:func:`tailmiss.studies.simulation.data.simulation_jobs`,
    :func:`tailmiss.studies.bridge.data.bridge_jobs`) join the same pool and take a process whenever no run is ready.
    """
    from tailmiss.experiments.pool import train_all

    wanted = list(dict.fromkeys(families))
    found = [resolve_family(f, ctx) for f in wanted]  # an unknown family is refused whatever the jobs
    workloads = [w for w in found if w is not None]
    if ctx.options.jobs == 1 or not (wanted or extra):
        return
    train_all(workloads, ctx.llm_cache, ctx.options, extra=extra)
