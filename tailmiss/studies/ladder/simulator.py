"""The simulator setting that best predicts the transformer on the ladder: the table rung whose M_ret-by-N curve
ranks most like a transformer rung's, checked on another task (:func:`best_simulator`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tailmiss.analytic.regimes import spearman, zone_agreement, zones
from tailmiss.studies.ladder.claims import has_large_n_regime, shape_row, shape_table

if TYPE_CHECKING:  # a type only: the claims import without the trainer (and torch)
    from tailmiss.experiments.ladder import LadderResult

__all__ = ["BestSimulator", "best_simulator"]


def _mean_curve(final: pd.DataFrame, rung: str, where: str = "pool") -> pd.Series:
    sel = final[(final["rung"] == rung) & (final["set"] == where) & (final["gamma"] == 0)]
    return sel.groupby("group_size")["retained_mass"].mean()


@dataclass(frozen=True)
class BestSimulator:
    """The table (simulator) rung whose M_ret-by-N curve best ranks like a transformer rung's (:func:`best_simulator`).

    ``scores_main`` holds each table rung's Spearman correlation with ``target`` on the main ladder; the remaining
    fields are the check on the hard task, ``None`` when the hard ladder lacks either rung.
    """

    target: str
    chosen: str
    scores_main: dict
    group_sizes: tuple | None = None
    sim_values: tuple | None = None
    llm_values: tuple | None = None
    spearman_hard: float | None = None
    zones_sim: tuple | None = None
    zones_llm: tuple | None = None
    zone_agreement: float | None = None
    regime_sim: bool | None = None
    regime_llm: bool | None = None
    """Whether each curve on the hard task shows the large-N regime (:func:`has_large_n_regime`)."""

    @property
    def checked(self) -> bool:
        """Whether the choice was checked on the hard task."""
        return self.spearman_hard is not None


def best_simulator(main: LadderResult, hard: LadderResult, target: str) -> BestSimulator:
    """The table (simulator) rung whose M_ret-by-N curve best ranks like the transformer's, checked on another task.

    Chosen on ``main`` by the Spearman correlation of the γ = 0 seed-mean curves
    on the training pool with rung ``target`` (a transformer rung); then, on
    ``hard``, the chosen rung's curve is compared with ``target``'s there: rank
    correlation, the share of N whose zone agrees and whether both or neither
    show the large-N regime.
    """

    def aligned_spearman(a: pd.Series, b: pd.Series) -> float:
        a, b = a.align(b, join="inner")
        return spearman(a, b)

    goal = _mean_curve(main.final, target)
    tables = [r.name for r in main.ladder.rungs if r.model == "table"]
    scores = {name: aligned_spearman(_mean_curve(main.final, name), goal) for name in tables}
    valid = {k: v for k, v in scores.items() if np.isfinite(v)}
    chosen = max(valid, key=valid.get) if valid else tables[0]
    if chosen not in {r.name for r in hard.ladder.rungs} or target not in {r.name for r in hard.ladder.rungs}:
        return BestSimulator(target, chosen, scores)
    sim, llm = _mean_curve(hard.final, chosen), _mean_curve(hard.final, target)
    sim, llm = sim.align(llm, join="inner")
    zs, zl = zones(sim.index.to_numpy(), sim.to_numpy()), zones(llm.index.to_numpy(), llm.to_numpy())
    hshape = shape_table(hard.final)
    return BestSimulator(
        target,
        chosen,
        scores,
        group_sizes=tuple(int(n) for n in sim.index),
        sim_values=tuple(float(x) for x in sim),
        llm_values=tuple(float(x) for x in llm),
        spearman_hard=spearman(sim, llm),
        zones_sim=tuple(zs),
        zones_llm=tuple(zl),
        zone_agreement=zone_agreement(zs, zl),
        regime_sim=has_large_n_regime(shape_row(hshape, chosen)),
        regime_llm=has_large_n_regime(shape_row(hshape, target)),
    )
