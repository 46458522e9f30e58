r"""The frontier carried to the plateau: the rules that judge the plateau runs, written before the runs.

The study's frontier (:mod:`tailmiss.studies.narrowing.frontier`) matches a pair
of arms at pass@1 levels up to the lowest best pass@1 of any of their runs, which
stops below the plateau where the arms separate. The plateau runs carry the
frontier arms (GRPO, F-GRPO γ = 0.5, 1, 2, GRPO at a lower rate) to their plateau,
and ask the question of the paper's low-LR control (F-GRPO, arXiv 2602.06717,
App. N): does the focal weight keep coverage GRPO loses, or does it only slow
GRPO down? The history is a long table with columns ``label``, ``seed``,
``step``, ``mu_pos`` (held-out pass@1, NaN on steps without an evaluation: those
rows are dropped) and ``exact_pass_at_256``.

* **Plateau** (:func:`plateaued`): an arm has plateaued when its held-out
  pass@1 gain over the last quarter of its steps, per seed, is shown *not
  higher* than :data:`PLATEAU_GAIN` by the report's noise rule (one-sided at that
  margin, :mod:`tailmiss.studies.rule`). An arm that is not shown so is reported
  as *not plateaued*, and its end point is not judged. (Amended 2026-12-06: the
  rule first compared the seed-mean gain with the margin, no test: +0.0052 and
  +0.0048 read apart on noise.)
* **Levels** (:func:`plateau_levels`): :data:`PLATEAU_LEVELS` pass@1 levels evenly
  spaced from the SFT model's pass@1 (excluded) to the highest pass@1 that at
  least three seeds reach in both arms of the pair (included), so every level
  has three pairs to test. (Amended 2026-12-06: the top was where three seeds of
  *each* arm reach, which left the top levels with too few common seeds, and a
  level that cannot tell made the whole word *cannot tell*.)
* **Frontier** (:func:`plateau_frontier`): each run is read where its pass@1
  first reaches a level (:func:`~tailmiss.studies.narrowing.frontier.at_levels`),
  each level compared on pass@256 on the seeds of the pair that both reach it (at
  least three, else *cannot tell* at that level) by the report's noise rule
  (:mod:`tailmiss.studies.rule`), the levels one Holm family; the words *above*,
  *on*, *below*, *crosses* and *cannot tell* as the study's frontier's.
* **End point** (:func:`end_point_verdict`, :func:`end_point_family`): each run's
  final evaluation, paired by seed. pass@1 is *equivalent* when two one-sided
  paired t-tests reject a difference beyond :math:`\pm` :data:`PASS1_BOUND`
  (:mod:`tailmiss.studies.equivalence`); pass@1's and pass@256's differences are
  judged by the noise rule; pass@256 is *equivalent* within :math:`\pm`
  :data:`PASS256_BOUND` by the same two tests. Then *a dominates b* when its
  pass@256 is higher and its pass@1 equivalent or higher; *is dominated* when
  its pass@256 is lower and its pass@1 equivalent or lower; *same point* when
  both are equivalent; *cannot tell* otherwise. The pairs of one comparison (the
  three γ) form one Holm family for each of the four tests separately.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from tailmiss.studies.equivalence import Equivalence, EquivalenceOutcome, equivalent, holm_equivalence
from tailmiss.studies.narrowing.frontier import FrontierVerdict, at_levels, frontier_word
from tailmiss.studies.rule import (
    IDENTICAL_TOL,
    MIN_SEEDS,
    Difference,
    Outcome,
    Verdict,
    compare,
    compare_values,
    holm,
    judge,
    practical_threshold,
)

__all__ = [
    "PLATEAU_QUARTER",
    "PLATEAU_GAIN",
    "PLATEAU_LEVELS",
    "PASS1_BOUND",
    "PASS256_BOUND",
    "PlateauCheck",
    "plateaued",
    "plateau_levels",
    "PlateauFrontier",
    "plateau_frontier",
    "end_points",
    "EndPointVerdict",
    "end_point_verdict",
    "end_point_family",
]

PLATEAU_QUARTER = 0.25
"""The share of an arm's steps, at the end, over which its gain is measured."""
PLATEAU_GAIN = 0.005
"""An arm whose seed-mean held-out pass@1 gains less than this over its last quarter has plateaued."""
PLATEAU_LEVELS = 8
"""Matched pass@1 levels per pair."""
PASS1_BOUND = 0.02
"""The end points' pass@1 equivalence margin: the pass@1 gap that moves GRPO's path by pass@256's threshold."""
PASS256_BOUND = 0.01
"""The end points' pass@256 equivalence margin (pass@k's practical threshold)."""


