r"""Enough seeds to decide the plateau's end point: the rule that sets the seed count, written before the runs it
sets.

The plateau runs (``narrowing-plateau``, seeds 10-14) judge each F-GRPO γ against GRPO at its end point
(:func:`tailmiss.studies.narrowing.plateau.end_point_family`): pass@1 *equivalent* within ±
:data:`~tailmiss.studies.narrowing.plateau.PASS1_BOUND` by two one-sided tests, pass@256's difference by the noise
rule. On five seeds the paired spread of pass@1 can be too wide for the equivalence to be shown even when the arms
are the same point, and the answer is then *cannot tell*. This rule reads the spread those five seeds measured and
sets how many **fresh** seeds a second set of runs needs; those runs, not seeds 10-14, then judge the end point (the
data that chose the count do not also judge it).

* *Pairs* (:data:`END_POINT_PAIRS`): F-GRPO γ = 0.5 and γ = 1 at N = 8, each against GRPO N = 8 and against GRPO at
  lr × m_γ (F-GRPO App. N's scale: ``low-LR``, ``low-LR-m1``); each comparison's two γ are one Holm family, so each
  test is counted at α / 2 (:data:`END_POINT_FAMILY`; Holm's first step, the strictest).
* *Measured*: per pair, the sd over seeds of the paired end-point differences of pass@1 (:math:`s_1`) and of pass@256
  (:math:`s_{256}`), and the mean pass@256 difference :math:`\bar d_{256}`, on the plateau runs' final evaluations.
* *Wanted*, each at power :data:`END_POINT_POWER` under the normal model with the measured sds taken as the truth
  (:mod:`tailmiss.studies.power`): (1) pass@1 shown equivalent within ±0.02 when the true difference is 0
  (:func:`~tailmiss.studies.power.tost_power`); (2) where :math:`|\bar d_{256}|` is at least pass@k's practical
  threshold (0.01), pass@256's difference resolved by the noise rule when the true difference is
  :math:`\bar d_{256}` (:func:`~tailmiss.studies.power.resolve_power`); a smaller measured difference asks nothing
  (the rule calls a difference below the threshold a tie at any seed count).
* *The count*: the fewest seeds, from :data:`~tailmiss.studies.rule.MIN_SEEDS` up, that meet every wanted power of
  every pair, at most :data:`END_POINT_MOST_SEEDS` (more is beyond what the study affords on two cores: each seed is
  five runs of 1,600 steps); where even that falls short, the count is the most and the section states the power it
  has. The arms of :data:`END_POINT_ARMS` are then trained on seeds :data:`END_POINT_FIRST_SEED` onward, which no
  earlier run used.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from tailmiss.studies.comparison import ALPHA, MIN_SEEDS, THRESHOLDS
from tailmiss.studies.narrowing.plateau import PASS1_BOUND, end_points
from tailmiss.studies.power import resolve_power, seeds_for_power, tost_power

__all__ = [
    "END_POINT_PAIRS",
    "END_POINT_ARMS",
    "END_POINT_FAMILY",
    "END_POINT_POWER",
    "END_POINT_MOST_SEEDS",
    "END_POINT_FIRST_SEED",
    "PairPower",
    "SeedCount",
    "end_point_seeds",
]

END_POINT_PAIRS = {
    "GRPO": (("F-GRPO γ=0.5 N=8", "GRPO N=8"), ("F-GRPO γ=1 N=8", "GRPO N=8")),
    "GRPO at lr × m_γ": (("F-GRPO γ=0.5 N=8", "GRPO N=8 low-LR"), ("F-GRPO γ=1 N=8", "GRPO N=8 low-LR-m1")),
}
"""Comparison -> its pairs ``(a, b)``, read ``a − b``; one Holm family each."""
END_POINT_ARMS = ("GRPO N=8", "F-GRPO γ=0.5 N=8", "F-GRPO γ=1 N=8", "GRPO N=8 low-LR", "GRPO N=8 low-LR-m1")
"""The arms the fresh seeds train (every arm of :data:`END_POINT_PAIRS`)."""
END_POINT_FAMILY = 2
"""Pairs per Holm family: each test is counted at ``ALPHA / END_POINT_FAMILY``."""
END_POINT_POWER = 0.8
"""The power every wanted test must reach."""
END_POINT_MOST_SEEDS = 30
"""The most fresh seeds the rule may ask for."""
END_POINT_FIRST_SEED = 15
"""The first fresh seed (the search used 0-2, the study 0-9, its controls 0-4, the plateau runs 10-14)."""


@dataclass(frozen=True)
class PairPower:
    """One pair's measured spread and the seeds each wanted test needs (module docstring)."""

    a: str
    b: str
    seeds: int
    """Paired seeds measured."""
    sd_pass1: float
    diff_pass256: float
    sd_pass256: float
    need_pass1: int | None
    """Seeds for pass@1's equivalence at the wanted power (None: more than :data:`END_POINT_MOST_SEEDS`)."""
    need_pass256: int | None
    """Seeds for pass@256's difference at the wanted power (None: more than the most, or not asked)."""
    asks_pass256: bool
    """Whether the measured pass@256 difference is at least the practical threshold (else nothing is asked)."""

    def need(self) -> int | None:
        """The seeds this pair needs (None when a wanted test cannot reach its power within the most)."""
        needs = [self.need_pass1] + ([self.need_pass256] if self.asks_pass256 else [])
        return None if None in needs else max(needs)


