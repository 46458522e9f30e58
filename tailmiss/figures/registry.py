"""The figure registry: :class:`FigureSpec`, :data:`FIGURES`, :func:`register`, :func:`make`.

Figure modules register themselves here; :mod:`tailmiss.figures` imports them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tailmiss.io import atomic_write
from tailmiss.results import Context, train_llm

__all__ = ["FigureSpec", "FIGURES", "register", "make", "figure_data"]


@dataclass(frozen=True)
class FigureSpec:
    name: str
    paper_ref: str
    description: str
    data: Callable[[Context], object]
    """The figure's results (a typed result of :mod:`tailmiss.results`, or a tidy frame of closed forms)."""
    plot: Callable[[object], object]
    """Draws :attr:`data`'s return value; computes nothing a claim depends on."""
    simulated: bool = False
    llm: tuple[str, ...] = ()
    """The LLM sweep and ladder families its data reads (:func:`make` trains them all in one pool first, through
    :func:`tailmiss.results.train_llm`)."""


FIGURES: dict[str, FigureSpec] = {}


def register(spec: FigureSpec) -> FigureSpec:
    if spec.name in FIGURES:
        raise ValueError(f"figure {spec.name!r} is registered twice")
    FIGURES[spec.name] = spec
    return spec


def _resolve(names: Iterable[str]) -> list[FigureSpec]:
    names = list(names)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise ValueError(f"unknown figure(s) {', '.join(map(repr, unknown))}; known: {', '.join(FIGURES)}")
    return [FIGURES[n] for n in names]


def figure_data(name: str, ctx: Context | None = None):
    """The results behind figure ``name`` (what its :attr:`FigureSpec.data` returns)."""
    (spec,) = _resolve([name])
    return spec.data(ctx or Context())


def make(names: Iterable[str], out_dir: str | Path = "figures", ctx: Context | None = None) -> list[Path]:
    """Render the named figures to ``out_dir/<name>.png`` and ``.pdf``; return the written paths."""
    import matplotlib.pyplot as plt

    from tailmiss.figures.style import paper_style

    ctx = ctx or Context()
    specs = _resolve(names)
    train_llm([f for spec in specs for f in spec.llm], ctx)
    out_dir = Path(out_dir)
    written = []
    for spec in specs:
        data = spec.data(ctx)
        with paper_style():
            fig = spec.plot(data)
            for ext in ("png", "pdf"):
                path = out_dir / f"{spec.name}.{ext}"
                # no creation date in the PDF: re-rendering unchanged data gives identical files
                metadata = {"CreationDate": None} if ext == "pdf" else None
                with atomic_write(path, "wb") as fh:
                    fig.savefig(fh, format=ext, metadata=metadata)
                written.append(path)
            plt.close(fig)
    return written
