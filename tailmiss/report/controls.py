"""The report's "Controls and γ sensitivity" section: F-GRPO Tables 3, 6-7, 12-14 and Fig. 1(b,c) in miniature.

Numbers and verdicts come from :mod:`tailmiss.results.claims.controls` over
:func:`tailmiss.results.controls_data`; this module only writes them.
"""

from __future__ import annotations

import numpy as np

from tailmiss.analytic import lr_matched_scale
from tailmiss.report import ledger
from tailmiss.report.text import table
from tailmiss.results import Context, controls_data
from tailmiss.results.claims import controls as cc

__all__ = ["CONTROLS_HEADING", "controls_section", "controls_text"]

CONTROLS_HEADING = "## Controls and γ sensitivity: F-GRPO Tables 3, 6-7, 12-14 and Fig. 1(b,c)"
PAPER_GAMMA = {"GRPO": 0.5, "DAPO": 0.5, "CISPO": 1.0}
"""F-GRPO Table 7's selected γ on Qwen2.5-7B (0.5 in 7 of the 9 model/method pairs)."""
_NAMES = {"pass1": "pass@1", "pass256": "pass@256", "mret": "M_ret", "dnll": "ΔNLL_rare", "rare256": "rare hit@256"}


def _ms(mean: float, sd: float, digits: int = 3) -> str:
    return f"{mean:.{digits}f}" if not np.isfinite(sd) else f"{mean:.{digits}f}±{sd:.{digits}f}"


def _outcome(d: cc.PairedDiff) -> str:
    if d.outcome is None:
        return "cannot tell (1 seed)"
    return {"higher": "higher", "lower": "lower", "tie": "tie"}[d.outcome]


def _diff(d: cc.PairedDiff, digits: int = 3) -> str:
    """``+0.012 ± 0.004 (t: 0.005) → higher``: mean, sd of the per-seed differences, the rule's threshold."""
    if d.outcome is None:
        return f"{d.mean:+.{digits}f} (1 seed: cannot tell)"
    return f"{d.mean:+.{digits}f} (sd {d.sd:.{digits}f}, threshold {d.threshold:.{digits}f}) → {_outcome(d)}"


def _verdict(word: str) -> str:
    return {"yes": "yes", "no": "**no**"}.get(word, word)


def _controls_rows(claims: cc.ControlsClaims) -> list[list[str]]:
    rows = []
    for _, r in claims.controls.iterrows():
        tag = r["label"].removeprefix("GRPO N=8 ")
        name = cc.CONTROL_TAGS.get(tag, r["label"])
        cells = [_ms(r[m], r[f"{m}_sd"], 2 if m == "dnll" else 3) for m in _NAMES]
        rows.append([name, *cells, str(int(r["seeds"]))])
    return rows


def _sentence_rows(claims: cc.ControlsClaims) -> list[list[str]]:
    rows = []
    for s in claims.sentences:
        parts = "; ".join(f"{d.a} − {d.b}, {_NAMES[d.metric]}: {_diff(d)} (want {want})" for d, want in s.parts)
        rows.append([f"“{s.text}”", parts, _verdict(s.verdict)])
    return rows


def _gamma_rows(claims: cc.ControlsClaims) -> list[list[str]]:
    rows = []
    for method in cc.METHODS.values():
        t = claims.gamma[claims.gamma["method"] == method].set_index("gamma")
        if t.empty:  # a method the sweeps did not run (the quick presets leave CISPO out)
            continue
        cells = []
        for g in cc.GAMMAS:
            if g in t.index:
                r = t.loc[g]
                cells.append(f"{_ms(r['pass1'], r['pass1_sd'])} / {_ms(r['pass256'], r['pass256_sd'])}")
            else:
                cells.append("—")
        rows.append([method, *cells])
    return rows


