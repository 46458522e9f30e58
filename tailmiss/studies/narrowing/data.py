"""The narrowing study's data: its sweeps' histories and final tables, and every run's held-out metrics by prompt
type (minority, rest, all) at every evaluation, from the runs' per-prompt masses."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from tailmiss.experiments.prompt_types import KS, TYPES, by_type
from tailmiss.studies.context import Context
from tailmiss.studies.narrowing.counterfactual import COUNTERFACTUAL
from tailmiss.studies.runs import ladder_result, resolve_family, sweep_result

__all__ = [
    "NARROWING_FAMILIES",
    "SEARCH_FAMILIES",
    "TYPES",
    "KS",
    "FINAL_LABELS",
    "BY_TYPE_FAMILIES",
    "ATTRIBUTED",
    "final_labels",
    "NarrowingData",
    "narrowing_data",
    "by_type",
    "final_by_type",
    "bridge_jobs",
    "narrowing_units",
    "PLATEAU",
    "END_POINT",
    "SETTINGS_READ",
    "archived_history",
]

SEARCH_FAMILIES = ("narrowing-search-str0.25", "narrowing-search-str0.5", "narrowing-search-str1")
"""The search's sweeps (one per conflict strength), in the grid's order."""
NARROWING_FAMILIES = (
    *SEARCH_FAMILIES,
    "narrowing",
    "narrowing-controls",
    "narrowing-visible",
    "narrowing-none",
    "narrowing-ladder",
)
"""Every sweep and ladder family of the study (:data:`tailmiss.studies.runs.SWEEPS`, ``LADDERS``); the quick
version reads ``narrowing`` (``narrowing-quick``) and the quick ladder alone."""
PLATEAU = "narrowing-plateau"
"""The plateau runs' family: the frontier's arms carried to their plateau on fresh seeds (full report only; the first
look quotes their archived answer, :mod:`tailmiss.studies.narrowing.archived`)."""
END_POINT = "narrowing-endpoint"
"""The end point's runs on enough fresh seeds (seeds 15-44; full report only,
:mod:`tailmiss.studies.narrowing.end_point`)."""
SETTINGS_READ: tuple[str, ...] = ("narrowing-settings-str0.25", "narrowing-settings-share0.1")
"""The runs at other settings of the task (:data:`tailmiss.studies.runs.SETTINGS_FAMILIES`) that the section reads:
each joins when the evidence archive holds all of it, and leaves the study's pending families then (full report
only, :mod:`tailmiss.studies.narrowing.settings`)."""
FINAL_LABELS = ("GRPO N=2", "GRPO N=8", "GRPO N=32", "F-GRPO γ=0.5 N=8", "F-GRPO γ=1 N=8", "GRPO N=8 low-LR")
"""The arms whose final models are scored again by prompt type (:func:`final_by_type`)."""
BY_TYPE_FAMILIES = ("narrowing", "narrowing-controls")
"""The sweeps whose final models are scored again by prompt type."""
ATTRIBUTED = (("narrowing", 5), (PLATEAU, 0))
"""The sweeps whose final models' steps are attributed to their groups (:mod:`tailmiss.experiments.attribution`),
with the batches drawn from the SFT model (both start from one): GRPO and F-GRPO γ = 1 at N = 8
(:data:`.attribution_text.ARMS`), the first ``ATTRIBUTED_SEEDS`` seeds, ``ATTRIBUTED_BATCHES`` batches per run."""
ATTRIBUTED_SEEDS = 5
ATTRIBUTED_BATCHES = 2


@dataclass
class NarrowingData:
    """The study's sweeps.

    Attributes
    ----------
    histories : dict
        Family -> its runs' evaluation history (``SweepResult.history``).
    finals : dict
        Family -> its final table (``SweepResult.final``; the SFT model included).
    typed : dict
        Family -> :func:`~tailmiss.experiments.prompt_types.by_type` of its runs: one row per run, evaluation step
        and prompt type.
    per_prompt : dict
        ``(label, seed) -> (steps, mu_pos)`` of every run of ``narrowing`` and ``narrowing-controls`` (their labels
        are distinct).
    finals_by_type : DataFrame or None
        :func:`final_by_type` of :data:`FINAL_LABELS` (None when not asked for, the figures do not need it, and in
        quick mode).
    bridge : DataFrame or None
        The categorical simulator started from the SFT model's per-prompt answer distributions beside the
        transformer's runs of ``narrowing`` (:func:`tailmiss.experiments.bridge.run_bridge`'s per-prompt rows), with
        each prompt's ``type``; None in quick mode.
    ladder : dict
        Rung name (``table-adamw-lr0.1``, ...) -> :func:`~tailmiss.experiments.prompt_types.by_type` of its runs on
        the training pool, which is the ladder's evaluation set.
    tasks, minority, names : dict
        Family -> its task (:class:`~tailmiss.llm.tasks.narrowing.NarrowingTask`), the boolean mask of its
        evaluation prompts' minority, the preset that ran (quick or full).
    quick : bool
    """

    histories: dict
    finals: dict
    typed: dict
    per_prompt: dict
    finals_by_type: pd.DataFrame | None
    bridge: pd.DataFrame | None
    ladder: dict
    tasks: dict
    minority: dict
    names: dict
    quick: bool
    plateau: pd.DataFrame | None = None
    """The plateau runs' history (:data:`PLATEAU`; None in the first look)."""
    plateau_typed: pd.DataFrame | None = None
    """The plateau runs' held-out metrics by prompt type (:func:`by_type`; None in the first look)."""
    plateau_rates: dict | None = None
    """The plateau runs' arms -> their learning rate over the study's (None in the first look)."""
    endpoint: pd.DataFrame | None = None
    """The end-point runs' history (:data:`END_POINT`; None in the first look)."""
    endpoint_typed: pd.DataFrame | None = None
    endpoint_rates: dict | None = None
    settings: dict = field(default_factory=dict)
    """Family of :data:`SETTINGS_READ` -> ``(history, typed, task)`` (empty in the first look)."""
    attribution: pd.DataFrame | None = None
    """One step's groups attributed at the SFT model and at the final models of :data:`ATTRIBUTED`, per checkpoint,
    arm and seed (``attribution_table``; None in the first look and without ``finals``)."""
    counterfactual: pd.DataFrame | None = None
    """The counterfactual pool's held-out metrics by prompt type (:func:`by_type`; None as ``attribution``)."""