def _evaluations(history: pd.DataFrame, labels) -> pd.DataFrame:
    """The rows of ``labels`` with a held-out pass@1 (a :class:`ValueError` naming a label without one)."""
    labels = list(labels)
    rows = history[history["label"].isin(labels)].dropna(subset=["mu_pos"])
    missing = [x for x in labels if x not in set(rows["label"])]
    if missing:
        raise ValueError(f"no evaluation of {', '.join(map(repr, missing))} in the history")
    return rows


# --- plateau ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlateauCheck:
    """Whether an arm has plateaued (module docstring)."""

    label: str
    steps: int
    """The arm's last evaluated step."""
    gain: float
    """Seed-mean pass@1 at the last evaluation minus at the last evaluation at or before the last quarter's start."""
    plateaued: bool
    test: Difference | None = None
    """The per-seed gains against 0, wanted *not higher* at the margin :data:`PLATEAU_GAIN`."""

    def describe(self) -> str:
        """``plateaued (pass@1 +0.0021 over the last quarter of 1600 steps; one-sided p 0.01 at +0.005)``."""
        word = "plateaued" if self.plateaued else "not plateaued"
        test = ""
        if self.test is not None and self.test.test != "none":
            test = f"; shown below +{self.test.margin:g}: one-sided p {self.test.p_not_higher:.2g}"
        elif self.test is not None:
            test = f"; {self.test.outcome}"
        return f"{word} (pass@1 {self.gain:+.4f} over the last quarter of {self.steps} steps{test})"


def plateaued(
    history: pd.DataFrame, label: str, last_quarter: float = PLATEAU_QUARTER, gain: float = PLATEAU_GAIN
) -> PlateauCheck:
    r"""Whether ``label``'s seed-mean held-out pass@1 gains less than ``gain`` over the last ``last_quarter`` of its
    steps.

    Parameters
    ----------
    history : DataFrame
        Columns ``label``, ``seed``, ``step``, ``mu_pos`` (rows without an evaluation dropped).
    label : str
        The arm.
    last_quarter : float
        The share :math:`q` of the steps at the end, in (0, 1).
    gain : float
        The gain below which the arm has plateaued.

    Returns
    -------
    PlateauCheck
        With :math:`\mu_s(t)` seed :math:`s`'s pass@1 at step :math:`t`, on the steps every run of the arm evaluated,
        :math:`T` the last of them and :math:`t_0` the last at or before :math:`(1 - q)\,T`: gain
        :math:`\mu_s(T) - \mu_s(t_0)` per seed, its seed mean reported, *plateaued* when the gains are shown not
        higher than ``gain`` by the noise rule (a one-sided paired t-test against 0 at that margin).
    """
    if not 0 < last_quarter < 1:
        raise ValueError(f"last_quarter must lie in (0, 1), got {last_quarter!r}")
    rows = _evaluations(history, [label])
    wide = rows.pivot_table(index="step", columns="seed", values="mu_pos").dropna().sort_index()
    if wide.empty:
        raise ValueError(f"the runs of {label!r} share no evaluated step")
    last = wide.index[-1]
    before = wide[wide.index <= (1 - last_quarter) * last]
    if before.empty:
        raise ValueError(f"{label!r} has no shared evaluation at or before step {(1 - last_quarter) * last:g}")
    gains = (wide.iloc[-1] - before.iloc[-1]).to_numpy(float)
    zero = np.zeros_like(gains)
    d = compare_values(gains, zero, "pass1", paired=True, labels=(f"{label} last-quarter gain", "0"))
    d = replace(d, margin=float(gain), p_not_higher=_below(gains, float(gain)))
    held = judge(f"{label} has plateaued", [(d, "not higher")]).verdict == Verdict.REPRODUCED
    return PlateauCheck(label, int(last), float(gains.mean()), held, d)


