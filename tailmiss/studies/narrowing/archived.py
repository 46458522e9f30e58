"""The narrowing study's answer as the evidence archive holds it: read in well under a second, without training, for
the first look's summary.

The first look trains one seed for a few steps, too little for any verdict. The full study's answer rests on the
runs to the plateau: the end-point runs on enough fresh seeds (``narrowing-endpoint``) where they train a pair, the
plateau runs (``narrowing-plateau``) elsewhere, whose sweep results the evidence archive keeps.
:func:`~tailmiss.studies.narrowing.data.archived_history` reads those units from the archive (their bytes verified
against the archive's record, their config the preset's as the code now defines it) and :func:`archived_answers`
reads them by the study's own rules (:func:`~tailmiss.studies.narrowing.end_point.study_answers`): by γ, the word
against GRPO at lr × m_γ, the pass@256 difference at the end point, the seeds.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from tailmiss.studies.narrowing.data import END_POINT, PLATEAU, archived_history

__all__ = ["ArchivedAnswer", "archived_answers", "archived_study_answers"]


@dataclass(frozen=True)
class ArchivedAnswer:
    """One γ's answer from the archived plateau runs (:func:`archived_answers`)."""

    gamma: float
    against: str
    """The slower GRPO it is read against (GRPO at lr × m_γ)."""
    word: str
    """:func:`~tailmiss.studies.narrowing.plateau_claims.more_than_slower`'s word: yes, no, partly, cannot tell."""
    frontier: str
    end: str
    """The end-point word (``"not judged"`` when an arm has not plateaued)."""
    gain256: float
    """F-GRPO − the slower GRPO, pass@256 at the end point (the mean paired difference; NaN when not judged)."""
    seeds: tuple[int, ...]
    steps: int


def archived_study_answers(root: Path | None = None) -> tuple:
    """:func:`~tailmiss.studies.narrowing.end_point.study_answers` against GRPO at lr × m_γ (F-GRPO App. N's scale for
    each γ) from the archived runs to the plateau: the end-point runs where the archive holds them and they train the
    γ, else the plateau runs (empty when the archive holds neither sweep). Read once per process for each state of
    those two archived units: the first look's summary and its figure ``focal-map`` share one reading."""
    from tailmiss import archive

    units = (archive.find(Path("runs/llm") / name, root) for name in (PLATEAU, END_POINT))
    state = tuple(None if u is None else (str(u.path), u.record.get("meta_sha256")) for u in units)
    return _study_answers(None if root is None else str(root), state)


@functools.lru_cache(maxsize=4)
def _study_answers(root: str | None, state: tuple) -> tuple:
    from tailmiss.studies.narrowing.end_point import end_point_claims, study_answers
    from tailmiss.studies.narrowing.plateau_claims import COMPARISONS, plateau_claims
    from tailmiss.studies.narrowing.settings import AGAINST

    where = None if root is None else Path(root)
    plateau, endpoint = archived_history(PLATEAU, where), archived_history(END_POINT, where)
    p = plateau_claims(plateau, comparisons={AGAINST: COMPARISONS[AGAINST]}) if plateau is not None else None
    e = end_point_claims(endpoint) if endpoint is not None else None
    return tuple(study_answers(p, e, comparisons=(AGAINST,)))


def archived_answers(root: Path | None = None) -> list[ArchivedAnswer]:
    """By γ, the study's answer to "is F-GRPO more than a slower GRPO?" from the archived runs to the plateau
    (:func:`archived_study_answers`), each γ against GRPO at lr × m_γ, as the first look's summary quotes it."""
    return [
        ArchivedAnswer(
            gamma=a.gamma,
            against=a.pair[1],
            word=a.word,
            frontier=a.frontier.word,
            end=a.end_word,
            gain256=float(a.end.pass256.mean) if a.end is not None else math.nan,
            seeds=a.seeds,
            steps=a.steps,
        )
        for a in archived_study_answers(root)
    ]