def _choice_rows(claims: cc.ControlsClaims) -> list[list[str]]:
    rows = []
    for c in claims.choices:
        best = [
            f"γ = {c.best[m]:g} ({'beyond the spread' if c.resolved[m] else 'not resolved'})"
            for m in _NAMES
            if m in c.best
        ]
        against = "; ".join(f"vs γ = {g:g}: {_diff(d)}" for g, d in c.selected_beats.items()) or "—"
        rows.append([c.method, *best, f"γ = {c.selected:g}", against, f"γ = {PAPER_GAMMA[c.method]:g}"])
    return rows


def _gamma_sentences(claims: cc.ControlsClaims) -> list[str]:
    picks = claims.choices
    halves = sum(c.selected == 0.5 for c in picks)
    resolved = [c for c in picks if c.selected_beats and all(d.outcome == "higher" for d in c.selected_beats.values())]
    lines = [
        f"- “γ = 0.5 is the usual choice” (F-GRPO Table 7; rule: the §7.1 selection picks 0.5 for most methods): "
        f"{'yes' if claims.gamma_usual else '**no**'}, {halves} of {len(picks)} methods. The selection beats every "
        f"other focal γ on pass@1 beyond the spread for {len(resolved)} of {len(picks)} "
        f"({', '.join(c.method for c in resolved) or 'none'}); where it does not, the seeds do not single out a γ, and "
        "the choice is only the largest of near-equal means.",
    ]
    two = [
        f"{name}: pass@256 {_diff(d['pass256'])}, pass@1 {_diff(d['pass1'])}" for name, d in claims.gamma_two.items()
    ]
    if two:
        lines.append(
            "- “γ = 2 sometimes adds pass@256 but more often costs pass@1” (F-GRPO §7.1), γ = 2 − γ = 0.5: "
            + "; ".join(two)
            + "."
        )
    for name in claims.identical:  # the tables would otherwise hide it
        lines.append(
            f"- {name}'s runs coincide with GRPO's at every γ (|Δ pass@256| < 1e-6): at this learning rate the "
            "policy moves so little per step that no mini-batch's importance ratio reaches a clip bound, and "
            f"without clipping {name}'s gradient is GRPO's. Its rows are GRPO's, not evidence about {name}."
        )
    return lines


def _crossing_rows(claims: cc.ControlsClaims) -> list[list[str]]:
    rows = []
    picks = {1: 0, 16: 4, 256: 8}
    for c in claims.crossings:
        cells = [_diff(c.diffs[i]) for i in picks.values()]
        cross = "none" if c.cross_k is None else f"k = {c.cross_k}"
        held = "not at k = 256" if c.resolved_k is None else f"{c.resolved} from k = {c.resolved_k}"
        rows.append([f"{c.focal} − {c.base}", c.scoring, *cells, cross, held])
    return rows


def _curve_rows(claims: cc.ControlsClaims) -> list[list[str]]:
    exact = claims.curves[claims.curves["scoring"] == "exact"]
    means = exact.groupby(["label", "k"])["value"].mean().unstack("k")
    labels = [lab for lab in claims.tradeoff["label"] if lab in means.index]
    return [[lab, *(f"{means.loc[lab, k]:.3f}" for k in cc.KS)] for lab in labels]


def _tradeoff_rows(claims: cc.ControlsClaims) -> list[list[str]]:
    return [
        [r["label"], _ms(r["pass1"], r["pass1_sd"]), _ms(r["pass256"], r["pass256_sd"]), str(int(r["seeds"]))]
        for _, r in claims.tradeoff.iterrows()
    ]


def _tradeoff_lines(claims: cc.ControlsClaims) -> list[str]:
    lines = []
    focal = cc.focal_label(cc.FOCAL_GAMMA)
    for key, (d1, d256) in claims.tradeoff_diffs.items():
        lines.append(f"- {focal} {key}: pass@1 {_diff(d1)}; pass@256 {_diff(d256)}.")
    lines.append(
        "- Fig. 1(b,c)'s reading “F-GRPO N = 8 improves both pass@1 and pass@256 over GRPO N = 8” (AIME25 +3.5 / "
        f"+11.8 points, IFEval +1.9 / +5.4; rule: both paired differences higher): "
        f"{_verdict(claims.tradeoff_sentence.verdict)}."
    )
    return lines


