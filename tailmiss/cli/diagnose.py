"""``tailmiss diagnose``: a real run's per-rollout log read against Lemma 3.1, a verdict and advice for its budget."""

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
    advice_rho: Annotated[float, typer.Option(help="Rare share of the verdict and the advice (default 0.05).")] = 0.05,
    budget: Annotated[int | None, typer.Option(help="Rollouts per step to advise on (default the run's own).")] = None,
    run_gamma: Annotated[
        float | None,
        typer.Option(help="The run's own focal gamma (default: from the log's focal_weight column, else 0: GRPO)."),
    ] = None,
    simulate: Annotated[
        bool,
        typer.Option(
            "--simulate",
            metavar="",
            help="Check the advice with the categorical simulator started from the fitted success rates "
            "(CPU minutes; writes diagnose_simcheck.csv and a figure panel).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Diagnose a real run: is it in the tail-miss regime, and how should it spend its rollouts per step?"""
    # numpy / pandas only (no torch): a bad log or setting is refused in about a second
    from tailmiss.diagnose import diagnose

    rhos, gammas = _checked_grids(rho, gamma, advice_rho, budget, run_gamma)  # every setting before the log is read
    out = _checked_out(out, log)
    rollouts = _read_log(log, fmt, reward_column)
    result = diagnose(
        rollouts,
        threshold=threshold,
        rhos=rhos,
        gammas=gammas,
        threshold_name="--threshold",
        advice_rho=advice_rho,
        budget=budget,
        run_gamma=run_gamma,
    )
    check = _simulate(result, as_json) if simulate and result.advice is not None else None
    _write_result(result, check, out)
    _echo_result(result, check, out, as_json)


def _checked_grids(rho, gamma, advice_rho: float, budget, run_gamma):
    """The rho and gamma grids (defaults for none), with the advice's settings checked too."""
    from tailmiss.diagnose import DEFAULT_GAMMAS, DEFAULT_RHOS, check_advice_settings
    from tailmiss.diagnose.analysis import check_grids

    rhos, gammas = check_grids(rho or DEFAULT_RHOS, gamma or DEFAULT_GAMMAS)
    check_advice_settings(advice_rho, budget, run_gamma)
    return rhos, gammas


def _checked_out(out: Path | None, log: Path) -> Path:
    """The result folder (default from the log's path), refused if it cannot be written or holds another log's."""
    from tailmiss.diagnose import RESULT_FILES, check_same_log, default_folder
    from tailmiss.io import check_result_dest

    out = out or default_folder(log)
    check_result_dest(out, RESULT_FILES, "diagnose result")
    check_same_log(out, log)
    return out


def _read_log(log: Path, fmt: str, reward_column: str | None):
    """The log read, its cut-off lines and repeated rows told as one warning line each on stderr."""
    import warnings

    from tailmiss.diagnose import CutLineWarning, RepeatedRowsWarning, read_rollouts

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CutLineWarning)  # the log carries them: one line each below
        warnings.simplefilter("ignore", RepeatedRowsWarning)
        rollouts = read_rollouts(log, fmt, reward_column)
    for note in rollouts.warnings:
        echo_err(f"Warning: {note}")
    return rollouts


def _write_result(result, check, out: Path) -> None:
    """The diagnosis, the simulated check (if any) and the figure written to ``out`` as one result."""
    from tailmiss.diagnose import RESULT_FILES, write_diagnosis
    from tailmiss.io import result_dir
    from tailmiss.studies.diagnose_figure import save_diagnosis_figure  # matplotlib: once there is something to draw

    with result_dir(out, RESULT_FILES, "diagnose result") as tmp:
        write_diagnosis(result, tmp)
        if check is not None:
            check.to_csv(tmp / "diagnose_simcheck.csv", index=False)
        save_diagnosis_figure(result, tmp, check)


def _echo_result(result, check, out: Path, as_json: bool) -> None:
    """The summary as JSON or as text on stdout, then the files written (on stderr with --json)."""
    from tailmiss.diagnose import RESULT_FILES, summary_json

    if as_json:
        summary = summary_json(result.summary)
        if check is not None:
            summary["simulated_check"] = json.loads(_check_table(check).to_json(orient="records"))
        typer.echo(json.dumps(summary, indent=2))
    else:
        _print_summary(result.summary, check)
    written = ", ".join(name for name in RESULT_FILES if (out / name).exists())
    typer.echo(f"wrote {out}/ ({written})", err=as_json)


SIMULATED_ROLLOUTS_CAP = 4096
"""Rollouts per prompt simulated at most."""
SIMULATED_MIN_UPDATES = 64
"""Updates of each simulated prompt at the run's N at least (a short log would otherwise show one or two)."""


def _simulate(result, quiet: bool):
    """The advice's current and advised spends, and GRPO and γ = 0.5 at the current N, in the categorical simulator.

    Each simulated prompt gets the run's own rollouts per prompt (its log's rollouts over its distinct prompts), at
    least :data:`SIMULATED_MIN_UPDATES` updates' worth at the run's N and at most :data:`SIMULATED_ROLLOUTS_CAP`.
    """
    from tailmiss.diagnose.simcheck import simulate_spends

    advice = result.advice
    cur, best = advice.current, advice.best
    pairs = [(cur.group_size, cur.gamma), (best.group_size, best.gamma), (cur.group_size, 0.0), (cur.group_size, 0.5)]
    spends = list(dict.fromkeys(pairs))
    groups = result.groups
    own = int(groups["n"].sum() / max(1, groups["prompt_id"].nunique()))
    per_prompt = min(max(own, SIMULATED_MIN_UPDATES * cur.group_size), SIMULATED_ROLLOUTS_CAP)
    per_prompt = max(per_prompt, max(n for n, _ in spends))
    if not quiet:
        echo_err(
            f"simulating {len(spends)} spends x 8 prompts x 3 seeds, {per_prompt} rollouts per prompt (the run's own: "
            f"{own}; at least {SIMULATED_MIN_UPDATES} updates at N = {cur.group_size}, at most "
            f"{SIMULATED_ROLLOUTS_CAP} rollouts) ..."
        )
    return simulate_spends(advice.fit.quantiles(8), advice.rho, spends, per_prompt, progress=not quiet)


def _check_table(check):
    from tailmiss.diagnose.simcheck import summarize_spends

    return summarize_spends(check)


def _print_summary(s, check=None) -> None:
    """The run in one line, Lemma 3.1's table per rho, the verdicts, the budget's spends and one sentence of advice."""
    from tailmiss.diagnose import advice_text, side_text, verdict_text

    sizes = ", ".join(map(str, s.group_sizes))
    dropped = "; ".join(f"{count} {why}" for why, count in s.dropped)
    typer.echo(
        f"{s.groups} groups over {s.steps} steps (N = {sizes}); mean mu_hat {s.mu_hat_mean:.3g}; "
        f"inactive {s.share_inactive:.1%}; success: {s.success}"
        + (f"; rows dropped: {dropped}" if dropped else "")
        + f"; run's gamma {s.run_gamma:g} ({s.run_gamma_source})"
    )
    if s.short_groups:
        typer.echo(f"{s.short_groups} groups are short of their step's N by the dropped rows: taken at their own size.")
    rows = [[r.rho, r.risk_at_observed_n, sizes, r.n_star, r.peak, side_text(r)] for r in s.tail_miss]
    print_table(
        "Lemma 3.1 over the observed mu_hat (tau = rho * mu_hat)",
        ["rho", "risk at run's N", "run's N", "N* (one common N)", "peak at N*", "run's N vs N*"],
        [["-" if v is None else v for v in row] for row in rows],
        False,
    )
    if len(s.group_sizes) > 1:
        typer.echo(
            "Groups differ in size: 'risk at run's N' takes each group at its own N, while N* and its peak are "
            "those of the groups' mixture at one common N, so the peak can lie below the risk at the run's sizes."
        )
    if any(r.risk_at_observed_n is None for r in s.tail_miss):
        typer.echo("-: no group solved its prompt (X > 0), so no correct mass to take a rare share of.")
    from tailmiss.diagnose.summary import VERDICT_RULE

    typer.echo(f"Verdict ({VERDICT_RULE}):")
    for v in s.verdicts:
        typer.echo(f"  {verdict_text(v)} (steps {v.first_step}-{v.last_step})")
    if s.advice is None:
        typer.echo(
            "No advice: it needs a group that solved its prompt and groups of two or more rollouts (the spread of "
            "success rates across prompts, which every other group size depends on, is not seen in groups of one)."
        )
    else:
        _print_advice(s.advice)
        if check is not None:
            _print_check(check)
        typer.echo(f"Advice: {advice_text(s.advice)}")
        if s.advice.caveat:
            typer.echo(f"Caveat: {s.advice.caveat}.")


def _print_advice(a) -> None:
    from tailmiss.diagnose import focal_text

    others = [g for g in sorted({sp.gamma for sp in a.spends}) if g > 0]
    rows = []
    for sp in (sp for sp in a.spends if sp.gamma == a.current.gamma):
        marks = ["current"] if sp.current else []
        if a.best.group_size == sp.group_size:
            marks.append("advised" + (f" at gamma {a.best.gamma:g}" if a.best.gamma != sp.gamma else ""))
        o = sp.outcome
        rows.append(
            [str(sp.group_size), str(sp.prompts)]
            + [f"{v:.3f}" for v in (o.active, o.risk, o.share_at_risk, o.miss_share)]
            + [f"{sp.missed_per_step:.3g}", f"{sp.signal_per_step:.3g}", f"{sp.drift_per_signal:.3f}"]
            + [focal_text(a, sp.group_size, g) for g in others]
            + [", ".join(marks)]
        )
    fit = a.fit
    typer.echo(
        f"Spending {a.budget} rollouts per step at rho = {a.rho:g} (predicted from the prompts' success rates "
        f"Beta({fit.a:.3g}, {fit.b:.3g}), mean {fit.mean:.3g}, fitted to the {a.fitted_on}'s {fit.groups} groups):"
    )
    header = ["N", "prompts", "active", "risk", "at risk", "miss|act", "missed", "signal", "drift/sig"]
    _plain_table(header + [f"g{g:g} drift/signal" for g in others] + [""], rows)
    typer.echo(
        "  per group: active = mixed rewards; risk = Lemma 3.1 (active, rare set missed); at risk = share of solved "
        "groups at risk; miss|act = risk / active. Per step: missed = prompts x risk; signal = active groups (focal-"
        "weighted); drift/sig = drift away from missed rare sets (X/N per missed group, F-GRPO Prop. 3.2 and Cor. H.2) "
        "per unit of signal. g<gamma>: the focal weight's change of the drift and of the signal, against gamma 0."
    )


def _plain_table(header: list[str], rows: list[list[str]]) -> None:
    """Right-aligned columns, two spaces apart, never wrapped (rich wraps at 80 columns in a pipe)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        typer.echo("  " + "  ".join(str(v).rjust(w) for v, w in zip(row, widths)).rstrip())


def _print_check(check) -> None:
    table = _check_table(check)
    typer.echo(
        "Simulated check (categorical policies started from the fitted success rates, equal rollouts per prompt):"
    )
    rows = [[f"{v:.3g}" if isinstance(v, float) else str(v) for v in row] for row in table.to_numpy().tolist()]
    _plain_table(list(table.columns), rows)
