"""Simulation: F-GRPO Fig. 2 (both readings of App. J) and BroRL Fig. 3 on the batched categorical simulator."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.record import Study
from tailmiss.studies.simulation import figures, section

__all__ = ["STUDY"]

STUDY = Study.of(section, figures, ledger.SIM, simulated=True)
