"""The report's small-transformer sections (F-GRPO Tables 1, 2 and 4 in miniature), as text.

Numbers and verdicts come from :mod:`tailmiss.results.claims.llm` over the
cached sweeps of :mod:`tailmiss.results`; this module only writes them (the
bridge's section is :mod:`tailmiss.report.bridge`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tailmiss.report import ledger
from tailmiss.report.bridge import bridge_section
from tailmiss.report.text import table
from tailmiss.results import Context, bridge_data, sweep_result
from tailmiss.results.claims.llm import (
    METRICS,
    Comparison,
    NsweepClaims,
    ObjectivesClaims,
    Stat,
    dapo_claims,
    maze_claims,
    nsweep_claims,
    objectives_claims,
    run_row,
    seed_means,
)

__all__ = [
    "OBJECTIVES_HEADING",
    "MAZE_HEADING",
    "DEFERRED_WHY",
    "llm_section",
    "objectives_section",
    "maze_section",
    "verdict_word",
]


def llm_section(ctx: Context, deferred: tuple[str, ...] = ()) -> str:
    """Markdown for the small-transformer sweeps (F-GRPO Tables 1, 2, 4 in miniature) and the bridge.

    ``deferred`` may hold ``"objectives"`` and ``"maze"``: those parts then say that the first look leaves them out
    (their sweeps are neither run nor read).
    """
    from tailmiss.report.text import deferred as deferred_text
    from tailmiss.results.llm import SWEEPS

    nsweep = sweep_result("nsweep", ctx)
    others = {f: sweep_result(f, ctx) for f in ("objectives", "maze") if f not in deferred}
    sft = nsweep.final[nsweep.final["method"] == "sft"].iloc[0]
    mode = "quick sweeps (`--quick`)" if ctx.quick else "full sweeps"
    parts = ["## Small transformer (F-GRPO Tables 1, 2 and 4 in miniature)\n"]
    parts.append(
        f"A {nsweep.meta['sft']['params']:,}-parameter transformer trained from scratch (`{nsweep.config.sft.name}`) "
        f"on task (a), the multi-solution digit task, then group-relative RL from it; {mode}. Held-out SFT "
        f"μ_pos {sft['mu_pos']:.3f}, off-format mass {sft['off_format']:.1e}. Task (a) metrics are exact (every "
        "well-formed answer scored on the same held-out prompts for every run: the model's forward pass, each "
        "next-token law normalised and the answer's log-probability summed in float64): pass@k = mean "
        "1 − (1 − μ_pos(x))^k; *rare hit@256* = mean 1 − (1 − τ(x))^256, where τ(x) is the current mass of the "
        "prompt's rare-correct set (the correct answers of smallest SFT mass holding ≤ 10% of its SFT μ_pos), "
        "the analog of what pass@256 measures on math benchmarks. Entries are mean ± sd over seeds; a difference "
        "inside the seed spread is called a tie. Reproduce with `tailmiss llm sweep --preset NAME` "
        "(and `tailmiss figures make llm-nsweep llm-objectives maze bridge`).\n"
    )
    header, rows = nsweep_table(nsweep)
    parts.append(f"### Group-size sweep `{nsweep.config.name}` (Table 2 analog; figure `llm-nsweep.png`)\n")
    parts.append(table(header, rows) + "\n")
    nclaims = nsweep_claims(nsweep)
    _record_nsweep(nclaims)
    parts.append(table(["Table 2 claim", "ours"], nsweep_rows(nclaims)) + "\n")
    for family, heading, write in (
        ("objectives", f"{OBJECTIVES_HEADING} (Table 1 analog)", objectives_section),
        ("maze", f"{MAZE_HEADING} (Table 4 / Fig. 6 analog)", maze_section),
    ):
        if family in others:
            parts.append(write(others[family]))
        else:
            parts.append(deferred_text(heading, family, f"`{SWEEPS[family][0]}`", DEFERRED_WHY[family]))
    bridge = bridge_data(ctx, nsweep)
    ledger.record(
        "fig2-zones",
        f"the simulator started from each prompt's SFT distribution against the transformer: zones agree at "
        f"{bridge.verdict.zone_agreement:.0%} of N, M_ret rank ρ {bridge.verdict.spearman_retained_mass:+.2f}; "
        f"regimes agree: {'yes' if bridge.agrees else 'no'}",
        not bridge.agrees,
    )
    parts.append(bridge_section(bridge))
    compute = [compute_row(r) for r in (nsweep, *others.values())]
    parts.append(
        "### Compute\n\n" + table(["sweep", "RL runs", "rollouts", "tokens", "training time", "device"], compute) + "\n"
    )
    return "\n".join(parts)


DEFERRED_WHY = {
    "objectives": "The first look shows the transformer once, through the group-size sweep above; this sweep adds "
    "DAPO, CISPO and DAPO with dynamic sampling, each with and without the focal weight, at N = 8.",
    "maze": "At quick size (one seed, a few held-out mazes, a 500-step SFT model) its differences sit within the "
    "sampling noise: one maze moves pass@256 by several points.",
}
"""Why the first look (``tailmiss repro --quick``) leaves the objective sweep and the maze out."""

MAZE_HEADING = "### Maze"


def maze_section(maze) -> str:
    """Markdown for the maze sweep (F-GRPO Table 4 / Fig. 6 analog): sampled pass@k by N, GRPO against F-GRPO."""
    header, rows = maze_table(maze)
    for c in maze_claims(maze):
        key = {1: "t4-pass1", 256: "t4-pass256"}.get(c.k)
        if key is not None:
            deltas = ", ".join(f"{n}: {100 * d:+.1f}" for n, d in c.deltas)
            seeds = "one seed" if c.seeds < 2 else f"{c.seeds} seeds"
            ledger.record(key, f"Δpass@{c.k} (points) by N {deltas} ({seeds})", c.verdict)
    cfg = maze.config
    return (
        f"{MAZE_HEADING} `{cfg.name}` (Table 4 / Fig. 6 analog; figure `maze.png`)\n\n"
        f"{cfg.sft.task.size}×{cfg.sft.task.size} mazes, {maze.meta['sft']['params']:,} parameters, "
        f"{cfg.rl.steps} RL steps of {cfg.rl.prompts_per_step} prompts (the paper: 17×17, about 3M, "
        "20K steps of 256; the paper-scale sweep `maze-nsweep` is a GPU job). Sampled unbiased pass@k, "
        f"{cfg.rl.eval_samples} samples on {cfg.rl.eval_prompts} held-out mazes, in %.\n\n"
        + table(header, rows)
        + "\n\n"
        + table(["Table 4 claim", "ours"], maze_rows(maze))
        + "\n"
    )


OBJECTIVES_HEADING = "### Objectives"


def objectives_section(objectives) -> str:
    """Markdown for the objective sweep (F-GRPO Table 1 analog), DAPO with and without dynamic sampling included."""
    header, rows = objectives_table(objectives)
    oclaims = objectives_claims(objectives)
    _record_objectives(objectives, oclaims)
    claims = objectives_rows(oclaims)
    said = {row[0] for row in claims}
    claims += [row for row in _dapo_rows(objectives) if row[0] not in said]
    return (
        f"{OBJECTIVES_HEADING} `{objectives.config.name}` (Table 1 analog; figure `llm-objectives.png`)\n\n"
        + table(header, rows)
        + "\n\n"
        + table(["Table 1 claim", "ours"], claims)
        + "\n"
    )


def _dapo_rows(objectives) -> list[list[str]]:
    """Does each DAPO variant differ from GRPO? Run by run (same seed and γ), then paired by seed at each γ."""
    rows = []
    for c in dapo_claims(objectives):
        seeds = max((d.seeds for _, d in c.diffs), default=0)
        resolved = ", ".join(
            f"γ = {g:g} {_METRIC_NAMES.get(d.metric, d.metric)} {d.mean:+.4f} ({d.outcome})" for g, d in c.resolved
        )
        if c.differ == 0:
            word = "**no**: every run equals its GRPO twin to the last digit"
        elif c.differs is None:
            word = "cannot tell (one seed)"
        elif c.differs:
            word = f"yes: beyond the seed spread on {resolved}"
        else:
            word = "**no**: every difference is within the seed spread"
        rows.append(
            [
                f"{c.method.upper()} differs from GRPO",
                f"{c.name}: {c.differ} of {c.runs} runs differ from their GRPO twin (same seed and γ); largest |Δ|: "
                f"pass@1 {c.gap['exact_pass_at_1']:.4f}, rare hit@256 {c.gap['rare_pass_at_256']:.3f}, M_ret "
                f"{c.gap['retained_mass']:.3f}. Rule: the variant − GRPO difference of each metric at each γ, paired "
                f"by seed over {seeds} seed(s), two-sided t-test at α = 0.05: {word}",
            ]
        )
    return rows


_METRIC_NAMES = {
    "exact_pass_at_1": "pass@1",
    "exact_pass_at_256": "pass@256",
    "rare_pass_at_256": "rare hit@256",
    "retained_mass": "M_ret",
    "dnll_rare": "ΔNLL_rare",
}


def _record_nsweep(c: NsweepClaims) -> None:
    """F-GRPO Table 2's verdicts on the group-size sweep, for the claims ledger."""
    ledger.record("t2-pass1", "pass@1 by N " + ", ".join(f"{n}: {v:.3f}" for n, v in zip(c.group_sizes, c.pass1)),
                  "partly" if c.pass1_rises is None else c.pass1_rises)  # fmt: skip
    ledger.record("t2-dip", "rare hit@256 by N " + ", ".join(f"{n}: {v:.3f}" for n, v in zip(c.group_sizes, c.rare))
                  + f" (exact pass@256 {c.pass256_range[0]:.3f}–{c.pass256_range[1]:.3f})",
                  "partly" if c.dip is None else c.dip)  # fmt: skip
    if c.focal_reach is not None:
        f = c.focal_reach
        reach = None if f.vacuous else f.comparison.verdict is not False
        ledger.record("t2-reach", f"rare hit@256 {f.focal.mean:.3f} vs {f.grpo32.mean:.3f}"
                      + (" (N = 32 is GRPO's worst: vacuous)" if f.vacuous else ""), reach)  # fmt: skip
    else:
        ledger.record("t2-reach", "the sweep has no F-GRPO N = 8 or no GRPO N = 32", None)
    if c.dnll is not None:
        d = c.dnll
        ledger.record("t2-dnll", f"N=2 {d.n2.mean:.2f}, N=32 {d.n32.mean:.2f}, N=8 {d.n8.mean:.2f}", d.ordered)
    else:
        ledger.record("t2-dnll", "the sweep lacks GRPO at N = 2, 8 or 32", None)


