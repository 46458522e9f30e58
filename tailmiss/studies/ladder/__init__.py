"""The ladder: one ingredient at a time from the simulator's policy to the transformer (why the regimes differ)."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.ladder import figures, section
from tailmiss.studies.record import Study

__all__ = ["STUDY"]

STUDY = Study.of(section, figures, ledger.LADDER, families=("ladder", "ladder-budget", "ladder-hard"))
"""The ladder study's record (:class:`~tailmiss.studies.record.Study`): its section, figures and ledger rows, and the
three ladder families it reads."""
