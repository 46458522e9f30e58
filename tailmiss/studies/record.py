"""One record per study: :class:`~tailmiss.studies.record.Study`, what the report needs to know of a part of the paper.

Each study's package (``tailmiss/studies/<name>/``) holds its data collection (``data``), its claims (``claims``
and the modules they use), its section text (``section``) and its figures (``figures``), and defines one ``STUDY``
in its ``__init__``; :mod:`tailmiss.report.registry` lists the studies once, in the report's order. Nothing else
names a study's families, headings, figures or deferral text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from tailmiss.studies.context import Context
from tailmiss.studies.figure import FigureSpec
from tailmiss.studies.text import Section

__all__ = ["Study"]


@dataclass(frozen=True)
class Study:
    """A part of the report: its heading, its writer, what it reads, its figures and its ledger claims.

    Attributes
    ----------
    name : str
        The study's name (``tailmiss repro --only NAME`` for a deferrable one).
    heading : str
        The start of its heading line (``"## Theory"``; a ``###`` heading for a part of a parent's section).
    write : callable or None
        ``write(ctx, deferred) -> Section``: the section's markdown and its ledger rows; ``deferred`` names the
        deferrable studies the report leaves out. ``None`` for a part its parent writes inside its own text.
    ledger : str
        The ledger's name for the section its rows come from.
    families : tuple of str
        The LLM sweep and ladder families it reads (keys of :data:`tailmiss.studies.runs.SWEEPS` or ``LADDERS``).
    simulated : bool
        Whether it reads the simulation presets.
    figures : tuple of FigureSpec
        Its figures, in the order ``tailmiss figures list`` shows them.
    claims : tuple of str
        The ledger claims only this study judges (listed as waiting for it when the report defers it).
    parent : str or None
        The study whose ``##`` section holds this ``###`` part (listed in that study's ``parts``).
    deferrable : bool
        Whether the report may leave it out (``tailmiss repro --only NAME`` writes it in place later).
    quick_deferred : bool
        Whether the first look (``tailmiss repro --quick``) leaves it out.
    deferred_why : str
        Why the first look leaves it out.
    units : callable or None
        ``units(ctx) -> list of UnitSpec``: the stored units it reads besides its families' runs and sweeps and the
        simulations (a comparison read off a sweep's runs: :class:`tailmiss.experiments.units.UnitSpec`).
    """

    name: str
    heading: str
    write: Callable[[Context, tuple[str, ...]], Section] | None
    ledger: str
    families: tuple[str, ...] = ()
    simulated: bool = False
    figures: tuple[FigureSpec, ...] = ()
    claims: tuple[str, ...] = ()
    parent: str | None = None
    deferrable: bool = False
    quick_deferred: bool = False
    deferred_why: str = ""
    units: Callable[[Context], list] | None = None
    parts: tuple[Study, ...] = ()
    """The ``###`` parts of its section that have a record of their own (written by its writer)."""
    pending: tuple[str, ...] = ()
    """LLM families whose runs the study will read once the evidence archive holds them all, and does not read yet:
    planned and computed last (``tailmiss repro --plan``, ``--budget``, as the section ``"<name> (pending)"``), never
    a unit the report lacks (``--verify``), so that a regeneration of many hours lands in parts."""

    @classmethod
    def of(cls, section: ModuleType, figures: ModuleType, ledger: str, /, **fields) -> Study:
        """The record of the study whose package holds ``section`` and ``figures``, read from the studies' layout.

        Its name is its package's; its heading ``section.HEADING``; its writer ``section.write`` (a part its parent
        writes defines none); its figures ``figures.FIGURES``; where the section states ``DEFERRED_WHY`` (why the
        report may leave the study out), it is deferrable with that reason. ``fields`` sets the rest
        (``families``, ``claims``, ``parent``, ``quick_deferred``, ...) or overrides the layout's.
        """
        why = getattr(section, "DEFERRED_WHY", "")
        layout = {
            "name": section.__name__.split(".")[-2],
            "heading": section.HEADING,
            "write": getattr(section, "write", None),
            "ledger": ledger,
            "figures": tuple(figures.FIGURES),
            "deferrable": bool(why),
            "deferred_why": why,
        }
        return cls(**{**layout, **fields})

    @property
    def level(self) -> int:
        """2 for a ``##`` section, 3 for a ``###`` part."""
        return len(self.heading) - len(self.heading.lstrip("#"))