def _record_objectives(objectives, c: ObjectivesClaims) -> None:
    """F-GRPO Table 1's verdicts on the objective sweep, for the claims ledger."""
    covers = [p.covers.verdict for p in c.methods]
    lifts = ", ".join(f"{p.method.upper()} {p.base_rare.mean:.3f} → {p.focal_rare.mean:.3f}" for p in c.methods)
    ledger.record("t1-pass256", f"rare hit@256, γ = 0 → {c.gamma:g}: {lifts}",
                  True if all(v is True for v in covers) else ("partly" if any(covers) else False))  # fmt: skip
    keeps = [p.keeps for p in c.methods]
    ledger.record("t1-pass1", f"pass@1 kept in {sum(keeps)} of {len(keeps)} methods",
                  True if all(keeps) else ("partly" if any(keeps) else False))  # fmt: skip
    dapo = next((d for d in dapo_claims(objectives) if d.method == "dapo"), None)
    if "dapo" in c.same_as_grpo:
        ledger.record("t1-dapo", "every DAPO run equals its GRPO twin to the last digit", False)
    elif dapo is not None:
        ledger.record("t1-dapo", f"{dapo.differ} of {dapo.runs} runs differ; {len(dapo.resolved)} paired "
                      "differences beyond the seed spread", dapo.differs)  # fmt: skip


