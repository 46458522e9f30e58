"""``tailmiss repro``: regenerate the figures and ``paper_repro.md`` (:mod:`tailmiss.report`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tailmiss.cli._common import (
    ExecutorOpt,
    JobsOpt,
    JsonOpt,
    RayAddressOpt,
    ReuseStaleOpt,
    app,
    check_folder,
    echo_err,
    executor_settings,
    single_process,
)


@app.command("repro")
def repro_cmd(
    quick: Annotated[bool, typer.Option(help="Quick simulations; writes under runs/quick/ by default.")] = False,
    out: Annotated[Path | None, typer.Option(help="Report path (default paper_repro.md, quick: runs/quick/).")] = None,
    figures: Annotated[bool, typer.Option(help="Also render every figure beside the report.")] = True,
    cache: Annotated[Path, typer.Option(help="Simulation cache folder.")] = Path("runs/sim"),
    device: Annotated[str | None, typer.Option(help="Device for simulations.")] = None,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    reuse_stale: ReuseStaleOpt = False,
    only: Annotated[
        str | None,
        typer.Option(
            help="Regenerate only this section (objectives, maze, ladder, protocol, controls, narrowing) and its "
            "figures in the report."
        ),
    ] = None,
    every_section: Annotated[
        bool,
        typer.Option(
            help="With --quick: every section at its quick size. Without it the quick report is the first look: "
            "objectives, maze, protocol and controls say how to add them (--quick --only NAME)."
        ),
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            help="Train and simulate nothing: compare the report's and its figures' stamps with the current code and "
            "presets, list what is stale and why, exit 1 if anything is."
        ),
    ] = False,
    jobs: JobsOpt = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Regenerate the figures and paper_repro.md: the paper's claims beside ours.

    With --quick, the first look: each pillar (theory, simulator, transformer, bridge, ladder) and the narrowing
    regime at a small size that still shows its finding; the other sections are added one at a time with --quick
    --only NAME. A whole report ends with a summary of what it found (--json: as JSON on stdout, the written files
    then listed on stderr).
    """
    from tailmiss._checks import check_choice
    from tailmiss.options import RunOptions
    from tailmiss.report import SECTIONS
    from tailmiss.studies.context import Context

    if only is not None:
        check_choice("--only", only, SECTIONS)
    if as_json and (only is not None or check):
        raise ValueError("--json prints a whole report's summary: it does not go with --only or --check")
    where = executor_settings(executor, ray_address, jobs)
    if check:
        _check(_report_path(out, quick))
        return
    deferred = _deferred_sections(quick, only, every_section)
    single_process("repro")
    options = RunOptions(device=device, jobs=jobs, progress=progress, log=echo_err, reuse_stale=reuse_stale, **where)
    ctx = Context(quick=quick, cache_dir=cache, options=options)
    out = _checked_out(_report_path(out, quick), figures, cache, only)
    _run_jobs(ctx, only, deferred)
    _write_report(out, ctx, only, deferred)
    written = _write_figures(out, ctx, only, deferred, as_json) if figures else []
    typer.echo(f"wrote {out}", err=as_json)
    if only is None:
        _summary(out, ctx, written, deferred, as_json)


def _summary(out: Path, ctx, written: list, deferred, as_json: bool) -> None:
    """What the report found (:func:`tailmiss.report.summary.report_summary`), as a table or as JSON."""
    import json

    from tailmiss.report.summary import report_summary

    summary = report_summary(out, ctx, written, deferred)
    if as_json:
        typer.echo(json.dumps(summary.to_dict(), indent=2))
        return
    typer.echo("")
    for line in summary.lines():
        typer.echo(line)


def _report_path(out: Path | None, quick: bool) -> Path:
    """``--out``, else ``paper_repro.md`` (with --quick: ``runs/quick/paper_repro.md``)."""
    return out or (Path("runs/quick/paper_repro.md") if quick else Path("paper_repro.md"))


def _deferred_sections(quick: bool, only: str | None, every_section: bool) -> tuple:
    """The sections the quick first look leaves out (none with --only or --every-section, which needs --quick)."""
    from tailmiss.report import QUICK_DEFERRED

    if every_section and not quick:
        raise ValueError("--every-section goes with --quick (the full report always has every section)")
    return QUICK_DEFERRED if quick and only is None and not every_section else ()


def _checked_out(out: Path, figures: bool, cache: Path, only: str | None) -> Path:
    """``out`` once the report's, the figures' and the cache's folders are usable (and, with --only, it exists)."""
    if out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a folder; give the report's file name")
    check_folder("--out's folder", out.parent)
    if figures:
        check_folder("the figure folder", out.parent / "figures")
    check_folder("--cache", cache)
    if only is not None and not out.is_file():
        raise ValueError(f"--only needs an existing report at {str(out)!r}: run without --only first")
    return out


def _run_jobs(ctx, only: str | None, deferred) -> None:
    """Every LLM run, simulation and bridge comparison the report needs, side by side, before the figures."""
    from tailmiss.experiments.pool import phase
    from tailmiss.report import llm_families
    from tailmiss.studies.bridge.data import bridge_jobs
    from tailmiss.studies.narrowing import data as narrowing
    from tailmiss.studies.runs import train_llm
    from tailmiss.studies.simulation.data import simulation_jobs

    extra = [] if only is not None else [*bridge_jobs(ctx), *simulation_jobs(ctx)]
    if only == "narrowing" or (only is None and "narrowing" not in deferred):
        extra += narrowing.bridge_jobs(ctx)
    with phase("llm pool"):
        train_llm(llm_families(only, deferred), ctx, extra)


def _write_report(out: Path, ctx, only: str | None, deferred) -> None:
    """The report itself, before the figures."""
    from tailmiss.experiments.pool import phase
    from tailmiss.report import write_report

    # the report first: its closed forms' large temporaries (BroRL's coupling over 128,000 actions) then meet a
    # process that has not yet kept the memory of Fig. 5's sampler (a peak of about 0.95 GB instead of 1.3 GB)
    with phase("report"):
        write_report(out, ctx, only=only, deferred=deferred)


def _write_figures(out: Path, ctx, only: str | None, deferred, quiet: bool = False) -> list[Path]:
    """The report's figures beside it, their stamps in it, and one ``wrote`` line per file (on stderr when
    ``quiet``); the files written."""
    from tailmiss.experiments.pool import phase
    from tailmiss.report import report_figures
    from tailmiss.report.registry import FIGURES, make
    from tailmiss.report.stamps import figure_stamp, write_stamps

    fig_dir = out.parent / "figures"
    names = list(report_figures(only, deferred))
    with phase("figures"):
        written = make(names, fig_dir, ctx)
    stamps = {n: figure_stamp(FIGURES[n], ctx, [p for p in written if p.stem == n]) for n in names}
    write_stamps(out, {}, figures=stamps)
    for path in written:
        typer.echo(f"wrote {path}", err=quiet)
    return written


def _check(report: Path) -> None:
    """``tailmiss repro --check``: one line per stale section or figure, exit 1 if any."""
    from tailmiss.report import report_figures
    from tailmiss.report.registry import FIGURES
    from tailmiss.report.stamps import check_stamps

    stale = check_stamps(report, FIGURES, lambda deferred: report_figures(None, deferred))
    for item in stale:
        typer.echo(str(item))
    if stale:
        typer.echo(f"{report}: {len(stale)} stale; regenerate with tailmiss repro (or --only NAME)")
        raise typer.Exit(1)
    typer.echo(f"{report}: every section and figure is current")
