"""The ``tailmiss`` command line: one sub-app per area (analytic, sim, llm, figures) plus ``repro``.

Bad input never shows a traceback: it prints one line ``Error: ...`` on stderr
and exits with code 2.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

__all__ = ["app", "main"]


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
    help="Tail-miss in group-relative RL: closed forms, simulations and the F-GRPO paper's figures.",
)
analytic_app = typer.Typer(no_args_is_help=True, help="Closed forms of F-GRPO / BroRL.")
sim_app = typer.Typer(no_args_is_help=True, help="Batched categorical-policy simulator.")
figures_app = typer.Typer(no_args_is_help=True, help="Render the paper's figures.")
llm_app = typer.Typer(no_args_is_help=True, help="Small transformer: SFT, group-relative RL, evaluation.")
app.add_typer(analytic_app, name="analytic")
app.add_typer(sim_app, name="sim")
app.add_typer(llm_app, name="llm")
app.add_typer(figures_app, name="figures")

_out = Console()


def _print_table(title: str, columns: list[str], rows: list[list], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps([dict(zip(columns, r)) for r in rows], indent=2))
        return
    table = Table(title=title)
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for row in rows:
        table.add_row(*(f"{v:.6g}" if isinstance(v, float) else str(v) for v in row))
    _out.print(table)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
ReuseStaleOpt = Annotated[
    bool,
    typer.Option("--reuse-stale", help="Reuse saved results made by other code (warns, naming the difference)."),
]


def _log(message: str) -> None:
    typer.echo(message, err=True)


def _single_process(command: str) -> None:
    """Refuse to run ``command`` as one of several ``torchrun`` processes (they would race on the same files)."""
    from tailmiss import _dist

    if _dist.env_world_size() > 1:
        raise ValueError(
            f"`tailmiss {command}` runs in one process; under torchrun, run `sim run` and `llm sweep` "
            "(which share their work among the ranks), then this command alone"
        )


def _check_folder(option: str, path: Path) -> None:
    """Before any work: ``path`` must be a folder this process can create and write."""
    from tailmiss.io import check_writable_folder

    check_writable_folder(path, f"{option} {str(path)!r}")


# --- analytic ---------------------------------------------------------------------


@analytic_app.command("tail-miss")
def tail_miss_cmd(
    mu_pos: Annotated[float, typer.Option(help="Probability that one rollout is correct.")],
    tau: Annotated[float, typer.Option(help="Mass of the rare-correct subset E (0 < tau < mu_pos).")],
    n: Annotated[list[int], typer.Option("-n", "--n", help="Group size; repeat for several.")],
    as_json: JsonOpt = False,
) -> None:
    """Lemma 3.1: probability that a group is active yet misses E, with the active probability."""
    from tailmiss import analytic

    miss = analytic.tail_miss_probability(mu_pos, tau, n)
    active = analytic.active_probability(mu_pos, n)
    rows = [[int(k), float(a), float(m)] for k, a, m in zip(n, active, miss)]
    _print_table(f"Lemma 3.1, mu_pos={mu_pos:g}, tau={tau:g}", ["N", "active", "tail_miss"], rows, as_json)


@analytic_app.command("peak")
def peak_cmd(
    mu_pos: Annotated[float, typer.Option(help="Probability that one rollout is correct.")],
    rho: Annotated[float | None, typer.Option(help="tau / mu_pos (give rho or tau).")] = None,
    tau: Annotated[float | None, typer.Option(help="Rare-correct mass (give rho or tau).")] = None,
    n_max: Annotated[int, typer.Option(help="Largest group size searched.")] = 10**7,
    as_json: JsonOpt = False,
) -> None:
    """Exact integer argmax N* of Lemma 3.1 and the best power of two."""
    from tailmiss import analytic

    if (rho is None) == (tau is None):
        raise ValueError("give exactly one of --rho and --tau")
    if tau is None:
        if not 0 < rho < 1:
            raise ValueError(f"rho must lie in (0, 1), got {rho!r}")
        tau = rho * mu_pos
    n_star, peak = analytic.tail_miss_peak(mu_pos, tau, n_max=n_max)
    grid = [2**k for k in range(0, max(1, n_max).bit_length())]
    n_pow2, peak_pow2 = analytic.tail_miss_peak(mu_pos, tau, grid=grid)
    rows = [["integer", int(n_star), float(peak)], ["power of two", int(n_pow2), float(peak_pow2)]]
    _print_table(f"Tail-miss peak, mu_pos={mu_pos:g}, tau={tau:g}", ["grid", "N*", "peak"], rows, as_json)


@analytic_app.command("pass-at-k")
def pass_at_k_cmd(
    n: Annotated[int, typer.Option("-n", help="Samples per problem.")],
    c: Annotated[int, typer.Option("-c", help="Correct samples.")],
    k: Annotated[list[int], typer.Option("-k", help="k; repeat for several.")],
    as_json: JsonOpt = False,
) -> None:
    """Unbiased pass@k estimate (Chen et al. 2021)."""
    from tailmiss import analytic

    values = analytic.pass_at_k(n, c, k)
    _print_table(f"pass@k, n={n}, c={c}", ["k", "pass@k"], [[int(a), float(b)] for a, b in zip(k, values)], as_json)


# --- sim ----------------------------------------------------------------------------


@sim_app.command("presets")
def presets_cmd() -> None:
    """List the named simulation setups."""
    from tailmiss.sim import PRESETS

    rows = [
        [name, c.num_runs, c.steps, c.surrogate, c.optimizer, f"{c.lr:g}", ",".join(map(str, c.group_sizes))]
        for name, c in PRESETS.items()
    ]
    _print_table("Presets", ["name", "runs", "steps", "surrogate", "optimizer", "lr", "group sizes"], rows, False)


@sim_app.command("export-presets")
def export_presets_cmd(
    out: Annotated[Path, typer.Option(help="Folder for the TOML files.")] = Path("experiments"),
) -> None:
    """Write every preset as <out>/<name>.toml (editable starting points for --config)."""
    from tailmiss.sim import PRESETS

    for name, cfg in PRESETS.items():
        cfg.to_toml(out / f"{name}.toml")
        typer.echo(f"wrote {out / f'{name}.toml'}")


@sim_app.command("run")
def sim_run_cmd(
    preset: Annotated[str | None, typer.Option(help="Named setup (see `tailmiss sim presets`).")] = None,
    config: Annotated[Path | None, typer.Option(help="TOML file with a [sim] table instead of a preset.")] = None,
    quick: Annotated[bool, typer.Option(help="Use the preset's quick variant.")] = False,
    device: Annotated[str | None, typer.Option(help="cpu, cuda, cuda:1 ... (default: cuda if available).")] = None,
    out: Annotated[Path | None, typer.Option(help="Result folder (default runs/sim/<name>).")] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the sweep's size and peak-memory estimate; run nothing.")
    ] = False,
    reuse_stale: ReuseStaleOpt = False,
    rerun: Annotated[bool, typer.Option("--rerun", help="Simulate even if --out holds this result.")] = False,
    checkpoint_every: Annotated[
        int | None, typer.Option(min=1, help="Snapshot every K steps (default: every 60 s) for resuming.")
    ] = None,
) -> None:
    """Run a simulation sweep (or reuse its saved result), save it, and print the final metrics (mean over seeds).

    A rerun reuses a result of the same config made by the same code; a killed
    run resumes from its last snapshot. Under ``torchrun --nproc_per_node=K``
    the runs are shared among K processes and rank 0 writes one result.
    """
    from tailmiss import _dist
    from tailmiss.sim import SimConfig, quick_name
    from tailmiss.sim import preset as get_preset
    from tailmiss.sim.runner import run_sim

    if (preset is None) == (config is None):
        raise ValueError("give exactly one of --preset and --config")
    if preset is not None:
        cfg = get_preset(quick_name(preset) if quick else preset)
    else:
        cfg = SimConfig.from_toml(config)
    if dry_run:
        _sim_dry_run(cfg, device)
        return
    rank_device = _dist.init_from_env(device)
    try:
        result = run_sim(
            cfg,
            out or Path("runs/sim") / cfg.name,
            device=rank_device or device,
            progress=progress,
            reuse_stale=reuse_stale,
            rerun=rerun,
            checkpoint_every=checkpoint_every,
            log=_log,
        )
    finally:
        _dist.destroy()
    if result is None:  # a rank other than 0 under torchrun
        return
    path = out or Path("runs/sim") / cfg.name
    final = result.seed_mean(result.final)
    rows = [
        [int(r.group_size), float(r.gamma), float(r.q_pos), float(r.retained_mass), float(r.entropy)]
        for r in final.itertuples()
    ]
    _print_table(
        f"{cfg.name}: step {cfg.steps}, mean of {len(cfg.seeds)} seed(s)",
        ["N", "gamma", "Q_pos", "M_ret", "entropy"],
        rows,
        False,
    )
    typer.echo(f"result in {path} ({result.meta['elapsed_s']} s on {result.meta['device']})")


def _sim_dry_run(cfg, device) -> None:
    from tailmiss._device import resolve_device
    from tailmiss.sim.engine import device_memory, memory_estimate

    dev = resolve_device(device)
    est = memory_estimate(cfg, device=dev)
    free = device_memory(dev)
    gib = 2**30
    typer.echo(f"{cfg.name}: {est['runs']} runs x {est['actions']:,} actions x {cfg.steps} steps")
    typer.echo(f"draws per step: {est['draws_per_step']:,}")
    for part in ("state", "tile", "sampler", "allocator"):
        typer.echo(f"  {part:<16} {est[part] / gib:8.3f} GiB")
    typer.echo(f"peak memory (estimate): {est['total'] / gib:.3f} GiB ({est['total']:,} bytes)")
    if free is None:
        typer.echo(f"free on {dev}: unknown")
    else:
        verdict = "fits" if est["total"] <= free else "does NOT fit: `sim run` will refuse it"
        typer.echo(f"free on {dev}: {free / gib:.1f} GiB; {verdict}")


# --- llm ------------------------------------------------------------------------------

PresetOpt = Annotated[str | None, typer.Option(help="Named setup (see `tailmiss llm presets`).")]
ConfigOpt = Annotated[Path | None, typer.Option(help="TOML file with an [sft] or [rl] table instead of a preset.")]
QuickOpt = Annotated[bool, typer.Option(help="Use the preset's quick variant.")]
DeviceOpt = Annotated[str | None, typer.Option(help="cpu, cuda, cuda:1 ... (default: cuda if available).")]
ResumeOpt = Annotated[bool, typer.Option(help="Continue the run in --out from its last checkpoint.")]
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


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


@llm_app.command("presets")
def llm_presets_cmd() -> None:
    """List the named SFT and RL setups."""
    from tailmiss.llm import LLM_PRESETS, SFTConfig

    rows = []
    for name, c in LLM_PRESETS.items():
        if isinstance(c, SFTConfig):
            rows.append([name, "sft", c.task.name, c.steps, f"batch {c.batch_size}", f"{c.lr:g}"])
        else:
            what = f"{c.method} γ={c.gamma:g} N={c.group_size} B={c.prompts_per_step}"
            rows.append([name, "rl", "(from --init)", c.steps, what, f"{c.lr:g}"])
    _print_table("LLM presets", ["name", "kind", "task", "steps", "setup", "lr"], rows, False)
    from tailmiss.llm.presets import LLM_SWEEPS

    rows = [
        [name, s.sft.task.name, len(s.variants), len(s.seeds), s.rl.steps, ", ".join(v.label for v in s.variants)]
        for name, s in LLM_SWEEPS.items()
    ]
    _print_table("LLM sweeps", ["name", "task", "variants", "seeds", "steps", "runs"], rows, False)
    from tailmiss.llm.presets import LADDERS

    rows = [
        [
            name,
            lad.sft.task.name,
            ", ".join(r.name for r in lad.rungs),
            ", ".join(map(str, lad.group_sizes)),
            ", ".join(f"{g:g}" for g in lad.gammas),
            len(lad.seeds),
            lad.budget,
        ]
        for name, lad in LADDERS.items()
    ]
    _print_table(
        "Ladders (`llm sweep --preset NAME`)", ["name", "task", "rungs", "N", "γ", "seeds", "budget"], rows, False
    )


@llm_app.command("export-presets")
def llm_export_presets_cmd(
    out: Annotated[Path, typer.Option(help="Folder for the TOML files.")] = Path("experiments"),
) -> None:
    """Write every LLM preset as <out>/<name>.toml (editable starting points for --config)."""
    from tailmiss.llm import LLM_PRESETS
    from tailmiss.llm.presets import LLM_SWEEPS

    for name, cfg in {**LLM_PRESETS, **LLM_SWEEPS}.items():
        cfg.to_toml(out / f"{name}.toml")
        typer.echo(f"wrote {out / f'{name}.toml'}")


def _echo_last_row(path: Path, columns: list[str]) -> None:
    import pandas as pd

    history = pd.read_csv(path / "history.csv")
    last = history.iloc[-1]
    shown = [f"{c}={last[c]:.4g}" for c in columns if c in history and pd.notna(last[c])]
    typer.echo(f"saved {path} (step {int(last['step'])}{': ' + ', '.join(shown) if shown else ''})")


@llm_app.command("sft")
def llm_sft_cmd(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    quick: QuickOpt = False,
    device: DeviceOpt = None,
    out: Annotated[Path | None, typer.Option(help="Run folder (default runs/llm/<name>).")] = None,
    resume: ResumeOpt = False,
    progress: ProgressOpt = True,
    threads: ThreadsOpt = 1,
) -> None:
    """Train a model from scratch on the task's SFT data; write config, history, meta and a checkpoint."""
    from tailmiss import _dist
    from tailmiss.llm import SFTConfig, train_sft
    from tailmiss.llm.cli_support import resolve_config

    cfg = resolve_config(preset, config, quick, SFTConfig)
    _set_threads(threads)
    rank_device = _dist.init_from_env(device)
    try:
        path = train_sft(
            cfg, out or Path("runs/llm") / cfg.name, device=rank_device or device, resume=resume, progress=progress
        )
    finally:
        _dist.destroy()
    if _dist.env_world_size() == 1 or _dist.env_rank() == 0:
        _echo_last_row(path, ["mu_pos", "off_format", "pass_at_1"])