# ---- words and numbers --------------------------------------------------------------------------------------------


def verdict_word(flag: bool | None) -> str:
    """``yes`` / ``**no**`` / ``partly`` (``None``)."""
    return "partly" if flag is None else ("yes" if flag else "**no**")


def _fmt(stat: Stat, digits: int = 3) -> str:
    """``mean ± sd``, or the mean alone when the seeds give no spread."""
    text = f"{stat.mean:.{digits}f}"
    return text + (f" ± {stat.sd:.{digits}f}" if np.isfinite(stat.sd) and stat.sd > 0 else "")


def _cell(row: pd.Series, metric: str, digits: int = 3) -> str:
    return _fmt(Stat(row[metric], row.get(f"{metric}_sd", np.nan)), digits)


def _compared(c: Comparison) -> str:
    """``yes`` / ``**no**``, or ``tie (|Δ| < margin)`` when the seeds cannot resolve it."""
    return f"tie (|Δ| < {c.tie:.3f})" if c.verdict is None else verdict_word(c.verdict)


# ---- tables ---------------------------------------------------------------------------------------------------------


def nsweep_table(result) -> tuple[list[str], list[list[str]]]:
    """Table 2 analog: one row per variant (seed mean ± sd)."""
    header = ["run", "rollouts", "pass@1", "pass@256", "rare hit@256", "M_ret", "ΔNLL_rare"]
    rows = [
        [label, f"{int(r['rollouts']):,}"] + [_cell(r, c, 4 if c == "exact_pass_at_256" else 3) for c in METRICS]
        for label, r in seed_means(result).iterrows()
    ]
    return header, rows


