"""What every sub-app of the ``tailmiss`` command line shares: the app, one-line errors, options, helpers.

Bad input never shows a traceback: it prints one line ``Error: ...`` on stderr
and exits with code 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup


class _Interrupted(Exception):
    """Ctrl-C inside a command, carried past click's own handler so that one line is printed."""


class _OneLineErrors(TyperGroup):
    """Turn usage errors and ``ValueError`` into one line on stderr and exit code 2; Ctrl-C into one line, code 130."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise _Interrupted() from None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra)
        except (ValueError, OSError) as exc:
            _fail(str(exc), 2)
        except _Interrupted:
            _fail(
                "interrupted: finished results and checkpoints are kept, no result is half-written; "
                "rerun the command to continue (`llm sft` / `llm train` with --resume)",
                130,
            )
        except Exception as exc:
            # click (older typer) and typer's vendored click raise look-alike classes: match by shape
            if type(exc).__name__ == "NoArgsIsHelpError":
                ctx = getattr(exc, "ctx", None)
                typer.echo(ctx.get_help() if ctx is not None else str(exc))
                sys.exit(0)
            if isinstance(exc, typer.Abort) or type(exc).__name__ == "Abort":
                _fail("aborted", 1)
            if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
                _fail(exc.format_message(), exc.exit_code)
            raise
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


def _fail(message: str, code: int) -> None:
    typer.echo("Error: " + " ".join(str(message).split()), err=True)
    sys.exit(code)


app = typer.Typer(
    cls=_OneLineErrors,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts are plain: "[sim]" and "[ray]" are words, not Rich markup
    help="Tail-miss in group-relative RL: closed forms, simulations and the F-GRPO paper's figures.",
)


def _print_version(value: bool) -> None:
    if value:
        from tailmiss import __version__

        typer.echo(f"tailmiss {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", metavar="", is_eager=True, callback=_print_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Tail-miss in group-relative RL: closed forms, simulations and the F-GRPO paper's figures."""


analytic_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Closed forms of F-GRPO / BroRL.")
sim_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Batched categorical-policy simulator.")
figures_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Render the paper's figures.")
llm_app = typer.Typer(
    no_args_is_help=True, rich_markup_mode=None, help="Small transformer: SFT, group-relative RL, evaluation."
)
app.add_typer(analytic_app, name="analytic")
app.add_typer(sim_app, name="sim")
app.add_typer(llm_app, name="llm")
app.add_typer(figures_app, name="figures")

console = Console()


def print_table(title: str, columns: list[str], rows: list[list], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps([dict(zip(columns, r)) for r in rows], indent=2))
        return
    table = Table(title=title)
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for row in rows:
        table.add_row(*(f"{v:.6g}" if isinstance(v, float) else str(v) for v in row))
    console.print(table)


JsonOpt = Annotated[bool, typer.Option("--json", metavar="", help="Print JSON instead of a table.")]
"""A flag: ``--json`` takes no value (an empty metavar, so the help shows none)."""
ReuseStaleOpt = Annotated[
    bool,
    typer.Option("--reuse-stale", help="Reuse saved results made by other code (warns, naming the difference)."),
]


def echo_err(message: str) -> None:
    typer.echo(message, err=True)


def single_process(command: str) -> None:
    """Refuse to run ``command`` as one of several ``torchrun`` processes (they would race on the same files)."""
    from tailmiss import _dist

    if _dist.env_world_size() > 1:
        raise ValueError(
            f"`tailmiss {command}` runs in one process; under torchrun, run `sim run` and `llm sweep` "
            "(which share their work among the ranks), then this command alone"
        )


def check_folder(option: str, path: Path) -> None:
    """Before any work: ``path`` must be a folder this process can create and write."""
    from tailmiss.io import check_writable_folder

    check_writable_folder(path, f"{option} {str(path)!r}")


QuickOpt = Annotated[bool, typer.Option(help="Use the preset's quick variant.")]
DeviceOpt = Annotated[str | None, typer.Option(help="cpu, cuda, cuda:1 ... (default: cuda if available).")]
ProgressOpt = Annotated[bool, typer.Option(help="Show a progress bar.")]
ThreadsOpt = Annotated[
    int,
    typer.Option(
        min=1,
        help="Intra-op threads per process. Default 1: the CPU models (0.1M parameters) gain little from more and "
        "run 10-100x slower when threads contend on a busy machine (benchmarks/README.md).",
    ),
]
JobsOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Processes that train LLM runs side by side (default: one per usable CPU core; 1 on CUDA; "
        "ignored under torchrun, whose ranks share the runs).",
    ),
]
StackOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="RL runs that share their shapes train as one stack of at most this many, each bit for bit as it "
        "would alone (1: every run alone). Default: 1 on the CPU, where a stack measured no faster on two cores; on "
        "an accelerator the compatible runs split evenly over the workers, at most 32 per stack "
        "(docs: the scaling guide).",
    ),
]

ExecutorOpt = Annotated[
    str,
    typer.Option(
        help="Where the runs are trained: local (this machine's process pool) or ray (one Ray task per run, on "
        "the cluster of --ray-address or on this machine; pip install 'tailmiss[ray]').",
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        help="With --executor ray: the Ray cluster to join (default $RAY_ADDRESS, else a Ray started on this "
        "machine with --jobs CPUs). Every node must see the result folders at the same path.",
    ),
]


def executor_settings(executor: str, ray_address: str | None, jobs: int | None) -> dict:
    """``RunOptions`` fields for ``--executor``/``--ray-address``, checked before any work (Ray importable, a cluster
    address only with Ray, ``--jobs`` not beside a cluster whose own resources decide)."""
    import importlib.util
    import os

    from tailmiss._checks import check_choice
    from tailmiss.options import EXECUTORS

    check_choice("--executor", executor, EXECUTORS)
    if executor != "ray":
        if ray_address is not None:
            raise ValueError(f"--ray-address {ray_address!r} goes with --executor ray")
        return {"executor": executor}
    if importlib.util.find_spec("ray") is None:
        raise ValueError("--executor ray needs Ray: pip install 'tailmiss[ray]'")
    from tailmiss import _dist

    if _dist.env_world_size() > 1:
        raise ValueError("--executor ray runs in one process: start it without torchrun")
    cluster = ray_address or os.environ.get("RAY_ADDRESS")
    if cluster and jobs is not None:
        raise ValueError(
            f"--jobs {jobs} sets the CPUs of a Ray started on this machine; the cluster at {cluster!r} runs as "
            "many jobs at once as its own CPUs allow"
        )
    return {"executor": "ray", "ray_address": ray_address}


def set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def on_ranks(device, work):
    """``work(device)`` inside this process's torch.distributed group (when torchrun started it), then leave it."""
    from tailmiss import _dist

    rank_device = _dist.init_from_env(device)
    try:
        return work(rank_device or device)
    finally:
        _dist.destroy()


def pick_config(preset: str | None, config: Path | None, quick: bool, from_preset, from_toml, quick_name):
    """The config named by ``--preset`` (its quick variant with ``--quick``) or read from ``--config``.

    ``from_preset(name)`` and ``from_toml(path)`` build it; ``quick_name(name)`` names a
    preset's quick variant. Exactly one of the two options must be given.
    """
    if (preset is None) == (config is None):
        raise ValueError("give exactly one of --preset and --config")
    if preset is None:
        return from_toml(config)
    return from_preset(quick_name(preset) if quick else preset)
