"""``tailmiss sim``: simulator presets and sweeps."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tailmiss.cli._common import (
    DeviceOpt,
    ProgressOpt,
    QuickOpt,
    ReuseStaleOpt,
    echo_err,
    on_ranks,
    pick_config,
    print_table,
    sim_app,
)


@sim_app.command("presets")
def presets_cmd() -> None:
    """List the named simulation setups (`sim run`), then the shared-parameter ones (`sim shared`)."""
    from tailmiss.sim import PRESETS
    from tailmiss.sim.shared import SHARED_PRESETS

    every = [(name, c, "") for name, c in PRESETS.items()]
    every += [(name, s.sim, f" x {s.num_prompts} prompts") for name, s in SHARED_PRESETS.items()]
    rows = [
        [name, f"{c.num_runs}{each}", c.steps, c.surrogate, c.optimizer, f"{c.lr:g}", ",".join(map(str, c.group_sizes))]
        for name, c, each in every
    ]
    print_table("Presets", ["name", "runs", "steps", "surrogate", "optimizer", "lr", "group sizes"], rows, False)


@sim_app.command("export-presets")
def export_presets_cmd(
    out: Annotated[Path, typer.Option(help="Folder for the TOML files.")] = Path("experiments"),
) -> None:
    """Write every preset as <out>/<name>.toml (editable starting points for --config)."""
    from tailmiss.sim import PRESETS
    from tailmiss.sim.shared import SHARED_PRESETS

    for name, cfg in {**PRESETS, **SHARED_PRESETS}.items():
        cfg.to_toml(out / f"{name}.toml")
        typer.echo(f"wrote {out / f'{name}.toml'}")


@sim_app.command("run")
def sim_run_cmd(
    preset: Annotated[str | None, typer.Option(help="Named setup (see `tailmiss sim presets`).")] = None,
    config: Annotated[Path | None, typer.Option(help="TOML file with a [sim] table instead of a preset.")] = None,
    quick: QuickOpt = False,
    device: DeviceOpt = None,
    out: Annotated[Path | None, typer.Option(help="Result folder (default runs/sim/<name>).")] = None,
    progress: ProgressOpt = True,
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
    from tailmiss.options import RunOptions
    from tailmiss.sim import SimConfig, quick_name
    from tailmiss.sim import preset as get_preset
    from tailmiss.sim.runner import run_sim

    cfg = pick_config(preset, config, quick, get_preset, SimConfig.from_toml, quick_name)
    if dry_run:
        _sim_dry_run(cfg, device)
        return
    result = on_ranks(
        device,
        lambda dev: run_sim(
            cfg,
            out or Path("runs/sim") / cfg.name,
            RunOptions(device=dev, progress=progress, reuse_stale=reuse_stale, log=echo_err),
            rerun=rerun,
            checkpoint_every=checkpoint_every,
        ),
    )
    if result is None:  # a rank other than 0 under torchrun
        return
    path = out or Path("runs/sim") / cfg.name
    final = result.seed_mean(result.final)
    rows = [
        [int(r.group_size), float(r.gamma), float(r.q_pos), float(r.retained_mass), float(r.entropy)]
        for r in final.itertuples()
    ]
    print_table(
        f"{cfg.name}: step {cfg.steps}, mean of {len(cfg.seeds)} seed(s)",
        ["N", "gamma", "Q_pos", "M_ret", "entropy"],
        rows,
        False,
    )
    typer.echo(f"result in {path} ({result.meta['elapsed_s']} s on {result.meta['device']})")


def _sim_dry_run(cfg, device) -> None:
    from tailmiss._device import resolve_device
    from tailmiss.sim.memory import device_memory, memory_estimate

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


@sim_app.command("shared")
def sim_shared_cmd(
    preset: Annotated[
        str | None, typer.Option(help="Named shared-parameter setup: shared-conflict (or its -quick version).")
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="TOML file with a [sim] and a [shared] table instead of a preset.")
    ] = None,
    quick: QuickOpt = False,
    device: DeviceOpt = None,
    out: Annotated[Path | None, typer.Option(help="Result folder (default runs/sim/<name>).")] = None,
    progress: ProgressOpt = True,
    reuse_stale: ReuseStaleOpt = False,
    rerun: Annotated[bool, typer.Option("--rerun", help="Simulate even if --out holds this result.")] = False,
    k: Annotated[int, typer.Option(min=1, help="The k of the printed pass@k (exact, from each prompt's Q_pos).")] = 256,
) -> None:
    """Run a sweep of the shared-parameter policy (prompts that share a log-linear policy), save it, and print each
    prompt type's final metrics (mean over its prompts, then over seeds).

    With one-hot prompt features and no bias the sweep is the table simulator's, one run per prompt; with a bias
    or random features an update on one prompt moves the others.
    """
    from tailmiss.options import RunOptions
    from tailmiss.sim.shared import SHARED_PRESETS, SharedSimConfig, run_shared, shared_preset

    def quick_of(name: str) -> str:
        return name if name.endswith("-quick") or f"{name}-quick" not in SHARED_PRESETS else f"{name}-quick"

    cfg = pick_config(preset, config, quick, shared_preset, SharedSimConfig.from_toml, quick_of)
    path = out or Path("runs/sim") / cfg.name
    options = RunOptions(device=device, progress=progress, reuse_stale=reuse_stale, log=echo_err)
    result = run_shared(cfg, path, options, rerun=rerun)
    final = result.by_type(ks=(k,), frame=result.final)
    start = result.by_type(ks=(k,), frame=result.history[result.history["step"] == 0]).groupby("prompt_type").mean()
    columns = ["group_size", "gamma", "prompt_type", "q_pos", "retained_mass", "entropy", f"pass@{k}"]
    rows = [
        [int(n), float(g), kind, *(round(float(v), 4) for v in (start.loc[kind, "q_pos"], q, m, h, pk))]
        for n, g, kind, q, m, h, pk in final[columns].itertuples(index=False)
    ]
    print_table(
        f"{cfg.name}: step {cfg.sim.steps}, {cfg.num_prompts} prompts ({cfg.minority_prompts} minority), "
        f"mean of {len(cfg.sim.seeds)} seed(s)",
        ["N", "gamma", "prompts", "Q_pos(0)", "Q_pos", "M_ret", "entropy", f"pass@{k}"],
        rows,
        False,
    )
    typer.echo(f"result in {path} ({result.meta['elapsed_s']} s on {result.meta['device']})")
