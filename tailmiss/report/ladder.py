"""The report's "Why the regimes differ" section: the ladder from the simulator to the transformer, as text.

Numbers come from :mod:`tailmiss.results.claims.ladder` over the cached ladders
(:func:`tailmiss.results.ladder_result`); this module only writes them.
"""

from __future__ import annotations

import numpy as np

from tailmiss import analytic
from tailmiss.analytic.regimes import ZONE_THRESHOLD
from tailmiss.report.text import mean_sd, table, yes
from tailmiss.results import Context, ladder_result
from tailmiss.results.claims import ladder as la

__all__ = ["LADDER_HEADING", "ladder_section"]

LADDER_HEADING = "## Why the regimes differ: a ladder from the simulator to the transformer"


def _where(s: str) -> str:
    return "trained-on" if s == "pool" else "held-out"


def _informative(result, frame):
    """Rows worth printing: table and factorized rungs never change on held-out prompts (no shared parameters)."""
    shared = {r.name for r in result.ladder.rungs if r.model == "transformer"}
    return frame[(frame["set"] == "pool") | frame["rung"].isin(shared)]


def _shape_rows(result, gamma: float = 0.0) -> list[list]:
    """One row per rung and set: M_ret by N, its shape and zones, and the shapes of ΔNLL_rare and rare hit@256."""
    mret = la.shape_table(result.final, "retained_mass")
    dnll = la.shape_table(result.final, "dnll_rare").set_index(["rung", "set", "gamma"])
    hit = la.shape_table(result.final, "rare_hit_at_256").set_index(["rung", "set", "gamma"])
    q = la.shape_table(result.final, "q_pos").set_index(["rung", "set", "gamma"])
    rows = []
    mret = _informative(result, mret)
    for _, r in mret[mret["gamma"] == gamma].iterrows():
        key = (r["rung"], r["set"], r["gamma"])
        d, h = dnll.loc[key], hit.loc[key]
        rows.append(
            [
                f"`{r['rung']}`",
                _where(r["set"]),
                f"{q.loc[key]['means'][-1]:.3f} ± {q.loc[key]['sds'][-1]:.3f}",
                mean_sd(r["means"], r["sds"]),
                f"{r['spearman']:+.2f}" if np.isfinite(r["spearman"]) else "flat",
                r["worst_n"],
                " ".join(r["zones"]),
                yes(la.has_large_n_regime(r)),
                f"{d['worst_n']} / {yes(d['recovers'])}",
                f"{h['worst_n']} / {yes(h['recovers'])}",
            ]
        )
    return rows


_SHAPE_HEADER = [
    "rung",
    "prompts",
    "Q_pos at max N",
    "M_ret by N (mean ± sd over seeds)",
    "Spearman(M_ret, N)",
    "worst N",
    "zones",
    "large-N regime",
    "ΔNLL_rare worst N / recovers",
    "rare hit@256 worst N / recovers",
]


def _two_se(focal, result):
    """Twice the standard error of each focal-table row's mean ΔM_ret over the ladder's seeds."""
    return 2 * focal["sd"] / np.sqrt(max(len(result.ladder.seeds), 1))


def _focal_rows(result) -> list[list]:
    focal = la.focal_table(result.final)
    if focal.empty:
        return []
    focal = _informative(result, focal)
    rows = []
    for (rung, where, gamma), part in focal.groupby(["rung", "set", "gamma"], sort=False):
        part = part.sort_values("group_size")
        sig = (part["mean"] > _two_se(part, result)) & (part["mean"] > 0)
        rows.append(
            [
                f"`{rung}`",
                _where(where),
                f"{gamma:g}",
                ", ".join(f"{m:+.3f}" for m in part["mean"]),
                f"{part['mean'].mean():+.3f}",
                f"{int(sig.sum())}/{len(part)}",
            ]
        )
    return rows


def _matched_rows(result) -> list[list]:
    m = la.matched_table(result.history)
    rows = []
    for rung, part in m[m["gamma"] == 0].groupby("rung", sort=False):
        part = part.sort_values("group_size")
        shape = la.n_shape(part["group_size"], part["mean"], part["sd"])
        rows.append(
            [
                f"`{rung}`",
                f"{part['target'].iloc[0]:.3f}",
                ", ".join(f"{a:.3f}±{b:.3f}" for a, b in zip(part["mean"], part["sd"])),
                f"{shape.spearman:+.2f}" if np.isfinite(shape.spearman) else "flat",
                f"{np.ptp(part['mean']):.3f}",
                yes(_n_matters(part)),
                shape.worst_n,
                yes(shape.recovers),
            ]
        )
    return rows


