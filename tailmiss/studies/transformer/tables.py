"""The small transformer's tables and verdict words: each sweep's table, each claim's row beside ours, the compute
row (written by :mod:`tailmiss.studies.transformer.section`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tailmiss.studies.rule import MIN_SEEDS, Difference, Verdict
from tailmiss.studies.transformer.claims import (
    METRICS,
    NsweepClaims,
    ObjectivesClaims,
    Stat,
    maze_claims,
    run_row,
    seed_means,
)

# ---- words and numbers --------------------------------------------------------------------------------------------


def _by_n(c: NsweepClaims, values, digits: int = 3) -> str:
    return ", ".join(f"{n}: {v:.{digits}f}" for n, v in zip(c.group_sizes, values))


def verdict_word(verdict: Verdict) -> str:
    """The verdict's word, *refuted* in bold."""
    return f"**{verdict}**" if verdict == Verdict.REFUTED else str(verdict)


def _fmt(stat: Stat, digits: int = 3) -> str:
    """``mean ± sd``, or the mean alone when the seeds give no spread."""
    text = f"{stat.mean:.{digits}f}"
    return text + (f" ± {stat.sd:.{digits}f}" if np.isfinite(stat.sd) and stat.sd > 0 else "")


def _cell(row: pd.Series, metric: str, digits: int = 3) -> str:
    return _fmt(Stat(row[metric], row.get(f"{metric}_sd", np.nan)), digits)


def _diff(d: Difference) -> str:
    """``+0.0123 (paired t, df 2, p 0.004): higher``: the difference, its test and the noise rule's outcome."""
    return d.describe() if d.test == "none" else f"{d.describe()}: {d.outcome}"


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
    """F-GRPO Table 2's claims beside ours: [paper, ours] rows, each comparison with its test (the sentence's
    cell: :meth:`~tailmiss.studies.rule.Sentence.cell`)."""
    dip = c.dip_sentence
    rows = [
        [
            "pass@1 rises with N (36.2 → 39.2, N = 2 → 32)",
            f"GRPO pass@1 by N: {_by_n(c, c.pass1)}; Spearman with N {c.pass1_spearman:+.2f}; the largest − the "
            "smallest N wanted higher, each step wanted not lower, one Holm family: "
            f"{c.pass1_sentence.cell(most=6)}: " + verdict_word(c.pass1_rises),
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
            f"answers) by N: {_by_n(c, c.rare)}; the smallest N not lower than any other, and some N of 8 and 16 "
            "below the smallest and the largest N (the trough not picked), one Holm family: "
            + (f"{dip.cell(most=6)}: {verdict_word(c.dip)}" if dip is not None else verdict_word(c.dip)),
        ],
    ]
    if c.focal_reach is not None:
        f = c.focal_reach
        rows.append(
            [
                "F-GRPO at N = 8 reaches GRPO N = 32's pass@256 with a quarter of the rollouts (70.3 vs 70.1)",
                f"rare hit@256 {_fmt(f.focal)} vs {_fmt(f.grpo32)} with {f.grpo32_rollouts / f.focal_rollouts:.1f}× "
                f"fewer rollouts ({int(f.focal_rollouts):,} vs {int(f.grpo32_rollouts):,}); F-GRPO − GRPO N = 32 "
                f"wanted not lower (one-sided at the margin: a tie reaches nothing): {f.sentence.cell()}: "
                + verdict_word(f.verdict)
                + (f" ({f.reason})" if f.reason else ""),
            ]
        )
    if c.dnll is not None:
        d = c.dnll
        text = f"ΔNLL_rare N=2 {_fmt(d.n2)}, N=32 {_fmt(d.n32)}, N=8 {_fmt(d.n8)}"
        text += "" if d.focal is None else f", F-GRPO N=8 {_fmt(d.focal)}"
        gaps = d.order.cell()
        between = "" if d.between is None else "; F-GRPO between N=2 and N=8: " + verdict_word(d.between.verdict)
        rows.append(
            [
                "ΔNLL_rare is ordered N=2 < N=32 < N=8 (0.19 < 0.52 < 0.68), F-GRPO in between (0.46)",
                f"{text}; gaps (one Holm family, each wanted lower) {gaps}. Order N=2 < N=32 < N=8: "
                + verdict_word(d.ordered)
                + between,
            ]
        )
    return rows


def objectives_rows(c: ObjectivesClaims) -> list[list[str]]:
    """F-GRPO Table 1's claims beside ours: [paper, ours] rows; the methods identical to GRPO are shown, not
    counted."""
    rows = [
        [
            f"{method.upper()} differs from GRPO",
            f"{verdict_word(Verdict.REFUTED)}: every {method.upper()} run equals its GRPO twin on every seed and "
            "metric (its loss settings never changed a token's loss in these runs): the same runs, not a test",
        ]
        for method in c.same_as_grpo
    ]

    def line(p, base, focal) -> str:
        note = " (identical to GRPO: not counted)" if p.method in c.same_as_grpo else ""
        floor = " (at the floor: not counted)" if p.method in c.at_floor else ""
        return f"{p.method.upper()} {_fmt(base)} → {_fmt(focal)}{note}{floor}"

    def judged(s) -> str:
        return "no method to count" if s is None else f"{s.cell(most=6)}: {verdict_word(s.verdict)}"

    cover = "; ".join(line(p, p.base_rare, p.focal_rare) for p in c.methods)
    keep = "; ".join(line(p, p.base_pass1, p.focal_pass1) for p in c.methods)
    return rows + [
        [
            "the focal weight raises pass@256 for every method (math: +6.2 / +3.2 / +3.6 on Qwen2.5-7B)",
            f"rare hit@256, γ = 0 → {c.gamma:g}: {cover}. Focal − base wanted higher, one Holm family: "
            + judged(c.raises_sentence),
        ],
        [
            "the focal weight keeps pass@1 (9/9 pairs within +2.8 / −0.0)",
            f"pass@1: {keep}. Focal − base wanted not lower (one-sided at the margin), one Holm family: "
            + judged(c.keeps_sentence),
        ],
    ]


def _maze_rule(c, mazes: int) -> str:
    """The noise rule's outcome per N and the verdict of one maze claim."""
    few = (
        f" ({c.seeds} seed(s), fewer than the rule's {MIN_SEEDS}; a sampled pass@k on {mazes} mazes moves by "
        f"{100 / mazes:.1f} points per maze)"
        if c.seeds < MIN_SEEDS
        else ""
    )
    outcomes = ", ".join(f"{n}: {_diff(d)}" for n, d in c.diffs)
    return (
        "; rule: γ = 0.5 − GRPO paired by seed at each N (the N one Holm family) by the report's noise rule (stated "
        f"at the top), each wanted higher: {outcomes}: {verdict_word(c.verdict)}{few}"
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