def final_labels(sweep) -> tuple[str, ...]:
    """The labels of :data:`FINAL_LABELS` that ``sweep`` has, in that order (the N sweep has no low-LR arm, the
    controls no GRPO at N = 2 or 32)."""
    have = {v.label for v in sweep.variants}
    return tuple(label for label in FINAL_LABELS if label in have)


def final_by_type(sweep, root, labels=None, options=None) -> pd.DataFrame:
    """Each run of ``labels`` (by default :func:`final_labels` of ``sweep``) at its last step, scored again on each
    prompt type of its evaluation prompts against its SFT model: ``mu_pos``, ``mret`` (retained mass, BroRL's /
    F-GRPO's :math:`M_{ret}`), ``dnll`` (ΔNLL_rare, F-GRPO Table 2) and exact ``pass256``, one row per run and type
    (:func:`tailmiss.experiments.by_type.run_by_type`: a unit of the store, computed once from the runs' weights)."""
    from tailmiss.experiments.by_type import run_by_type
    from tailmiss.options import RunOptions

    labels = final_labels(sweep) if labels is None else tuple(labels)
    return run_by_type(sweep, root, labels, options or RunOptions()).scores


def _minority(sweep) -> np.ndarray:
    """The minority mask of the evaluation prompts every run of ``sweep`` scores (one fixed set: ``eval_seed``)."""
    cfg = sweep.runs()[0][2]
    task = sweep.sft.task
    prompts = task.prompts(cfg.eval_split, cfg.eval_prompts, seed=cfg.eval_prompt_seed, distinct=True)
    return task.minority_mask(prompts)


def _bridge(result, minority: np.ndarray, ctx: Context) -> pd.DataFrame:
    """The bridge's per-prompt rows with each prompt's type (its evaluation prompts are the sweep's)."""
    from tailmiss.experiments.bridge import run_bridge

    rows = run_bridge(result, ctx.llm_cache, options=ctx.options).prompts
    kinds = np.where(minority, "minority", "rest")
    return rows.assign(type=kinds[rows["prompt"].to_numpy()])


