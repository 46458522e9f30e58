"""Simulation results: the cached preset runs behind F-GRPO Fig. 2 and BroRL Fig. 3, and Fig. 5's sampler.

Every simulation the figures and the report read is run (or loaded from the
cache under ``ctx.cache_dir``) here; the figures only plot what these return.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss import analytic
from tailmiss.analytic.regimes import concentration_zone
from tailmiss.studies.context import Context

__all__ = [
    "FIG5_MU",
    "FIG5_TAU",
    "FIG5_MAX_EXP",
    "SIMULATED",
    "SimulatedMeans",
    "simulated_means",
    "simulation_jobs",
    "tail_miss_at_init",
]

SIMULATED = ("fgrpo-fig2", "fgrpo-fig2-prob", "brorl-fig3")
"""The simulation presets the figures and the report read (their quick variants in quick mode)."""

FIG5_MU, FIG5_TAU, FIG5_MAX_EXP = 0.64, 6.3e-5, 17
"""F-GRPO Fig. 5: the non-anchor action's μ_pos and τ, and the largest group size as a power of 2."""


@dataclass(frozen=True)
class SimulatedMeans:
    """Seed-mean history of one simulation preset (F-GRPO Fig. 2, BroRL Fig. 3).

    Attributes
    ----------
    preset : str
        The preset's name (its quick variant in quick mode).
    means : DataFrame
        One row per logged step, group size and γ: the seed means of the
        simulator's metrics (``q_pos``, ``retained_mass``, ``entropy``, ...).
    final_step : int
        The last step (the preset's ``steps``).
    num_seeds : int
    ends : DataFrame
        Per seed: the rows at step 0 and at :attr:`final_step` (``group_size, gamma, seed, step`` and the
        metrics), for comparisons over seeds by the report's noise rule.
    """

    preset: str
    means: pd.DataFrame
    final_step: int
    num_seeds: int
    ends: pd.DataFrame | None = None

    @property
    def start(self) -> pd.DataFrame:
        """The rows at step 0."""
        return self.means[self.means["step"] == 0]

    @property
    def final(self) -> pd.DataFrame:
        """The rows at :attr:`final_step`."""
        return self.means[self.means["step"] == self.final_step]

    @property
    def zone(self) -> tuple[float, float] | None:
        """Zone II of the final γ = 0 retained mass (:func:`~tailmiss.analytic.regimes.concentration_zone`), ``None``
        if there is none."""
        g0 = self.final[self.final["gamma"] == 0]
        return concentration_zone(g0["group_size"], g0["retained_mass"])


def simulated_means(preset_name: str, ctx: Context) -> SimulatedMeans:
    """Seed-mean history of a preset (its quick variant in quick mode), run or loaded from the cache."""
    from tailmiss.experiments.pool import phase
    from tailmiss.sim import preset, quick_name
    from tailmiss.sim.runner import run_cached

    config = preset(quick_name(preset_name) if ctx.quick else preset_name)
    with phase("simulation", preset=config.name):
        result = run_cached(config, ctx.cache_dir, ctx.options)
    history = result.history
    ends = history[history["step"].isin([0, config.steps])].drop(columns=["run"]).reset_index(drop=True)
    return SimulatedMeans(
        preset=config.name,
        means=result.seed_mean(),
        final_step=config.steps,
        num_seeds=len(config.seeds),
        ends=ends,
    )


def _simulate(config, cache_dir, options) -> None:
    """A pool job: run (or reuse) ``config`` into the cache; its readers load it from there."""
    from tailmiss.sim.runner import run_cached

    run_cached(config, cache_dir, options)


def simulation_jobs(ctx: Context, presets=SIMULATED) -> list:
    """The presets (quick variants in quick mode) as jobs of the LLM runs' process pool
    (:func:`tailmiss.experiments.pool.train_all`), so that they run beside the runs instead of after them, each on
    one thread."""
    from tailmiss.experiments.pool import Job
    from tailmiss.sim import preset, quick_name

    configs = [preset(quick_name(name) if ctx.quick else name) for name in presets]
    return [
        Job(f"simulation {c.name}", _simulate, (c, ctx.cache_dir), label=f"simulation {c.name}", doing="simulating")
        for c in configs
    ]


def tail_miss_at_init(ctx: Context) -> pd.DataFrame:
    """F-GRPO Fig. 5's data: Lemma 3.1 at (μ, τ) = (0.64, 6.3e-5) and at the exact ``fgrpo-fig2`` initial policy,
    beside the simulator sampler's empirical tail-miss frequencies at N = 2^0 … 2^17.

    Returns one row per ``kind`` (``analytic``, ``analytic-init``, ``sampler``) and group size, with ``mu_pos``,
    ``tau``, ``value`` and the sampler's ``stderr`` (NaN for the closed forms).
    """
    from tailmiss.experiments.pool import phase
    from tailmiss.sim import preset
    from tailmiss.sim.diagnostics import empirical_tail_miss
    from tailmiss.sim.engine import initial_policy

    config = preset("fgrpo-fig2")
    init = initial_policy(config)
    dense = np.unique(np.round(2 ** np.linspace(0, FIG5_MAX_EXP, 600)).astype(np.int64))
    rows = [
        pd.DataFrame(
            {
                "kind": "analytic",
                "mu_pos": FIG5_MU,
                "tau": FIG5_TAU,
                "group_size": dense,
                "value": analytic.tail_miss_probability(FIG5_MU, FIG5_TAU, dense),
                "stderr": np.nan,
            }
        ),
        pd.DataFrame(
            {
                "kind": "analytic-init",
                "mu_pos": init.q_pos,
                "tau": init.tau_leaf,
                "group_size": dense,
                "value": analytic.tail_miss_probability(init.q_pos, init.tau_leaf, dense),
                "stderr": np.nan,
            }
        ),
    ]
    with phase("simulation", preset="fig5 sampler"):
        emp = empirical_tail_miss(
            config,
            [2**k for k in range(FIG5_MAX_EXP + 1)],
            num_groups=512 if ctx.quick else 4096,
            draw_budget=2**21 if ctx.quick else 2**24,
            device=ctx.options.device,
        )
    rows.append(
        pd.DataFrame(
            {
                "kind": "sampler",
                "mu_pos": init.q_pos,
                "tau": init.tau_leaf,
                "group_size": emp["group_size"],
                "value": emp["estimate"],
                "stderr": emp["stderr"],
            }
        )
    )
    return pd.concat(rows, ignore_index=True)
