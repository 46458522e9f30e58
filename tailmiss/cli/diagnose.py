"""``tailmiss diagnose``: a real run's per-rollout log read against Lemma 3.1 (:mod:`tailmiss.diagnose`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tailmiss.cli._common import JsonOpt, app, echo_err, print_table


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
        summary_json,
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
    if as_json:
        typer.echo(json.dumps(summary_json(result.summary), indent=2))
    else:
        _print_summary(result.summary)
    typer.echo(f"wrote {out}/ ({', '.join(RESULT_FILES)})", err=as_json)


def _print_summary(s) -> None:
    """The run in one line, then Lemma 3.1's table per rho, with a note where group sizes differ or none solved."""
    from tailmiss.diagnose import side_text

    sizes = ", ".join(map(str, s.group_sizes))
    typer.echo(
        f"{s.groups} groups over {s.steps} steps (N = {sizes}); mean mu_hat {s.mu_hat_mean:.3g}; "
        f"inactive {s.share_inactive:.1%}; success: {s.success}"
    )
    rows = [[r.rho, r.risk_at_observed_n, sizes, r.n_star, r.peak, side_text(r)] for r in s.tail_miss]
    print_table(
        "Lemma 3.1 over the observed mu_hat (tau = rho * mu_hat)",
        ["rho", "risk at run's N", "run's N", "N*", "peak", "run's N vs N*"],
        [["-" if v is None else v for v in row] for row in rows],
        False,
    )
    if len(s.group_sizes) > 1:
        typer.echo(
            "Groups differ in size: the risk takes each group at its own N; N* is the peak of their mixture "
            "at one common N."
        )
    if any(r.risk_at_observed_n is None for r in s.tail_miss):
        typer.echo("-: no group solved its prompt (X > 0), so no correct mass to take a rare share of.")
