r"""Comparing two rows on one metric, over seeds: the tests behind the one noise rule (:mod:`tailmiss.studies.rule`).

Two rows (runs of two configs, or two sets of per-seed values) are compared paired by seed where they share seeds
(the per-seed differences :math:`d_s = a_s - b_s`, a two-sided paired t-test on :math:`n - 1` degrees of freedom),
by Welch's t-test otherwise; each :class:`Difference` also carries the two one-sided tests at the margin
:math:`\pm\Delta` (:func:`margin`) that decide "not lower", "not higher" and "same"; :func:`holm` corrects a family
of them. :mod:`tailmiss.studies.rule` states the rule and judges sentences from these comparisons.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

__all__ = [
    "ALPHA",
    "MIN_SEEDS",
    "IDENTICAL_TOL",
    "THRESHOLDS",
    "NEAR_BOUND_SHARE",
    "Word",
    "Outcome",
    "Difference",
    "practical_threshold",
    "margin",
    "one_sided",
    "outcome_of",
    "compare_values",
    "compare",
    "holm_adjusted",
    "holm",
    "identical_runs",
]

ALPHA = 0.05
"""Two-sided level of every test, after Holm's correction within a family."""
MIN_SEEDS = 3
"""Fewer seeds than this on a side: the rule cannot tell."""
IDENTICAL_TOL = 1e-6
"""Paired runs whose every per-seed difference is at most this are the same runs in effect."""
THRESHOLDS = {
    "pass@1": 0.005,
    "pass@k": 0.01,
    "rare hit@256": 0.02,
    "M_ret": 0.01,
    "ΔNLL_rare": 0.05,
    "Q_pos": 0.005,
    "share": 0.05,
    "worst drop": 1e-6,
}
"""The practical threshold δ per metric family (fractions; ΔNLL_rare in nats per token): a difference the test
resolves but smaller than δ is a tie. pass@1 half a point and pass@k one point are below every gap F-GRPO reports
(Table 1's smallest pass@256 gain is 0.3 points of 70; its pass@1 gains reach 2.8); a rare-set hit rate of 2
points; M_ret one point of mass; ΔNLL_rare 0.05 (Table 2's gaps are 0.14-0.49); Q_pos half a point; a share of
runs, pairs or actions 5 points; BroRL's worst single-action drop 1e-6 (the initial probabilities are ~1e-5)."""

_FAMILY = {
    "pass1": "pass@1",
    "exact_pass_at_1": "pass@1",
    "pass_at_1": "pass@1",
    "mu_pos": "pass@1",
    "pass256": "pass@k",
    "exact_pass_at_256": "pass@k",
    "pass_at_256": "pass@k",
    "rare256": "rare hit@256",
    "rare_pass_at_256": "rare hit@256",
    "mret": "M_ret",
    "retained_mass": "M_ret",
    "dnll": "ΔNLL_rare",
    "dnll_rare": "ΔNLL_rare",
    "q_pos": "Q_pos",
    "share": "share",
    "frac_correct_improved": "share",
    "worst_drop": "worst drop",
}


class Word(str, enum.Enum):
    """A word of the report's vocabulary: printed as itself."""

    def __str__(self) -> str:
        return self.value


class Outcome(Word):
    """The rule's outcome for one comparison ``a − b`` (module docstring)."""

    HIGHER = "higher"
    LOWER = "lower"
    TIE = "tie"
    BELOW_DELTA = "tie (below δ)"
    CANNOT_TELL = "cannot tell"
    IDENTICAL = "identical"

    @property
    def resolved(self) -> bool:
        """Higher or lower: beyond noise and above δ."""
        return self in (Outcome.HIGHER, Outcome.LOWER)


def practical_threshold(metric: str) -> float:
    """δ of ``metric`` (a column name such as ``pass256`` or ``exact_pass_at_1``, or a family of
    :data:`THRESHOLDS`); pass@k at any other k (``pass_at_16``, ``exact_pass_at_64``) takes pass@k's δ."""
    if metric in THRESHOLDS:
        return THRESHOLDS[metric]
    if metric in _FAMILY:
        return THRESHOLDS[_FAMILY[metric]]
    if metric.removeprefix("exact_").startswith("pass_at_"):
        return THRESHOLDS["pass@k"]
    raise ValueError(f"no practical threshold for metric {metric!r}: name one of {sorted(THRESHOLDS)}")