@dataclass(frozen=True)
class SeedCount:
    """The rule's answer: the pairs' needs and the fresh seeds to train."""

    pairs: tuple[PairPower, ...]
    count: int
    reached: bool
    """Whether every wanted power is reached at ``count`` (False: the most seeds, short of some power)."""

    @property
    def seeds(self) -> tuple[int, ...]:
        """The fresh seeds: :data:`END_POINT_FIRST_SEED` onward."""
        return tuple(range(END_POINT_FIRST_SEED, END_POINT_FIRST_SEED + self.count))

    def power_at(self, pair: PairPower, n: int | None = None) -> tuple[float, float | None]:
        """pass@1's equivalence power and (where asked) pass@256's resolution power of ``pair`` at ``n`` seeds
        (default the count)."""
        n = self.count if n is None else n
        alpha = ALPHA / END_POINT_FAMILY
        p1 = tost_power(n, pair.sd_pass1, PASS1_BOUND, alpha=alpha)
        p256 = (
            resolve_power(n, pair.sd_pass256, pair.diff_pass256, alpha=alpha, threshold=THRESHOLDS["pass@k"])
            if pair.asks_pass256
            else None
        )
        return p1, p256


def _pair(points: pd.DataFrame, a: str, b: str) -> PairPower:
    wide = points.pivot_table(index="seed", columns="label", values=["pass1", "pass256"]).dropna()
    if len(wide) < 2:
        raise ValueError(f"{a!r} and {b!r} share {len(wide)} seed(s): a paired spread needs at least 2")
    d1 = wide[("pass1", a)] - wide[("pass1", b)]
    d256 = wide[("pass256", a)] - wide[("pass256", b)]
    sd1, sd256, mean256 = float(d1.std(ddof=1)), float(d256.std(ddof=1)), float(d256.mean())
    alpha = ALPHA / END_POINT_FAMILY
    threshold = THRESHOLDS["pass@k"]
    asks = abs(mean256) >= threshold
    need1 = seeds_for_power(
        lambda n: tost_power(n, sd1, PASS1_BOUND, alpha=alpha), END_POINT_POWER, MIN_SEEDS, END_POINT_MOST_SEEDS
    )
    need256 = (
        seeds_for_power(
            lambda n: resolve_power(n, sd256, mean256, alpha=alpha, threshold=threshold),
            END_POINT_POWER,
            MIN_SEEDS,
            END_POINT_MOST_SEEDS,
        )
        if asks
        else None
    )
    return PairPower(a, b, len(wide), sd1, mean256, sd256, need1, need256, asks)


def end_point_seeds(history: pd.DataFrame) -> SeedCount:
    r"""The fresh seeds the end-point comparisons need (module docstring), from the plateau runs' ``history``.

    Parameters
    ----------
    history : DataFrame
        The ``narrowing-plateau`` sweep's history: ``label``, ``seed``, ``step``, ``mu_pos``, ``exact_pass_at_256``,
        with every arm of :data:`END_POINT_ARMS`.

    Returns
    -------
    SeedCount
        :math:`n^\ast = \max_{\text{pairs, wanted tests}} \min\{n \ge 3 : \mathrm{power}(n) \ge 0.8\}`, capped at
        :data:`END_POINT_MOST_SEEDS`.
    """
    points = end_points(history, END_POINT_ARMS)
    pairs = tuple(_pair(points, a, b) for family in END_POINT_PAIRS.values() for a, b in family)
    needs = [p.need() for p in pairs]
    reached = None not in needs
    count = max(needs) if reached else END_POINT_MOST_SEEDS
    return SeedCount(pairs, int(count), reached)
