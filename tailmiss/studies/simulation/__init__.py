"""Simulation: F-GRPO Fig. 2 (both readings of App. J) and BroRL Fig. 3 on the batched categorical simulator."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.record import Study
from tailmiss.studies.simulation import figures, section

__all__ = ["STUDY"]

STUDY = Study.of(section, figures, ledger.SIM, simulated=True)
"""The simulation study's record (:class:`~tailmiss.studies.record.Study`): the report's Simulation section, its figures
and its ledger rows, read from this package's ``section`` and ``figures``; it reads the simulation presets."""