def _n_matters(part) -> bool:
    """Whether M_ret at matched Q_pos differs across N beyond the seed spread (range > 2 × the largest sd)."""
    return bool(np.ptp(part["mean"]) > max(2 * float(part["sd"].max()), 0.01))


def _lemma_line(result) -> str:
    """Lemma 3.1 at the pool's SFT μ_pos and rare-set share: where coverage (zone III) is predicted to start."""
    start = result.history[(result.history["set"] == "pool") & (result.history["step"] == 0)]
    mu = float(start["q_pos"].mean())
    rho = float(result.ladder.rl.rare_share)
    tau = rho * mu
    ns = np.asarray(result.ladder.group_sizes)
    tm = analytic.tail_miss_probability(mu, tau, ns)
    peak = analytic.tail_miss_peak(mu_pos=mu, tau=tau)
    grid = np.arange(1, 200_001)
    below = grid[(grid > peak.n_star) & (analytic.tail_miss_probability(mu, tau, grid) < 0.5)]
    half = int(below[0]) if len(below) else None
    return (
        f"Lemma 3.1 at the pool's mean SFT μ_pos = {mu:.3f} and a rare set of ρ = {rho:g} of it (τ = {tau:.3g}, the "
        f"largest the rare-set rule allows): Pr(active group misses the rare set) by N = "
        + ", ".join(f"{int(n)}: {p:.2f}" for n, p in zip(ns, tm))
        + f"; it peaks at N* = {peak.n_star} ({peak.peak:.2f})"
        + (f" and falls below 0.5 only at N ≥ {half:,}." if half else ".")
    )


def _best_line(best: la.BestSimulator) -> str:
    scores = ", ".join(f"`{k}` {v:+.2f}" for k, v in best.scores_main.items())
    text = (
        f"Chosen on the main ladder by the rank correlation of its γ = 0 M_ret-by-N curve (trained-on prompts) with "
        f"`{best.target}`'s: {scores}; chosen: **`{best.chosen}`**."
    )
    if not best.checked:
        return text + " (The hard-task ladder does not hold both rungs, so the check on another task is missing.)"
    agree = best.regime_sim == best.regime_llm
    return text + (
        f" On the hard task, which it was not chosen on: M_ret by N = {', '.join(map(str, best.group_sizes))} is "
        f"{', '.join(f'{v:.3f}' for v in best.sim_values)} (simulator) vs "
        f"{', '.join(f'{v:.3f}' for v in best.llm_values)} (transformer); Spearman "
        f"{best.spearman_hard:+.2f}; zones {' '.join(best.zones_sim)} vs {' '.join(best.zones_llm)} "
        f"(agree at {best.zone_agreement:.0%} of N); large-N regime: simulator {yes(best.regime_sim)}, transformer "
        f"{yes(best.regime_llm)}: {'agree' if agree else '**disagree**'}."
    )


def verdict_text(v: la.IngredientVerdict) -> str:
    """An ingredient's verdict in words: its effect on the large-N regime and, if so, the reversed trend in N."""
    if v.effect == "none":
        text = f"does not affect the large-N regime ({'present' if v.source_regime else 'absent'} in both)"
    else:
        text = f"{v.effect} the large-N regime"
    if v.reverses_trend:
        ra, rb = v.source_curve["spearman"], v.target_curve["spearman"]
        text += f"; reverses the trend in N (Spearman {ra:+.2f} → {rb:+.2f})"
    return text


def _budget(lad) -> str:
    """The rollout budget of an equal-budget ladder as run: N × steps per prompt slot, and where rounding the steps
    to a whole number makes it unequal."""
    goal = lad.rl.steps * lad.reference_n
    spent = {n: n * lad.steps_for(n) for n in lad.group_sizes}
    off = [f"{v:,} at N = {n} ({v / goal - 1:+.0%})" for n, v in spent.items() if v != goal]
    return f"an equal rollout budget ({lad.rl.steps} × {lad.reference_n} / N steps, rounded: N × steps = {goal:,}" + (
        f" except {', '.join(off)})" if off else " at every N)"
    )


def _describe(lad) -> str:
    rl = lad.rl
    rungs = ", ".join(f"`{r.name}`" for r in lad.rungs)
    budget = f"{rl.steps} steps at every N" if lad.budget == "steps" else _budget(lad)
    return (
        f"`{lad.name}`: task `{lad.sft.task.name}` (SFT `{lad.sft.name}`), rungs {rungs}; N = "
        f"{', '.join(map(str, lad.group_sizes))}; γ = {', '.join(f'{g:g}' for g in lad.gammas)}; "
        f"{len(lad.seeds)} seed(s); {budget}; a pool of {rl.train_prompts} training prompts, {rl.prompts_per_step} "
        f"per step, {rl.eval_prompts} held-out prompts; rare set ρ ≤ {rl.rare_share:g}."
    )


