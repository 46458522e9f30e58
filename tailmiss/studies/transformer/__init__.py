"""The small transformer: F-GRPO Tables 1, 2 and 4 in miniature (the group-size sweep, the objectives, the maze),
with the bridge to the simulator as one of its parts."""

from __future__ import annotations

from tailmiss.studies import bridge, ledger
from tailmiss.studies.record import Study
from tailmiss.studies.transformer import figures, section

__all__ = ["STUDY", "OBJECTIVES", "MAZE"]


def _figures(*names: str) -> tuple:
    return tuple(f for f in figures.FIGURES if f.name in names)


OBJECTIVES = Study(
    name="objectives",
    heading=section.OBJECTIVES_HEADING,
    write=section.write_objectives,
    ledger=ledger.LLM,
    families=("objectives",),
    figures=_figures("llm-objectives"),
    claims=("t1-pass256", "t1-pass1"),
    parent="transformer",
    deferrable=True,
    quick_deferred=True,
    deferred_why=section.DEFERRED_WHY["objectives"],
)
MAZE = Study(
    name="maze",
    heading=section.MAZE_HEADING,
    write=section.write_maze,
    ledger=ledger.LLM,
    families=("maze",),
    figures=_figures("maze"),
    claims=("t4-pass1", "t4-pass256"),
    parent="transformer",
    deferrable=True,
    quick_deferred=True,
    deferred_why=section.DEFERRED_WHY["maze"],
)
STUDY = Study(
    name="transformer",
    heading="## Small transformer",
    write=section.llm_section,
    ledger=ledger.LLM,
    families=("nsweep",),
    figures=_figures("llm-nsweep"),
    parts=(OBJECTIVES, MAZE, bridge.STUDY),
)
