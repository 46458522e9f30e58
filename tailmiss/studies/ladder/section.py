"""The report's "Why the regimes differ" section: the ladder from the simulator to the transformer, as text.

Numbers come from :mod:`tailmiss.studies.ladder.claims` over the cached ladders; this module only writes them."""

from __future__ import annotations

import numpy as np

from tailmiss import analytic
from tailmiss.analytic.regimes import ZONE_THRESHOLD
from tailmiss.studies.context import Context
from tailmiss.studies.ladder import claims as la
from tailmiss.studies.ladder.simulator import BestSimulator, best_simulator
from tailmiss.studies.rule import ALPHA, MIN_SEEDS, Outcome, Verdict, practical_threshold
from tailmiss.studies.runs import ladder_result
from tailmiss.studies.text import Section, mean_sd, table, yes

__all__ = ["HEADING", "DEFERRED_WHY", "ladder_section", "write"]

HEADING = "## Why the regimes differ: a ladder from the simulator to the transformer"
"""The start of the section's heading line."""
DEFERRED_WHY = "The ladder takes the transformer apart one ingredient at a time, on its own SFT models."
"""Why the report may leave this study out, in its deferral note."""


def _where(s: str) -> str:
    return "trained-on" if s == "pool" else "held-out"


def _informative(result, frame):
    """Rows worth printing: table and factorized rungs never change on held-out prompts (no shared parameters)."""
    shared = {r.name for r in result.ladder.rungs if r.model == "transformer"}
    return frame[(frame["set"] == "pool") | frame["rung"].isin(shared)]


RULE = "the report's noise rule (stated at the top; `tailmiss.studies.rule`)"


def _tests(diffs) -> str:
    """The tests behind ``diffs`` (:class:`~tailmiss.studies.rule.Difference`, ``None`` skipped) in words."""
    diffs = [d for d in diffs if d is not None]
    out = []
    for test in ("paired t", "Welch t"):
        dofs = sorted({round(float(d.dof), 1) for d in diffs if d.test == test})
        if dofs:
            out.append(f"{test} on {dofs[0]:g}" + (f"-{dofs[-1]:g}" if len(dofs) > 1 else "") + " df")
    for outcome, why in ((Outcome.CANNOT_TELL, f"cannot tell (< {MIN_SEEDS} seeds)"), (Outcome.IDENTICAL, "identical")):
        if count := sum(d.outcome == outcome for d in diffs):
            out.append(f"{count} {why}")
    return "; ".join(out) or "no comparison"


def _told(flag: bool, judged) -> str:
    """``yes`` / ``**no**``, or ``cannot tell`` where the sentence ``judged`` behind a *no* could not be told (too
    few seeds, identical runs) or was never judged (``None``)."""
    if not flag and (judged is None or judged.verdict == Verdict.CANNOT_TELL):
        return "cannot tell"
    return yes(flag)


def _recovered(r) -> str:
    """A curve's dip and recovery (a :func:`~tailmiss.studies.ladder.claims.shape_table` row) in words."""
    return _told(r["recovers"], r["recovery"])


def _regime(r) -> str:
    """The large-N regime in words: *cannot tell* when it rests on a recovery too few seeds can judge."""
    flag = la.has_large_n_regime(r)
    return "cannot tell" if not flag and _recovered(r) == "cannot tell" else yes(flag)


def _shape_block(result, gamma: float = 0.0) -> str:
    """The shape table at ``gamma`` and the tests behind its recoveries."""
    rows, diffs = _shape_rows(result, gamma)
    return table(_SHAPE_HEADER, rows) + (
        f"\n\n*Recovers*: a dip and recovery tested without picking the trough, by {RULE}: for some N strictly "
        "inside the sweep, the smallest and the largest N both higher than it on per-seed values (lower for "
        "ΔNLL_rare), every interior N's pair in one Holm family per curve (not corrected across curves), "
        f"δ = {practical_threshold('retained_mass'):g} (M_ret), "
        f"{practical_threshold('dnll_rare'):g} (ΔNLL_rare, lower), {practical_threshold('rare hit@256'):g} "
        f"(rare hit@256): {_tests(diffs)}.\n"
    )


