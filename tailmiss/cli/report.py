"""``tailmiss figures``, ``tailmiss repro`` and ``tailmiss diagnose``: the paper's figures, the report, real runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tailmiss.cli._common import (
    JobsOpt,
    JsonOpt,
    ReuseStaleOpt,
    app,
    check_folder,
    console,
    echo_err,
    figures_app,
    print_table,
    single_process,
)

# --- figures ------------------------------------------------------------------------


@figures_app.command("list")
def figures_list_cmd() -> None:
    """List the registered figures."""
    from tailmiss.figures import FIGURES

    rows = [[s.name, s.paper_ref, "yes" if s.simulated else "no", s.description] for s in FIGURES.values()]
    table = Table(title="Figures")
    for col in ("name", "paper", "simulated", "content"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    console.print(table)


@figures_app.command("make")
def figures_make_cmd(
    names: Annotated[list[str] | None, typer.Argument(help="Figure names (see `tailmiss figures list`).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Render every registered figure.")] = False,
    quick: Annotated[bool, typer.Option(help="Quick simulations (minutes on a CPU).")] = False,
    out: Annotated[Path | None, typer.Option(help="Output folder (default figures/, or runs/quick/figures).")] = None,
    cache: Annotated[Path, typer.Option(help="Simulation cache folder.")] = Path("runs/sim"),
    device: Annotated[str | None, typer.Option(help="Device for simulated figures.")] = None,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    reuse_stale: ReuseStaleOpt = False,
    jobs: JobsOpt = None,
) -> None:
    """Render figures to PNG and PDF."""
    from tailmiss.figures import FIGURES, make
    from tailmiss.results import Context

    single_process("figures make")
    if all_ == bool(names):
        raise ValueError("give figure names or --all (not both)")
    selected = list(FIGURES) if all_ else list(names)
    unknown = [n for n in selected if n not in FIGURES]
    if unknown:
        raise ValueError(f"unknown figure {unknown[0]!r}; known: {', '.join(FIGURES)}")
    out = out or (Path("runs/quick/figures") if quick else Path("figures"))
    check_folder("--out", out)
    check_folder("--cache", cache)
    ctx = Context(
        quick=quick, cache_dir=cache, device=device, progress=progress, reuse_stale=reuse_stale, log=echo_err, jobs=jobs
    )
    for path in make(selected, out, ctx):
        typer.echo(f"wrote {path}")


# --- reproduction report ----------------------------------------------------------------


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
        typer.Option(help="Regenerate only this section (ladder, objectives) and its figures in the existing report."),
    ] = None,
    jobs: JobsOpt = None,
) -> None:
    """Regenerate the figures and paper_repro.md: the paper's claims beside ours."""
    from tailmiss.figures import FIGURES, make
    from tailmiss.repro import SECTIONS, llm_families, write_report
    from tailmiss.results import Context, train_llm

    if only is not None and only not in SECTIONS:
        raise ValueError(f"--only must be one of {', '.join(SECTIONS)}, got {only!r}")

    single_process("repro")
    ctx = Context(
        quick=quick, cache_dir=cache, device=device, progress=progress, reuse_stale=reuse_stale, log=echo_err, jobs=jobs
    )
    out = out or (Path("runs/quick/paper_repro.md") if quick else Path("paper_repro.md"))
    if out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a folder; give the report's file name")
    check_folder("--out's folder", out.parent)
    if figures:
        check_folder("the figure folder", out.parent / "figures")
    check_folder("--cache", cache)
    if only is not None and not out.is_file():
        raise ValueError(f"--only needs an existing report at {str(out)!r}: run without --only first")
    train_llm(llm_families(only), ctx)  # every LLM run the report needs, side by side, before the figures
    if figures:
        fig_dir = out.parent / "figures"
        names = {"ladder": ["ladder", "frontier"], "objectives": ["llm-objectives"]}.get(only, list(FIGURES))
        for path in make(names, fig_dir, ctx):
            typer.echo(f"wrote {path}")
    write_report(out, ctx, only=only)
    typer.echo(f"wrote {out}")