def _below(gains: np.ndarray, bound: float) -> float:
    r"""One-sided p of :math:`H_0:` mean gain :math:`\ge` ``bound`` (paired t on :math:`n - 1` degrees of freedom;
    NaN below :data:`~tailmiss.studies.rule.MIN_SEEDS` seeds)."""
    from scipy import stats

    n = gains.size
    if n < MIN_SEEDS:
        return math.nan
    se = float(gains.std(ddof=1)) / math.sqrt(n)
    mean = float(gains.mean())
    if se == 0:
        return 0.0 if mean < bound else 1.0
    return float(stats.t.cdf((mean - bound) / se, n - 1))


# --- the frontier to the plateau ----------------------------------------------------------------------------------


def _span(history: pd.DataFrame, a: str, b: str, min_seeds: int) -> tuple[float, float, str]:
    """The SFT model's pass@1, the highest pass@1 that at least ``min_seeds`` seeds reach in both ``a`` and ``b``,
    and why there is no level (``""`` when there are)."""
    rows = _evaluations(history, [a, b])
    start = rows.loc[rows["step"] == 0, "mu_pos"]
    if start.empty:
        raise ValueError(f"{a!r} and {b!r}: no step-0 evaluation (the SFT model's pass@1)")
    start = float(start.mean())
    best = rows.pivot_table(index="seed", columns="label", values="mu_pos", aggfunc="max").reindex(columns=[a, b])
    both = best.dropna().min(axis=1).sort_values(ascending=False)  # a seed reaches a level in both arms up to this
    if len(both) < min_seeds:
        return start, math.nan, f"{len(both)} seed{'s' * (len(both) != 1)} in both arms, fewer than {min_seeds}"
    reach = float(both.iloc[min_seeds - 1])
    if not reach > start + IDENTICAL_TOL:  # the step-0 mean of one model's score can sit an ulp off it
        return start, reach, f"{min_seeds} seeds never raise pass@1 above the SFT model's {start:.4f} in both arms"
    return start, reach, ""


def plateau_levels(
    history: pd.DataFrame, a: str, b: str, count: int = PLATEAU_LEVELS, min_seeds: int = MIN_SEEDS
) -> np.ndarray:
    r"""``count`` pass@1 levels for the pair ``a``, ``b``, evenly spaced from the SFT model's pass@1 (excluded) to the
    highest pass@1 that at least ``min_seeds`` seeds reach in both arms (included).

    Parameters
    ----------
    history : DataFrame
        Columns ``label``, ``seed``, ``step``, ``mu_pos``.
    a, b : str
        The pair's labels.
    count : int
        Levels.
    min_seeds : int
        Seeds that must reach the top level in both arms.

    Returns
    -------
    ndarray
        :math:`L_i = \mu_0 + (R - \mu_0)\,i/\mathrm{count}`, :math:`i = 1..\mathrm{count}`, with :math:`\mu_0` the mean
        step-0 pass@1 over the pair's runs and :math:`R` the ``min_seeds``-th largest over the seeds both arms have of
        :math:`\min(b_{a,s}, b_{b,s})`, :math:`b_{x,s}` seed :math:`s`'s best pass@1 in arm :math:`x` (a run reaches
        :math:`L` when its best pass@1 is at least :math:`L`): every level has ``min_seeds`` pairs.

    Raises
    ------
    ValueError
        Naming the pair, when fewer than ``min_seeds`` seeds are in both arms or :math:`R` is not above
        :math:`\mu_0` (by more than :data:`~tailmiss.studies.rule.IDENTICAL_TOL`: the mean of one model's step-0 score
        may sit a rounding error off it).
    """
    start, reach, why = _span(history, a, b, min_seeds)
    if why:
        raise ValueError(f"no pass@1 level for {a!r} against {b!r}: {why}")
    return start + (reach - start) * np.arange(1, count + 1) / count


