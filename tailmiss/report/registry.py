"""The studies of the report, listed once, and the figures they register.

:data:`STUDIES` is the report's order; each entry is a study package's ``STUDY`` record
(:class:`~tailmiss.studies.record.Study`). Everything the report and ``tailmiss repro`` need to know of a study (its
heading, writer, families, figures, ledger claims, deferral text) comes from its record, so a new study is one
package and one line here. :data:`FIGURES` gathers every study's figures by name; :func:`make` renders them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tailmiss.studies import controls, ladder, narrowing, protocol, sharing, simulation, theory, transformer
from tailmiss.studies.context import Context
from tailmiss.studies.figure import FigureSpec, render
from tailmiss.studies.record import Study

__all__ = ["STUDIES", "FIGURES", "all_studies", "study", "make", "figure_data"]

STUDIES: tuple[Study, ...] = (
    theory.STUDY,
    simulation.STUDY,
    transformer.STUDY,
    ladder.STUDY,
    protocol.STUDY,
    controls.STUDY,
    narrowing.STUDY,
    sharing.STUDY,
)
"""The report's ``##`` studies, in its order (each one's ``###`` parts are in its ``parts``)."""


def all_studies() -> tuple[Study, ...]:
    """Every study record, each ``##`` study followed by its parts."""
    return tuple(s for top in STUDIES for s in (top, *top.parts))


def study(name: str) -> Study:
    """The record of study ``name`` (``ValueError`` naming the known ones otherwise)."""
    found = {s.name: s for s in all_studies()}
    if name not in found:
        raise ValueError(f"unknown study {name!r}; known: {', '.join(found)}")
    return found[name]


def _figures() -> dict[str, FigureSpec]:
    out: dict[str, FigureSpec] = {}
    for s in all_studies():
        for spec in s.figures:
            if spec.name in out:
                raise ValueError(f"figure {spec.name!r} is registered twice")
            out[spec.name] = spec
    return out


FIGURES: dict[str, FigureSpec] = _figures()
"""Every figure of every study, by name, in the studies' order."""


def _resolve(names: Iterable[str]) -> list[FigureSpec]:
    names = list(names)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise ValueError(f"unknown figure(s) {', '.join(map(repr, unknown))}; known: {', '.join(FIGURES)}")
    return [FIGURES[n] for n in names]


def figure_data(name: str, ctx: Context | None = None):
    """The results behind figure ``name`` (what its :attr:`~tailmiss.studies.figure.FigureSpec.data` returns)."""
    (spec,) = _resolve([name])
    return spec.data(ctx or Context())


def make(names: Iterable[str], out_dir: str | Path = "figures", ctx: Context | None = None) -> list[Path]:
    """Render the named figures to ``out_dir/<name>.png`` and ``.pdf``; return the written paths."""
    return render(_resolve(names), out_dir, ctx)
