"""The small transformer: F-GRPO Tables 1, 2 and 4 in miniature (the group-size sweep, the objectives, the maze),
with the bridge to the simulator as one of its parts."""

from __future__ import annotations

from tailmiss.studies import bridge, ledger
from tailmiss.studies.record import Study
from tailmiss.studies.transformer import figures, section

__all__ = ["STUDY", "OBJECTIVES", "MAZE"]


def _figures(*names: str) -> tuple:
    return tuple(f for f in figures.FIGURES if f.name in names)


def _part(name: str, heading: str, write, figure: str, claims: tuple[str, ...]) -> Study:
    """A ``###`` part of the section with a sweep of its own (``name``), which the first look leaves out."""
    return Study(
        name=name,
        heading=heading,
        write=write,
        ledger=ledger.LLM,
        families=(name,),
        figures=_figures(figure),
        claims=claims,
        parent="transformer",
        deferrable=True,
        quick_deferred=True,
        deferred_why=section.PARTS_DEFERRED_WHY[name],
    )


OBJECTIVES = _part(
    "objectives", section.OBJECTIVES_HEADING, section.write_objectives, "llm-objectives", ("t1-pass256", "t1-pass1")
)
"""The record (:class:`~tailmiss.studies.record.Study`) of the objective sweep's part of the section (F-GRPO Table 1
analog): its own sweep, figure and claims; deferrable, and deferred by the first look."""
MAZE = _part("maze", section.MAZE_HEADING, section.write_maze, "maze", ("t4-pass1", "t4-pass256"))
"""The record (:class:`~tailmiss.studies.record.Study`) of the maze's part of the section (F-GRPO Table 4 / Fig. 6
analog): its own sweep, figure and claims; deferrable, and deferred by the first look."""
STUDY = Study.of(
    section,
    figures,
    ledger.LLM,
    families=("nsweep",),
    figures=_figures("llm-nsweep"),
    parts=(OBJECTIVES, MAZE, bridge.STUDY),
)
"""The small transformer study's record (:class:`~tailmiss.studies.record.Study`): its section, the group-size sweep it
reads, its figure and ledger rows, and its parts (:data:`OBJECTIVES`, :data:`MAZE` and the bridge's record)."""
