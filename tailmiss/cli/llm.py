"""``tailmiss llm``: SFT, RL, sweeps, ladders and evaluation of the small transformer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tailmiss.cli._common import (
    DeviceOpt,
    ExecutorOpt,
    JobsOpt,
    JsonOpt,
    ProgressOpt,
    QuickOpt,
    RayAddressOpt,
    ReuseStaleOpt,
    StackOpt,
    ThreadsOpt,
    check_folder,
    executor_settings,
    llm_app,
    on_ranks,
    pick_config,
    print_table,
    set_threads,
)

PresetOpt = Annotated[str | None, typer.Option(help="Named setup (see `tailmiss llm presets`).")]
ConfigOpt = Annotated[Path | None, typer.Option(help="TOML file with an [sft] or [rl] table instead of a preset.")]
RunOutOpt = Annotated[Path | None, typer.Option(help="Run folder (default runs/llm/<name>).")]
ResumeOpt = Annotated[bool, typer.Option(help="Continue the run in --out from its last checkpoint.")]


@llm_app.command("presets")
def llm_presets_cmd() -> None:
    """List the named SFT and RL setups."""
    from tailmiss.experiments.presets import LLM_PRESETS
    from tailmiss.llm import SFTConfig

    rows = []
    for name, c in LLM_PRESETS.items():
        if isinstance(c, SFTConfig):
            rows.append([name, "sft", c.task.name, c.steps, f"batch {c.batch_size}", f"{c.optim.lr:g}"])
        else:
            what = f"{c.method} γ={c.gamma:g} N={c.group_size} B={c.prompts_per_step}"
            rows.append([name, "rl", "(from --init)", c.steps, what, f"{c.optim.lr:g}"])
    print_table("LLM presets", ["name", "kind", "task", "steps", "setup", "lr"], rows, False)
    from tailmiss.experiments.presets import LLM_SWEEPS

    rows = [
        [name, s.sft.task.name, len(s.variants), len(s.seeds), s.rl.steps, ", ".join(v.label for v in s.variants)]
        for name, s in LLM_SWEEPS.items()
    ]
    print_table("LLM sweeps", ["name", "task", "variants", "seeds", "steps", "runs"], rows, False)
    from tailmiss.experiments.presets import LADDERS

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
    print_table(
        "Ladders (`llm sweep --preset NAME`)", ["name", "task", "rungs", "N", "γ", "seeds", "budget"], rows, False
    )


@llm_app.command("export-presets")
def llm_export_presets_cmd(
    out: Annotated[Path, typer.Option(help="Folder for the TOML files.")] = Path("experiments"),
) -> None:
    """Write every LLM preset as <out>/<name>.toml (editable starting points for --config)."""
    from tailmiss.experiments.presets import LLM_PRESETS, LLM_SWEEPS

    for name, cfg in {**LLM_PRESETS, **LLM_SWEEPS}.items():
        cfg.to_toml(out / f"{name}.toml")
        typer.echo(f"wrote {out / f'{name}.toml'}")


def resolve_llm_config(preset, config, quick, kind):
    """``--preset`` / ``--config`` of ``llm sft`` (``kind`` SFTConfig) or ``llm train`` (RLConfig)."""
    from tailmiss.experiments.presets import llm_preset, quick_name
    from tailmiss.llm import SFTConfig
    from tailmiss.llm.config import load_config

    cfg = pick_config(preset, config, quick, llm_preset, load_config, quick_name)
    if not isinstance(cfg, kind):
        wanted = "an SFT ([sft])" if kind is SFTConfig else "an RL ([rl])"
        raise ValueError(f"{preset or config} is not {wanted} config")
    return cfg


def _train_one(chosen: tuple, kind: type, out: Path | None, device, threads: int, train, columns: list[str]) -> None:
    """``llm sft`` / ``llm train``: the chosen config, ``train(cfg, out, device)`` on this rank, rank 0's summary."""
    import csv

    from tailmiss import _dist

    cfg = resolve_llm_config(*chosen, kind)
    set_threads(threads)
    out = out or Path("runs/llm") / cfg.name
    path = on_ranks(device, lambda dev: train(cfg, out, dev))
    if _dist.env_world_size() > 1 and _dist.env_rank() != 0:
        return  # rank 0 alone reports
    with open(path / "history.csv", newline="") as fh:  # the csv module: pandas would double a run's start-up
        last = list(csv.DictReader(fh))[-1]
    shown = [f"{c}={float(last[c]):.4g}" for c in columns if last.get(c) not in (None, "", "nan")]
    typer.echo(f"saved {path} (step {int(float(last['step']))}{': ' + ', '.join(shown) if shown else ''})")


@llm_app.command("sft")
def llm_sft_cmd(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    quick: QuickOpt = False,
    device: DeviceOpt = None,
    out: RunOutOpt = None,
    resume: ResumeOpt = False,
    progress: ProgressOpt = True,
    threads: ThreadsOpt = 1,
) -> None:
    """Train a model from scratch on the task's SFT data; write config, history, meta and a checkpoint."""
    from tailmiss.llm import SFTConfig, train_sft

    def train(cfg, out, dev):
        return train_sft(cfg, out, device=dev, resume=resume, progress=progress)

    _train_one((preset, config, quick), SFTConfig, out, device, threads, train, ["mu_pos", "off_format", "pass_at_1"])