@llm_app.command("train")
def llm_train_cmd(
    init: Annotated[Path, typer.Option(help="SFT run folder to start from.")],
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    quick: QuickOpt = False,
    device: DeviceOpt = None,
    out: Annotated[Path | None, typer.Option(help="Run folder (default runs/llm/<name>).")] = None,
    resume: ResumeOpt = False,
    progress: ProgressOpt = True,
    threads: ThreadsOpt = 1,
) -> None:
    """Group-relative RL (GRPO / DAPO / CISPO / Dr. GRPO, focal weight γ) from an SFT run."""
    from tailmiss import _dist
    from tailmiss.llm import RLConfig, train_rl
    from tailmiss.llm.cli_support import resolve_config

    cfg = resolve_config(preset, config, quick, RLConfig)
    _set_threads(threads)
    rank_device = _dist.init_from_env(device)
    try:
        path = train_rl(
            cfg,
            init,
            out or Path("runs/llm") / cfg.name,
            device=rank_device or device,
            resume=resume,
            progress=progress,
        )
    finally:
        _dist.destroy()
    if _dist.env_world_size() == 1 or _dist.env_rank() == 0:
        _echo_last_row(path, ["mu_pos", "retained_mass", "dnll_rare", "pass_at_1"])


@llm_app.command("sweep")
def llm_sweep_cmd(
    preset: Annotated[str | None, typer.Option(help="Named sweep (see `tailmiss llm presets`).")] = None,
    config: Annotated[Path | None, typer.Option(help="Sweep TOML ([sweep], [sft], [rl]) instead of a preset.")] = None,
    quick: QuickOpt = False,
    device: DeviceOpt = None,
    root: Annotated[Path, typer.Option(help="Cache folder for the SFT, RL and result folders.")] = Path("runs/llm"),
    progress: ProgressOpt = True,
    reuse_stale: ReuseStaleOpt = False,
    jobs: JobsOpt = None,
    threads: ThreadsOpt = 1,
) -> None:
    """Run (or reuse) every run of a sweep and write its tidy result to <root>/<name>/.

    The runs are trained side by side on --jobs processes of --threads threads
    each. Under ``torchrun --nproc_per_node=K`` they are shared among the K
    processes instead (each run on one of them) and rank 0 writes the result.
    """
    from tailmiss.llm.presets import LADDERS, LLM_SWEEPS, llm_sweep, quick_name
    from tailmiss.llm.sweep import load_sweep, run_sweep

    if (preset is None) == (config is None):
        raise ValueError("give exactly one of --preset and --config")
    name = (quick_name(preset) if quick else preset) if preset is not None else None
    if name is not None and name not in LADDERS and name not in LLM_SWEEPS:
        raise ValueError(
            f"unknown LLM sweep {name!r}; known sweeps: {', '.join(LLM_SWEEPS)}; ladders: {', '.join(LADDERS)}"
        )
    _set_threads(threads)
    pool = dict(jobs=jobs, threads=threads, progress=progress, log=typer.echo, reuse_stale=reuse_stale)
    if name in LADDERS:
        _run_ladder_cmd(LADDERS[name], root, device, pool)
        return
    sweep = llm_sweep(name) if preset is not None else load_sweep(config)
    _check_folder("--root", root)
    result = _on_ranks(device, lambda dev: run_sweep(sweep, root, device=dev, **pool))
    if result is None:  # a rank other than 0 under torchrun
        return
    cols = [c for c in ("mu_pos", "retained_mass", "dnll_rare", "exact_pass_at_256", "pass_at_1", "pass_at_256")]
    summary = result.seed_mean()
    cols = [c for c in cols if c in summary]
    rows = [[r["label"], int(r["rollouts"]), *(r[c] for c in cols)] for _, r in summary.iterrows()]
    _print_table(f"{sweep.name} (mean over {len(sweep.seeds)} seed(s))", ["run", "rollouts", *cols], rows, False)
    typer.echo(f"saved {root / sweep.name} ({result.meta['total_elapsed_s']} s of training)")


