r"""The noise rule's equivalence test: two one-sided tests (TOST), for sentences that say "same", "reaches", "keeps".

The noise rule (:mod:`tailmiss.studies.rule`) tells a difference beyond noise; a
tie there is only the absence of evidence. A sentence that claims two rows are
the *same* needs the converse: evidence that the difference lies within a margin
:math:`\pm\Delta` fixed before the runs. Schuirmann's two one-sided tests give it.

Paired by seed, with per-seed differences :math:`d_s = a_s - b_s`, their mean
:math:`\bar d`, sd :math:`s_d` over :math:`n` seeds and
:math:`\mathrm{se} = s_d/\sqrt n`, the two null hypotheses
:math:`H_0^-: \delta \le -\Delta` and :math:`H_0^+: \delta \ge \Delta` are tested
one-sided on :math:`n - 1` degrees of freedom:

.. math::

    p_- = P\!\left(T_{n-1} \ge \frac{\bar d + \Delta}{\mathrm{se}}\right), \qquad
    p_+ = P\!\left(T_{n-1} \le \frac{\bar d - \Delta}{\mathrm{se}}\right), \qquad
    p = \max(p_-, p_+).

The two rows are *equivalent* when :math:`p < \alpha` (:data:`~tailmiss.studies.rule.ALPHA`):
both nulls rejected, which is the same as the :math:`(1 - 2\alpha)` t interval
:math:`\bar d \pm t_{1-\alpha,\,n-1}\,\mathrm{se}` lying inside :math:`(-\Delta, \Delta)`
(:attr:`Equivalence.ci`). A family is corrected by Holm's method
(:func:`holm_equivalence`), as the noise rule's. As in the noise rule, paired runs
whose every difference is within :data:`~tailmiss.studies.rule.IDENTICAL_TOL` are
*identical* (one run twice, never evidence) and fewer than
:data:`~tailmiss.studies.rule.MIN_SEEDS` pairs *cannot tell*; a test that
rejects neither bound is *not shown* (equivalence not shown, not a difference
shown). When every difference is the same nonzero value (:math:`s_d = 0`),
:math:`p = 0` if :math:`|\bar d| < \Delta` and 1 otherwise.

The one-sided tests and the Holm adjustment are the noise rule's own
(:func:`~tailmiss.studies.comparison.one_sided`, :func:`~tailmiss.studies.comparison.holm_adjusted`): this module
keeps the record of an equivalence at a bound a study fixed before its runs (the plateau's end point, ±0.02 on
pass@1), where the rule's own sentences take the margin of :func:`~tailmiss.studies.comparison.margin`.

References
----------
D. J. Schuirmann (1987), "A comparison of the two one-sided tests procedure and the power approach for assessing the
equivalence of average bioavailability", *J. Pharmacokinet. Biopharm.* 15:657-680.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from tailmiss.studies.comparison import ALPHA, IDENTICAL_TOL, MIN_SEEDS, holm_adjusted, one_sided

__all__ = [
    "EquivalenceOutcome",
    "Equivalence",
    "equivalent_values",
    "equivalent",
    "holm_equivalence",
]


class EquivalenceOutcome(str, enum.Enum):
    """The outcome of one equivalence test ``a − b`` within ``±bound`` (module docstring)."""

    EQUIVALENT = "equivalent"
    NOT_SHOWN = "not shown"
    CANNOT_TELL = "cannot tell"
    IDENTICAL = "identical"

    def __str__(self) -> str:
        return self.value

    @property
    def tested(self) -> bool:
        """Whether a test stands behind the outcome (equivalent or not shown)."""
        return self in (EquivalenceOutcome.EQUIVALENT, EquivalenceOutcome.NOT_SHOWN)


@dataclass(frozen=True)
class Equivalence:
    """``a − b`` on one metric tested for equivalence within ``±bound`` by two one-sided paired t-tests."""

    a: str
    b: str
    metric: str
    mean: float
    """Mean paired difference ``a − b`` (NaN without a pair)."""
    sd: float
    """Sd of the per-seed differences (NaN below two pairs)."""
    seeds: int
    """Pairs."""
    bound: float
    """The margin Δ: equivalence is ``−Δ < a − b < Δ``."""
    dof: float
    """Degrees of freedom, ``seeds − 1`` (NaN without a test)."""
    p: float
    """TOST p-value, the larger of the two one-sided p-values (NaN without a test)."""
    p_adjusted: float
    """After Holm within its family (the raw p alone)."""
    family: int
    """Tests in its Holm family (1 alone)."""
    outcome: EquivalenceOutcome

    @property
    def ci(self) -> tuple[float, float]:
        r"""The :math:`(1 - 2\alpha)` t interval :math:`\bar d \pm t_{1-\alpha,\,n-1}\,s_d/\sqrt n` (unadjusted;
        NaN without a test): the raw test says *equivalent* exactly when it lies inside ``(−bound, bound)``."""
        from scipy import stats

        if not self.outcome.tested:
            return math.nan, math.nan
        half = float(stats.t.ppf(1 - ALPHA, self.dof)) * self.sd / math.sqrt(self.seeds)
        return self.mean - half, self.mean + half

    def describe(self) -> str:
        """``+0.0031 within ±0.02 (TOST, df 4, p 0.012)``: the number, the margin and the test behind the outcome."""
        if not self.outcome.tested:
            return f"{self.mean:+.4f} ({self.outcome}, {self.seeds} seed{'s' * (self.seeds != 1)})"
        where = "within" if self.outcome == EquivalenceOutcome.EQUIVALENT else "not shown within"
        p = f"p {self.p:.2g}" if self.family == 1 else f"Holm p {self.p_adjusted:.2g} of {self.family}"
        return f"{self.mean:+.4f} {where} ±{self.bound:g} (TOST, df {self.dof:.3g}, {p})"


def _outcome(p: float) -> EquivalenceOutcome:
    return EquivalenceOutcome.EQUIVALENT if p < ALPHA else EquivalenceOutcome.NOT_SHOWN


def _check_bound(bound) -> float:
    try:
        value = float(bound)
    except (TypeError, ValueError):
        raise ValueError(f"the equivalence bound must be a positive finite number, got {bound!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"the equivalence bound must be a positive finite number, got {bound!r}")
    return value


def equivalent_values(a, b, metric: str, bound: float, *, labels: tuple[str, str] = ("a", "b")) -> Equivalence:
    r"""``a − b`` on ``metric`` within ``±bound``, from paired per-seed values (same seeds, in order).

    Parameters
    ----------
    a, b : array_like
        Per-seed values of the two rows, paired by position; one shape.
    metric : str
        The metric's name (for the record only).
    bound : float
        The margin :math:`\Delta > 0`, fixed before the runs.
    labels : tuple of str
        Names of ``a`` and ``b`` in the record.

    Returns
    -------
    Equivalence
        With :math:`d_s = a_s - b_s`, :math:`\mathrm{se} = s_d/\sqrt n` and
        :math:`p = \max\{P(T_{n-1} \ge (\bar d + \Delta)/\mathrm{se}),\ P(T_{n-1} \le (\bar d - \Delta)/\mathrm{se})\}`,
        *equivalent* when :math:`p <` :data:`~tailmiss.studies.rule.ALPHA`, else *not shown*; *identical* when every
        :math:`|d_s| \le` :data:`~tailmiss.studies.rule.IDENTICAL_TOL`; *cannot tell* below
        :data:`~tailmiss.studies.rule.MIN_SEEDS` pairs (Schuirmann 1987).

    Raises
    ------
    ValueError
        When the shapes differ, there is no value, a value is not finite, or ``bound`` is not a positive finite
        number.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired values must have one shape, got {x.shape} and {y.shape}")
    if x.size == 0:
        raise ValueError(f"{labels[0]!r} and {labels[1]!r}: no values to test on {metric!r}")
    delta = _check_bound(bound)
    d = (x - y).ravel()
    if not np.all(np.isfinite(d)):
        raise ValueError(f"{labels[0]!r} and {labels[1]!r}: values on {metric!r} must be finite, got {d.tolist()}")
    mean, n = float(d.mean()), int(d.size)
    sd = float(d.std(ddof=1)) if n > 1 else math.nan
    blank = dict(dof=math.nan, p=math.nan, p_adjusted=math.nan, family=1)
    if np.all(np.abs(d) <= IDENTICAL_TOL):
        return Equivalence(*labels, metric, mean, sd, n, delta, outcome=EquivalenceOutcome.IDENTICAL, **blank)
    if n < MIN_SEEDS:
        return Equivalence(*labels, metric, mean, sd, n, delta, outcome=EquivalenceOutcome.CANNOT_TELL, **blank)
    dof = float(n - 1)
    p = max(one_sided(mean, sd / math.sqrt(n), dof, delta))  # the rule's one-sided tests at ±bound
    return Equivalence(*labels, metric, mean, sd, n, delta, dof, p, p, 1, _outcome(p))