# --- diagnose a real run ----------------------------------------------------------------


@app.command("diagnose")
def diagnose_cmd(
    log: Annotated[
        Path,
        typer.Argument(
            help="Per-rollout log: a CSV / JSONL / parquet file, or a folder of them (verl's rollout_data_dir, "
            "TRL's completions/). Columns step, prompt_id, reward [, correct, rollout]; see --format."
        ),
    ],
    out: Annotated[
        Path | None, typer.Option(help="Result folder (default runs/diagnose/<log name>-<hash of its path>).")
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="auto, tailmiss (the schema), trl (completion tables), verl (rollout dump).")
    ] = "auto",
    threshold: Annotated[
        float | None, typer.Option(help="Success threshold for non-binary rewards: reward >= threshold is correct.")
    ] = None,
    reward_column: Annotated[str | None, typer.Option(help="Read the reward from this column instead.")] = None,
    rho: Annotated[
        list[float] | None,
        typer.Option(help="Rare share tau/mu_hat of the correct mass; repeat (default 0.01 0.05 0.1 0.2)."),
    ] = None,
    gamma: Annotated[list[float] | None, typer.Option(help="Focal gamma; repeat (default 0.5 1 2).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Diagnose a real run: group success, inactive share, Lemma 3.1 risk and its peak N, focal weights."""
    import warnings

    # numpy / pandas only (no torch): a bad log is refused in about a second
    from tailmiss.diagnose import (
        DEFAULT_GAMMAS,
        DEFAULT_RHOS,
        RESULT_FILES,
        CutLineWarning,
        check_same_log,
        default_folder,
        diagnose,
        read_rollouts,
        write_diagnosis,
    )
    from tailmiss.io import check_result_dest, result_dir

    out = out or default_folder(log)
    check_result_dest(out, RESULT_FILES, "diagnose result")
    check_same_log(out, log)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CutLineWarning)  # the log carries them: one line each below
        rollouts = read_rollouts(log, fmt, reward_column)
    for note in rollouts.warnings:
        echo_err(f"Warning: {note}")
    result = diagnose(
        rollouts,
        threshold=threshold,
        rhos=rho or DEFAULT_RHOS,
        gammas=gamma or DEFAULT_GAMMAS,
        threshold_name="--threshold",
    )
    from tailmiss.figures.diagnose import save_diagnosis_figure  # matplotlib: once there is something to draw

    with result_dir(out, RESULT_FILES, "diagnose result") as tmp:
        write_diagnosis(result, tmp)
        save_diagnosis_figure(result, tmp)
    s = result.summary
    if as_json:
        typer.echo(json.dumps({k: v for k, v in s.items() if k != "per_step"}, indent=2))
    else:
        sizes = ", ".join(map(str, s["group_sizes"]))
        typer.echo(
            f"{s['groups']} groups over {s['steps']} steps (N = {sizes}); mean mu_hat {s['mu_hat_mean']:.3g}; "
            f"inactive {s['share_inactive']:.1%}; success: {s['success']}"
        )
        rows = [[r["rho"], r["risk_at_observed_n"], sizes, r["n_star"], r["peak"], r["side"]] for r in s["tail_miss"]]
        print_table(
            "Lemma 3.1 over the observed mu_hat (tau = rho * mu_hat)",
            ["rho", "risk at run's N", "run's N", "N*", "peak", "run's N vs N*"],
            [["-" if v is None else v for v in row] for row in rows],
            False,
        )
        if len(s["group_sizes"]) > 1:
            typer.echo(
                "Groups differ in size: the risk takes each group at its own N; N* is the peak of their mixture "
                "at one common N."
            )
        if any(r["risk_at_observed_n"] is None for r in s["tail_miss"]):
            typer.echo("-: no group solved its prompt (X > 0), so no correct mass to take a rare share of.")
    typer.echo(f"wrote {out}/ ({', '.join(RESULT_FILES)})", err=as_json)
