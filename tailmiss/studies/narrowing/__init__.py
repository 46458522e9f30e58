"""The narrowing regime: a miniature where GRPO loses coverage (a conflict between prompts the policy cannot resolve
from the prompt), the paper's LLM claims judged there, and whether F-GRPO is more than a slower GRPO."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.narrowing import figures, section
from tailmiss.studies.narrowing.data import NARROWING_FAMILIES
from tailmiss.studies.record import Study

__all__ = ["STUDY"]

STUDY = Study(
    name="narrowing",
    heading=section.NARROWING_HEADING,
    write=section.narrowing_section,
    ledger=ledger.NARROWING,
    families=NARROWING_FAMILIES,
    figures=tuple(figures.FIGURES),
    claims=("appN-frontier",),
    deferrable=True,
    quick_deferred=True,
    deferred_why="Its verdicts rest on 5-10 seeds of 400 steps from one SFT model of the narrowing task (about an "
    "hour on two cores); the quick version trains GRPO and F-GRPO at N = 8 for 200 steps with one seed, enough to "
    "see pass@256 fall below the SFT model's and too little for any verdict.",
)