def objectives_table(result) -> tuple[list[str], list[list[str]]]:
    header = ["run", "pass@1", "rare hit@256", "M_ret", "ΔNLL_rare"]
    cols = ("exact_pass_at_1", "rare_pass_at_256", "retained_mass", "dnll_rare")
    rows = [[label] + [_cell(r, c) for c in cols] for label, r in seed_means(result).iterrows()]
    return header, rows


def maze_table(result, ks=(1, 128, 256)) -> tuple[list[str], list[list[str]]]:
    m = seed_means(result)
    runs = m[m["method"] != "sft"]
    gammas = sorted(runs["gamma"].unique())
    ks = [k for k in ks if f"pass_at_{k}" in m]
    header = ["N"] + [f"pass@{k} (GRPO / " + " / ".join(f"γ={g:g}" for g in gammas[1:]) + ")" for k in ks]
    sft = m[m["method"] == "sft"].iloc[0]
    rows = [["SFT"] + [f"{100 * sft[f'pass_at_{k}']:.1f}" for k in ks]]
    for n in sorted(runs["group_size"].unique()):
        cells = [" / ".join(f"{100 * run_row(m, 'grpo', g, int(n))[f'pass_at_{k}']:.1f}" for g in gammas) for k in ks]
        rows.append([int(n)] + cells)
    return header, rows


def compute_row(result) -> list[str]:
    """Compute of a sweep: runs, rollouts, tokens, training wall time, device."""
    meta = result.meta
    devices = sorted({str(r.get("device")) for r in meta["runs"]})
    threads = sorted({str(r.get("threads")) for r in meta["runs"]})
    return [
        f"`{result.config.name}`",
        str(len(meta["runs"])),
        f"{meta['total_rollouts']:,}",
        f"{meta['total_tokens']:,}",
        f"{meta['total_elapsed_s'] / 60:.1f} min (+ SFT {meta['sft']['elapsed_s'] or 0:.0f} s)",
        f"{', '.join(devices)} ({', '.join(threads)} thread(s))",
    ]


# ---- claims ---------------------------------------------------------------------------------------------------------


