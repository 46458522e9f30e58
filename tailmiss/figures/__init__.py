"""Figure registry: one function pair per figure, compute separate from plot.

Each :class:`FigureSpec` has ``data(ctx) -> DataFrame`` (may run or load a
cached simulation under ``ctx.cache_dir``) and ``plot(frame) -> Figure`` (pure
plotting), so restyling never reruns a simulation. :func:`make` renders PNG and
PDF atomically.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tailmiss.io import atomic_write

__all__ = ["FigureSpec", "Context", "FIGURES", "register", "make", "figure_data", "train_llm"]


@dataclass(frozen=True)
class Context:
    """Where and how figure data is computed."""

    quick: bool = False
    cache_dir: Path = Path("runs/sim")
    device: str | None = None
    progress: bool = True
    llm_cache_dir: Path | None = None
    llm_sweeps: Mapping[str, object] | None = None
    """Sweeps to use instead of the presets, by figure family (``"nsweep"``, ``"objectives"``,
    ``"maze"``; see :data:`tailmiss.figures.llm.SWEEPS`), e.g. small ones in a notebook."""
    reuse_stale: bool = False
    """Reuse cached results made by other code (with a warning) instead of recomputing them."""
    log: Callable[[str], None] | None = None
    """Receives one line per cache decision (reused, stale, damaged, resumed)."""
    jobs: int | None = 1
    """Processes that train the LLM runs side by side (``None``: one per usable CPU core; 1: in this process)."""

    def llm_options(self) -> dict:
        """The keyword arguments of :func:`~tailmiss.llm.sweep.run_sweep` and :func:`~tailmiss.llm.ladder.run_ladder`
        that this context sets."""
        options = ("device", "progress", "log", "reuse_stale", "jobs")
        return {name: getattr(self, name) for name in options}

    @property
    def llm_cache(self) -> Path:
        """Where LLM runs are cached: ``llm_cache_dir``, else ``llm/`` beside the simulation cache."""
        return Path(self.llm_cache_dir) if self.llm_cache_dir is not None else Path(self.cache_dir).parent / "llm"


@dataclass(frozen=True)
class FigureSpec:
    name: str
    paper_ref: str
    description: str
    data: Callable[[Context], pd.DataFrame]
    plot: Callable[[pd.DataFrame], object]
    simulated: bool = False
    llm: tuple[str, ...] = ()
    """The LLM sweep and ladder families its data trains (see :func:`train_llm`)."""


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


def figure_data(name: str, ctx: Context | None = None) -> pd.DataFrame:
    """The tidy data behind figure ``name``."""
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
        frame = spec.data(ctx)
        with paper_style():
            fig = spec.plot(frame)
            for ext in ("png", "pdf"):
                path = out_dir / f"{spec.name}.{ext}"
                # no creation date in the PDF: re-rendering unchanged data gives identical files
                metadata = {"CreationDate": None} if ext == "pdf" else None
                with atomic_write(path, "wb") as fh:
                    fig.savefig(fh, format=ext, metadata=metadata)
                written.append(path)
            plt.close(fig)
    return written


def train_llm(families: Iterable[str], ctx: Context) -> None:
    """Train every run of the LLM sweep and ladder ``families`` together on ``ctx.jobs`` processes.

    With ``ctx.jobs == 1`` nothing happens here: each figure trains its own
    runs in this process when it needs them. Otherwise the SFT runs, derived
    policies and RL runs of all the families go to one pool, so that no core
    idles between one sweep and the next; the figures then find them done.
    """
    from tailmiss.figures.ladder import LADDERS, resolve_ladder
    from tailmiss.figures.llm import SWEEPS, resolve_sweep
    from tailmiss.llm.pool import train_all

    wanted = list(dict.fromkeys(families))
    if ctx.jobs == 1 or not wanted:
        return
    unknown = [f for f in wanted if f not in SWEEPS and f not in LADDERS]
    if unknown:
        raise ValueError(f"unknown LLM family {unknown[0]!r}; known: {', '.join([*SWEEPS, *LADDERS])}")
    workloads = [resolve_sweep(f, ctx) if f in SWEEPS else resolve_ladder(f, ctx) for f in wanted]
    train_all(workloads, ctx.llm_cache, ctx.device, ctx.jobs, 1, ctx.progress, ctx.reuse_stale, ctx.log)


# registration side effects: the figure modules add themselves to FIGURES
from tailmiss.figures import ladder, llm, simulation, theory  # noqa: E402,F401