def bridge_jobs(ctx: Context) -> list:
    """The study's bridge (:func:`narrowing_data`'s slowest step after training) as jobs of the LLM runs' process
    pool (:func:`tailmiss.experiments.pool.train_all`): the ``narrowing`` sweep's result once its runs are done, then
    the bridge at the simulator's default rate, each on one thread, beside the other runs; the report then loads it.
    None in quick mode, whose report runs no bridge."""
    from tailmiss.experiments.pool import Job
    from tailmiss.options import RunOptions

    if ctx.quick:
        return []

    sent = replace(ctx, options=RunOptions())  # each job gets the pool's options; the caller's log may not pickle
    sweep = resolve_family("narrowing", ctx)
    runs = tuple(job.key for job in sweep.jobs(ctx.llm_cache, ctx.options))
    first = Job(
        f"{sweep.name} (narrowing bridge)",
        _sweep_job,
        (sent,),
        needs=runs,
        label=f"sweep result {sweep.name}",
        doing="collecting",
    )
    bridge = Job(f"{sweep.name} bridge", _bridge_job, (sent,), (first.key,), f"bridge {sweep.name}", doing="simulating")
    return [first, bridge, *_by_type_jobs(ctx, sent), *_attribution_jobs(ctx, sent)]


def _by_type_jobs(ctx: Context, sent: Context) -> list:
    """The by-type scores of :func:`final_by_type` as pool jobs, each once its sweep's runs are done: they read the
    runs' weights, which the evidence archive does not keep."""
    from tailmiss.experiments.pool import Job

    out = []
    for family in BY_TYPE_FAMILIES:
        sweep = resolve_family(family, ctx)
        runs = tuple(cfg.name for _, _, cfg in sweep.runs())
        out.append(
            Job(f"{sweep.name} by type", _by_type_job, (sent, family), runs, f"by-type {sweep.name}", None, "scoring")
        )
    return out


def _attributed(ctx: Context) -> list:
    """``(sweep, seeds, sft_batches)`` of each sweep of :data:`ATTRIBUTED`."""
    out = []
    for family, sft_batches in ATTRIBUTED:
        sweep = resolve_family(family, ctx)
        out.append((sweep, tuple(sweep.seeds[:ATTRIBUTED_SEEDS]), sft_batches))
    return out


def _attribution_jobs(ctx: Context, sent: Context) -> list:
    """The attributions of :data:`ATTRIBUTED` as pool jobs, each once the runs it reads are done: they read the
    runs' weights, which the evidence archive does not keep."""
    from tailmiss.experiments.pool import Job
    from tailmiss.studies.narrowing.attribution_text import ARMS

    out = []
    for sweep, seeds, _ in _attributed(ctx):
        runs = tuple(cfg.name for v, s, cfg in sweep.runs() if v.label in ARMS and s in seeds)
        args = (sent, sweep.name)
        out.append(Job(f"{sweep.name} attribution", _attribution_job, args, runs, f"attribution {sweep.name}"))
    return out


def _attribution_job(ctx: Context, name: str, options) -> None:
    """A pool job: the attribution of the sweep ``name`` of :data:`ATTRIBUTED`, saved where :func:`narrowing_data`
    loads it."""
    sent = replace(ctx, options=options.replace(jobs=1))
    for sweep, seeds, sft_batches in _attributed(sent):
        if sweep.name == name:
            _attribution(sent, sweep, seeds, sft_batches)


def _attribution(ctx: Context, sweep, seeds: tuple, sft_batches: int):
    """:func:`tailmiss.experiments.attribution.run_attribution` of one sweep of :data:`ATTRIBUTED`."""
    from tailmiss.experiments.attribution import run_attribution
    from tailmiss.studies.narrowing.attribution_text import ARMS

    return run_attribution(sweep, ctx.llm_cache, ARMS, seeds, ATTRIBUTED_BATCHES, sft_batches, ctx.options)


def attribution_rows(ctx: Context) -> pd.DataFrame:
    """:data:`ATTRIBUTED`'s groups (computed or loaded), with ``as_archived``: whether the weights read came out as the
    run's archived copy (:class:`tailmiss.experiments.attribution.Attribution`; the SFT model's always do)."""
    frames = []
    for sweep, seeds, sft_batches in _attributed(ctx):
        found = _attribution(ctx, sweep, seeds, sft_batches)
        g, names = found.groups, {(v.label, s): cfg.name for v, s, cfg in sweep.runs()}
        keys = zip(g["checkpoint"], g["label"], g["seed"])
        same = [c == "SFT model" or found.as_archived.get(names[(v, s)]) for c, v, s in keys]
        frames.append(g.assign(as_archived=pd.array(same, dtype="boolean")))
    return pd.concat(frames, ignore_index=True)