def nsweep_rows(c: NsweepClaims) -> list[list[str]]:
    """F-GRPO Table 2's four claims beside ours: [paper, ours] rows."""
    rows = [
        [
            "pass@1 rises with N (36.2 → 39.2, N = 2 → 32)",
            "GRPO pass@1 by N: "
            + ", ".join(f"{n}: {v:.3f}" for n, v in zip(c.group_sizes, c.pass1))
            + f"; Spearman with N {c.pass1_spearman:+.2f}: "
            + verdict_word(c.pass1_rises),
        ],
        [
            "GRPO pass@256 is non-monotone in N: best at N = 2, worst near N = 8, partly recovered at N = 32",
            (
                f"exact pass@256 is {c.pass256_range[0]:.4f}–{c.pass256_range[1]:.4f} for every run: saturated, "
                "**no** signal (task (a)'s correct set is learnable from the prompt, so RL lifts every held-out "
                "prompt's μ_pos). "
                if c.saturated
                else f"exact pass@256 by N: {', '.join(f'{v:.4f}' for v in c.pass256)}. "
            )
            + "Rare-set hit@256 (the analog: the chance that 256 samples reach the SFT model's rarest correct "
            "answers) by N: "
            + ", ".join(f"{n}: {v:.3f}" for n, v in zip(c.group_sizes, c.rare))
            + f"; best N = {c.rare_best_n}, worst N = {c.rare_worst_n}: "
            + verdict_word(c.dip),
        ],
    ]
    if c.focal_reach is not None:
        f = c.focal_reach
        rows.append(
            [
                "F-GRPO at N = 8 reaches GRPO N = 32's pass@256 with a quarter of the rollouts (70.3 vs 70.1)",
                f"rare hit@256 {_fmt(f.focal)} vs {_fmt(f.grpo32)} with {f.grpo32_rollouts / f.focal_rollouts:.1f}× "
                f"fewer rollouts ({int(f.focal_rollouts):,} vs {int(f.grpo32_rollouts):,}): "
                + (
                    "cannot tell: N = 32 is GRPO's worst N here, so reaching it says nothing of a kept tail (the "
                    "paper's N = 32 had partly recovered)"
                    if f.vacuous
                    else _compared(f.comparison).replace("**no**", "**no** (lower)")
                    + " (a tie also counts as reaching it)"
                ),
            ]
        )
    if c.dnll is not None:
        d = c.dnll
        text = f"ΔNLL_rare N=2 {_fmt(d.n2)}, N=32 {_fmt(d.n32)}, N=8 {_fmt(d.n8)}"
        text += "" if d.focal is None else f", F-GRPO N=8 {_fmt(d.focal)}"
        rows.append(
            [
                "ΔNLL_rare is ordered N=2 < N=32 < N=8 (0.19 < 0.52 < 0.68), F-GRPO in between (0.46)",
                text
                + f". Order N=2 < N=32 < N=8: {verdict_word(d.ordered)}"
                + ("" if d.between is None else f"; F-GRPO between N=2 and N=8: {verdict_word(d.between)}"),
            ]
        )
    return rows


def objectives_rows(c: ObjectivesClaims) -> list[list[str]]:
    """F-GRPO Table 1's claims beside ours: [paper, ours] rows."""
    rows = [
        [
            f"{method.upper()} differs from GRPO",
            f"**no**: every {method.upper()} run equals its GRPO twin to the last digit (same seeds; its loss "
            "settings never changed a token's loss in these runs)",
        ]
        for method in c.same_as_grpo
    ]
    cover = [
        f"{p.method.upper()} {_fmt(p.base_rare)} → {_fmt(p.focal_rare)}: " + _compared(p.covers) for p in c.methods
    ]
    keep = [
        f"{p.method.upper()} {_fmt(p.base_pass1)} → {_fmt(p.focal_pass1)}: " + verdict_word(p.keeps) for p in c.methods
    ]
    return rows + [
        [
            "the focal weight raises pass@256 for every method (math: +6.2 / +3.2 / +3.6 on Qwen2.5-7B)",
            f"rare hit@256, γ = 0 → {c.gamma:g}: " + "; ".join(cover),
        ],
        [
            "the focal weight keeps pass@1 (9/9 pairs within +2.8 / −0.0)",
            "pass@1 (kept = drop < max(0.01, seed sd)): " + "; ".join(keep),
        ],
    ]


def _maze_rule(c, mazes: int) -> str:
    """The paired rule's outcome per N and the verdict of one maze claim."""
    if c.seeds < 2:
        return (
            "; rule: γ = 0.5 − GRPO paired by seed at each N, two-sided t-test at α = 0.05. One seed: "
            "**cannot tell** (no seed spread to judge a difference by; a sampled pass@k on "
            f"{mazes} mazes moves by {100 / mazes:.1f} points per maze)"
        )
    outcomes = ", ".join(f"{n}: {d.outcome}" for n, d in c.diffs)
    return (
        f"; rule: γ = 0.5 − GRPO paired by seed at each N over {c.seeds} seeds, two-sided t-test at α = 0.05 "
        f"({outcomes}): " + ("cannot tell (a tie at some N)" if c.verdict is None else verdict_word(c.verdict))
    )


def maze_rows(result) -> list[list[str]]:
    """F-GRPO Table 4's claim beside ours, per k."""
    return [
        [
            f"F-GRPO γ = 0.5 beats GRPO at every N on pass@{c.k} (Table 4)",
            f"Δpass@{c.k} (γ=0.5 − GRPO, points) by N: "
            + ", ".join(f"{n}: {100 * d:+.1f}" for n, d in c.deltas)
            + _maze_rule(c, result.config.rl.eval_prompts),
        ]
        for c in maze_claims(result)
    ]
