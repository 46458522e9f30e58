"""``tailmiss figures``: list and render the paper's figures (:mod:`tailmiss.report.registry`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tailmiss.cli._common import (
    ExecutorOpt,
    JobsOpt,
    RayAddressOpt,
    ReuseStaleOpt,
    StackOpt,
    check_folder,
    console,
    echo_err,
    executor_settings,
    figures_app,
    single_process,
)


@figures_app.command("list")
def figures_list_cmd() -> None:
    """List the registered figures."""
    from tailmiss.report.registry import FIGURES

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
    stack: StackOpt = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Render figures to PNG and PDF."""
    from tailmiss.options import RunOptions
    from tailmiss.report.registry import FIGURES, make
    from tailmiss.studies.context import Context

    single_process("figures make")
    where = executor_settings(executor, ray_address, jobs)
    if all_ == bool(names):
        raise ValueError("give figure names or --all (not both)")
    selected = list(FIGURES) if all_ else list(names)
    unknown = [n for n in selected if n not in FIGURES]
    if unknown:
        raise ValueError(f"unknown figure {unknown[0]!r}; known: {', '.join(FIGURES)}")
    out = out or (Path("runs/quick/figures") if quick else Path("figures"))
    check_folder("--out", out)
    check_folder("--cache", cache)
    options = RunOptions(
        device=device, jobs=jobs, progress=progress, log=echo_err, reuse_stale=reuse_stale, stack=stack, **where
    )
    ctx = Context(quick=quick, cache_dir=cache, options=options)
    for path in make(selected, out, ctx):
        typer.echo(f"wrote {path}")
