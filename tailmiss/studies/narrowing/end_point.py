r"""The end point on enough fresh seeds (``narrowing-endpoint``), and the study's answer by γ.

On the plateau runs' five seeds (10-14) the end points' paired spread of pass@1 was too wide to show two arms the
same point, and every γ read *cannot tell*. The rule of :mod:`tailmiss.studies.narrowing.end_point_seeds` set from
that spread how many fresh seeds decide it (30: seeds 15-44), and ``narrowing-endpoint`` trains the arms of
:data:`~tailmiss.studies.narrowing.end_point_seeds.END_POINT_ARMS` on them with the plateau runs' recipe.

**Reading** (written on 2026-12-07, before any of these runs was read; the rules themselves are the plateau runs',
committed before those runs, :mod:`tailmiss.experiments.narrowing_presets`):

* these seeds alone (not pooled with seeds 10-14, whose spread chose their count);
* every arm's plateau check, every pair's frontier to the plateau (8 pass@1 levels up to the highest pass@1 three
  seeds reach in both arms) and its end point, and *more than a slower GRPO?* from the two words, exactly as
  :func:`~tailmiss.studies.narrowing.plateau_claims.plateau_claims` reads the plateau runs;
* the comparisons of :data:`~tailmiss.studies.narrowing.end_point_seeds.END_POINT_PAIRS`: F-GRPO γ = 0.5 and 1
  against GRPO, and against GRPO at lr × m_γ; each comparison's two γ one Holm family (the family the seed count
  was powered for);
* **the study's answer by γ** (:func:`study_answers`): each pair from these runs where they train it, else from the
  plateau runs (γ = 2, and γ = 1 against the speed-matched rate, which these runs do not train: their answers stay
  those of seeds 10-14, and say so);
* each γ's sentence gives the end point's word with pass@256's and pass@1's paired differences, and the range of
  pass@1 the frontier's levels cover.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from tailmiss.studies.narrowing.end_point_seeds import END_POINT_PAIRS
from tailmiss.studies.narrowing.plateau import EndPointVerdict, PlateauFrontier
from tailmiss.studies.narrowing.plateau_claims import COMPARISONS, GAMMAS, PlateauClaims, focal, plateau_claims
from tailmiss.studies.narrowing.plateau_text import seed_range

__all__ = ["StudyAnswer", "end_point_claims", "study_answers"]


def end_point_claims(
    history: pd.DataFrame, typed: pd.DataFrame | None = None, rates: dict | None = None
) -> PlateauClaims:
    """The ``narrowing-endpoint`` runs read by the plateau runs' rules over the comparisons of
    :data:`~tailmiss.studies.narrowing.end_point_seeds.END_POINT_PAIRS` (module docstring).

    Parameters
    ----------
    history : DataFrame
        The sweep's history (``label``, ``seed``, ``step``, ``mu_pos``, ``exact_pass_at_256``, ``gamma``,
        ``group_size``).
    typed : DataFrame, optional
        Its runs' held-out metrics by prompt type (the regime table: GRPO N = 8's fall on these seeds).
    rates : dict, optional
        Arm -> its learning rate over the study's.
    """
    return plateau_claims(history, typed, comparisons=END_POINT_PAIRS, rates=rates)


@dataclass(frozen=True)
class StudyAnswer:
    """One pair's answer to "is F-GRPO more than a slower GRPO?" and the runs it rests on (:func:`study_answers`)."""

    gamma: float
    against: str
    """The comparison's name (``"GRPO"``, ``"GRPO at lr × m_γ"``, ``"GRPO at the speed-matched rate"``)."""
    pair: tuple[str, str]
    word: str
    """:func:`~tailmiss.studies.narrowing.plateau_claims.more_than_slower`'s word."""
    frontier: PlateauFrontier
    end: EndPointVerdict | None
    """None when an arm of the pair has not plateaued (not judged)."""
    late: tuple[str, ...]
    """The pair's arms that have not plateaued."""
    seeds: tuple[int, ...]
    steps: int
    family: str
    """The sweep it rests on (``narrowing-endpoint`` or ``narrowing-plateau``)."""

    @property
    def end_word(self) -> str:
        return self.end.word if self.end is not None else "not judged"

    def sentence(self) -> str:
        """``against GRPO at lr × m_1: end point dominates (pass@256 +0.041 ..., pass@1 ...), frontier on over pass@1
        0.390-0.712, seeds 15-44 → more than a slower GRPO: yes``."""
        f = self.frontier
        span = f"pass@1 {f.covered[0]:.3f}-{f.covered[1]:.3f}" if f.levels else "no pass@1 level"
        if self.end is not None:
            end = f"end point **{self.end.word}** ({self.end.describe().split(': ', 1)[1]})"
        else:
            end = f"end point not judged ({' and '.join(self.late)} not plateaued)"
        seeds = f"seeds {seed_range(self.seeds)}, `{self.family}`"
        return f"against {self.against}: {end}; frontier {f.word} over {span} ({seeds}) → **{self.word}**"


def _answer(p: PlateauClaims, name: str, pair: tuple[str, str], gamma: float, family: str) -> StudyAnswer:
    return StudyAnswer(
        gamma=gamma,
        against=name,
        pair=pair,
        word=p.answers[pair],
        frontier=p.frontiers[pair],
        end=p.ends.get(pair),
        late=tuple(x for x in pair if not p.checks[x].plateaued),
        seeds=p.seeds,
        steps=p.steps,
        family=family,
    )


def study_answers(
    plateau: PlateauClaims | None,
    endpoint: PlateauClaims | None,
    comparisons=None,
    families: tuple[str, str] = ("narrowing-plateau", "narrowing-endpoint"),
) -> list[StudyAnswer]:
    """The study's answer, pair by pair in γ order: from ``endpoint`` where it reads the pair, else from ``plateau``
    (module docstring).

    Parameters
    ----------
    plateau, endpoint : PlateauClaims or None
        The plateau runs (seeds 10-14) and the end-point runs (seeds 15-44) read by their rules.
    comparisons : iterable of str, optional
        Which comparisons of :data:`~tailmiss.studies.narrowing.plateau_claims.COMPARISONS` (default all).
    families : (str, str)
        The sweeps' names, for :attr:`StudyAnswer.family`.
    """
    names = tuple(COMPARISONS) if comparisons is None else tuple(comparisons)
    unknown = [n for n in names if n not in COMPARISONS]
    if unknown:
        raise ValueError(f"unknown comparison {unknown[0]!r}; expected one of {', '.join(map(repr, COMPARISONS))}")
    out = []
    for gamma in GAMMAS:
        for name in names:
            for pair in COMPARISONS[name]:
                if pair[0] != focal(gamma):
                    continue
                if endpoint is not None and pair in endpoint.answers:
                    out.append(_answer(endpoint, name, pair, gamma, families[1]))
                elif plateau is not None and pair in plateau.answers:
                    out.append(_answer(plateau, name, pair, gamma, families[0]))
    return out
