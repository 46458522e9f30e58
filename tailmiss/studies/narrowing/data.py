"""The narrowing study's data: its sweeps' histories and final tables, and every run's held-out metrics by prompt
type (minority, rest, all) at every evaluation, from the runs' per-prompt masses."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from tailmiss.studies.context import Context
from tailmiss.studies.runs import ladder_result, resolve_family, sweep_result

__all__ = [
    "NARROWING_FAMILIES",
    "SEARCH_FAMILIES",
    "TYPES",
    "KS",
    "FINAL_LABELS",
    "NarrowingData",
    "narrowing_data",
    "by_type",
    "final_by_type",
    "bridge_jobs",
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
TYPES = ("minority", "rest", "all")
"""The prompt types of the per-type tables: the conflict's minority, the rest, and the whole stratified set."""
KS = (1, 4, 16, 64, 256)
"""The k of the per-type pass@k (exact, from the per-prompt correct mass)."""
FINAL_LABELS = ("GRPO N=2", "GRPO N=8", "GRPO N=32", "F-GRPO γ=0.5 N=8", "F-GRPO γ=1 N=8", "GRPO N=8 low-LR")
"""The arms whose final models are scored again by prompt type (:func:`final_by_type`)."""


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
        Family -> :func:`by_type` of its runs: one row per run, evaluation step and prompt type.
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
        Rung name (``table-adamw-lr0.1``, ...) -> :func:`by_type` of its runs on the training pool, which is the
        ladder's evaluation set.
    tasks : dict
        Family -> its task (:class:`~tailmiss.llm.tasks.narrowing.NarrowingTask`).
    minority : dict
        Family -> boolean mask of its evaluation prompts' minority.
    names : dict
        Family -> the preset that ran (quick or full).
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


def by_type(per_prompt: dict, minority: np.ndarray, ks=KS) -> pd.DataFrame:
    """Per run, evaluation and prompt type (:data:`TYPES`): ``mu_pos`` (held-out pass@1) and exact pass@k,
    :math:`1 - (1 - \\mu_x)^k` averaged over the type's prompts (F-GRPO Eq. 1 with the exact correct mass).

    Parameters
    ----------
    per_prompt : dict
        ``(label, seed) -> (steps (E,), mu_pos (E, P))`` (:func:`tailmiss.experiments.sweep.per_prompt_evals`).
    minority : ndarray of bool, shape (P,)
        Which evaluation prompts are the minority's.
    """
    minority = np.asarray(minority, dtype=bool)
    masks = {"minority": minority, "rest": ~minority, "all": np.ones_like(minority)}
    rows = []
    for (label, seed), (steps, mu) in per_prompt.items():
        mu = np.clip(np.asarray(mu, dtype=float), 0.0, 1.0)
        if mu.shape[1] != minority.size:
            raise ValueError(f"{label} seed {seed}: {mu.shape[1]} evaluation prompts, the mask has {minority.size}")
        for kind, mask in masks.items():
            if not mask.any():
                continue
            part = mu[:, mask]
            cols = {f"pass{k}": (1.0 - (1.0 - part) ** k).mean(axis=1) for k in ks}
            frame = pd.DataFrame({"label": label, "seed": int(seed), "step": np.asarray(steps, int), "type": kind})
            rows.append(frame.assign(mu_pos=part.mean(axis=1), **cols))
    return pd.concat(rows, ignore_index=True)


def final_by_type(sweep, root, labels=FINAL_LABELS) -> pd.DataFrame:
    """Each run of ``labels`` at its last step, scored again on each prompt type of its evaluation prompts against
    its SFT model (the reference its checkpoint holds): ``mu_pos``, ``mret`` (retained mass, BroRL's / F-GRPO's
    :math:`M_{ret}`), ``dnll`` (ΔNLL_rare, F-GRPO Table 2) and exact ``pass256``, one row per run and type."""
    from pathlib import Path

    from tailmiss.llm.checkpoint import LoadedRun
    from tailmiss.llm.evaluate import answer_distribution, exact_metrics

    task, rows = sweep.sft.task, []
    references = {}  # every run starts from the sweep's SFT model: its distribution once per prompt set
    for variant, seed, cfg in sweep.runs():
        if variant.label not in labels:
            continue
        run = LoadedRun(Path(root) / cfg.name)
        prompts = task.prompts(cfg.eval_split, cfg.eval_prompts, seed=cfg.eval_prompt_seed, distinct=True)
        mask = task.minority_mask(prompts)
        for kind, sel in (("minority", mask), ("rest", ~mask)):
            sub = [p for p, keep in zip(prompts, sel) if keep]
            if not sub:
                continue
            key = (kind, cfg.eval_split, cfg.eval_prompts, cfg.eval_prompt_seed)
            if key not in references:
                references[key] = answer_distribution(run.reference, task, sub, correct_only=True)
            ref = references[key]
            cur = answer_distribution(run.model, task, sub, correct_only=True)
            m = exact_metrics(cur, ref, rare_share=cfg.rare_share)
            rows.append(
                {
                    "label": variant.label,
                    "seed": int(seed),
                    "type": kind,
                    "mu_pos": m["mu_pos_mean"],
                    "mret": m["retained_mass_mean"],
                    "dnll": m["dnll_rare"],
                    "pass256": m["exact_pass_at_k"][256],
                }
            )
    return pd.DataFrame(rows)


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
    return [first, bridge]


def _sweep_job(ctx: Context, options) -> None:
    """A pool job: the ``narrowing`` sweep's result (its runs are done), on one thread."""
    sweep_result("narrowing", replace(ctx, options=options.replace(jobs=1)))


def _bridge_job(ctx: Context, options) -> None:
    """A pool job: the ``narrowing`` sweep's bridge, saved where :func:`narrowing_data` loads it."""
    from tailmiss.experiments.bridge import run_bridge

    ctx = replace(ctx, options=options.replace(jobs=1))
    run_bridge(sweep_result("narrowing", ctx), ctx.llm_cache, options=ctx.options)


def _finals(results: dict, ctx: Context) -> pd.DataFrame:
    families = [f for f in ("narrowing", "narrowing-controls") if f in results]
    return pd.concat([final_by_type(results[f].config, ctx.llm_cache) for f in families], ignore_index=True)


def narrowing_data(ctx: Context, finals: bool = True) -> NarrowingData:
    """Run (or load) the study's sweeps and split every run's held-out evaluations by prompt type; with ``finals``,
    score :data:`FINAL_LABELS`' final models again by type (:func:`final_by_type`).

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
    )