def _intro(mode: str) -> str:
    """What the ladder is, how its rungs differ and how to reproduce it."""
    return (
        "The bridge above compares the simulator with a transformer that never trains on the prompts it is scored "
        "on. The ladder changes one ingredient at a time between the two, with the same GRPO update (one on-policy "
        "update per step, so GRPO, DAPO and CISPO coincide), the same SFT answer distributions, the same fixed pool "
        "of training prompts and exact metrics on that pool (*trained-on*) and on held-out prompts. Rungs: `table` "
        "(one free logit per answer and prompt, i.e. the simulator's policy; the test "
        "`tests/test_ladder.py::test_table_rl_follows_the_simulator_in_law` checks over 40 seeds that the RL loop "
        "on it follows `tailmiss.sim` in law, with Adam and with SGD), `factorized` (one softmax per answer "
        "position and prompt: parameters shared across answers, no network), `transformer` (shared across answers "
        "and prompts); each with Adam (AdamW, no weight decay) and plain SGD. Learning rates were set once per rung "
        "so that Q_pos on the pool moves by a similar amount at N = 8 (never from an N-shape). Zones keep F-GRPO "
        f"Fig. 2's meaning (II: M_ret < {ZONE_THRESHOLD:g}; III: not II, above some zone-II N; I: the rest). The "
        "*large-N regime* is where retained mass is high again at large N: zone III, or a significant dip and "
        "recovery (M_ret's worst N strictly inside the sweep and M_ret at the largest N above it by > 0.05 and > "
        "twice the seed spread) on a curve that never enters zone II. "
        f"Table rungs hold the prompts they were built on only, so their held-out rows are 1 by construction; {mode}. "
        "Reproduce with `tailmiss llm sweep --preset ladder` (and `ladder-budget`, `ladder-hard`), then "
        "`tailmiss figures make ladder frontier`.\n"
    )


_MATCHED_HEADER = [
    "rung",
    "target Q_pos",
    "M_ret at target by N",
    "Spearman(M_ret, N)",
    "range over N",
    "N matters",
    "worst N",
    "dip and recovery",
]


def _verdict_parts(main, hard, verdicts) -> list[str]:
    """The verdict per ingredient and the simulator setting that best predicts the transformer."""
    parts = []
    parts.append("### One verdict per ingredient (GRPO, γ = 0, M_ret by N)\n")
    vrows = [
        [
            v.ingredient,
            v.comparison,
            mean_sd(v.source_curve["means"], v.source_curve["sds"]),
            mean_sd(v.target_curve["means"], v.target_curve["sds"]),
            verdict_text(v),
        ]
        for v in verdicts
    ]
    parts.append(table(["ingredient", "from → to", "M_ret by N (from)", "M_ret by N (to)", "verdict"], vrows) + "\n")
    targets = [r.name for r in main.ladder.rungs if r.model == "transformer" and r.optimizer == "adamw"]
    if targets:
        best = la.best_simulator(main, hard, targets[0])
        parts.append("### The simulator setting that predicts the transformer\n")
        parts.append(_best_line(best) + "\n")
    return parts


def ladder_section(ctx: Context) -> str:
    """Markdown for the ladder: per-rung N-shapes, focal effects, matched Q_pos, verdicts, the best simulator."""
    main, budget, hard = (ladder_result(ctx, f) for f in ("ladder", "ladder-budget", "ladder-hard"))
    mode = "quick ladders (`--quick`)" if ctx.quick else "full ladders"
    parts = [LADDER_HEADING + "\n"]
    parts.append(_intro(mode))
    parts.append("- " + "\n- ".join(_describe(r.ladder) for r in (main, budget, hard)) + "\n")
    parts.append(f"### GRPO: M_ret against N on every rung (`{main.ladder.name}`; figure `ladder.png`)\n")
    parts.append(table(_SHAPE_HEADER, _shape_rows(main)) + "\n")
    parts.append(_lemma_line(main) + "\n")
    parts.append("### Focal weight: ΔM_ret = M_ret(γ) − M_ret(0), paired by seed\n")
    rows = _focal_rows(main)
    if rows:
        parts.append(
            table(["rung", "prompts", "γ", "ΔM_ret by N", "mean over N", "N where it helps (> 2 se)"], rows) + "\n"
        )
    else:
        parts.append("No focal runs in this ladder.\n")
    parts.append(
        "### At matched Q_pos (figure `frontier.png`)\n\n"
        "Rungs learn at different speeds, so M_ret is also read along training, where each run's trained-on Q_pos "
        "first reaches a common target (its rung's start plus half the smallest γ = 0 gain over N).\n"
    )
    parts.append(table(_MATCHED_HEADER, _matched_rows(main)))
    parts.append("")
    parts.append(f"### Equal rollout budget (`{budget.ladder.name}`)\n")
    parts.append(table(_SHAPE_HEADER, _shape_rows(budget)) + "\n")
    parts.append(f"### Difficulty (`{hard.ladder.name}`)\n")
    parts.append(table(_SHAPE_HEADER, _shape_rows(hard)) + "\n")
    parts.append(_lemma_line(hard) + "\n")
    verdicts = la.ingredient_verdicts(main, budget, hard)
    parts += _verdict_parts(main, hard, verdicts)
    parts.append("### Where the paper's claims do and do not appear\n")
    parts.append(_claims_text(main, verdicts) + "\n")
    return "\n".join(parts)


