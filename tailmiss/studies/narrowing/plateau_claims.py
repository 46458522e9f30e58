"""The narrowing study's answer to "is F-GRPO more than a slower GRPO?", from the plateau runs (``narrowing-plateau``).

The runs, their seeds and the rules that judge them were written before the runs (the docstring of
:mod:`tailmiss.experiments.narrowing_presets`); :mod:`tailmiss.studies.narrowing.plateau` applies the rules. This
module reads them pair by pair and says, by γ, what the frontier and the end point answer together
(:func:`more_than_slower`, written before the runs finished and committed with the code that reads them).

The comparisons, each one family (the end points' Holm families; the frontier's families are each pair's levels):

* **against GRPO** at the study's rate: F-GRPO γ = 0.5, 1, 2 against GRPO N = 8;
* **against GRPO at lr × m_γ** (F-GRPO App. N's scale for the same γ): γ = 0.5 against ``low-LR`` (the paper's
  control), γ = 1 against ``low-LR-m1``, γ = 2 against ``low-LR-m2``;
* **against GRPO at the speed-matched rate**: γ = 1 against ``speed-LR`` (a family of one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from tailmiss.studies.narrowing.plateau import (
    EndPointVerdict,
    PlateauCheck,
    PlateauFrontier,
    end_point_family,
    end_points,
    plateau_frontier,
    plateaued,
)
from tailmiss.studies.narrowing.regime import regime_table
from tailmiss.studies.narrowing.sharing import narrowing
from tailmiss.studies.rule import Difference, Verdict

__all__ = [
    "PLATEAU_GRPO",
    "SLOWER",
    "SPEED",
    "GAMMAS",
    "COMPARISONS",
    "ANSWERS",
    "PlateauClaims",
    "plateau_claims",
    "more_than_slower",
    "answer_verdict",
    "focal",
    "seed_summary",
]

PLATEAU_GRPO = "GRPO N=8"
"""GRPO at the study's rate."""
SLOWER = {0.5: "GRPO N=8 low-LR", 1.0: "GRPO N=8 low-LR-m1", 2.0: "GRPO N=8 low-LR-m2"}
"""γ -> GRPO at lr × m_γ (F-GRPO App. N's scale for that γ)."""
SPEED = "GRPO N=8 speed-LR"
"""GRPO at the rate matched to F-GRPO γ = 1's pass@1 speed."""
GAMMAS = (0.5, 1.0, 2.0)
"""The focal weights the plateau runs train."""


def focal(gamma: float) -> str:
    """F-GRPO's label at N = 8 (``F-GRPO γ=0.5 N=8``)."""
    return f"F-GRPO γ={gamma:g} N=8"


COMPARISONS = {
    "GRPO": tuple((focal(g), PLATEAU_GRPO) for g in GAMMAS),
    "GRPO at lr × m_γ": tuple((focal(g), SLOWER[g]) for g in GAMMAS),
    "GRPO at the speed-matched rate": ((focal(1.0), SPEED),),
}
"""Comparison -> its pairs ``(a, b)``, read ``a − b``; one family each (module docstring)."""
ANSWERS = ("yes", "no", "partly", "cannot tell")
"""The words of :func:`more_than_slower`."""


def more_than_slower(frontier: str, end: str) -> str:
    """Is F-GRPO more than the slower GRPO it is paired with? The frontier word and the end-point word together.

    * *yes*: the end point **dominates** and the frontier lies *above* or *on* (nowhere below);
    * *no*: the end point is the **same point** or **is dominated**, and the frontier lies *on*, *below* or cannot
      be read (nowhere above);
    * *partly*: the two disagree (an end point that dominates with a frontier *below* or *crossing*; an end point
      that does not with a frontier *above* or *crossing*), or the frontier lies *above* while the end points cannot
      be compared (their pass@1 not shown equivalent: end point *cannot tell*);
    * *cannot tell*: otherwise, and always when the end point is not judged (an arm has not plateaued, so the
      question about the plateau has no answer).

    Parameters
    ----------
    frontier : str
        :class:`~tailmiss.studies.narrowing.plateau.PlateauFrontier`'s word: above, on, below, crosses, cannot tell.
    end : str
        :class:`~tailmiss.studies.narrowing.plateau.EndPointVerdict`'s word (dominates, is dominated, same point,
        cannot tell), or ``"not judged"`` when an arm has not plateaued.
    """
    if end == "dominates":
        return "yes" if frontier in ("above", "on") else "partly"
    if end in ("same point", "is dominated"):
        return "partly" if frontier in ("above", "crosses") else "no"
    if end == "cannot tell":
        return "partly" if frontier == "above" else "cannot tell"
    return "cannot tell"


def answer_verdict(word: str) -> Verdict:
    """The ledger's verdict on "the focal weight is more than a slower GRPO" from :func:`more_than_slower`'s word."""
    return {
        "yes": Verdict.REPRODUCED,
        "no": Verdict.REFUTED,
        "partly": Verdict.PARTLY,
    }.get(word, Verdict.CANNOT_TELL)