def _on_ranks(device, work):
    """``work(device)`` inside this process's torch.distributed group (when torchrun started it), then leave it."""
    from tailmiss import _dist

    rank_device = _dist.init_from_env(device)
    try:
        return work(rank_device or device)
    finally:
        _dist.destroy()


def _run_ladder_cmd(ladder, root: Path, device, pool: dict) -> None:
    """``llm sweep`` on a ladder preset: every rung's sweep, then the N-shape of M_ret per rung."""
    from tailmiss.ladder_analysis import shape_table
    from tailmiss.llm.ladder import run_ladder

    _check_folder("--root", root)
    result = _on_ranks(device, lambda dev: run_ladder(ladder, root, device=dev, **pool))
    if result is None:  # a rank other than 0 under torchrun
        return
    shape = shape_table(result.final)
    rows = [
        [
            r["rung"],
            r["set"],
            f"{r['gamma']:g}",
            " ".join(f"{float(v.split('±')[0]):.2f}" for v in r["values"].split(", ")),
            f"{r['spearman']:+.2f}" if r["spearman"] == r["spearman"] else "flat",
            r["worst_n"],
            "yes" if r["recovers"] else "no",
        ]
        for _, r in shape.iterrows()
    ]
    ns = ", ".join(map(str, ladder.group_sizes))
    title = f"{ladder.name}: M_ret by N = {ns} (mean over {len(ladder.seeds)} seed(s))"
    _print_table(title, ["rung", "set", "γ", "M_ret", "Spearman", "worst N", "recovers"], rows, False)
    total = sum(r.meta["total_elapsed_s"] for r in result.sweeps.values())
    typer.echo(f"saved {len(result.sweeps)} rung sweeps under {root} ({total:.1f} s of training)")