def _shape_rows(result, gamma: float = 0.0) -> tuple[list[list], list]:
    """One row per rung and set: M_ret by N, its shape and zones, and the shapes of ΔNLL_rare and rare hit@256; and
    every recovery comparison behind them."""
    mret = la.shape_table(result.final, "retained_mass")
    dnll = la.shape_table(result.final, "dnll_rare").set_index(["rung", "set", "gamma"])
    hit = la.shape_table(result.final, "rare_hit_at_256").set_index(["rung", "set", "gamma"])
    q = la.shape_table(result.final, "q_pos").set_index(["rung", "set", "gamma"])
    rows, diffs = [], []
    mret = _informative(result, mret)
    for _, r in mret[mret["gamma"] == gamma].iterrows():
        key = (r["rung"], r["set"], r["gamma"])
        d, h = dnll.loc[key], hit.loc[key]
        diffs += [x for c in (r, d, h) if c["recovery"] is not None for x in c["recovery"].differences]
        rows.append(
            [
                f"`{r['rung']}`",
                _where(r["set"]),
                f"{q.loc[key]['means'][-1]:.3f} ± {q.loc[key]['sds'][-1]:.3f}",
                mean_sd(r["means"], r["sds"]),
                f"{r['spearman']:+.2f}" if np.isfinite(r["spearman"]) else "flat",
                r["worst_n"],
                " ".join(r["zones"]),
                _regime(r),
                f"{d['worst_n']} / {_recovered(d)}",
                f"{h['worst_n']} / {_recovered(h)}",
            ]
        )
    return rows, diffs


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


def _family(focal) -> int:
    """The focal table's Holm family: its tested cells (every rung × prompts × γ × N with enough seeds)."""
    tested = focal[focal["test"] != "none"]
    return int(tested["family"].max()) if len(tested) else 0


def _focal_block(result) -> str:
    """The focal table (ΔM_ret by N per rung, prompts and γ; where it helps by the rule) and its rule."""
    focal = la.focal_table(result.final)
    if focal.empty:
        return "No focal runs in this ladder.\n"
    family, delta = _family(focal), practical_threshold("retained_mass")
    rows = []
    for (rung, where, gamma), part in _informative(result, focal).groupby(["rung", "set", "gamma"], sort=False):
        part = part.sort_values("group_size")
        helps = int((part["outcome"] == Outcome.HIGHER).sum())
        unknown = int((part["outcome"] == Outcome.CANNOT_TELL).sum())
        means = ", ".join(f"{m:+.3f}" for m in part["mean"])
        count = f"{helps}/{len(part)}" + (f" ({unknown} cannot tell)" if unknown else "")
        rows.append([f"`{rung}`", _where(where), f"{gamma:g}", means, f"{part['mean'].mean():+.3f}", count])
    header = ["rung", "prompts", "γ", "ΔM_ret by N", "mean over N"]
    over = f"Holm over the table's {family} cells" if family else f"no cell has {MIN_SEEDS} seeds"
    header.append(f"N where it helps (paired t, {over}, δ = {delta:g})")
    return table(header, rows) + (
        f"\n\nEach cell (rung × prompts × γ × N) is judged by {RULE}: a paired t-test of M_ret(γ) against M_ret(0) "
        f"over seeds ({_tests(focal['diff'])}); the whole table is one Holm family: its {family} tested cells of "
        f"{len(focal)}, the unprinted held-out rows of rungs without shared parameters counted (identical runs and "
        f"cells under {MIN_SEEDS} seeds are untested); γ *helps* at N when the Holm-adjusted p < {ALPHA:g} and "
        f"ΔM_ret ≥ δ = {delta:g}.\n"
    )


def _said(word: str, judged) -> str:
    return word if judged is None else f"{word}: {judged.cell(most=2)}"