@dataclass(frozen=True)
class PlateauClaims:
    """The plateau runs read by the rules (module docstring)."""

    seeds: tuple[int, ...]
    steps: int
    checks: dict
    """Arm -> :class:`~tailmiss.studies.narrowing.plateau.PlateauCheck`."""
    frontiers: dict
    """``(a, b)`` -> :class:`~tailmiss.studies.narrowing.plateau.PlateauFrontier`."""
    ends: dict
    """``(a, b)`` -> :class:`~tailmiss.studies.narrowing.plateau.EndPointVerdict`, or None when an arm of the pair
    has not plateaued (not judged)."""
    answers: dict
    """``(a, b)`` -> :func:`more_than_slower`'s word."""
    points: pd.DataFrame
    """Every run's end point (``label, seed, step, pass1, pass256``)."""
    regime: pd.DataFrame
    """Every arm's SFT and final held-out pass@1 / pass@256 by prompt type
    (:func:`~tailmiss.studies.narrowing.regime.regime_table` on these seeds)."""
    narrows: Verdict
    """Whether GRPO N = 8 narrows on these seeds (:func:`~tailmiss.studies.narrowing.sharing.narrowing`: its final
    pass@256 *lower* than the SFT model's by the noise rule; *cannot tell* without the comparison)."""
    change: Difference | None = None
    """GRPO N = 8's final − SFT pass@256, paired by seed (None when the history has no such arm)."""
    rates: dict = field(default_factory=dict)
    """Arm -> its learning rate over the study's (empty when not given)."""

    def end_word(self, pair) -> str:
        """The end-point word of ``pair``, ``"not judged"`` when an arm has not plateaued."""
        v = self.ends.get(tuple(pair))
        return v.word if v is not None else "not judged"

    @property
    def main(self) -> tuple[str, str]:
        """The pair the ledger reads: F-GRPO γ = 0.5 against GRPO at lr × m_0.5 (the paper's control)."""
        return focal(0.5), SLOWER[0.5]


def _family(history: pd.DataFrame, pairs, checks: dict) -> dict:
    """End-point verdicts of one comparison's ``pairs``: one Holm family over the pairs whose arms both plateaued."""
    judged = [p for p in pairs if checks[p[0]].plateaued and checks[p[1]].plateaued]
    verdicts: dict[tuple, EndPointVerdict | None] = {p: None for p in pairs}
    if judged:
        verdicts.update(zip(judged, end_point_family(history, judged), strict=True))
    return verdicts


def plateau_claims(
    history: pd.DataFrame, typed: pd.DataFrame | None = None, comparisons=None, rates: dict | None = None
) -> PlateauClaims:
    """The plateau runs' verdicts (module docstring).

    Parameters
    ----------
    history : DataFrame
        The ``narrowing-plateau`` sweep's history (``label``, ``seed``, ``step``, ``mu_pos``, ``exact_pass_at_256``,
        ``gamma``, ``group_size``).
    typed : DataFrame, optional
        Its runs' held-out metrics by prompt type (:func:`tailmiss.studies.narrowing.data.by_type`); without it the
        claims have no regime table and GRPO's narrowing *cannot tell* (the first look's summary reads the answer
        alone).
    comparisons : dict, optional
        Which of :data:`COMPARISONS` to read (default all); each is its own family, so a subset reads the same.
    rates : dict, optional
        Arm -> its learning rate over the study's (the section's rate column).
    """
    have = set(history["label"])
    chosen = COMPARISONS if comparisons is None else comparisons
    pairs = {name: tuple(p for p in ps if set(p) <= have) for name, ps in chosen.items()}
    arms = sorted({x for ps in pairs.values() for p in ps for x in p})
    checks: dict[str, PlateauCheck] = {a: plateaued(history, a) for a in arms}
    frontiers: dict[tuple, PlateauFrontier] = {p: plateau_frontier(history, *p) for ps in pairs.values() for p in ps}
    ends: dict = {}
    for ps in pairs.values():
        ends.update(_family(history, ps, checks))
    answers = {p: more_than_slower(frontiers[p].word, ends[p].word if ends[p] else "not judged") for p in frontiers}
    regime, change = regime_table(history, typed) if typed is not None else (pd.DataFrame(), None)
    evaluated = history.dropna(subset=["mu_pos"])
    return PlateauClaims(
        seeds=tuple(sorted(int(s) for s in evaluated["seed"].unique())),
        steps=int(evaluated["step"].max()) if len(evaluated) else 0,
        checks=checks,
        frontiers=frontiers,
        ends=ends,
        answers=answers,
        points=end_points(history, arms) if arms else pd.DataFrame(),
        regime=regime,
        narrows=Verdict.CANNOT_TELL if change is None else narrowing(change),
        change=change,
        rates=dict(rates or {}),
    )


def seed_summary(points: pd.DataFrame, label: str, metric: str) -> tuple[float, float]:
    """Seed mean and sd of ``metric`` at ``label``'s end points (NaN sd with one seed)."""
    x = points.loc[points["label"] == label, metric].to_numpy(float)
    if x.size == 0:
        return math.nan, math.nan
    return float(x.mean()), float(x.std(ddof=1)) if x.size > 1 else math.nan