@llm_app.command("eval")
def llm_eval_cmd(
    run: Annotated[Path, typer.Option(help="Run folder (SFT or RL).")],
    samples: Annotated[int, typer.Option(help="Samples per prompt for the unbiased pass@k (k up to 256).")] = 256,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
    device: DeviceOpt = None,
    as_json: JsonOpt = False,
    progress: ProgressOpt = True,
    threads: ThreadsOpt = 1,
) -> None:
    """pass@k of a run on its evaluation prompts; exact answer-mass metrics for enumerable tasks."""
    from tailmiss.llm.cli_support import evaluate_run

    _set_threads(threads)
    result = evaluate_run(run, samples, device=device, seed=seed, progress=progress and not as_json)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    exact = result.get("exact_pass_at_k", {})
    rows = [[int(k), v, exact.get(k, float("nan"))] for k, v in result["pass_at_k"].items()]
    title = f"{result['run']}: step {result['step']}, {result['prompts']} {result['split']} prompts"
    _print_table(title, ["k", "pass@k (sampled)", "pass@k (exact)"], rows, False)
    if "mu_pos" in result:
        typer.echo(
            f"mu_pos={result['mu_pos']:.4f} retained_mass={result['retained_mass']:.4f} "
            f"dnll_rare={result['dnll_rare']:.4f} off_format={result['off_format']:.2e}"
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
    _out.print(table)


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

    _single_process("figures make")
    if all_ == bool(names):
        raise ValueError("give figure names or --all (not both)")
    selected = list(FIGURES) if all_ else list(names)
    unknown = [n for n in selected if n not in FIGURES]
    if unknown:
        raise ValueError(f"unknown figure {unknown[0]!r}; known: {', '.join(FIGURES)}")
    out = out or (Path("runs/quick/figures") if quick else Path("figures"))
    _check_folder("--out", out)
    _check_folder("--cache", cache)
    ctx = Context(
        quick=quick, cache_dir=cache, device=device, progress=progress, reuse_stale=reuse_stale, log=_log, jobs=jobs
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

    _single_process("repro")
    ctx = Context(
        quick=quick, cache_dir=cache, device=device, progress=progress, reuse_stale=reuse_stale, log=_log, jobs=jobs
    )
    out = out or (Path("runs/quick/paper_repro.md") if quick else Path("paper_repro.md"))
    if out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a folder; give the report's file name")
    _check_folder("--out's folder", out.parent)
    if figures:
        _check_folder("the figure folder", out.parent / "figures")
    _check_folder("--cache", cache)
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
            "TRL's completions/). Columns step, prompt_id, reward [, correct]; see --format."
        ),
    ],
    out: Annotated[Path | None, typer.Option(help="Result folder (default runs/diagnose/<log name>).")] = None,
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
    from tailmiss.diagnose import DEFAULT_GAMMAS, DEFAULT_RHOS, RESULT_FILES, diagnose, write_diagnosis
    from tailmiss.figures.diagnose import save_diagnosis_figure
    from tailmiss.io import check_result_dest, result_dir
    from tailmiss.rollout_log import read_rollouts

    out = out or Path("runs/diagnose") / (log.stem or "log")
    check_result_dest(out, RESULT_FILES, "diagnose result")
    result = diagnose(
        read_rollouts(log, fmt, reward_column),
        threshold=threshold,
        rhos=rho or DEFAULT_RHOS,
        gammas=gamma or DEFAULT_GAMMAS,
        threshold_name="--threshold",
    )
    with result_dir(out, RESULT_FILES, "diagnose result") as tmp:
        write_diagnosis(result, tmp)
        save_diagnosis_figure(result, tmp)
    s = result.summary
    if as_json:
        typer.echo(json.dumps({k: v for k, v in s.items() if k != "per_step"}, indent=2))
    else:
        typer.echo(
            f"{s['groups']} groups over {s['steps']} steps (N = {', '.join(map(str, s['group_sizes']))}); "
            f"mean mu_hat {s['mu_hat_mean']:.3g}; inactive {s['share_inactive']:.1%}; success: {s['success']}"
        )
        rows = [
            [r["rho"], r["risk_at_observed_n"], r["n_observed"], r["n_star"], r["peak"], r["side"]]
            for r in s["tail_miss"]
        ]
        _print_table(
            "Lemma 3.1 over the observed mu_hat (tau = rho * mu_hat)",
            ["rho", "risk at run's N", "run's N", "N*", "peak", "run's N vs N*"],
            rows,
            False,
        )
    typer.echo(f"wrote {out}/ ({', '.join(RESULT_FILES)})", err=as_json)


def main() -> None:
    """Console-script entry point.

    Under ``torchrun`` (``WORLD_SIZE`` > 1) each rank ends with :func:`os._exit` once the command
    has returned and its output is flushed. The C++ teardown of torch.distributed at interpreter
    exit (after ``destroy_process_group``, every result already written) sometimes aborts with
    ``terminate called without an active exception`` (SIGABRT); we saw it in 3 of 119
    two-rank ``sim run`` launches on a loaded 2-core machine with torch 2.13, and torchrun then
    reports the whole job failed. Skipping that teardown keeps the exit code the command chose.
    """
    from tailmiss import _dist

    if _dist.env_world_size() == 1:
        app()
        return
    try:
        app()
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
