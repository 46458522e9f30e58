r"""The ladder's claims (:mod:`tailmiss.experiments.ladder`): N-shapes, matched-Q_pos retention, focal effects, one
verdict per ingredient, the best simulator setting.

Every "beyond noise" here is the report's one rule (:mod:`tailmiss.studies.rule`), judged once in this
layer so the report only prints it: a focal cell helps when ``M_ret(γ) − M_ret(0)`` paired by seed is *higher*
after Holm over the whole focal table (:func:`focal_table`); a curve dips and recovers when, for some N strictly
inside the sweep, the smallest and the largest N both lie the good way of it (:func:`shape_table`); N matters at
matched Q_pos when some pair of N differs (:func:`matched_shape_table`). Neither picks its N from the seed means
first: every candidate is a part of the sentence's one Holm family (:func:`~tailmiss.studies.rule.judge_any`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tailmiss.analytic.regimes import n_shape, zones
from tailmiss.studies.rule import Difference, Sentence, Verdict, compare, compare_values, holm, judge_any

if TYPE_CHECKING:  # a type only: the claims import without the trainer (and torch)
    from tailmiss.experiments.ladder import LadderResult

__all__ = [
    "IngredientVerdict",
    "shape_table",
    "matched_runs",
    "matched_table",
    "matched_shape_table",
    "focal_table",
    "has_large_n_regime",
    "shape_row",
    "ingredient_verdicts",
]

_RULE_METRIC = {"rare_hit_at_256": "rare hit@256"}
"""Ladder columns whose δ (:data:`~tailmiss.studies.rule.THRESHOLDS`) the rule does not know by column name."""


def _between(part: pd.DataFrame, metric: str, a: int, b: int, column: str | None = None) -> Difference:
    """``metric`` at N = ``a`` minus at N = ``b`` from ``part``'s per-seed rows (columns ``group_size, seed`` and
    ``column``, default ``metric``), by the rule: paired by seed when both N have the same seeds, else
    :func:`~tailmiss.studies.rule.compare` (paired on the seeds they share, or Welch)."""
    column = column or metric
    name, labels = _RULE_METRIC.get(metric, metric), (f"N={a}", f"N={b}")
    va, vb = (part[part["group_size"] == n].groupby("seed")[column].mean() for n in (a, b))
    if set(va.index) == set(vb.index):
        return compare_values(va.to_numpy(), vb.reindex(va.index).to_numpy(), name, paired=True, labels=labels)
    rows = pd.concat(
        [pd.DataFrame({"label": x, "seed": v.index, name: v.to_numpy()}) for x, v in zip(labels, (va, vb))]
    )
    return compare(rows, *labels, name)


def _curve(part: pd.DataFrame, metric: str, lower_is_worse: bool = True, column: str | None = None) -> dict:
    """One curve over N from per-seed rows: :func:`~tailmiss.analytic.regimes.n_shape` of the seed means (its trend
    and worst N, descriptive), with ``recovers`` judged by the rule (not ``n_shape``'s margin): ``recovery``
    (:func:`_dip`) is *reproduced*."""
    g = part.groupby("group_size")[column or metric]
    stats = pd.DataFrame({"mean": g.mean(), "sd": g.std(ddof=1).fillna(0.0)}).sort_index()
    ns = [int(n) for n in stats.index]
    shape = n_shape(ns, stats["mean"], stats["sd"], lower_is_worse)
    recovery = _dip(part, metric, ns, lower_is_worse, column)
    return {
        **dataclasses.asdict(shape),
        "recovers": bool(recovery is not None and recovery.verdict == Verdict.REPRODUCED),
        "recovery": recovery,
        "group_sizes": tuple(ns),
        "means": tuple(float(m) for m in stats["mean"]),
        "sds": tuple(float(sd) for sd in stats["sd"]),
    }


def _dip(part: pd.DataFrame, metric: str, ns: list, lower_is_worse: bool, column: str | None) -> Sentence | None:
    """ "``metric`` dips inside the sweep and recovers", tested without picking the trough: for some N strictly inside
    the sweep, the smallest N − N and the largest N − N are both *higher* (*lower* where higher is worse, ΔNLL_rare),
    every interior N's pair in one Holm family. None with fewer than three N."""
    if len(ns) < 3:
        return None
    want = "higher" if lower_is_worse else "lower"
    alternatives = [
        [(_between(part, metric, ns[0], n, column), want), (_between(part, metric, ns[-1], n, column), want)]
        for n in ns[1:-1]
    ]
    return judge_any(f"{metric} dips inside N = {ns[0]}-{ns[-1]} and recovers", alternatives)


def shape_table(final: pd.DataFrame, metric: str = "retained_mass") -> pd.DataFrame:
    """The N-shape of ``metric`` per rung, set and γ: :func:`tailmiss.analytic.regimes.n_shape` of the seed means,
    recovery by the noise rule, and zones.

    Columns: ``rung, set, gamma``, the :class:`~tailmiss.analytic.regimes.NShape` fields ``spearman, worst_n,
    worst, at_max_n, recovers``, ``recovery`` (the dip and recovery tested without picking the trough, a
    :class:`~tailmiss.studies.rule.Sentence`: for some N strictly inside the sweep, both ends *higher* than it
    on per-seed values, *lower* for ΔNLL_rare, where higher is worse; ``None`` with fewer than three N), the curve
    ``group_sizes, means, sds`` (tuples by N: seed mean and sd) and, for M_ret only, ``zones`` (a tuple such as
    ``("I", "II", "III")``). ``recovers`` (``recovery`` *reproduced*) overrides ``n_shape``'s (a margin of
    :data:`~tailmiss.analytic.regimes.RECOVERY_MARGIN` and twice the seed sd, a spread threshold the report does not
    use).
    """
    from tailmiss.experiments.ladder import METRICS  # the trainer's package: not imported with the claims

    lower_is_worse = METRICS[metric][1]
    rows = []
    for (rung, where, gamma), part in final.groupby(["rung", "set", "gamma"], sort=False):
        row = {"rung": rung, "set": where, "gamma": gamma, **_curve(part, metric, lower_is_worse)}
        if metric == "retained_mass":
            row["zones"] = tuple(zones(np.asarray(row["group_sizes"]), np.asarray(row["means"])))
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


def matched_runs(history: pd.DataFrame, where: str = "pool", fraction: float = 0.5) -> pd.DataFrame:
    r"""M_ret at matched :math:`Q_{pos}` per run: learning speed taken out of the comparison.

    For each rung the target is its start plus ``fraction`` of the smallest
    gain :math:`Q_{pos}(T) - Q_{pos}(0)` over its γ = 0 cells (seed means), so
    every cell reaches it; each run's :math:`M_{ret}` is read where its
    :math:`Q_{pos}` first reaches the target. Columns: ``rung, gamma,
    group_size, seed, target, m`` (runs that never reach it are left out).
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
    return pd.DataFrame(rows).dropna(subset=["m"])


def matched_table(history: pd.DataFrame, where: str = "pool", fraction: float = 0.5) -> pd.DataFrame:
    """:func:`matched_runs` over seeds per rung, γ and N. Columns: ``rung, gamma, group_size, target, mean, sd``."""
    g = matched_runs(history, where, fraction).groupby(["rung", "gamma", "group_size"])
    return g.agg(target=("target", "first"), mean=("m", "mean"), sd=("m", "std")).fillna(0.0).reset_index()


def matched_shape_table(
    history: pd.DataFrame, where: str = "pool", fraction: float = 0.5, gamma: float = 0.0
) -> pd.DataFrame:
    """M_ret at matched Q_pos by N per rung at ``gamma`` (:func:`matched_runs`), judged by the noise rule.

    Columns: ``rung, target``, the curve fields of :func:`shape_table` (``recovers`` and ``recovery`` by the rule),
    ``best_n``, ``spread`` ("N changes the retained mass", a :class:`~tailmiss.studies.rule.Sentence`: some pair of
    N whose per-seed values differ, every pair one part of one Holm family, each written higher-mean first; paired
    by seed when both N have the same runs, else :func:`~tailmiss.studies.rule.compare`; ``None`` with one N) and
    ``n_matters`` (``spread`` *reproduced*: N changes the retained mass beyond noise and δ).
    """
    runs = matched_runs(history, where, fraction)
    rows = []
    for rung, part in runs[runs["gamma"] == gamma].groupby("rung", sort=False):
        curve = _curve(part, "retained_mass", column="m")
        best = curve["group_sizes"][int(np.argmax(curve["means"]))]
        spread = _spread(part, curve["group_sizes"], curve["means"])
        n_matters = bool(spread is not None and spread.verdict == Verdict.REPRODUCED)
        target = float(part["target"].iloc[0])
        rows.append({"rung": rung, "target": target, **curve, "best_n": best, "spread": spread, "n_matters": n_matters})
    return pd.DataFrame(rows)


def _spread(part: pd.DataFrame, ns: tuple, means: tuple) -> Sentence | None:
    """ "N changes M_ret at matched Q_pos": some pair of N differs (the higher seed mean first, *higher*; the
    two-sided test does not depend on the order), every pair in one Holm family. None with one N."""
    if len(ns) < 2:
        return None
    order = sorted(zip(means, ns), reverse=True)
    pairs = [
        [(_between(part, "retained_mass", a, b, "m"), "higher")]
        for i, (_, a) in enumerate(order)
        for _, b in order[i + 1 :]
    ]
    return judge_any("N changes M_ret at matched Q_pos", pairs)


def focal_table(final: pd.DataFrame, metric: str = "retained_mass") -> pd.DataFrame:
    """The focal effect per rung, set, γ > 0 and N: ``metric(γ) − metric(0)`` paired by seed, judged by the rule.

    Every cell (rung × set × γ × N) is one paired t-test on its seeds (seeds − 1 df); the whole table is ONE Holm
    family (:func:`~tailmiss.studies.rule.holm`; identical runs and cells under
    :data:`~tailmiss.studies.rule.MIN_SEEDS` seeds are untested and out of it). The focal weight *helps* a
    cell when its ``outcome`` is *higher*. Columns: ``rung, set, group_size, gamma, mean, sd`` (of the per-seed
    differences; sd 0 with one seed), ``seeds, test, dof, p, p_adjusted, family, outcome`` and ``diff`` (the
    :class:`~tailmiss.studies.rule.Difference`).
    """
    keys = ["rung", "set", "group_size", "seed"]
    base = final[final["gamma"] == 0].groupby(keys)[metric].mean()
    name = _RULE_METRIC.get(metric, metric)
    cells, diffs = [], []
    for gamma in sorted(g for g in final["gamma"].unique() if g > 0):
        cur = final[final["gamma"] == gamma].groupby(keys)[metric].mean()
        both = pd.DataFrame({"a": cur, "b": base.reindex(cur.index)}).dropna().reset_index()
        for (rung, where, n), cell in both.groupby(["rung", "set", "group_size"]):
            labels = (f"{rung} {where} N={n} γ={gamma:g}", f"{rung} {where} N={n} γ=0")
            diffs.append(compare_values(cell["a"], cell["b"], name, paired=True, labels=labels))
            cells.append({"rung": rung, "set": where, "group_size": n, "gamma": gamma})
    if not cells:
        return pd.DataFrame()
    fields = ("seeds", "test", "dof", "p", "p_adjusted", "family", "outcome")
    rows = [
        {**cell, "mean": d.mean, "sd": np.nan_to_num(d.sd), **{f: getattr(d, f) for f in fields}, "diff": d}
        for cell, d in zip(cells, holm(diffs))
    ]
    return pd.DataFrame(rows)


# ---- verdicts: which ingredient creates or removes the large-N regime ---------------------------------


def has_large_n_regime(row) -> bool:
    """The large-N regime on a curve (a :func:`shape_table` row): F-GRPO Fig. 2's zone III (M_ret at or above
    :data:`~tailmiss.analytic.regimes.ZONE_THRESHOLD` at some N above a zone-II N), or a dip and recovery of M_ret
    resolved by the noise rule (``row["recovers"]``: for some N strictly inside the sweep, both ends *higher*,
    :func:`shape_table`). Zone III itself is only the first: ``"III" in row["zones"]``."""
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


def shape_row(shape: pd.DataFrame, rung: str, where: str = "pool", gamma: float = 0.0):
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
            out.append(
                _compare("optimizer geometry", f"SGD → Adam, {model}", shape_row(shape, a), shape_row(shape, b), a, b)
            )
    for opt in ("adamw", "sgd"):
        chain = [by[(m, opt)] for m in ("table", "factorized", "transformer") if (m, opt) in by]
        for a, b in zip(chain, chain[1:]):
            what = f"{rungs[a].model} → {rungs[b].model}, {opt}"
            out.append(_compare("parameter sharing", what, shape_row(shape, a), shape_row(shape, b), a, b))
    for name, rung in rungs.items():
        if rung.model == "transformer":
            a, b = shape_row(shape, name, "heldout"), shape_row(shape, name, "pool")
            out.append(_compare("prompt reuse", f"held-out → trained-on, {name}", a, b, "held-out", "trained-on"))
    if hard is not None:
        hshape = shape_table(hard.final)
        for name in rungs:
            if name in {r.name for r in hard.ladder.rungs}:
                what = f"task (a) → hard task (a), {name}"
                out.append(
                    _compare(
                        "difficulty",
                        what,
                        shape_row(shape, name),
                        shape_row(hshape, name),
                        main.ladder.name,
                        hard.ladder.name,
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
                        shape_row(shape, rung.name),
                        shape_row(bshape, rung.name),
                        main.ladder.name,
                        budget.ladder.name,
                    )
                )
    return [v for v in out if v is not None]