@dataclass(frozen=True)
class PlateauFrontier(FrontierVerdict):
    """``a`` against ``b`` along the frontier to the plateau: the levels, each level's pass@256
    :class:`~tailmiss.studies.rule.Difference` (one Holm family), the word and the pass@1 range the levels cover."""

    covered: tuple = (math.nan, math.nan)
    """The first and the last level (NaN, NaN without a level)."""

    def describe(self) -> str:
        """``above (3 of 8 levels higher, none lower, 0 cannot tell; largest +0.041; pass@1 0.456-0.712)``."""
        if not self.levels:
            return f"{self.word} (no pass@1 level: too few seeds of the pair rise above the SFT model's pass@1)"
        up = sum(d.outcome == Outcome.HIGHER for d in self.diffs)
        down = sum(d.outcome == Outcome.LOWER for d in self.diffs)
        unknown = sum(d.outcome in (Outcome.CANNOT_TELL, Outcome.IDENTICAL) for d in self.diffs)
        means = [d.mean for d in self.diffs if np.isfinite(d.mean)]
        big = max(means, key=abs) if means else math.nan
        return (
            f"{self.word} ({up} of {len(self.diffs)} levels higher, {down} lower, {unknown} cannot tell; "
            f"largest {big:+.3f}; pass@1 {self.covered[0]:.3f}-{self.covered[1]:.3f})"
        )


def _level_difference(at: pd.DataFrame, a: str, b: str) -> Difference:
    """pass@256 ``a − b`` at one level on the seeds both reach it (the noise rule; *cannot tell* under three)."""
    at = at.dropna(subset=["pass256"])
    wide = at.pivot_table(index="seed", columns="label", values="pass256").reindex(columns=[a, b])
    shared = wide.dropna().index
    if len(shared) == 0:
        delta = practical_threshold("pass256")
        return Difference(
            a, b, "pass256", math.nan, math.nan, 0, "none", math.nan, math.nan, math.nan, 1, delta, math.nan,
            Outcome.CANNOT_TELL,
        )  # fmt: skip
    return compare(at[at["seed"].isin(shared)], a, b, "pass256")


def plateau_frontier(history: pd.DataFrame, a: str, b: str, levels=None) -> PlateauFrontier:
    """``a`` above, on, below or crossing ``b``'s frontier up to the plateau (module docstring).

    Parameters
    ----------
    history : DataFrame
        Columns ``label``, ``seed``, ``step``, ``mu_pos``, ``exact_pass_at_256``.
    a, b : str
        The pair's labels.
    levels : array_like, optional
        The pass@1 levels; by default :func:`plateau_levels`'. When fewer than three seeds of an arm rise above the
        SFT model's pass@1 there is none, and the word is *cannot tell* with no levels (as the study's frontier).

    Returns
    -------
    PlateauFrontier
        At each level, pass@256 where each run's pass@1 first reaches it, ``a − b`` by the noise rule on the seeds
        of the pair that both reach it (fewer than three: *cannot tell* there), the levels one Holm family. *above*:
        some level higher and none lower; *below*: the converse; *crosses*: both; *on*: no level resolved;
        *cannot tell*: some level cannot tell or identical.
    """
    if levels is None:
        *_, why = _span(history, a, b, MIN_SEEDS)
        if why:
            return PlateauFrontier(a, b, (), (), "cannot tell", (math.nan, math.nan))
        levels = plateau_levels(history, a, b)
    levels = np.asarray(levels, float)
    _evaluations(history, [a, b])
    points = at_levels(history, [a, b], levels)
    diffs = holm(_level_difference(points[np.isclose(points["level"], lv)], a, b) for lv in levels)
    word = frontier_word(diffs)
    covered = (float(levels[0]), float(levels[-1])) if levels.size else (math.nan, math.nan)
    return PlateauFrontier(a, b, tuple(float(x) for x in levels), diffs, word, covered)


# --- end points ---------------------------------------------------------------------------------------------------


def end_points(history: pd.DataFrame, labels) -> pd.DataFrame:
    """One row per run of ``labels`` at its final evaluation: ``label, seed, step, pass1, pass256``."""
    rows = _evaluations(history, labels).sort_values("step")
    last = rows.groupby(["label", "seed"], sort=True).tail(1)
    out = last.rename(columns={"mu_pos": "pass1", "exact_pass_at_256": "pass256"})
    out = out[["label", "seed", "step", "pass1", "pass256"]].sort_values(["label", "seed"])
    return out.reset_index(drop=True)


