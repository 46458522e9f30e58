"""A figure of a study: :class:`~tailmiss.studies.figure.FigureSpec` (its data, separate from its plot) and
:func:`~tailmiss.studies.figure.render`.

Each study's ``figures`` module lists its specs in ``FIGURES``; the report's registry
(:mod:`tailmiss.report.registry`) gathers them by name. ``data(ctx)`` obtains the
figure's results through the study's ``data`` module (typed, cached simulations,
sweeps, ladders and bridges, or a tidy frame of closed forms) and ``plot(data) ->
Figure`` only draws, so restyling never reruns a simulation. :func:`render` writes
PNG and PDF atomically.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tailmiss.io import atomic_write
from tailmiss.studies.context import Context
from tailmiss.studies.runs import train_llm

__all__ = ["FigureSpec", "render"]


@dataclass(frozen=True)
class FigureSpec:
    name: str
    paper_ref: str
    description: str
    data: Callable[[Context], object]
    """The figure's results (a typed result of a study's ``data`` module, or a tidy frame of closed forms)."""
    plot: Callable[[object], object]
    """Draws :attr:`data`'s return value; computes nothing a claim depends on."""
    simulated: bool = False
    llm: tuple[str, ...] = ()
    """The LLM sweep and ladder families its data reads (:func:`render` trains them all in one pool first, through
    :func:`tailmiss.studies.runs.train_llm`)."""


def render(specs: Iterable[FigureSpec], out_dir: str | Path = "figures", ctx: Context | None = None) -> list[Path]:
    """Render ``specs`` to ``out_dir/<name>.png`` and ``.pdf``; return the written paths.

    Figures drawn from the same :attr:`FigureSpec.data` (a study's claims behind several panels) read it once: it is
    kept until the last of them is drawn."""
    import matplotlib.pyplot as plt

    from tailmiss.studies.style import paper_style

    ctx = ctx or Context()
    specs = list(specs)
    train_llm([f for spec in specs for f in spec.llm], ctx)
    out_dir = Path(out_dir)
    written = []
    left = Counter(spec.data for spec in specs)
    kept: dict = {}
    for spec in specs:
        if spec.data not in kept:
            kept[spec.data] = spec.data(ctx)
        data = kept[spec.data]
        left[spec.data] -= 1
        if not left[spec.data]:
            del kept[spec.data]
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
