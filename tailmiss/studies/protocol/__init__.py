"""The paper's protocol (F-GRPO Table 5) reached one ingredient at a time: does Table 2's dip appear, could one
seed show it, and App. Q's test on same-config pairs."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.protocol import figures, section
from tailmiss.studies.protocol.data import PROTOCOL_FAMILIES
from tailmiss.studies.record import Study

__all__ = ["STUDY"]

STUDY = Study.of(
    section, figures, ledger.PROTOCOL, families=PROTOCOL_FAMILIES, claims=("t2-protocol", "appQ"), quick_deferred=True
)
"""The protocol study's record (:class:`~tailmiss.studies.record.Study`): its section, figures and ledger rows, the
sweep families it reads (:data:`~tailmiss.studies.protocol.data.PROTOCOL_FAMILIES`) and the claims only it judges; the
first look defers it."""