@dataclass(frozen=True)
class EndPointVerdict:
    """``a`` against ``b`` at their end points: the four tests and the word (module docstring)."""

    a: str
    b: str
    pass1_equivalence: Equivalence
    """pass@1 within ± :data:`PASS1_BOUND` (TOST)."""
    pass1: Difference
    """pass@1 ``a − b`` by the noise rule."""
    pass256: Difference
    """pass@256 ``a − b`` by the noise rule."""
    pass256_equivalence: Equivalence
    """pass@256 within ± :data:`PASS256_BOUND` (TOST)."""
    word: str
    """``"dominates"``, ``"is dominated"``, ``"same point"`` or ``"cannot tell"``."""

    def describe(self) -> str:
        """``dominates: pass@256 higher +0.0410 (paired t, ...); pass@1 +0.0031 within ±0.02 (TOST, ...)``: each
        metric by its equivalence test where that holds, else by the noise rule."""

        def one(e: Equivalence, d: Difference) -> str:
            if e.outcome == EquivalenceOutcome.EQUIVALENT:
                return e.describe()
            return d.describe() if d.test == "none" else f"{d.outcome} {d.describe()}"

        return (
            f"{self.word}: pass@256 {one(self.pass256_equivalence, self.pass256)}; "
            f"pass@1 {one(self.pass1_equivalence, self.pass1)}"
        )


def _end_word(e1: Equivalence, d1: Difference, d256: Difference, e256: Equivalence) -> str:
    same1 = e1.outcome == EquivalenceOutcome.EQUIVALENT
    if d256.outcome == Outcome.HIGHER and (same1 or d1.outcome == Outcome.HIGHER):
        return "dominates"
    if d256.outcome == Outcome.LOWER and (same1 or d1.outcome == Outcome.LOWER):
        return "is dominated"
    if same1 and e256.outcome == EquivalenceOutcome.EQUIVALENT:
        return "same point"
    return "cannot tell"


def end_point_family(
    history: pd.DataFrame, pairs, pass1_bound: float = PASS1_BOUND, pass256_bound: float = PASS256_BOUND
) -> tuple[EndPointVerdict, ...]:
    """The end-point verdicts of ``pairs`` (``(a, b)`` label pairs, one comparison's γ), one Holm family for each of
    the four tests separately (pass@1 TOST, pass@1 difference, pass@256 difference, pass@256 TOST).

    Parameters
    ----------
    history : DataFrame
        Columns ``label``, ``seed``, ``step``, ``mu_pos``, ``exact_pass_at_256``.
    pairs : iterable of (str, str)
        The pairs ``(a, b)``, each read ``a − b``.
    pass1_bound, pass256_bound : float
        The equivalence margins of pass@1 and pass@256.

    Returns
    -------
    tuple of EndPointVerdict
        In the order of ``pairs``.
    """
    pairs = [tuple(p) for p in pairs]
    points = end_points(history, sorted({x for p in pairs for x in p}))
    e1 = holm_equivalence(equivalent(points, a, b, "pass1", pass1_bound) for a, b in pairs)
    d1 = holm(compare(points, a, b, "pass1") for a, b in pairs)
    d256 = holm(compare(points, a, b, "pass256") for a, b in pairs)
    e256 = holm_equivalence(equivalent(points, a, b, "pass256", pass256_bound) for a, b in pairs)
    return tuple(
        EndPointVerdict(a, b, *tests, _end_word(*tests))
        for (a, b), *tests in zip(pairs, e1, d1, d256, e256, strict=True)
    )


def end_point_verdict(
    history: pd.DataFrame, a: str, b: str, pass1_bound: float = PASS1_BOUND, pass256_bound: float = PASS256_BOUND
) -> EndPointVerdict:
    """``a`` against ``b`` at their end points, alone (a family of one: :func:`end_point_family`)."""
    return end_point_family(history, [(a, b)], pass1_bound, pass256_bound)[0]