def equivalent(rows: pd.DataFrame, a: str, b: str, metric: str, bound: float) -> Equivalence:
    """``a − b`` on ``metric`` within ``±bound`` between two labels of ``rows`` (columns ``label``, ``seed`` and the
    metric), paired on the seeds both have a value on (:func:`equivalent_values`).

    An equivalence claim needs pairs: there is no unpaired fallback, and fewer than
    :data:`~tailmiss.studies.rule.MIN_SEEDS` shared seeds *cannot tell* (none shared: a mean of NaN).

    Raises
    ------
    ValueError
        When a label has no row, or ``bound`` is not a positive finite number.
    """
    have = set(rows["label"])
    missing = [x for x in (a, b) if x not in have]
    if missing:
        raise ValueError(f"no run of {', '.join(map(repr, missing))} to test for equivalence")
    delta = _check_bound(bound)
    wide = rows[rows["label"].isin([a, b])].pivot_table(index="seed", columns="label", values=metric)
    both = wide.reindex(columns=[a, b]).dropna()
    if both.empty:
        return Equivalence(
            a, b, metric, math.nan, math.nan, 0, delta, math.nan, math.nan, math.nan, 1, EquivalenceOutcome.CANNOT_TELL
        )
    return equivalent_values(both[a].to_numpy(), both[b].to_numpy(), metric, delta, labels=(a, b))


def holm_equivalence(tests) -> tuple[Equivalence, ...]:
    """The family ``tests`` with Holm-adjusted p-values and outcomes (same order), as
    :func:`~tailmiss.studies.rule.holm`: the :math:`i`-th smallest of the :math:`m` tested p-values is multiplied by
    :math:`m - i + 1`, capped at 1 and made monotone; tests without a test statistic (identical, cannot tell) keep
    their outcome and are not counted in the family."""
    tests = tuple(tests)
    adjusted = holm_adjusted([t.p if t.outcome.tested else math.nan for t in tests])  # the rule's Holm
    m = sum(t.outcome.tested for t in tests)
    return tuple(
        replace(t, p_adjusted=p, family=m, outcome=_outcome(p)) if t.outcome.tested else t
        for t, p in zip(tests, adjusted)
    )
