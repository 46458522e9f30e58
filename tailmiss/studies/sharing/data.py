"""The shared rung's data: every rung of the narrowing ladder and the shared rung, split by prompt type.

The shared rung trains in a ladder of its own (``narrowing-ladder-shared``: the same SFT model, pool, arms and seeds
as ``narrowing-ladder``), so that adding it left the narrowing ladder's runs as they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tailmiss.studies.context import Context
from tailmiss.studies.narrowing.data import by_type
from tailmiss.studies.runs import ladder_result, resolve_family

__all__ = [
    "NARROWING_LADDER",
    "SHARED_LADDER",
    "N_LADDER",
    "FRONTIER_LADDERS",
    "RUNG_ORDER",
    "rung_kind",
    "SharedRungData",
    "shared_rung_data",
    "SIMULATED_LADDERS",
    "sharing_units",
    "shared_simulation_jobs",
]

NARROWING_LADDER = "narrowing-ladder"
"""The narrowing ladder (the table, factorized and transformer rungs) the shared rung stands beside."""
SHARED_LADDER = "narrowing-ladder-shared"
"""The shared rung's ladder preset (its quick version: ``narrowing-ladder-shared-quick``)."""
N_LADDER = "narrowing-ladder-shared-n"
"""The N shape's ladder preset (the shared rung and the transformer, GRPO at N = 2 … 32); not in the first look."""
FRONTIER_LADDERS = ("narrowing-ladder-frontier", "narrowing-ladder-frontier-low")
"""The frontier's ladder presets (the arms at the rungs' rates, and GRPO at half of them); not in the first look."""
SIMULATED_LADDERS = (SHARED_LADDER, N_LADDER, *FRONTIER_LADDERS)
"""The ladders whose shared rung the shared simulator is run from (a stored unit each, :func:`sharing_units`)."""
RUNG_ORDER = ("table", "factorized", "shared", "transformer")
"""The rungs' models in the ladder's order: the shared rung between the factorized policy and the transformer."""


def rung_kind(rung: str) -> str:
    """The model of rung ``rung`` (``"shared-adamw-lr0.03"`` → ``"shared"``)."""
    return rung.split("-")[0]


@dataclass(frozen=True)
class SharedRungData:
    """Every rung's held-out (here: the pool's) evaluations by prompt type.

    Attributes
    ----------
    ladder : dict
        Rung name (``shared-adamw-lr0.03``, ...) → :func:`tailmiss.experiments.prompt_types.by_type` of its runs:
        one row per run label, seed, evaluation step and prompt type (``mu_pos``, ``pass256``, ...); in
        :data:`RUNG_ORDER`.
    names : tuple of str
        The two ladder presets read (the narrowing ladder's, the shared rung's).
    quick : bool
    """

    ladder: dict
    names: tuple[str, str]
    quick: bool
    simulator: pd.DataFrame | None = None
    """The shared simulator from the shared rung's start, in the rungs' form (the stored
    :func:`tailmiss.experiments.shared_bridge.run_rung_simulation`)."""
    sim_meta: dict | None = None
    """The simulation's meta (the device it ran on)."""
    simulator_shape: tuple[int, int] = (0, 0)
    """The simulated law's prompts and actions."""
    grad_norm_max: float = float("nan")
    """The largest gradient norm of any step of the trainer's shared rung, before its clip."""
    grad_clip: float = float("nan")
    """The trainer's clip of the gradient norm (``optim.grad_clip``)."""
    n_shape: dict | None = None
    """The N shape's policies (``shared``, ``transformer``, ``shared simulator``) → by-type frames of their GRPO runs
    at every N; None when not run (the first look)."""
    frontier: dict | None = None
    """The frontier's policies (the same names) → by-type frames of their three arms (GRPO at half the rate labelled
    ``GRPO N=8 low-LR``); None when not run (the first look)."""


def _minority_of(sweep):
    """Which of the prompts every run of ``sweep`` is scored on (its fixed evaluation set) are the minority's."""
    run = sweep.runs()[0][2]
    task = sweep.sft.task
    scored = task.prompts(run.eval_split, run.eval_prompts, seed=run.eval_prompt_seed, distinct=True)
    return task.minority_mask(scored)


def _typed(result, ctx: Context):
    """A rung's sweep ``result`` split by prompt type (:func:`tailmiss.experiments.prompt_types.by_type` of its
    per-prompt evaluations)."""
    from tailmiss.experiments.sweep import per_prompt_evals

    return by_type(per_prompt_evals(result.config, ctx.llm_cache), _minority_of(result.config))