def _matched_rows(result) -> list[list]:
    """One row per rung: M_ret at matched Q_pos by N, whether N matters and whether it dips and recovers (the rule)."""
    rows = []
    for _, r in la.matched_shape_table(result.history).iterrows():
        rows.append(
            [
                f"`{r['rung']}`",
                f"{r['target']:.3f}",
                mean_sd(r["means"], r["sds"]),
                f"{r['spearman']:+.2f}" if np.isfinite(r["spearman"]) else "flat",
                f"{np.ptp(r['means']):.3f}",
                _said(_told(r["n_matters"], r["spread"]), r["spread"]),
                r["worst_n"],
                _said(_recovered(r), r["recovery"]),
            ]
        )
    return rows


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


def _best_line(best: BestSimulator) -> str:
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
    """An equal-budget ladder's rollout budget as run (N × steps per slot), and where rounded steps make it unequal."""
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
        "*large-N regime* is where retained mass is high again at large N: zone III, or a dip and recovery on a "
        "curve that never enters zone II (for some N strictly inside the sweep, M_ret at the smallest and at the "
        f"largest N both *higher* than at it by {RULE}: per-seed values paired by seed, every interior N's pair "
        f"in one Holm family, p < {ALPHA:g} and at least δ = {practical_threshold('retained_mass'):g}; the trough "
        "is not picked from the seed means first). Every *beyond noise* below is that rule; the test, its "
        "degrees of freedom and its Holm family are printed with each table. "
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
    "N matters (some pair of N)",
    "worst N",
    "dip and recovery (both ends − an interior N)",
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
        best = best_simulator(main, hard, targets[0])
        parts.append("### The simulator setting that predicts the transformer\n")
        parts.append(_best_line(best) + "\n")
    return parts


def ladder_section(ctx: Context) -> str:
    """Markdown for the ladder: per-rung N-shapes, focal effects, matched Q_pos, verdicts, the best simulator."""
    main, budget, hard = (ladder_result(ctx, f) for f in ("ladder", "ladder-budget", "ladder-hard"))
    mode = "quick ladders (`--quick`)" if ctx.quick else "full ladders"
    parts = [HEADING + "\n"]
    parts.append(_intro(mode))
    parts.append("- " + "\n- ".join(_describe(r.ladder) for r in (main, budget, hard)) + "\n")
    parts.append(f"### GRPO: M_ret against N on every rung (`{main.ladder.name}`; figure `ladder.png`)\n")
    parts.append(_shape_block(main))
    parts.append(_lemma_line(main) + "\n")
    parts.append("### Focal weight: ΔM_ret = M_ret(γ) − M_ret(0), paired by seed\n")
    parts.append(_focal_block(main))
    parts.append(
        "### At matched Q_pos (figure `frontier.png`)\n\n"
        "Rungs learn at different speeds, so M_ret is also read along training, where each run's trained-on Q_pos "
        "first reaches a common target (its rung's start plus half the smallest γ = 0 gain over N). *N matters* "
        f"when some pair of N is resolved by {RULE}, on per-seed values paired by seed where both N reached the "
        "target on the same seeds, else Welch, every pair one part of one Holm family per rung (not corrected "
        "across rungs); *dip and recovery* as above.\n"
    )
    parts.append(table(_MATCHED_HEADER, _matched_rows(main)))
    parts.append("")
    parts.append(f"### Equal rollout budget (`{budget.ladder.name}`)\n")
    parts.append(_shape_block(budget))
    parts.append(f"### Difficulty (`{hard.ladder.name}`)\n")
    parts.append(_shape_block(hard))
    parts.append(_lemma_line(hard) + "\n")
    verdicts = la.ingredient_verdicts(main, budget, hard)
    parts += _verdict_parts(main, hard, verdicts)
    parts.append("### Where the paper's claims do and do not appear\n")
    parts.append(_claims_text(main, verdicts) + "\n")
    return "\n".join(parts)


