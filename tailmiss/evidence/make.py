"""Making the report: every unit it reads computed (or reused) first, then ``paper_repro.md``, then its figures.

``tailmiss repro`` is these three steps (:func:`compute`, :func:`write`, :func:`render`); the re-derivation from the
evidence archive (:mod:`tailmiss.evidence.verify`) runs the same steps with nothing left to compute.
"""

from __future__ import annotations

from pathlib import Path

from tailmiss.studies.context import Context

__all__ = ["compute", "write", "render", "make"]


def compute(ctx: Context, only: str | None = None, deferred: tuple[str, ...] = ()) -> None:
    """Every LLM run, simulation and comparison the report (or its study ``only``) needs, side by side on one pool,
    before the sections read them (with one job, each section computes its own as it asks)."""
    from tailmiss.experiments.pool import phase
    from tailmiss.report import llm_families
    from tailmiss.studies.bridge.data import bridge_jobs
    from tailmiss.studies.narrowing import data as narrowing
    from tailmiss.studies.runs import train_llm
    from tailmiss.studies.sharing import data as sharing
    from tailmiss.studies.simulation.data import simulation_jobs

    extra = [] if only is not None else [*bridge_jobs(ctx), *simulation_jobs(ctx)]
    if only == "narrowing" or (only is None and "narrowing" not in deferred):
        extra += narrowing.bridge_jobs(ctx)
    if only == "sharing" or (only is None and "sharing" not in deferred):
        extra += sharing.shared_simulation_jobs(ctx)
    with phase("llm pool"):
        train_llm(llm_families(only, deferred), ctx, extra)


def write(out: Path, ctx: Context, only: str | None = None, deferred: tuple[str, ...] = ()) -> None:
    """The report itself (:func:`tailmiss.report.write_report`), before the figures."""
    from tailmiss.experiments.pool import phase
    from tailmiss.report import write_report

    # the report first: its closed forms' large temporaries (BroRL's coupling over 128,000 actions) then meet a
    # process that has not yet kept the memory of Fig. 5's sampler (a peak of about 0.95 GB instead of 1.3 GB)
    with phase("report"):
        write_report(out, ctx, only=only, deferred=deferred)


def render(out: Path, ctx: Context, only: str | None = None, deferred: tuple[str, ...] = ()) -> list[Path]:
    """The report's figures in ``figures/`` beside it and their stamps in its stamps file; the files written."""
    from tailmiss.experiments.pool import phase
    from tailmiss.report import report_figures
    from tailmiss.report.registry import FIGURES, make
    from tailmiss.report.stamps import figure_stamp, write_stamps

    names = list(report_figures(only, deferred))
    with phase("figures"):
        written = make(names, Path(out).parent / "figures", ctx)
    stamps = {n: figure_stamp(FIGURES[n], ctx, [p for p in written if p.stem == n]) for n in names}
    write_stamps(out, {}, figures=stamps)
    return written


def make(
    out: Path, ctx: Context, only: str | None = None, deferred: tuple[str, ...] = (), figures: bool = True
) -> list[Path]:
    """:func:`compute`, :func:`write`, then (with ``figures``) :func:`render`; the figures written."""
    compute(ctx, only, deferred)
    write(out, ctx, only, deferred)
    return render(out, ctx, only, deferred) if figures else []
