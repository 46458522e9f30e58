"""F-GRPO Table 3's controls, Tables 6-7's γ sensitivity, Tables 12-14's pass@k curves and Fig. 1(b,c), on the
paper's protocol."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.controls import figures, section
from tailmiss.studies.controls.data import CONTROL_FAMILIES
from tailmiss.studies.record import Study

__all__ = ["STUDY"]

STUDY = Study.of(
    section,
    figures,
    ledger.CONTROLS,
    families=CONTROL_FAMILIES,
    claims=("t3-lowlr", "t3-ds", "t3-best", "t67-usual", "t67-two", "t1214", "fig1bc"),
    quick_deferred=True,
)
"""The controls study's record (:class:`~tailmiss.studies.record.Study`): its section, figures and ledger rows, the
sweep families it reads (:data:`~tailmiss.studies.controls.data.CONTROL_FAMILIES`) and the claims only it judges; the
first look defers it."""