def _conclusion(claims: cc.ControlsClaims) -> list[str]:
    """What the controls say, from the paired differences against GRPO N = 8 (each with its outcome)."""
    parts = []
    for row, d in claims.against_grpo.items():
        name = cc.CONTROL_TAGS.get(row.removeprefix("GRPO N=8 "), row)
        parts.append(
            f"{name}: "
            + ", ".join(f"{_NAMES[m]} {d[m].mean:+.4f} ({_outcome(d[m])})" for m in ("pass256", "pass1", "mret"))
        )
    lines = [
        "Each row against GRPO N = 8, paired by seed: " + "; ".join(parts) + ". The seeds share the SFT model, the "
        "prompt order and the evaluation set, so pairing resolves differences as small as 1e-4: “higher” and "
        "“lower” say the sign is beyond seed noise, not that the difference matters."
    ]
    if claims.low_lr_undertrains:
        last, runs = claims.last_epoch
        grpo_256 = float(claims.controls.set_index("label").loc[cc.focal_label(0.0), "pass256"])
        lines.append(
            "The low-LR control learns less in the same budget (its pass@1 is lower too): GRPO's best held-out "
            f"pass@1 is at the last epoch in {last} of {runs} runs, so a smaller step under-trains rather "
            "than protects the tail. The paper's control asks whether a gentler GRPO step keeps the tail that GRPO "
            f"loses over training; here GRPO loses none (pass@256 {claims.start['pass256']:.3f} for the SFT "
            f"model, {grpo_256:.3f} at GRPO's selected checkpoint), so the control cannot answer that question."
        )
    return lines


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _seeds(claims: cc.ControlsClaims) -> int:
    return int(claims.controls["seeds"].min())


def _record(claims: cc.ControlsClaims) -> None:
    """Table 3's sentences, Tables 6-7, 12-14 and Fig. 1(b,c), for the claims ledger."""
    words = {"yes": True, "no": False, "not resolved": None, "cannot tell": None}
    for key, s in zip(("t3-lowlr", "t3-ds", "t3-best"), claims.sentences):
        parts = "; ".join(f"{d.a} − {d.b} {_NAMES[d.metric]} {d.mean:+.4f}" for d, _ in s.parts)
        ledger.record(key, parts, words[s.verdict])
    picks = claims.choices
    halves = sum(c.selected == 0.5 for c in picks)
    ledger.record("t67-usual", f"§7.1's rule picks γ = 0.5 for {halves} of {len(picks)} methods", claims.gamma_usual)
    if claims.gamma_two:
        costs = [d["pass1"].outcome for d in claims.gamma_two.values()]
        text = "; ".join(f"{n}: pass@1 {d['pass1'].mean:+.4f}, pass@256 {d['pass256'].mean:+.4f}"
                         for n, d in claims.gamma_two.items())  # fmt: skip
        verdict = None if all(o is None for o in costs) else sum(o == "lower" for o in costs) * 2 >= len(costs)
        ledger.record("t67-two", f"γ = 2 − γ = 0.5: {text}", verdict)
    exact = [c for c in claims.crossings if c.scoring == "exact" and c.base.startswith("GRPO")]
    if exact:
        c = exact[0]
        grows = None if c.resolved_k is None else (c.cross_k is None and c.resolved == "higher")
        ledger.record(
            "t1214",
            f"{c.focal} − {c.base}, exact pass@k: {c.diffs[0].mean:+.4f} at k = 1, {c.diffs[-1].mean:+.4f} at k = 256"
            + ("" if c.cross_k is None else f"; sign change at k = {c.cross_k}"),
            grows,
        )
    s = claims.tradeoff_sentence
    parts = "; ".join(f"{_NAMES[d.metric]} {d.mean:+.4f}" for d, _ in s.parts)
    ledger.record("fig1bc", f"F-GRPO N = 8 − GRPO N = 8: {parts}", words[s.verdict])


