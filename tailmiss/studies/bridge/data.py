"""The bridge's results: the simulation from the SFT answer distributions beside the transformer's RL runs.

:func:`bridge_data` runs (or loads) :func:`tailmiss.experiments.bridge.run_bridge` on the
group-size sweep at every simulator learning rate of
:data:`tailmiss.experiments.bridge.SENSITIVITY_LRS`; its verdict (F-GRPO Fig. 2's regimes
and Lemma 3.1 against the transformer) is judged once, by :mod:`tailmiss.studies.bridge.claims`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from tailmiss.studies.bridge.claims import BridgeVerdict, bridge_verdict, per_prompt_spearman
from tailmiss.studies.context import Context
from tailmiss.studies.runs import resolve_family, sweep_result

__all__ = ["BridgeData", "bridge_data", "bridge_jobs", "bridge_lrs", "bridge_units"]


@dataclass(frozen=True)
class BridgeData:
    """The bridge at every checked simulator learning rate, with the transformer runs it compares against.

    Attributes
    ----------
    sweep : SweepResult
        The group-size sweep (its ``final`` table: one row per run plus the SFT model).
    main : BridgeResult
        The bridge at :data:`tailmiss.experiments.bridge.DEFAULT_SIM_LR` (F-GRPO App. J's learning rate).
    others : tuple of BridgeResult
        The bridge at the other learning rates of :func:`bridge_lrs`, in the order of
        :data:`tailmiss.experiments.bridge.SENSITIVITY_LRS`.
    per_prompt : DataFrame
        The transformer's prompts at the default rate, seed means per prompt, N and γ: Lemma 3.1's
        ``tail_miss`` beside the rare-set mass ``tau`` and its SFT value ``tau0``.
    per_prompt_spearman : float
        :func:`~tailmiss.studies.bridge.claims.per_prompt_spearman` of :attr:`per_prompt`.
    verdict : BridgeVerdict
        The verdict of :attr:`main` (:func:`~tailmiss.studies.bridge.claims.bridge_verdict`).
    others_verdicts : tuple of BridgeVerdict
        The verdict at each of :attr:`others`.
    unchecked : tuple of float
        The rates of :data:`~tailmiss.experiments.bridge.SENSITIVITY_LRS` not run here (quick mode runs the default
        rate only).
    """

    sweep: object
    main: object
    others: tuple
    per_prompt: pd.DataFrame
    per_prompt_spearman: float
    verdict: BridgeVerdict
    others_verdicts: tuple
    unchecked: tuple = ()

    @property
    def agrees(self) -> bool:
        """Whether the regimes agree at the default rate (:attr:`BridgeVerdict.agrees`)."""
        return self.verdict.agrees


def bridge_lrs(ctx: Context) -> tuple[float, ...]:
    """The simulator learning rates the bridge runs at: every rate of
    :data:`~tailmiss.experiments.bridge.SENSITIVITY_LRS`, in quick mode only the default one (the first look shows
    the comparison; the other rates check that its verdict does not hang on the one free setting)."""
    from tailmiss.experiments.bridge import DEFAULT_SIM_LR, SENSITIVITY_LRS

    return (DEFAULT_SIM_LR,) if ctx.quick else tuple(SENSITIVITY_LRS)


def bridge_data(ctx: Context, sweep=None) -> BridgeData:
    """The bridge of the group-size sweep at every rate of :func:`bridge_lrs`, run or loaded, with its verdicts.

    Parameters
    ----------
    ctx : Context
    sweep : SweepResult, optional
        The group-size sweep when the caller already holds it (``sweep_result("nsweep", ctx)`` otherwise).
    """
    from tailmiss.experiments.bridge import DEFAULT_SIM_LR, SENSITIVITY_LRS, run_bridge
    from tailmiss.experiments.pool import phase

    result = sweep_result("nsweep", ctx) if sweep is None else sweep
    bridges = {}
    for lr in bridge_lrs(ctx):
        with phase("bridge", sim_lr=lr):
            bridges[lr] = run_bridge(result, ctx.llm_cache, sim_lr=lr, options=ctx.options)
    main = bridges[DEFAULT_SIM_LR]
    others = tuple(b for lr, b in bridges.items() if lr != DEFAULT_SIM_LR)
    prompts = main.prompts[main.prompts["source"] == "llm"]
    per_prompt = prompts.groupby(["prompt", "group_size", "gamma"], as_index=False)[["tail_miss", "tau", "tau0"]].mean()
    return BridgeData(
        sweep=result,
        main=main,
        others=others,
        per_prompt=per_prompt,
        per_prompt_spearman=per_prompt_spearman(per_prompt),
        verdict=bridge_verdict(main.summary),
        others_verdicts=tuple(bridge_verdict(b.summary) for b in others),
        unchecked=tuple(lr for lr in SENSITIVITY_LRS if lr not in bridges),
    )


def _sweep_job(ctx: Context, options) -> None:
    """A pool job: the group-size sweep's result, collected from its finished runs and saved."""
    sweep_result("nsweep", replace(ctx, options=options.replace(jobs=1)))


def _bridge_job(ctx: Context, sim_lr: float, options) -> None:
    """A pool job: the bridge at ``sim_lr``, run (or reused) and saved; :func:`bridge_data` then loads it."""
    from tailmiss.experiments.bridge import run_bridge

    ctx = replace(ctx, options=options.replace(jobs=1))
    run_bridge(sweep_result("nsweep", ctx), ctx.llm_cache, sim_lr=sim_lr, options=ctx.options)


def bridge_jobs(ctx: Context) -> list:
    """:func:`bridge_data`'s work as jobs of the LLM runs' process pool (:func:`tailmiss.experiments.pool.train_all`):
    the group-size sweep's result once its runs are done, then the bridge at each learning rate of
    :func:`bridge_lrs`, each on one thread, beside the other runs."""
    from tailmiss.experiments.pool import Job
    from tailmiss.options import RunOptions

    sent = replace(ctx, options=RunOptions())  # each job gets the pool's options; the caller's log may not pickle
    sweep = resolve_family("nsweep", ctx)
    runs = tuple(job.key for job in sweep.jobs(ctx.llm_cache, ctx.options))
    first = Job(
        f"{sweep.name} (bridge)",
        _sweep_job,
        (sent,),
        needs=runs,
        label=f"sweep result {sweep.name}",
        doing="collecting",
    )
    return [first] + [
        Job(f"bridge lr {lr:g}", _bridge_job, (sent, lr), (first.key,), f"bridge lr {lr:g}", doing="simulating")
        for lr in bridge_lrs(ctx)
    ]


def bridge_units(ctx: Context) -> list:
    """The stored units :func:`bridge_data` reads besides the group-size sweep's: its bridge at every rate of
    :func:`bridge_lrs` (:class:`tailmiss.experiments.units.UnitSpec`)."""
    from tailmiss.experiments.bridge import SCOPE, bridge_name
    from tailmiss.experiments.units import comparison_unit

    sweep = resolve_family("nsweep", ctx)
    return [
        comparison_unit("bridge result", bridge_name(sweep, lr), sweep, SCOPE, {"sim_lr": float(lr)})
        for lr in bridge_lrs(ctx)
    ]