@llm_app.command("train")
def llm_train_cmd(
    init: Annotated[Path, typer.Option(help="SFT run folder to start from.")],
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    quick: QuickOpt = False,
    device: DeviceOpt = None,
    out: RunOutOpt = None,
    resume: ResumeOpt = False,
    progress: ProgressOpt = True,
    threads: ThreadsOpt = 1,
) -> None:
    """Group-relative RL (GRPO / DAPO / CISPO / Dr. GRPO, focal weight γ) from an SFT run."""
    from tailmiss.llm import RLConfig, train_rl

    def train(cfg, out, dev):
        return train_rl(cfg, init, out, device=dev, resume=resume, progress=progress)

    columns = ["mu_pos", "retained_mass", "dnll_rare", "pass_at_1"]
    _train_one((preset, config, quick), RLConfig, out, device, threads, train, columns)


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
    stack: StackOpt = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Run (or reuse) every run of a sweep and write its tidy result to <root>/<name>/.

    The runs are trained side by side on --jobs processes of --threads threads
    each (runs of one shape as stacks of up to --stack runs), or as Ray tasks
    with --executor ray. Under ``torchrun --nproc_per_node=K`` they are shared among the K
    processes instead (each run on one of them) and rank 0 writes the result.
    """
    from tailmiss.experiments.ladder import Ladder
    from tailmiss.experiments.presets import quick_name, workload
    from tailmiss.experiments.sweep import load_sweep, run_sweep
    from tailmiss.options import RunOptions

    where = executor_settings(executor, ray_address, jobs)
    sweep = pick_config(preset, config, quick, workload, load_sweep, quick_name)
    set_threads(threads)
    options = RunOptions(
        jobs=jobs, threads=threads, progress=progress, log=typer.echo, reuse_stale=reuse_stale, stack=stack, **where
    )
    if isinstance(sweep, Ladder):
        _run_ladder_cmd(sweep, root, device, options)
        return
    check_folder("--root", root)
    result = on_ranks(device, lambda dev: run_sweep(sweep, root, options.replace(device=dev)))
    if result is None:  # a rank other than 0 under torchrun
        return
    cols = [c for c in ("mu_pos", "retained_mass", "dnll_rare", "exact_pass_at_256", "pass_at_1", "pass_at_256")]
    summary = result.seed_mean()
    cols = [c for c in cols if c in summary]
    rows = [[r["label"], int(r["rollouts"]), *(r[c] for c in cols)] for _, r in summary.iterrows()]
    print_table(f"{sweep.name} (mean over {len(sweep.seeds)} seed(s))", ["run", "rollouts", *cols], rows, False)
    typer.echo(f"saved {root / sweep.name} ({result.meta['total_elapsed_s']} s of training)")


def _run_ladder_cmd(ladder, root: Path, device, options) -> None:
    """``llm sweep`` on a ladder preset: every rung's sweep, then the N-shape of M_ret per rung."""
    from tailmiss.experiments.ladder import run_ladder
    from tailmiss.studies.ladder.claims import shape_table

    check_folder("--root", root)
    result = on_ranks(device, lambda dev: run_ladder(ladder, root, options.replace(device=dev)))
    if result is None:  # a rank other than 0 under torchrun
        return
    shape = shape_table(result.final)
    rows = [
        [
            r["rung"],
            r["set"],
            f"{r['gamma']:g}",
            " ".join(f"{m:.2f}" for m in r["means"]),
            f"{r['spearman']:+.2f}" if r["spearman"] == r["spearman"] else "flat",
            r["worst_n"],
            "yes" if r["recovers"] else "no",
        ]
        for _, r in shape.iterrows()
    ]
    ns = ", ".join(map(str, ladder.group_sizes))
    title = f"{ladder.name}: M_ret by N = {ns} (mean over {len(ladder.seeds)} seed(s))"
    print_table(title, ["rung", "set", "γ", "M_ret", "Spearman", "worst N", "recovers"], rows, False)
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
    from tailmiss.llm.checkpoint import evaluate_run

    set_threads(threads)
    result = evaluate_run(run, samples, device=device, seed=seed, progress=progress and not as_json)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    exact = result.get("exact_pass_at_k", {})
    rows = [[int(k), v, exact.get(k, float("nan"))] for k, v in result["pass_at_k"].items()]
    title = f"{result['run']}: step {result['step']}, {result['prompts']} {result['split']} prompts"
    print_table(title, ["k", "pass@k (sampled)", "pass@k (exact)"], rows, False)
    if "mu_pos" in result:
        typer.echo(
            f"mu_pos={result['mu_pos']:.4f} retained_mass={result['retained_mass']:.4f} "
            f"dnll_rare={result['dnll_rare']:.4f} off_format={result['off_format']:.2e}"
        )
