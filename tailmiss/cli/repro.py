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
    StackOpt,
    app,
    check_folder,
    echo_err,
    executor_settings,
    single_process,
)
from tailmiss.cli.evidence import archive_written, run_budget, run_prune, run_spot_check, run_verify, show_plan
from tailmiss.evidence.regenerate import parse_duration


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
    plan: Annotated[
        bool,
        typer.Option(
            help="Train nothing: list what the full report reads that the evidence archive lacks or holds stale "
            "(unit, preset, section, why, the CPU seconds its recorded runs took), with totals per section."
        ),
    ] = False,
    budget: Annotated[
        str | None,
        typer.Option(
            help="Compute the most-needed units the archive lacks that fit in this much time (2h, 90m, 1h30m), "
            "archiving each as it completes: a long regeneration in parts, committed between calls.",
        ),
    ] = None,
    spot_check: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Train this many archived runs again, picked at random, and say whether each came out the same bit "
            "for bit (or how far its numbers moved, on which hosts).",
        ),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="With --spot-check: the seed that picks the runs.")] = None,
    prune: Annotated[bool, typer.Option(help="Remove the archived units that no section reads.")] = False,
    verify: Annotated[
        bool,
        typer.Option(
            help="Re-derive the report and its figures from the evidence archive alone in a temporary folder "
            "(computing nothing) and compare them with the committed ones; exit 1 on any difference or missing unit.",
        ),
    ] = False,
    partial: Annotated[
        bool,
        typer.Option(
            help="With --verify: re-derive only the sections whose units the archive holds, listing what the others "
            "lack, instead of failing on them."
        ),
    ] = False,
    evidence: Annotated[
        Path | None,
        typer.Option(help="The evidence archive to read and add to (default: evidence/ in this checkout)."),
    ] = None,
    jobs: JobsOpt = None,
    stack: StackOpt = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Regenerate the figures and paper_repro.md: the paper's claims beside ours.

    With --quick, the first look: each pillar (theory, simulator, transformer, bridge, ladder) and the narrowing
    regime at a small size that still shows its finding; the other sections are added one at a time with --quick
    --only NAME. A whole report ends with a summary of what it found (--json: as JSON on stdout, the written files
    then listed on stderr).

    The full report's runs live in the evidence archive (evidence/): a fresh clone re-derives the report from it
    without training; a full report adds the units it computed to it. --plan, --budget, --spot-check, --prune and
    --verify work on the archive.
    """
    from tailmiss._checks import check_choice
    from tailmiss.evidence.make import make
    from tailmiss.options import RunOptions
    from tailmiss.report import SECTIONS
    from tailmiss.studies.context import Context

    if only is not None:
        check_choice("--only", only, SECTIONS)
    mode = _mode(
        check=check, plan=plan, budget=budget is not None, spot_check=spot_check is not None, prune=prune, verify=verify
    )
    if as_json and only is not None:
        raise ValueError("--json does not go with --only: it prints a whole report's summary, a plan or a spot check")
    if as_json and mode not in (None, "plan", "spot_check"):
        raise ValueError("--json prints a whole report's summary, a plan or a spot check")
    if mode not in (None, "check", "verify") and quick:
        raise ValueError(f"--{mode.replace('_', '-')} works on the full report's evidence: it does not go with --quick")
    if partial and mode != "verify":
        raise ValueError("--partial goes with --verify")
    if seed is not None and mode != "spot_check":
        raise ValueError("--seed goes with --spot-check")
    where = executor_settings(executor, ray_address, jobs)
    seconds = parse_duration(budget) if budget is not None else None
    _use_evidence(evidence)
    if mode == "check":
        _check(_report_path(out, quick))
        return
    options = RunOptions(
        device=device, jobs=jobs, progress=progress, log=echo_err, reuse_stale=reuse_stale, stack=stack, **where
    )
    if mode is not None:
        _evidence_mode(
            mode, Context(cache_dir=cache, options=options), out, as_json, seconds, spot_check, seed, partial
        )
        return
    deferred = _deferred_sections(quick, only, every_section)
    single_process("repro")
    ctx = Context(quick=quick, cache_dir=cache, options=options)
    out = _checked_out(_report_path(out, quick), figures, cache, only)
    written = make(out, ctx, only, deferred, figures)
    for path in written:
        typer.echo(f"wrote {path}", err=as_json)
    typer.echo(f"wrote {out}", err=as_json)
    if not quick:
        archive_written(ctx, only, echo_err)
    if only is None:
        _summary(out, ctx, written, deferred, as_json)


def _mode(**given: bool) -> str | None:
    """The one evidence mode (or --check) asked for, else None; two at once are refused."""
    chosen = [name for name, on in given.items() if on]
    if len(chosen) > 1:
        raise ValueError(" and ".join(f"--{n.replace('_', '-')}" for n in chosen) + " do not go together")
    return chosen[0] if chosen else None


def _use_evidence(evidence: Path | None) -> None:
    """``--evidence``: the archive this process and its workers read (and a full report adds to)."""
    import os

    from tailmiss.archive import ARCHIVE_ENV

    if evidence is None:
        return
    if evidence.exists() and not evidence.is_dir():
        raise ValueError(f"--evidence {str(evidence)!r} is a file, not a folder")
    os.environ[ARCHIVE_ENV] = str(evidence.resolve())


def _evidence_mode(mode: str, ctx, out, as_json: bool, seconds, count, seed, partial: bool) -> None:
    """--plan, --budget, --spot-check, --prune or --verify."""
    from tailmiss.evidence.plan import plan
    from tailmiss.experiments.pool import default_jobs

    jobs = ctx.options.jobs or default_jobs(ctx.options.device, 2)
    if mode == "plan":
        show_plan(plan(ctx, cache=ctx.llm_cache), as_json, jobs)
    elif mode == "budget":
        single_process("repro --budget")
        run_budget(seconds, ctx, jobs)
    elif mode == "spot_check":
        run_spot_check(count, seed, as_json)
    elif mode == "prune":
        run_prune(plan(ctx))
    else:
        run_verify(_report_path(out, False), partial, ctx.options.replace(log=None), None)


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
