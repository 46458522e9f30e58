r"""Paired comparisons over seeds and verdicts on the paper's sentences built from them.

Two rows (runs of two configs) are compared on the seeds they share, paired by
seed: the difference :math:`d_s = a_s - b_s` per seed, its mean :math:`\bar d`
and sd :math:`s_d` over the :math:`n` seeds, and a two-sided paired t-test at
α = 0.05: "higher" when :math:`\bar d > t_{0.975,n-1}\,s_d/\sqrt n`, "lower"
when :math:`\bar d < -t_{0.975,n-1}\,s_d/\sqrt n`, otherwise a tie; with one
seed nothing can be resolved (``None``). A sentence holds ("yes") when every part
goes its way, fails ("no") when a part goes the other way, and is "not
resolved" otherwise ("cannot tell" with one seed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

__all__ = ["PairedDiff", "paired_diff", "Sentence", "judge_sentence"]


@dataclass(frozen=True)
class PairedDiff:
    """``a - b`` on one metric over the seeds both rows have (module docstring's rule)."""

    a: str
    b: str
    metric: str
    mean: float
    sd: float
    seeds: int
    threshold: float
    """:math:`t_{0.975,n-1}\\,s_d/\\sqrt n` (NaN with one seed)."""
    outcome: str | None
    """``"higher"``, ``"lower"``, ``"tie"`` (within the threshold) or ``None`` (one seed: cannot tell)."""


def _t975(dof: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, dof))


def paired_diff(chosen: pd.DataFrame, a: str, b: str, metric: str) -> PairedDiff:
    """Compare rows ``a`` and ``b`` (labels of ``chosen``) on ``metric``, paired by seed."""
    wide = chosen[chosen["label"].isin([a, b])].pivot_table(index="seed", columns="label", values=metric)
    if a not in wide or b not in wide:
        missing = [x for x in (a, b) if x not in wide]
        raise ValueError(f"no run of {', '.join(map(repr, missing))} among the chosen checkpoints")
    d = (wide[a] - wide[b]).dropna().to_numpy()
    if d.size == 0:
        raise ValueError(f"{a!r} and {b!r} share no seed")
    mean = float(d.mean())
    if d.size < 2:
        return PairedDiff(a, b, metric, mean, math.nan, 1, math.nan, None)
    sd = float(d.std(ddof=1))
    threshold = _t975(d.size - 1) * sd / math.sqrt(d.size)
    outcome = "higher" if mean > threshold else "lower" if mean < -threshold else "tie"
    return PairedDiff(a, b, metric, mean, sd, int(d.size), threshold, outcome)


@dataclass(frozen=True)
class Sentence:
    """One of the paper's sentences, its parts (each a wanted direction of a :class:`PairedDiff`) and a verdict."""

    text: str
    parts: tuple
    """``(PairedDiff, wanted)`` pairs, ``wanted`` in ``"higher"`` / ``"lower"``."""
    verdict: str
    """``"yes"``, ``"no"``, ``"not resolved"`` (some part a tie) or ``"cannot tell"`` (one seed)."""


def judge_sentence(text: str, parts: list) -> Sentence:
    """The verdict on a sentence whose ``parts`` are ``(PairedDiff, wanted direction)`` (module docstring)."""
    outcomes = [(d.outcome, wanted) for d, wanted in parts]
    if any(o is None for o, _ in outcomes):
        verdict = "cannot tell"
    elif any(o not in (w, "tie") for o, w in outcomes):
        verdict = "no"
    elif all(o == w for o, w in outcomes):
        verdict = "yes"
    else:
        verdict = "not resolved"
    return Sentence(text, tuple(parts), verdict)
