"""The paper's protocol (F-GRPO Table 5) reached one ingredient at a time: does Table 2's dip appear, could one
seed show it, and App. Q's test on same-config pairs."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.protocol import figures, section
from tailmiss.studies.protocol.data import PROTOCOL_FAMILIES
from tailmiss.studies.record import Study

__all__ = ["STUDY"]

STUDY = Study(
    name="protocol",
    heading=section.PROTOCOL_HEADING,
    write=section.protocol_section,
    ledger=ledger.PROTOCOL,
    families=PROTOCOL_FAMILIES,
    figures=tuple(figures.FIGURES),
    claims=("t2-protocol", "appQ"),
    deferrable=True,
    quick_deferred=True,
    deferred_why="Its findings rest on 10 seeds of 80 steps (the dip's shape and what one seed can show); the quick "
    "version trains 8 steps with one to three seeds, where GRPO's pass@256 hardly moves with N.",
)
