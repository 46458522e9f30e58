r"""The one rule for "beyond noise", used by every section of the report and by its claims ledger.

Two rows (runs of two configs, or two sets of per-seed values) are compared on
one metric:

* **paired by seed** where they share seeds: the per-seed differences
  :math:`d_s = a_s - b_s`, their mean :math:`\bar d` and sd :math:`s_d` over
  :math:`n` seeds, and a two-sided paired t-test (scipy's ``ttest_rel``:
  :math:`t = \bar d / (s_d/\sqrt n)` on :math:`n - 1` degrees of freedom);
* **Welch's t-test** otherwise (``ttest_ind(equal_var=False)``: the difference of
  the two means over :math:`\sqrt{s_a^2/n_a + s_b^2/n_b}`, Welch-Satterthwaite
  degrees of freedom).

A **family** of comparisons (the ladder's cells × N, the DAPO tests, the
controls against GRPO) is corrected for multiplicity by Holm's step-down
procedure (:func:`holm`: the :math:`i`-th smallest of :math:`m` p-values is
multiplied by :math:`m - i + 1`, made monotone). Then, at α = :data:`ALPHA`:

* ``identical``: paired runs whose every per-seed difference is within
  :data:`IDENTICAL_TOL`: one run twice, never evidence (:class:`Outcome`);
* ``cannot tell``: fewer than :data:`MIN_SEEDS` seeds on a side (a t-test on one
  degree of freedom resolves nothing a referee would sign);
* ``higher`` / ``lower``: the (adjusted) p-value is below α **and** the difference is
  at least the metric's practical threshold δ (:data:`THRESHOLDS`);
* ``tie (below δ)``: resolved by the test but smaller than δ;
* ``tie``: not resolved by the test.

A paper's sentence is judged from its parts (:func:`judge`), each a comparison
and the direction the sentence wants; the verdict is one :class:`Verdict`, the only
vocabulary from the claims to the ledger.
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
    "Outcome",
    "Verdict",
    "Difference",
    "practical_threshold",
    "compare_values",
    "compare",
    "holm",
    "identical_runs",
    "Sentence",
    "judge",
    "judge_family",
    "rule_text",
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


class _Word(str, enum.Enum):
    """A word of the report's vocabulary: printed as itself."""

    def __str__(self) -> str:
        return self.value


class Outcome(_Word):
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


class Verdict(_Word):
    """A verdict on one of the paper's claims: the one vocabulary from the claims to the ledger."""

    REPRODUCED = "reproduced"
    REFUTED = "refuted"
    PARTLY = "partly"
    NOT_RESOLVED = "not resolved"
    CANNOT_TELL = "cannot tell"
    NOT_TESTABLE = "not testable"
    CAVEAT = "caveat"

    @classmethod
    def of(cls, value) -> Verdict:
        """``True`` reproduced, ``False`` refuted, ``None`` not resolved; a :class:`Verdict` as is."""
        if isinstance(value, Verdict):
            return value
        if value is None:
            return cls.NOT_RESOLVED
        if isinstance(value, (bool, np.bool_)):
            return cls.REPRODUCED if value else cls.REFUTED
        raise TypeError(f"a verdict is a Verdict, True, False or None, got {value!r}")


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


def _outcome(mean: float, p: float, delta: float) -> Outcome:
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
    return Difference(*labels, metric, mean, sd, n, test, dof, p, p, 1, delta, half, _outcome(mean, p, delta))


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


def holm(diffs) -> tuple[Difference, ...]:
    """The family ``diffs`` with Holm-adjusted p-values and outcomes (same order); comparisons without a test
    (identical, too few seeds) keep their outcome and are not counted in the family."""
    diffs = tuple(diffs)
    tested = [i for i, d in enumerate(diffs) if d.test != "none"]
    m = len(tested)
    out = list(diffs)
    running = 0.0
    for rank, i in enumerate(sorted(tested, key=lambda j: diffs[j].p)):
        running = max(running, min(1.0, (m - rank) * diffs[i].p))
        d = diffs[i]
        out[i] = replace(d, p_adjusted=running, family=m, outcome=_outcome(d.mean, running, d.delta))
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


@dataclass(frozen=True)
class Sentence:
    """One of the paper's sentences, its parts (each a wanted direction of a :class:`Difference`) and a verdict."""

    text: str
    parts: tuple
    """``(Difference, wanted)`` pairs, ``wanted`` in ``"higher"`` / ``"lower"`` / ``"not lower"``."""
    verdict: Verdict


def _part(d: Difference, wanted: str) -> str:
    """``"yes"``, ``"no"``, ``"open"`` (a tie) or ``"unknown"`` (cannot tell / identical) for one part."""
    o = d.outcome
    if o in (Outcome.CANNOT_TELL, Outcome.IDENTICAL):
        return "unknown"
    if wanted == "not lower":
        return "no" if o == Outcome.LOWER else "yes"
    if wanted == "not higher":
        return "no" if o == Outcome.HIGHER else "yes"
    if o == Outcome(wanted):
        return "yes"
    return "no" if o.resolved else "open"


def judge(text: str, parts) -> Sentence:
    """The verdict on a sentence whose ``parts`` are ``(Difference, wanted)``: refuted when a part goes the other way
    beyond noise and δ, reproduced when every part goes its way, *cannot tell* when a part cannot be told (too few
    seeds, identical runs) and none fails, *partly* when some parts hold and the rest are ties, *not resolved* when
    every part is a tie. ``wanted`` ``"not lower"`` holds unless the part is resolved lower (a tie below δ keeps)."""
    states = [_part(d, wanted) for d, wanted in parts]
    if not states:
        raise ValueError(f"the sentence {text!r} has no parts to judge")
    if "no" in states:
        verdict = Verdict.REFUTED
    elif "unknown" in states:
        verdict = Verdict.CANNOT_TELL
    elif all(s == "yes" for s in states):
        verdict = Verdict.REPRODUCED
    elif "yes" in states:
        verdict = Verdict.PARTLY
    else:
        verdict = Verdict.NOT_RESOLVED
    return Sentence(text, tuple(parts), verdict)


def judge_family(text: str, parts) -> Sentence:
    """:func:`judge` on a sentence whose parts form one Holm family: each part's :class:`Difference` adjusted
    together (:func:`holm`), the wanted directions kept."""
    diffs = holm(d for d, _ in parts)
    return judge(text, [(d, wanted) for d, (_, wanted) in zip(diffs, parts)])


def rule_text() -> str:
    """One paragraph stating the rule and the thresholds, for the report."""
    deltas = ", ".join(f"{name} {value:g}" for name, value in THRESHOLDS.items())
    return (
        f"**The noise rule** (one for the whole report, `tailmiss.studies.rule`): two rows are compared "
        f"paired by seed where they share seeds (paired t-test), by Welch's t-test otherwise, two-sided at α = "
        f"{ALPHA}; a family of comparisons is corrected by Holm's method; a difference is *higher* / *lower* only "
        f"when it is also at least the metric's practical threshold δ ({deltas}), else *tie (below δ)*; "
        f"fewer than {MIN_SEEDS} seeds on a side *cannot tell*; runs equal to within {IDENTICAL_TOL:g} on every "
        "seed are *identical* and count as no evidence."
    )