@dataclass(frozen=True)
class Difference:
    """``a − b`` on one metric, judged by the one rule (module docstring)."""

    a: str
    b: str
    metric: str
    mean: float
    """Mean paired difference, or the difference of the two means (Welch)."""
    sd: float
    """Sd of the per-seed differences (paired) or the Welch standard error × √seeds; NaN below two seeds."""
    seeds: int
    """Pairs (paired) or the smaller side's runs (Welch)."""
    test: str
    """``"paired t"``, ``"Welch t"`` or ``"none"`` (identical, or too few seeds)."""
    dof: float
    p: float
    """Two-sided p-value (NaN without a test)."""
    p_adjusted: float
    """After Holm within its family (the raw p alone)."""
    family: int
    """Comparisons in its Holm family (1 alone)."""
    delta: float
    """The practical threshold δ."""
    threshold: float
    """Half-width of the difference's (1 − α) t interval, unadjusted (NaN without a test)."""
    outcome: Outcome
    margin: float = math.nan
    """The margin Δ of the one-sided tests (:func:`margin`; NaN without a test)."""
    p_not_lower: float = math.nan
    r"""One-sided p of :math:`H_0: a - b \le -\Delta` (small: ``a`` is shown not lower than ``b`` by Δ)."""
    p_not_higher: float = math.nan
    r"""One-sided p of :math:`H_0: a - b \ge \Delta` (small: ``a`` is shown not higher than ``b`` by Δ)."""

    @property
    def ci(self) -> tuple[float, float]:
        """The (1 − α) t interval of the difference (unadjusted)."""
        return self.mean - self.threshold, self.mean + self.threshold

    def describe(self) -> str:
        """``+0.0123 (paired t, df 9, p 0.004)``: the number and the test behind the outcome."""
        if self.test == "none":
            return f"{self.mean:+.4f} ({self.outcome}, {self.seeds} seed{'s' * (self.seeds != 1)})"
        p = f"p {self.p:.2g}" if self.family == 1 else f"Holm p {self.p_adjusted:.2g} of {self.family}"
        return f"{self.mean:+.4f} ({self.test}, df {self.dof:.3g}, {p})"


NEAR_BOUND_SHARE = 0.1
"""Near the top of a success rate, the margin of "not lower", "not higher" and "same" is at most this share of what is
left to gain (:func:`margin`)."""
_RATES = ("pass@1", "pass@k", "rare hit@256", "M_ret", "Q_pos")
"""The metric families that are success rates on [0, 1] (higher is better, 1 the top)."""


def margin(metric: str, level: float) -> float:
    r"""The margin Δ of the one-sided tests on ``metric`` between rows at ``level`` (the higher of the two means).

    .. math::

        \Delta = \min\bigl(\delta,\ s\,(1 - \ell)\bigr) \text{ for a success rate, else } \Delta = \delta,

    with δ the metric's practical threshold (:func:`practical_threshold`), :math:`\ell` the level and
    :math:`s` = :data:`NEAR_BOUND_SHARE`: where little is left to gain (pass@1 ≈ 0.99), "keeps pass@1" must exclude a
    loss of a tenth of the remaining failure rate, not of δ (0.005 there would be half of it). A success rate is a
    metric of ``_RATES``.
    """
    delta = practical_threshold(metric)
    family = metric if metric in THRESHOLDS else _FAMILY.get(metric)
    rate = family in _RATES or (family is None and metric.removeprefix("exact_").startswith("pass_at_"))
    if not rate or not math.isfinite(level):
        return delta
    return float(min(delta, NEAR_BOUND_SHARE * max(1.0 - level, 0.0)))


def one_sided(mean: float, se: float, dof: float, bound: float) -> tuple[float, float]:
    r"""``(p_not_lower, p_not_higher)``: one-sided t tests of :math:`H_0: d \le -\Delta` and :math:`H_0: d \ge \Delta`
    on ``dof`` degrees of freedom, for a mean difference ``mean`` of standard error ``se`` (with
    :math:`\mathrm{se} = 0`: 0 or 1 as the mean lies inside the bound or not). Their larger is Schuirmann's two
    one-sided tests' p for "within ±Δ"."""
    from scipy import stats

    if se == 0:
        return (0.0 if mean > -bound else 1.0), (0.0 if mean < bound else 1.0)
    return float(stats.t.sf((mean + bound) / se, dof)), float(stats.t.cdf((mean - bound) / se, dof))


def outcome_of(mean: float, p: float, delta: float) -> Outcome:
    """The outcome of a tested difference ``mean`` with (adjusted) p-value ``p`` and practical threshold ``delta``."""
    if not p < ALPHA:
        return Outcome.TIE
    if abs(mean) < delta:
        return Outcome.BELOW_DELTA
    return Outcome.HIGHER if mean > 0 else Outcome.LOWER