def _focal_line(family: int, focal) -> str:
    """The focal weight's bullet: where it raises and lowers M_ret (``focal``: the printed rows, Holm ``family``)."""
    keys = ["rung", "set", "gamma"]
    helps = focal.groupby(keys)["mean"].mean()
    most = (focal.assign(up=focal["outcome"] == Outcome.HIGHER).groupby(keys)["up"].mean() > 0.5).sum()
    down = focal[focal["outcome"] == Outcome.LOWER].drop_duplicates(keys)
    where = ", ".join(f"`{r.rung}` ({_where(r.set)}, γ = {r.gamma:g})" for r in down.itertuples())
    return (
        f"- The focal weight raises mean M_ret over N on {int((helps > 0).sum())} of {len(helps)} rung × prompts "
        f"× γ cells, resolved higher (paired t, Holm over the focal table's {family} cells, δ = "
        f"{practical_threshold('retained_mass'):g}) at most N on {int(most)} of them (F-GRPO: γ = 1 lifts M_ret, "
        "mostly in zone II); it lowers M_ret, resolved the same way, at some N on "
        + (f"{len(down)}: {where}" if len(down) else "none")
        + ". Under SGD it also shrinks the step (g ≤ 1 multiplies the gradient), under Adam much less (Adam "
        "divides the scale out), so SGD rows mix the two effects."
    )


def _claims_text(main, verdicts) -> str:
    shape = _informative(main, la.shape_table(main.final))
    base = shape[shape["gamma"] == 0]
    label = {"yes": [], "**no**": [], "cannot tell": []}
    for _, r in base.iterrows():
        label[_regime(r)].append(f"`{r['rung']}` ({_where(r['set'])})")
    dips = [
        f"`{r['rung']}` ({_where(r['set'])}, {r['recovery'].cell(most=2)})" for _, r in base.iterrows() if r["recovers"]
    ]
    proper = [f"`{r['rung']}` ({_where(r['set'])})" for _, r in base.iterrows() if "III" in (r.get("zones") or ())]
    changes = [f"{v.ingredient} ({v.comparison}): {verdict_text(v)}" for v in verdicts if v.effect != "none"]
    trends = [f"{v.ingredient} ({v.comparison})" for v in verdicts if v.reverses_trend]
    matched = la.matched_shape_table(main.history)
    matters = {r["rung"]: _told(r["n_matters"], r["spread"]) for _, r in matched.iterrows()}
    untold = [f"`{r}`" for r, v in matters.items() if v == "cannot tell"]
    lines = [
        "- The large-N regime (F-GRPO Fig. 2's zone III, or a dip and recovery of M_ret resolved by the noise rule) "
        "at γ = 0: present on "
        + (", ".join(label["yes"]) if label["yes"] else "**no rung**")
        + "; absent on "
        + (", ".join(label["**no**"]) if label["**no**"] else "none")
        + (f"; too few seeds to tell on {', '.join(label['cannot tell'])}" if label["cannot tell"] else "")
        + ". Zone III itself (M_ret back at or above the threshold above a zone-II N): "
        + (", ".join(proper) if proper else "**on no rung**")
        + ".",
        "- A dip and recovery of M_ret over N resolved by the noise rule (F-GRPO Table 2's non-monotone shape: for "
        "some N strictly inside the sweep, both ends higher): " + (", ".join(dips) if dips else "**on no rung**") + ".",
        "- Ingredients that change whether the large-N regime appears: "
        + ("; ".join(changes) if changes else "**none** of those tested")
        + (". Ingredients that reverse the direction of M_ret in N: " + "; ".join(trends) if trends else "")
        + ".",
        "- At matched Q_pos (one retention/accuracy frontier per N, figure `frontier.png`), N changes the retained "
        "mass beyond noise (some pair of N, every pair in one Holm family, the noise rule) on "
        + (", ".join(f"`{r}`" for r, v in matters.items() if v == "yes") or "**no rung**")
        + "; no difference is resolved (consistent with one frontier) on "
        + (", ".join(f"`{r}`" for r, v in matters.items() if v == "**no**") or "**no rung**")
        + (f"; too few seeds to tell on {', '.join(untold)}" if untold else "")
        + ". Where every N shares one frontier, a larger N only travels further along it in the same number of "
        "steps, so at equal steps M_ret falls with N.",
    ]
    if not (focal := la.focal_table(main.final)).empty:
        lines.append(_focal_line(_family(focal), _informative(main, focal)))
    return "\n".join(lines)


def write(ctx: Context, deferred: tuple[str, ...] = ()) -> Section:
    """The ladder section (its verdicts are its own; the ledger's claims are judged by the other sections)."""
    return Section(ladder_section(ctx), [])
