"""``tailmiss diagnose``: a real run's per-rollout log read against Lemma 3.1 (:mod:`tailmiss.diagnose`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tailmiss.cli._common import JsonOpt, app, print_table


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
        print_table(
            "Lemma 3.1 over the observed mu_hat (tau = rho * mu_hat)",
            ["rho", "risk at run's N", "run's N", "N*", "peak", "run's N vs N*"],
            rows,
            False,
        )
    typer.echo(f"wrote {out}/ ({', '.join(RESULT_FILES)})", err=as_json)