def compare_values(a, b, metric: str, *, paired: bool, labels: tuple[str, str] = ("a", "b")) -> Difference:
    """``a − b`` on ``metric`` from per-seed values: paired (same seeds, in order) or Welch (module docstring)."""
    from scipy import stats

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    delta = practical_threshold(metric)
    if paired and x.shape != y.shape:
        raise ValueError(f"paired values must have one shape, got {x.shape} and {y.shape}")
    if x.size == 0 or y.size == 0:
        raise ValueError(f"{labels[0]!r} and {labels[1]!r}: no values to compare on {metric!r}")
    blank = dict(test="none", dof=math.nan, p=math.nan, p_adjusted=math.nan, family=1, delta=delta)
    if paired:
        d = x - y
        mean, n = float(d.mean()), int(d.size)
        sd = float(d.std(ddof=1)) if n > 1 else math.nan
        if np.all(np.abs(d) <= IDENTICAL_TOL):
            return Difference(*labels, metric, mean, sd, n, threshold=math.nan, outcome=Outcome.IDENTICAL, **blank)
        if n < MIN_SEEDS:
            return Difference(*labels, metric, mean, sd, n, threshold=math.nan, outcome=Outcome.CANNOT_TELL, **blank)
        se, dof, test = sd / math.sqrt(n), float(n - 1), "paired t"
    else:
        mean, n = float(x.mean() - y.mean()), int(min(x.size, y.size))
        if n < MIN_SEEDS:
            return Difference(
                *labels, metric, mean, math.nan, n, threshold=math.nan, outcome=Outcome.CANNOT_TELL, **blank
            )
        va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
        se = float(math.sqrt(va + vb))
        dof = float((va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))) if se > 0 else float(n - 1)
        sd, test = se * math.sqrt(n), "Welch t"
    if se == 0:
        p = 0.0 if mean != 0 else 1.0
    else:
        p = float(2 * stats.t.sf(abs(mean) / se, dof))
    half = float(stats.t.ppf(1 - ALPHA / 2, dof) * se)
    bound = margin(metric, max(float(x.mean()), float(y.mean())))
    low, high = one_sided(mean, se, dof, bound)
    outcome = outcome_of(mean, p, delta)
    return Difference(*labels, metric, mean, sd, n, test, dof, p, p, 1, delta, half, outcome, bound, low, high)


def compare(rows: pd.DataFrame, a: str, b: str, metric: str) -> Difference:
    """``a − b`` on ``metric`` between two labels of ``rows`` (columns ``label``, ``seed`` and the metric): paired on
    the seeds both have when they share at least :data:`~tailmiss.studies.rule.MIN_SEEDS` (or all of either side's),
    Welch otherwise."""
    have = set(rows["label"])
    missing = [x for x in (a, b) if x not in have]
    if missing:
        raise ValueError(f"no run of {', '.join(map(repr, missing))} to compare")
    wide = rows[rows["label"].isin([a, b])].pivot_table(index="seed", columns="label", values=metric)
    both = wide.dropna()
    sides = [wide[x].dropna() for x in (a, b)]
    if len(both) >= min(MIN_SEEDS, *(len(s) for s in sides)) and len(both) > 0:
        return compare_values(both[a].to_numpy(), both[b].to_numpy(), metric, paired=True, labels=(a, b))
    return compare_values(sides[0].to_numpy(), sides[1].to_numpy(), metric, paired=False, labels=(a, b))


def holm_adjusted(ps) -> list[float]:
    """Holm-adjusted p-values of ``ps`` in their order: the :math:`i`-th smallest of the :math:`m` tested ones
    multiplied by :math:`m - i + 1`, capped at 1 and made monotone (NaN: no test, left out of the family)."""
    ps = [float(p) for p in ps]
    tested = [i for i, p in enumerate(ps) if not math.isnan(p)]
    out, running = list(ps), 0.0
    for rank, i in enumerate(sorted(tested, key=lambda j: ps[j])):
        running = max(running, min(1.0, (len(tested) - rank) * ps[i]))
        out[i] = running
    return out


def holm(diffs) -> tuple[Difference, ...]:
    """The family ``diffs`` with Holm-adjusted p-values and outcomes (same order); comparisons without a test
    (identical, too few seeds) keep their outcome and are not counted in the family."""
    diffs = tuple(diffs)
    adjusted = holm_adjusted([d.p if d.test != "none" else math.nan for d in diffs])
    m = sum(d.test != "none" for d in diffs)
    out = [
        d if d.test == "none" else replace(d, p_adjusted=p, family=m, outcome=outcome_of(d.mean, p, d.delta))
        for d, p in zip(diffs, adjusted)
    ]
    return tuple(out)


def identical_runs(rows: pd.DataFrame, a: str, b: str, metrics) -> bool:
    """Whether ``a`` and ``b`` (labels of ``rows``) are the same runs in effect: they share every seed and each
    metric differs by at most :data:`IDENTICAL_TOL` on every seed."""
    sub = rows[rows["label"].isin([a, b])]
    seeds = [set(sub.loc[sub["label"] == x, "seed"]) for x in (a, b)]
    if not seeds[0] or seeds[0] != seeds[1]:
        return False
    for metric in metrics:
        wide = sub.pivot_table(index="seed", columns="label", values=metric)
        if not np.all(np.abs(wide[a] - wide[b]).to_numpy() <= IDENTICAL_TOL):
            return False
    return True