def controls_text(claims: cc.ControlsClaims) -> str:
    """The section's body from computed claims."""
    _record(claims)
    names = claims.names
    presets = ", ".join(f"`{names[f]}`" for f in names)
    t_crit = "t₀.₉₇₅,ₙ₋₁" if _seeds(claims) > 1 else "(one seed: no test)"
    parts = [
        CONTROLS_HEADING,
        "",
        f"All rows train on the paper's protocol at N = 8 from one SFT model ({presets}), "
        f"{_plural(_seeds(claims), 'seed')}, the same seeds in every row, each run read at the paper's selected "
        "checkpoint (best held-out pass@1; a focal run no later than its γ = 0 baseline's). Metrics on the "
        f"{claims.prompts} held-out prompts from exact correct masses. The controls at the paper's settings: GRPO at "
        f"lr × m₀.₅ (`analytic.lr_matched_scale(0.5)` = {lr_matched_scale(0.5):.4f}, F-GRPO App. N), entropy bonus "
        "1e-3, KL penalty 1e-3, and DS-GRPO (differential smoothing, Gai et al. 2025: −β log π(y) added to the reward "
        f"of correct rollouts only, β = {claims.overrides.get('DS', {}).get('transform_coef', float('nan')):g}, "
        "a value fixed "
        "before any run; the paper gives none). **Rule for every comparison**: paired by seed, the mean difference "
        f"against {t_crit} × its sd / √n (two-sided paired t-test, α = 0.05): beyond it “higher” or “lower”, "
        "within it a tie. A sentence is “yes” when every part goes its way, “**no**” when a part goes the other "
        "way, “not resolved” when a part is a tie.",
        "",
        "### Table 3: F-GRPO against the controls (figure `controls.png`)",
        "",
        table(["row", *_NAMES.values(), "seeds"], _controls_rows(claims)),
        "",
        table(["the paper's sentence", "paired differences (a − b)", "verdict"], _sentence_rows(claims)),
        "",
        "### Tables 6-7: γ sensitivity (figure `gamma.png`)",
        "",
        "pass@1 / pass@256 by γ at N = 8 (DAPO with its dynamic sampling):",
        "",
        table(["method", *(f"γ = {g:g}" for g in cc.GAMMAS)], _gamma_rows(claims)),
        "",
        table(
            [
                "method",
                "best γ for pass@1",
                "best γ for pass@256",
                "selected (§7.1: best pass@1 among 0.5, 1, 2)",
                "selected − other γ, pass@1",
                "paper (Table 7, Qwen2.5-7B)",
            ],
            _choice_rows(claims),
        ),
        "",
        *_gamma_sentences(claims),
        "",
        "### Tables 12-14: pass@k curves (figure `passk.png`)",
        "",
        f"Exact pass@k (mean over seeds) at k = {', '.join(map(str, cc.KS))}:",
        "",
        table(["run", *(f"k={k}" for k in cc.KS)], _curve_rows(claims)),
        "",
        f"F-GRPO (γ = {cc.FOCAL_GAMMA:g}) − base method by k, exact and the paper's way (`sampled`: "
        f"{cc.SAMPLES} answers per prompt drawn from the exact masses, the unbiased estimator, one draw per run); "
        "the crossing is the first k whose mean difference has the other sign than at k = 1 (a sign, not a verdict); "
        "the last column gives the k from which on every difference is resolved one way by the rule:",
        "",
        table(["pair", "scoring", "k = 1", "k = 16", "k = 256", "sign crossing", "resolved"], _crossing_rows(claims)),
        "",
        "### Fig. 1(b,c): the pass@1–pass@256 plane (figure `tradeoff.png`)",
        "",
        table(["run", "pass@1", "pass@256", "seeds"], _tradeoff_rows(claims)),
        "",
        *_tradeoff_lines(claims),
        "",
        "### What the controls say",
        "",
        *_conclusion(claims),
        "",
    ]
    return "\n".join(parts)


def controls_section(ctx: Context) -> str:
    """The section, from the cached sweeps (run if missing)."""
    return controls_text(cc.controls_claims(controls_data(ctx)))