def attribution_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per checkpoint, arm and seed of ``attribution_rows``: the mean over batches of the summed :math:`c_j` of the
    minority's groups, the rest's (and of those, the rare and frequent successes'), all groups' (``total``), the
    ``active`` groups (some but not all rollouts correct), ``batches``, the ``groups`` of a batch, ``as_archived``."""
    from tailmiss.experiments.attribution import BUCKETS

    rest, target, keys = rows["type"] == "rest", rows["minority"], ["checkpoint", "label", "seed"]
    parts = {
        "minority_groups": target.where(rows["type"] == "minority", 0.0),
        "rest_groups": target.where(rest, 0.0),
        "rest_rare": target.where(rest & (rows["bucket"] == BUCKETS[1]), 0.0),
        "rest_frequent": target.where(rest & (rows["bucket"] == BUCKETS[2]), 0.0),
        "total": target,
        "active": rows["bucket"].isin(BUCKETS[1:3]).astype(float),
        "groups": 1,
    }
    how = {**dict.fromkeys(parts, "sum"), "as_archived": "first"}
    per_batch = rows.assign(**parts).groupby([*keys, "batch"], sort=False).agg(how)
    by_seed = per_batch.groupby(keys, sort=False)
    out = by_seed[list(parts)].mean().join(by_seed.size().rename("batches")).join(by_seed["as_archived"].first())
    return out.reset_index().astype({"groups": "int64"})


def _by_type_job(ctx: Context, family: str, options) -> None:
    """A pool job: :func:`final_by_type` of ``family``'s sweep, saved where :func:`narrowing_data` loads it."""
    final_by_type(resolve_family(family, ctx), ctx.llm_cache, options=options.replace(jobs=1))


def narrowing_units(ctx: Context) -> list:
    """The stored units :func:`narrowing_data` reads besides its families' runs and sweeps: the bridge of
    ``narrowing``, the by-type scores of :data:`BY_TYPE_FAMILIES` and the attributions of :data:`ATTRIBUTED` (none in
    quick mode)."""
    from tailmiss.experiments.bridge import DEFAULT_SIM_LR, bridge_name
    from tailmiss.experiments.bridge import SCOPE as BRIDGE_SCOPE
    from tailmiss.experiments.by_type import SCOPE as BY_TYPE_SCOPE
    from tailmiss.experiments.by_type import by_type_name
    from tailmiss.experiments.units import attribution_unit, comparison_unit
    from tailmiss.studies.narrowing.attribution_text import ARMS

    if ctx.quick:
        return []
    sweep = resolve_family("narrowing", ctx)
    out = [comparison_unit("bridge result", bridge_name(sweep), sweep, BRIDGE_SCOPE, {"sim_lr": DEFAULT_SIM_LR})]
    for family in BY_TYPE_FAMILIES:
        typed = resolve_family(family, ctx)
        key = {"labels": list(final_labels(typed))}
        out.append(comparison_unit("by-type scores", by_type_name(typed), typed, BY_TYPE_SCOPE, key))
    for sweep, seeds, sft_batches in _attributed(ctx):
        out.append(attribution_unit(sweep, ARMS, seeds, ATTRIBUTED_BATCHES, sft_batches))
    return out


def _sweep_job(ctx: Context, options) -> None:
    """A pool job: the ``narrowing`` sweep's result (its runs are done), on one thread."""
    sweep_result("narrowing", replace(ctx, options=options.replace(jobs=1)))


def _bridge_job(ctx: Context, options) -> None:
    """A pool job: the ``narrowing`` sweep's bridge, saved where :func:`narrowing_data` loads it."""
    from tailmiss.experiments.bridge import run_bridge

    ctx = replace(ctx, options=options.replace(jobs=1))
    run_bridge(sweep_result("narrowing", ctx), ctx.llm_cache, options=ctx.options)


def _finals(results: dict, ctx: Context) -> pd.DataFrame:
    families = [f for f in BY_TYPE_FAMILIES if f in results]
    return pd.concat(
        [final_by_type(results[f].config, ctx.llm_cache, options=ctx.options) for f in families], ignore_index=True
    )


def narrowing_data(ctx: Context, finals: bool = True, plateau: bool = True, endpoint: bool = True) -> NarrowingData:
    """Run (or load) the study's sweeps and split every run's held-out evaluations by prompt type; with ``finals``,
    score :data:`FINAL_LABELS`' final models again by type (:func:`final_by_type`); with ``plateau``, read the plateau
    runs (:data:`PLATEAU`) too, and with ``endpoint`` as well the end point's (:data:`END_POINT`).

    The quick version (``ctx.quick``, the first look) neither scores the final models again nor runs the bridge:
    each scores every run's held-out prompts over their answers again, which costs more than the quick runs."""
    from tailmiss.experiments.sweep import per_prompt_evals

    families = ("narrowing",) if ctx.quick else tuple(f for f in NARROWING_FAMILIES if f != "narrowing-ladder")
    results = {f: sweep_result(f, ctx) for f in families}
    minority = {f: _minority(r.config) for f, r in results.items()}
    evals = {f: per_prompt_evals(r.config, ctx.llm_cache) for f, r in results.items()}
    typed = {f: by_type(evals[f], minority[f]) for f in results}
    per_prompt = {k: v for f in ("narrowing", "narrowing-controls") if f in evals for k, v in evals[f].items()}
    ladder = {
        rung: by_type(per_prompt_evals(r.config, ctx.llm_cache), _minority(r.config))
        for rung, r in ladder_result(ctx, "narrowing-ladder").sweeps.items()
    }
    return NarrowingData(
        histories={f: r.history for f, r in results.items()},
        finals={f: r.final for f, r in results.items()},
        typed=typed,
        per_prompt=per_prompt,
        finals_by_type=_finals(results, ctx) if finals and not ctx.quick else None,
        bridge=None if ctx.quick else _bridge(results["narrowing"], minority["narrowing"], ctx),
        ladder=ladder,
        tasks={f: r.config.sft.task for f, r in results.items()},
        minority=minority,
        names={f: r.config.name for f, r in results.items()},
        quick=ctx.quick,
        **(_long_runs(ctx, PLATEAU, "plateau") if plateau and not ctx.quick else {}),
        **(_long_runs(ctx, END_POINT, "endpoint") if plateau and endpoint and not ctx.quick else {}),
        settings=_settings(ctx) if plateau and endpoint and not ctx.quick else {},
        attribution=attribution_table(attribution_rows(ctx)) if finals and plateau and not ctx.quick else None,
        counterfactual=_long(ctx, COUNTERFACTUAL)[1] if finals and plateau and not ctx.quick else None,
    )


def _long(ctx: Context, family: str):
    """The sweep result of runs to the plateau (``family``) and their held-out metrics by prompt type."""
    from tailmiss.experiments.sweep import per_prompt_evals

    result = sweep_result(family, ctx)
    return result, by_type(per_prompt_evals(result.config, ctx.llm_cache), _minority(result.config))


def _long_runs(ctx: Context, family: str, name: str) -> dict:
    """The history of the runs to the plateau (``family``), their held-out metrics by prompt type and their arms'
    learning rates over the study's (:class:`NarrowingData`'s ``name``, ``name_typed``, ``name_rates``)."""
    result, typed = _long(ctx, family)
    base = result.config.rl.optim.lr
    rates = {v.label: float(dict(v.overrides).get("optim.lr", base)) / base for v in result.config.variants}
    return {name: result.history, f"{name}_typed": typed, f"{name}_rates": rates}


def _settings(ctx: Context) -> dict:
    """:class:`NarrowingData`'s ``settings``: each family of :data:`SETTINGS_READ` as ``(history, typed, task)``."""
    out = {}
    for family in SETTINGS_READ:
        result, typed = _long(ctx, family)
        out[family] = (result.history, typed, result.config.sft.task)
    return out


def archived_history(name: str = PLATEAU, root=None) -> pd.DataFrame | None:
    """The history of sweep ``name`` from the evidence archive ``root`` (default: the archive the store reads), or
    None when the archive does not hold it or holds it for another config than the preset's (read without training
    or restoring anything: the first look's summary, :mod:`tailmiss.studies.narrowing.archived`).

    ``ArchiveError`` (a ``ValueError``) when the archived bytes differ from those the archive recorded.
    """
    import io
    from pathlib import Path

    from tailmiss import archive
    from tailmiss.experiments.presets import llm_sweep
    from tailmiss.experiments.sweep_config import LLMSweep

    unit = archive.find(Path("runs/llm") / name, root)
    if unit is None:
        return None
    files = unit.files()  # every stored file checked against the archive's record
    if LLMSweep.from_toml(unit.path / "config.toml") != llm_sweep(name):  # config.toml is kept plain
        return None
    return pd.read_csv(io.BytesIO(files["history.csv"]), dtype={"gamma": "float64", "seed": "int64"})