def _frontier(ctx: Context) -> dict | None:
    """The frontier ladders' runs by type per rung model, GRPO at half the rate relabelled, and the shared simulator
    of both ladders (None without them)."""
    from tailmiss.experiments.ladder import run_ladder
    from tailmiss.studies.sharing.frontier import GRPO, LOW
    from tailmiss.studies.sharing.simulator import SIMULATOR

    ladders = [resolve_family(name, ctx) for name in FRONTIER_LADDERS]
    if any(lad is None for lad in ladders):
        return None
    out: dict[str, list] = {}
    for i, ladder in enumerate(ladders):
        rename = {GRPO: LOW} if i else {}
        result = run_ladder(ladder, ctx.llm_cache, ctx.options)
        for rung, r in result.sweeps.items():
            out.setdefault(rung_kind(rung), []).append(_typed(r, ctx).replace({"label": rename}))
        sim = _simulation(ladder, ctx).typed
        out.setdefault(SIMULATOR, []).append(sim.replace({"label": rename}))
    return {name: pd.concat(parts, ignore_index=True) for name, parts in out.items()}


def _n_shape(ctx: Context) -> dict | None:
    """The N ladder's runs by type per rung model, and the shared simulator at the same N (None without it)."""
    from tailmiss.experiments.ladder import run_ladder
    from tailmiss.studies.sharing.simulator import SIMULATOR

    ladder = resolve_family(N_LADDER, ctx)
    if ladder is None:
        return None
    result = run_ladder(ladder, ctx.llm_cache, ctx.options)
    out = {rung_kind(rung): _typed(r, ctx) for rung, r in result.sweeps.items()}
    out[SIMULATOR] = _simulation(ladder, ctx).typed
    return out


def shared_rung_data(ctx: Context) -> SharedRungData:
    """Run (or load) the narrowing ladder and the shared rung's ladder, split every run's evaluations by type, and
    run (or load) the shared simulator from the shared rung's start (stored:
    :func:`tailmiss.experiments.shared_bridge.run_rung_simulation`)."""
    from tailmiss.experiments.ladder import run_ladder

    base = ladder_result(ctx, NARROWING_LADDER)
    shared = run_ladder(resolve_family(SHARED_LADDER, ctx), ctx.llm_cache, ctx.options)
    results = sorted({**base.sweeps, **shared.sweeps}.items(), key=lambda kv: RUNG_ORDER.index(rung_kind(kv[0])))
    ladder = {rung: _typed(r, ctx) for rung, r in results}
    sim = _simulation(shared.ladder, ctx)
    ((_, sweep),) = shared.sweeps.items()
    norms = [_grad_norm_max(Path(ctx.llm_cache) / cfg.name) for _, _, cfg in sweep.config.runs()]
    return SharedRungData(
        ladder=ladder,
        names=(base.ladder.name, shared.ladder.name),
        quick=ctx.quick,
        simulator=sim.typed,
        sim_meta={"device": sim.device},
        simulator_shape=(sim.num_prompts, sim.num_actions),
        grad_norm_max=max(norms),
        grad_clip=float(shared.ladder.rl.optim.grad_clip),
        n_shape=_n_shape(ctx),
        frontier=_frontier(ctx),
    )


def _simulation(ladder, ctx: Context):
    """The shared simulator from ``ladder``'s shared rung, by prompt type: a unit of the store
    (:func:`tailmiss.experiments.shared_bridge.run_rung_simulation`), simulated once and then read back."""
    from tailmiss.experiments.shared_bridge import SIM_SEEDS, run_rung_simulation

    return run_rung_simulation(ladder, ctx.llm_cache, seeds=SIM_SEEDS, options=ctx.options.replace(progress=False))


def sharing_units(ctx: Context) -> list:
    """The stored units :func:`shared_rung_data` reads besides its ladders' runs and sweeps: the shared simulator of
    each ladder it reads that has a shared rung
    (:func:`tailmiss.experiments.shared_bridge.run_rung_simulation`)."""
    from tailmiss.experiments.units import rung_simulation_unit

    ladders = [resolve_family(name, ctx) for name in SIMULATED_LADDERS]
    return [rung_simulation_unit(ladder) for ladder in ladders if ladder is not None]


def shared_simulation_jobs(ctx: Context) -> list:
    """The shared simulators of :func:`sharing_units` as pool jobs, each once its ladder's shared policy is derived,
    so that a report made on several processes does not simulate them one after another in its section."""
    from tailmiss.experiments.pool import Job
    from tailmiss.experiments.shared_bridge import rung_simulation_name, shared_rung

    out = []
    for name in SIMULATED_LADDERS:
        ladder = resolve_family(name, ctx)
        if ladder is None:
            continue
        start = shared_rung(ladder)[1].sft.name
        unit = rung_simulation_name(ladder)
        out.append(Job(unit, _simulation_job, (ctx, name), (start,), f"shared simulation {unit}", None, "simulating"))
    return out


def _simulation_job(ctx: Context, family: str, options) -> None:
    """A pool job: the shared simulator of the ladder ``family``, saved where :func:`shared_rung_data` loads it."""
    from dataclasses import replace

    _simulation(resolve_family(family, ctx), replace(ctx, options=options.replace(jobs=1)))


def _grad_norm_max(run: Path) -> float:
    """The largest gradient norm (before the clip) in the history of the run folder ``run``."""
    return float(pd.read_csv(run / "history.csv")["grad_norm"].max())
