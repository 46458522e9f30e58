r"""The ladder's claims (:mod:`tailmiss.experiments.ladder`): N-shapes, matched-Q_pos retention, focal effects, one
verdict per ingredient, the best simulator setting.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss.analytic.regimes import n_shape, spearman, zone_agreement, zones
from tailmiss.experiments.ladder import METRICS, LadderResult

__all__ = [
    "IngredientVerdict",
    "BestSimulator",
    "shape_table",
    "matched_table",
    "focal_table",
    "has_large_n_regime",
    "ingredient_verdicts",
    "best_simulator",
]


def _seed_stats(frame: pd.DataFrame, keys: list[str], metric: str) -> pd.DataFrame:
    g = frame.groupby(keys)[metric]
    return pd.DataFrame({"mean": g.mean(), "sd": g.std(ddof=1).fillna(0.0), "seeds": g.size()}).reset_index()


def shape_table(final: pd.DataFrame, metric: str = "retained_mass") -> pd.DataFrame:
    """The N-shape of ``metric`` per rung, set and γ (seed means): :func:`tailmiss.analytic.regimes.n_shape` plus zones.

    Columns: ``rung, set, gamma``, the :class:`~tailmiss.analytic.regimes.NShape` fields ``spearman, worst_n,
    worst, at_max_n, recovers``, the curve ``group_sizes, means, sds`` (tuples by N: seed mean and sd) and, for
    M_ret only, ``zones`` (a tuple such as ``("I", "II", "III")``).
    """
    lower_is_worse = METRICS[metric][1]
    stats = _seed_stats(final, ["rung", "set", "gamma", "group_size"], metric)
    rows = []
    for (rung, where, gamma), part in stats.groupby(["rung", "set", "gamma"], sort=False):
        part = part.sort_values("group_size")
        shape = n_shape(part["group_size"], part["mean"], part["sd"], lower_is_worse)
        row = {"rung": rung, "set": where, "gamma": gamma, **dataclasses.asdict(shape)}
        if metric == "retained_mass":
            row["zones"] = tuple(zones(part["group_size"].to_numpy(), part["mean"].to_numpy()))
        row["group_sizes"] = tuple(int(n) for n in part["group_size"])
        row["means"] = tuple(float(m) for m in part["mean"])
        row["sds"] = tuple(float(sd) for sd in part["sd"])
        rows.append(row)
    return pd.DataFrame(rows)


def _value_at(q: np.ndarray, m: np.ndarray, target: float) -> float:
    """M_ret where Q_pos first reaches ``target`` along a run (linear between evaluations; NaN if never)."""
    hit = np.flatnonzero(q >= target)
    if not len(hit):
        return float("nan")
    i = int(hit[0])
    if i == 0:
        return float(m[0])
    w = (target - q[i - 1]) / (q[i] - q[i - 1]) if q[i] != q[i - 1] else 1.0
    return float(m[i - 1] + w * (m[i] - m[i - 1]))


def matched_table(history: pd.DataFrame, where: str = "pool", fraction: float = 0.5) -> pd.DataFrame:
    r"""M_ret at matched :math:`Q_{pos}` per rung, γ and N: learning speed taken out of the comparison.

    For each rung the target is its start plus ``fraction`` of the smallest
    gain :math:`Q_{pos}(T) - Q_{pos}(0)` over its γ = 0 cells (seed means), so
    every cell reaches it; each run's :math:`M_{ret}` is read where its
    :math:`Q_{pos}` first reaches the target. Columns: ``rung, gamma,
    group_size, target, mean, sd`` (over seeds; runs that never reach it are
    left out).
    """
    h = history[history["set"] == where]
    rows = []
    for rung, part in h.groupby("rung", sort=False):
        per_run = part.groupby(["gamma", "group_size", "seed"])
        start = float(part[part["step"] == 0]["q_pos"].mean())
        ends = part[part["step"] == part.groupby(["group_size", "gamma", "seed"])["step"].transform("max")]
        gain = ends[ends["gamma"] == 0].groupby("group_size")["q_pos"].mean().min() - start
        target = start + fraction * max(gain, 0.0)
        for (gamma, n, seed), run in per_run:
            run = run.sort_values("step")
            value = _value_at(run["q_pos"].to_numpy(), run["retained_mass"].to_numpy(), target)
            rows.append({"rung": rung, "gamma": gamma, "group_size": n, "seed": seed, "target": target, "m": value})
    frame = pd.DataFrame(rows).dropna(subset=["m"])
    g = frame.groupby(["rung", "gamma", "group_size"])
    return g.agg(target=("target", "first"), mean=("m", "mean"), sd=("m", "std")).fillna(0.0).reset_index()


def focal_table(final: pd.DataFrame, metric: str = "retained_mass") -> pd.DataFrame:
    """The focal effect per rung, set, γ > 0 and N: mean and sd over seeds of ``metric(γ) − metric(0)`` (paired)."""
    base = final[final["gamma"] == 0].set_index(["rung", "set", "group_size", "seed"])[metric]
    rows = []
    for gamma in sorted(g for g in final["gamma"].unique() if g > 0):
        cur = final[final["gamma"] == gamma].set_index(["rung", "set", "group_size", "seed"])[metric]
        diff = (cur - base.reindex(cur.index)).rename("delta").reset_index()
        g = diff.groupby(["rung", "set", "group_size"])["delta"]
        stats = pd.DataFrame({"mean": g.mean(), "sd": g.std(ddof=1).fillna(0.0)}).reset_index()
        rows.append(stats.assign(gamma=gamma))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


# ---- verdicts: which ingredient creates or removes the large-N regime ---------------------------------


def has_large_n_regime(row) -> bool:
    """The large-N regime on a curve (a :func:`shape_table` row): F-GRPO Fig. 2's zone III (M_ret at or above
    :data:`~tailmiss.analytic.regimes.ZONE_THRESHOLD` at some N above a zone-II N), or a significant dip and
    recovery of M_ret (worst N strictly inside the sweep, the largest N above it by more than
    :data:`~tailmiss.analytic.regimes.RECOVERY_MARGIN` and twice the seed spread). Zone III itself is only the
    first: ``"III" in row["zones"]``."""
    return bool(row["recovers"] or "III" in (row.get("zones") or ()))


@dataclass(frozen=True)
class IngredientVerdict:
    """One controlled comparison of the ladder: does moving from ``source`` to ``target`` create the
    large-N regime?

    Attributes
    ----------
    ingredient, comparison : str
        What changes (e.g. ``"optimizer geometry"``) and between which rungs (``"SGD → Adam, table"``).
    source, target : str
        The two sides' labels.
    source_curve, target_curve : pandas.Series
        The two :func:`shape_table` rows (M_ret by N, GRPO, γ = 0).
    effect : str
        ``"creates"``, ``"removes"`` or ``"none"`` (the large-N regime, :func:`has_large_n_regime`).
    reverses_trend : bool
        Both Spearman correlations with N are at least 0.5 in size and of opposite signs.
    """

    ingredient: str
    comparison: str
    source: str
    target: str
    source_curve: pd.Series
    target_curve: pd.Series
    effect: str
    reverses_trend: bool

    @property
    def source_regime(self) -> bool:
        return has_large_n_regime(self.source_curve)

    @property
    def target_regime(self) -> bool:
        return has_large_n_regime(self.target_curve)


def _row(shape: pd.DataFrame, rung: str, where: str = "pool", gamma: float = 0.0):
    sel = shape[(shape["rung"] == rung) & (shape["set"] == where) & (shape["gamma"] == gamma)]
    return None if sel.empty else sel.iloc[0]


def _compare(ingredient: str, what: str, a, b, a_label: str, b_label: str) -> IngredientVerdict | None:
    if a is None or b is None:
        return None
    za, zb = has_large_n_regime(a), has_large_n_regime(b)
    effect = "none" if za == zb else ("creates" if zb else "removes")
    ra, rb = a["spearman"], b["spearman"]
    reverses = bool(
        np.isfinite(ra) and np.isfinite(rb) and np.sign(ra) != np.sign(rb) and abs(ra) >= 0.5 and abs(rb) >= 0.5
    )
    return IngredientVerdict(ingredient, what, a_label, b_label, a, b, effect, reverses)


def ingredient_verdicts(
    main: LadderResult, budget: LadderResult | None = None, hard: LadderResult | None = None
) -> list[IngredientVerdict]:
    """One line per controlled comparison (GRPO, γ = 0, M_ret by N on the training pool unless said otherwise).

    * optimizer geometry: SGD → Adam on each parameterisation;
    * parameter sharing: table → factorized → transformer with each optimizer;
    * prompt reuse: the transformer on held-out prompts → on its training pool;
    * difficulty: the transformer on task (a) → on the hard variant;
    * compute matching: equal steps → equal rollouts per rung.

    Each says whether moving from the first to the second *creates*, *removes* or
    does not affect the large-N regime (:func:`has_large_n_regime`).
    """
    shape = shape_table(main.final)
    rungs = {r.name: r for r in main.ladder.rungs}
    out = []
    by: dict = {}
    for r in main.ladder.rungs:  # the first rung of each (model, optimizer) is its calibrated one
        by.setdefault((r.model, r.optimizer), r.name)
    for model in dict.fromkeys(r.model for r in main.ladder.rungs):
        if (model, "sgd") in by and (model, "adamw") in by:
            a, b = by[(model, "sgd")], by[(model, "adamw")]
            out.append(_compare("optimizer geometry", f"SGD → Adam, {model}", _row(shape, a), _row(shape, b), a, b))
    for opt in ("adamw", "sgd"):
        chain = [by[(m, opt)] for m in ("table", "factorized", "transformer") if (m, opt) in by]
        for a, b in zip(chain, chain[1:]):
            what = f"{rungs[a].model} → {rungs[b].model}, {opt}"
            out.append(_compare("parameter sharing", what, _row(shape, a), _row(shape, b), a, b))
    for name, rung in rungs.items():
        if rung.model == "transformer":
            a, b = _row(shape, name, "heldout"), _row(shape, name, "pool")
            out.append(_compare("prompt reuse", f"held-out → trained-on, {name}", a, b, "held-out", "trained-on"))
    if hard is not None:
        hshape = shape_table(hard.final)
        for name in rungs:
            if name in {r.name for r in hard.ladder.rungs}:
                what = f"task (a) → hard task (a), {name}"
                out.append(
                    _compare(
                        "difficulty", what, _row(shape, name), _row(hshape, name), main.ladder.name, hard.ladder.name
                    )
                )
    if budget is not None:
        bshape = shape_table(budget.final)
        for rung in budget.ladder.rungs:
            if rung.name in rungs:
                what = f"equal steps → equal rollouts, {rung.name}"
                out.append(
                    _compare(
                        "compute matching",
                        what,
                        _row(shape, rung.name),
                        _row(bshape, rung.name),
                        main.ladder.name,
                        budget.ladder.name,
                    )
                )
    return [v for v in out if v is not None]


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
        regime_sim=has_large_n_regime(_row(hshape, chosen)),
        regime_llm=has_large_n_regime(_row(hshape, target)),
    )
