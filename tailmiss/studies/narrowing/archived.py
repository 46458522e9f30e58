"""The narrowing study's answer as the evidence archive holds it: read in well under a second, without training, for
the first look's summary.

The first look trains one seed for a few steps, too little for any verdict. The full study's answer rests on the
plateau runs (``narrowing-plateau``), whose sweep result the evidence archive keeps.
:func:`~tailmiss.studies.narrowing.data.archived_history` reads that unit from the archive (its bytes verified
against the archive's record, its config the preset's as the code now defines it) and :func:`archived_answers` reads
it by the study's own rules
(:func:`~tailmiss.studies.narrowing.plateau_claims.plateau_claims`): by γ, the word against GRPO at lr × m_γ, the
pass@256 difference at the end point, the seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from tailmiss.studies.narrowing.data import PLATEAU, archived_history

__all__ = ["ArchivedAnswer", "archived_answers"]


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


def archived_answers(root: Path | None = None) -> list[ArchivedAnswer]:
    """By γ, the study's answer to "is F-GRPO more than a slower GRPO?" from the archived plateau runs (empty when
    the archive does not hold them): each γ against GRPO at lr × m_γ (F-GRPO App. N's scale for that γ)."""
    from tailmiss.studies.narrowing.plateau_claims import COMPARISONS, SLOWER, focal, plateau_claims

    history = archived_history(PLATEAU, root)
    if history is None:
        return []
    slower = "GRPO at lr × m_γ"
    p = plateau_claims(history, comparisons={slower: COMPARISONS[slower]})
    out = []
    for gamma, slower in SLOWER.items():
        pair = (focal(gamma), slower)
        if pair not in p.answers:
            continue
        end = p.ends.get(pair)
        out.append(
            ArchivedAnswer(
                gamma=gamma,
                against=slower,
                word=p.answers[pair],
                frontier=p.frontiers[pair].word,
                end=p.end_word(pair),
                gain256=float(end.pass256.mean) if end is not None else math.nan,
                seeds=p.seeds,
                steps=p.steps,
            )
        )
    return out