def _claims_text(main, verdicts) -> str:
    shape = _informative(main, la.shape_table(main.final))
    base = shape[shape["gamma"] == 0]
    label = {True: [], False: []}
    for _, r in base.iterrows():
        label[la.has_large_n_regime(r)].append(f"`{r['rung']}` ({_where(r['set'])})")
    dips = [
        f"`{r['rung']}` ({_where(r['set'])}, worst N = {r['worst_n']})" for _, r in base.iterrows() if r["recovers"]
    ]
    proper = [f"`{r['rung']}` ({_where(r['set'])})" for _, r in base.iterrows() if "III" in (r.get("zones") or ())]
    changes = [f"{v.ingredient} ({v.comparison}): {verdict_text(v)}" for v in verdicts if v.effect != "none"]
    trends = [f"{v.ingredient} ({v.comparison})" for v in verdicts if v.reverses_trend]
    matched = la.matched_table(main.history)
    matched = matched[matched["gamma"] == 0]
    matters = {rung: _n_matters(part) for rung, part in matched.groupby("rung", sort=False)}
    focal = la.focal_table(main.final)
    focal = _informative(main, focal) if not focal.empty else focal
    helps = focal.groupby(["rung", "set", "gamma"])["mean"].mean() if not focal.empty else None
    lines = [
        "- The large-N regime (F-GRPO Fig. 2's zone III, or a significant dip and recovery of M_ret) at γ = 0: "
        "present on "
        + (", ".join(label[True]) if label[True] else "**no rung**")
        + "; absent on "
        + (", ".join(label[False]) if label[False] else "none")
        + ". Zone III itself (M_ret back at or above the threshold above a zone-II N): "
        + (", ".join(proper) if proper else "**on no rung**")
        + ".",
        "- A significant dip and recovery of M_ret over N (F-GRPO Table 2's non-monotone shape, worst N strictly "
        "inside the sweep): " + (", ".join(dips) if dips else "**on no rung**") + ".",
        "- Ingredients that change whether the large-N regime appears: "
        + ("; ".join(changes) if changes else "**none** of those tested")
        + (". Ingredients that reverse the direction of M_ret in N: " + "; ".join(trends) if trends else "")
        + ".",
        "- At matched Q_pos (one retention/accuracy frontier per N, figure `frontier.png`), N changes the retained "
        "mass beyond the seed spread on "
        + (", ".join(f"`{r}`" for r, v in matters.items() if v) or "**no rung**")
        + "; every N lies on one frontier on "
        + (", ".join(f"`{r}`" for r, v in matters.items() if not v) or "**no rung**")
        + ". Where every N shares one frontier, a larger N only travels further along it in the same number of "
        "steps, so at equal steps M_ret falls with N.",
    ]
    if helps is not None:
        positive = int((helps > 0).sum())
        se = _two_se(focal, main)
        keys = ["rung", "set", "gamma"]
        most = (focal.assign(up=focal["mean"] > se).groupby(keys)["up"].mean() > 0.5).sum()
        down = focal[focal["mean"] < -se].drop_duplicates(keys)
        where = ", ".join(f"`{r.rung}` ({_where(r.set)}, γ = {r.gamma:g})" for r in down.itertuples())
        lines.append(
            f"- The focal weight raises mean M_ret over N on {positive} of {len(helps)} rung × prompts × γ cells, "
            f"beyond 2 se at most N on {int(most)} of them (F-GRPO: γ = 1 lifts M_ret, mostly in zone II); it lowers "
            "M_ret beyond 2 se at some N on " + (f"{len(down)}: {where}" if len(down) else "none") + ". Under SGD it "
            "also shrinks the step (g ≤ 1 multiplies the gradient), under Adam much less (Adam divides the scale "
            "out), so SGD rows mix the two effects."
        )
    return "\n".join(lines)
