"""F-GRPO Table 3's controls, Tables 6-7's γ sensitivity, Tables 12-14's pass@k curves and Fig. 1(b,c), on the
paper's protocol."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.controls import figures, section
from tailmiss.studies.controls.data import CONTROL_FAMILIES
from tailmiss.studies.record import Study

__all__ = ["STUDY"]

STUDY = Study(
    name="controls",
    heading=section.CONTROLS_HEADING,
    write=section.controls_section,
    ledger=ledger.CONTROLS,
    families=CONTROL_FAMILIES,
    figures=tuple(figures.FIGURES),
    claims=("t3-lowlr", "t3-ds", "t3-best", "t67-usual", "t67-two", "t1214", "fig1bc"),
    deferrable=True,
    quick_deferred=True,
    deferred_why="Its rule pairs each control with GRPO and F-GRPO seed by seed over 5 seeds of 80 steps; the quick "
    "version trains 8 steps with one seed per control, where the rule cannot tell any difference.",
)
