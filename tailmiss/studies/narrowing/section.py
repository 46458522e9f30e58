"""The report's "The narrowing regime" section: the paper's LLM claims where RL loses coverage.

Numbers and verdicts come from :mod:`tailmiss.studies.narrowing.claims` over
:func:`tailmiss.studies.narrowing.data.narrowing_data`; this module only writes them.
"""

from __future__ import annotations

import numpy as np

from tailmiss.studies import ledger
from tailmiss.studies.context import Context
from tailmiss.studies.narrowing import claims as nc
from tailmiss.studies.narrowing.attribution_text import attribution_lines
from tailmiss.studies.narrowing.controls_text import controls_lines
from tailmiss.studies.narrowing.counterfactual import counterfactual_part
from tailmiss.studies.narrowing.data import narrowing_data
from tailmiss.studies.narrowing.end_point_text import answer_lines, end_point_lines
from tailmiss.studies.narrowing.frontier_text import frontier_lines
from tailmiss.studies.narrowing.plateau_claims import answer_verdict
from tailmiss.studies.narrowing.plateau_text import plateau_lines
from tailmiss.studies.narrowing.search import LEVELLED, MIN_RISE, SATURATED
from tailmiss.studies.narrowing.settings_text import settings_lines
from tailmiss.studies.narrowing.sharing_text import sharing_lines
from tailmiss.studies.rule import Verdict
from tailmiss.studies.text import Section, table, yes

__all__ = ["HEADING", "DEFERRED_WHY", "write", "narrowing_text"]

HEADING = "## The narrowing regime: where GRPO loses coverage, is F-GRPO more than a slower GRPO?"
"""The start of the section's heading line."""
_TYPE = {"minority": "minority", "rest": "rest", "all": "all"}


def _ms(mean: float, sd: float, digits: int = 3) -> str:
    return f"{mean:.{digits}f}" if not np.isfinite(sd) else f"{mean:.{digits}f}±{sd:.{digits}f}"


def _verdict(verdict) -> str:
    word = str(verdict)
    return f"**{word}**" if word == "refuted" else word


def _diff(d) -> str:
    return f"{d.describe()} → {d.outcome}"


def _search(c: nc.NarrowingClaims) -> list[str]:
    s = c.search
    if s is None:
        return []
    rows = [
        [
            f"{r.strength:g}",
            f"{r.sft_pass256:.3f}",
            _ms(r.final_pass256, r.final_pass256_sd),
            f"{r.drop:+.3f}",
            f"{r.sft_pass1:.3f} → {r.final_pass1:.3f}",
            f"{r.late_share:.2f}",
            f"{yes(r.unsaturated)} / {yes(r.narrows)} / {yes(r.levels)}",
        ]
        for r in s.table.itertuples()
    ]
    picked = f"strength {s.picked:g}" if s.picked is not None else "no setting"
    agree = (
        "the study below runs it"
        if s.agrees
        else f"**the study's preset runs strength {s.preset:g}, not the rule's pick**"
    )
    return [
        "**The search** (the rule and its grid were written before any N sweep, beside the presets in "
        "`tailmiss/experiments/narrowing_presets.py`): share 0.25, hidden, rule `complement`, GRPO N = 8 over 3 "
        f"seeds per strength. Rules: (1) SFT held-out pass@256 ≤ {SATURATED}; (2) final pass@256 below the SFT "
        f"model's by more than 2 seed sds; (3) pass@1 rises by more than {MIN_RISE} and the last third of the steps "
        f"adds at most {LEVELLED:.0%} of the rise. The rule picked **{picked}**; {agree}.",
        "",
        table(
            [
                "strength",
                "SFT pass@256",
                "final pass@256",
                "change",
                "pass@1 SFT → final",
                "last third's share of the rise",
                "rules 1 / 2 / 3",
            ],
            rows,
        ),
        "",
    ]


def _regime(c: nc.NarrowingClaims) -> list[str]:
    rows = [
        [
            r.label,
            _TYPE[r.type],
            f"{r.sft_pass1:.3f} → {_ms(r.final_pass1, r.final_pass1_sd)}",
            f"{r.sft_pass256:.3f} → {_ms(r.final_pass256, r.final_pass256_sd)}",
            f"{r.change256:+.3f}",
            str(r.seeds),
        ]
        for r in c.regime.itertuples()
    ]
    g8 = c.regime[(c.regime["label"] == nc.GRPO) & (c.regime["type"] == "all")]
    word = {
        Verdict.REPRODUCED: "GRPO N = 8 narrows",
        Verdict.REFUTED: "GRPO N = 8 does **not** narrow (shown not lower)",
    }.get(c.narrows, "Cannot tell; GRPO N = 8")
    lead = (
        f"**Does it narrow?** {word}: held-out pass@256 {g8['sft_pass256'].iloc[0]:.3f} (SFT) → "
        f"{_ms(g8['final_pass256'].iloc[0], g8['final_pass256_sd'].iloc[0])} at the final step; by the rule "
        f"({c.change.a} − {c.change.b} {c.change.describe()}: {c.change.outcome}; *lower* narrows, *not lower* does "
        "not) (figure `narrowing.png`)."
        if len(g8) and c.change is not None
        else "**Does it narrow?** GRPO N = 8 was not run."
    )
    return [
        lead,
        "",
        table(["run", "prompts", "pass@1 SFT → final", "pass@256 SFT → final", "pass@256 change", "seeds"], rows),
        "",
    ]


def _task_controls(c: nc.NarrowingClaims) -> list[str]:
    t = c.task_controls
    if t is None:
        return []
    rows = [
        [
            r.task,
            _TYPE[r.type],
            f"{r.sft_pass256:.3f}",
            _ms(r.final_pass256, r.final_pass256_sd),
            f"{r.change256:+.3f}",
            r.hidden_minus_this or "—",
            str(r.seeds),
        ]
        for r in t.itertuples()
    ]
    return [
        "**The task's controls** (GRPO N = 8, each task from its own SFT model; the study's seeds 0-4): the same "
        "conflict made visible by a marker in the prompt, and no conflict. The last column is the hidden task's "
        "change of pass@256 minus this task's (Welch's t on per-seed changes).",
        "",
        table(["task", "prompts", "SFT pass@256", "final pass@256", "change", "hidden − this (change)", "seeds"], rows),
        "",
    ]


def _nsweep(c: nc.NarrowingClaims) -> list[str]:
    t = c.nsweep
    rows = [
        [
            r.label,
            _ms(r.pass1, r.pass1_sd),
            _ms(r.pass256, r.pass256_sd),
            _ms(r.mret, r.mret_sd),
            _ms(r.dnll, r.dnll_sd, 2),
            f"{r.step:.0f}",
            str(int(r.seeds)),
        ]
        for r in t.itertuples()
    ]
    out = [
        "### F-GRPO Table 2 in this regime: GRPO at N = 2 … 32 and F-GRPO at N = 8",
        "",
        "At equal steps with the paper's checkpoint selection (the best held-out pass@1; a focal run no later than "
        "its GRPO baseline's choice), held-out prompts:",
        "",
        table(["run", "pass@1", "pass@256", "M_ret", "ΔNLL_rare", "selected step (mean)", "seeds"], rows),
        "",
    ]
    if c.pass1_sentence is not None:
        s = c.pass1_sentence
        out.append(f"- “{s.text}” (the largest − the smallest N higher, each step not lower): {s.cell(most=6)} "
                   f"→ **{s.verdict}**.")  # fmt: skip
    r = c.rungs
    if r is not None:
        dip = "not testable (no N near 8 inside)" if r.dip_sentence is None else r.dip_sentence.cell(most=12)
        out += [
            "- Table 2's dip (best at N = 2, worst near N = 8, partly recovered at N = 32; N = 2 not lower than each "
            f"other N, and some N of 8 and 16 below N = 2 and N = 32, the trough not picked): {dip} (the seed means' "
            f"worst N: {r.pass256_shape.worst_n}) → **{r.dip}**.",
            f"- ΔNLL_rare ordered N = 2 < N = 32 < N = 8: {r.dnll.cell()} → **{r.dnll.verdict}**.",
        ]
        for g, s in r.reach.items():
            out.append(f"- F-GRPO γ = {g:g} at N = 8 reaches GRPO N = 32's pass@256: {s.cell()} → **{s.verdict}**.")
    if c.tradeoff is not None:
        s = c.tradeoff
        out.append(f"- “{s.text}”: {s.cell()} → **{s.verdict}**.")
    if c.one_seed is not None:
        o = c.one_seed
        out.append(
            f"- Could one seed show Table 2's dip? Of the {o['sweeps']:,} sweeps made of one seed per N, "
            f"{o['p_table2']:.1%} show the paper's pattern (an interior minimum, a dip of at least 0.109 from N = 2 "
            f"and a recovery of at least 0.060 at N = 32) and {o['p_interior']:.1%} any interior minimum that "
            f"recovers; if N did nothing (the values exchangeable across N) these would be {o['null_table2']:.1%} "
            f"(one-seed sweeps drawn from the pooled values) and {o['null_interior']:.1%} (the least of "
            f"{len(o['ns'])} exchangeable values lies inside with chance {len(o['ns']) - 2}/{len(o['ns'])}); the "
            f"seed means' worst N is {o['mean_worst_n']}."
        )
    for name, d in c.rollouts.items():
        out.append(
            f"- At equal rollouts, {name}: {_diff(d)} (equal rollouts set a larger N at proportionally fewer steps, so "
            "this compares training progress as much as group size)."
        )
    return out + [""]


def _first_look(c: nc.NarrowingClaims) -> list[str]:
    """What the quick version shows and what it cannot (the first look's note)."""
    if not c.quick:
        return []
    g8 = c.regime[c.regime["label"] == nc.GRPO].set_index("type")
    seeds = int(g8.loc["all", "seeds"]) if "all" in g8.index else 0
    fall = (
        f"GRPO N = 8 takes held-out pass@256 from {g8.loc['all', 'sft_pass256']:.3f} to "
        f"{g8.loc['all', 'final_pass256']:.3f}, the minority's from {g8.loc['minority', 'sft_pass256']:.3f} to "
        f"{g8.loc['minority', 'final_pass256']:.3f} and the rest's from {g8.loc['rest', 'sft_pass256']:.3f} to "
        f"{g8.loc['rest', 'final_pass256']:.3f}"
        if {"all", "minority", "rest"} <= set(g8.index)
        else "GRPO N = 8 was not run"
    )
    return [
        f"**The first look** ({seeds} seed{'s' if seeds != 1 else ''}, {c.steps} RL steps; the quick preset's setting "
        "was picked by the rule in `tailmiss/experiments/narrowing_presets.py` on seeds 1-2, and the first look "
        f"shows seed 0): {fall}. With fewer than three seeds the noise rule cannot tell, so no verdict below says yes "
        "or no. The full study (`tailmiss repro --only "
        "narrowing`: 10 seeds of 400 steps with the search, the controls and the task's controls, about an hour and "
        "a half on two cores) answers whether GRPO narrows, the N shape, where F-GRPO lies against GRPO's frontier "
        "and what the controls do; the repository's `paper_repro.md` holds its answer.",
        "",
    ]


def _mechanism(c: nc.NarrowingClaims) -> str:
    """Each regime's mechanism, with what in this section tests this one's."""
    evidence = {
        True: "the ladder below finds that the per-prompt table policy keeps the minority's coverage and the "
        "transformer loses it",
        False: "the ladder below does **not** find that narrowing needs shared parameters",
        None: "the ladder below tests whether narrowing needs shared parameters",
    }[c.sharing.needs_sharing]
    return (
        "**Each regime's mechanism.** The learning regime (the sections above): coverage rises, and what RL does there "
        "is per-prompt sharpening (Lemma 3.1's tail miss acts on each prompt's own rare answers). This regime: "
        "coverage is lost through **interference between prompts**: updates on the rest, through parameters shared "
        f"across prompts, push down the minority's correct answers; {evidence}. Verdicts here are about this "
        "mechanism, not the paper's per-prompt one."
    )


def _gamma(c: nc.NarrowingClaims) -> list[str]:
    sensitivity = c.sensitivity
    g = sensitivity.gamma
    out = ["### Tables 6-7, 12-14 and Fig. 1(b,c) in this regime", ""]
    if g is not None and len(g):
        cells = ", ".join(
            f"γ = {r.gamma:g}: {_ms(r.pass1, r.pass1_sd)} / {_ms(r.pass256, r.pass256_sd)}" for r in g.itertuples()
        )
        out.append(f"- GRPO's γ sensitivity (pass@1 / pass@256): {cells}.")
    for s in (sensitivity.usual_sentence, sensitivity.two_sentence):
        if s is not None:
            out.append(f"- “{s.text}” (GRPO, its γ = 0.5, 1 and 2; one Holm family): {s.cell()} → **{s.verdict}**.")
    if sensitivity.curves is not None:
        exact = sensitivity.curves[sensitivity.curves["scoring"] == "exact"]
        for label in (nc.GRPO, nc.FOCAL, "F-GRPO γ=1 N=8"):
            mean = exact[exact["label"] == label].groupby("k")["value"].mean()
            if len(mean):
                cells = ", ".join(f"k = {k}: {v:.3f}" for k, v in mean.items() if k in (1, 4, 16, 64, 256))
                out.append(f"- pass@k of {label} (exact, selected checkpoints): {cells}.")
    if sensitivity.lead_sentence is not None:
        s = sensitivity.lead_sentence
        out.append(
            f"- “{s.text}” (our reading of Tables 12-14: the lead at k = 256 higher and grown from k = 1): {s.cell()} "
            f"→ **{s.verdict}**."
        )
    if c.fig1bc is not None:
        out.append(f"- Fig. 1(b,c) (“{c.fig1bc.text}”): {c.fig1bc.cell(most=6)} → **{c.fig1bc.verdict}**.")
    return out + [""]


def _typed(c: nc.NarrowingClaims) -> list[str]:
    t = c.typed
    f = c.finals.set_index(["label", "type"]) if c.finals is not None else None
    order = ["SFT", *(f"GRPO N={n}" for n in (2, 4, 8, 16, 32)), nc.FOCAL, "F-GRPO γ=1 N=8", nc.LOW_LR]
    order += ["GRPO N=8 DS", "GRPO N=8 DS-2e-1"]
    rows = []
    for label in order:
        for kind in ("minority", "rest"):
            r = t[(t["label"] == label) & (t["type"] == kind)]
            if r.empty:
                continue
            r = r.iloc[0]
            cells = [_ms(r[f"pass{k}"], r[f"pass{k}_sd"]) for k in (1, 16, 256)]
            if f is not None and (label, kind) in f.index:
                e = f.loc[(label, kind)]
                cells += [_ms(e["mret"], e["mret_sd"]), _ms(e["dnll"], e["dnll_sd"], 2)]
            else:
                cells += ["1 (the reference)", "0"] if label == "SFT" else ["—", "—"]
            rows.append([label, kind, *cells, str(int(r["seeds"]))])
    return [
        "### By prompt type (the final step)",
        "",
        "Held-out pass@k from the per-prompt correct masses of the last evaluation; M_ret (one minus the SFT model's "
        "correct mass lost answer by answer, over its correct mass) and ΔNLL_rare (the change of the rare correct "
        "answers' NLL, nats per token) from the final models scored again on each type against the SFT model"
        + (" (in the full study only: the first look does not score its models again)." if c.quick else "."),
        "",
        table(["run", "prompts", "pass@1", "pass@16", "pass@256", "M_ret", "ΔNLL_rare", "seeds"], rows),
        "",
    ]


def _record(c: nc.NarrowingClaims) -> list:
    rows = []
    s = c.pass1_sentence
    if s is not None:
        rows += ledger.row("t2-pass1", s.cell(most=2), s.verdict)
    if c.rungs is not None:
        r = c.rungs
        if r.dip_sentence is not None:
            rows += ledger.row("t2-dip", r.dip_sentence.cell(most=2), r.dip)
        rows += ledger.row("t2-dnll", r.dnll.cell(), r.dnll.verdict)
        if 0.5 in r.reach:
            rows += ledger.row("t2-reach", r.reach[0.5].cell(), r.reach[0.5].verdict)
    if c.tradeoff is not None:
        rows += ledger.row("t2-tradeoff", c.tradeoff.cell(), c.tradeoff.verdict)
    for key, sentence in c.sentences:
        rows += ledger.row(key, sentence.cell(most=3), sentence.verdict)
    sensitivity = c.sensitivity
    for key, sentence in (("t67-usual", sensitivity.usual_sentence), ("t67-two", sensitivity.two_sentence),
                          ("t1214", sensitivity.lead_sentence)):  # fmt: skip
        if sentence is not None:
            rows += ledger.row(key, sentence.cell(most=3), sentence.verdict)
    if c.fig1bc is not None:
        rows += ledger.row("fig1bc", c.fig1bc.cell(most=3), c.fig1bc.verdict)
    return rows + _appn(c)


def _appn(c: nc.NarrowingClaims) -> list:
    """The ledger's App. N row: from the runs to the plateau (F-GRPO γ = 0.5 against GRPO at lr × m_0.5, the
    paper's control; the frontier and the end point together, from the end-point runs where the report has them)
    when the report has them, else from the 400-step frontier."""
    main = next((a for a in c.answers if a.gamma == 0.5 and a.against == "GRPO at lr × m_γ"), None)
    if main is not None:
        a, b = main.pair
        end = main.end.describe() if main.end is not None else f"cannot tell ({' and '.join(main.late)} not plateaued)"
        text = (
            f"{a} − {b}, seeds {min(main.seeds)}-{max(main.seeds)} to step {main.steps}: frontier "
            f"{main.frontier.describe()}; end point {end} → more than a slower GRPO: {main.word}"
        )
        return ledger.row("appN-frontier", text, answer_verdict(main.word))
    _, frontier = nc.answer(c)
    if frontier is None:
        return []
    text = f"F-GRPO γ = 0.5 against GRPO N = 8: {frontier.describe()}"
    if frontier.diffs:
        d = max(frontier.diffs, key=lambda x: abs(x.mean) if x.mean == x.mean else -1.0)
        text += f"; its largest level: {d.a} − {d.b} {d.metric} {d.describe()}: {d.outcome}"
    return ledger.row("appN-frontier", text, nc.frontier_word(frontier))


def narrowing_text(c: nc.NarrowingClaims) -> Section:
    """The section's body from computed claims, and its ledger rows."""
    parts = [
        HEADING,
        "",
        "Under the paper's protocol the miniature raises coverage (the sections above), so those verdicts judge a "
        "model that loses nothing. This section builds a regime where RL **narrows**: the narrowing task "
        "(`tailmiss.llm.tasks.narrowing.NarrowingTask`) is task (a) with a conflict between prompts that the "
        "policy cannot resolve from the prompt: on a quarter of the prompts (the *minority*, picked by a hash the "
        "model cannot read) the rule of the rest is wrong (an answer is correct there iff it uses **no** listed "
        "digit). Every metric stays exact. A conflict between prompts is one mechanism of narrowing, not "
        "necessarily the paper's.",
        "",
        _mechanism(c),
        "",
        *_first_look(c),
        *_search(c),
        *_regime(c),
        *_task_controls(c),
        *_nsweep(c),
        *frontier_lines(c),
        *plateau_lines(c.plateau),
        *end_point_lines(c.endpoint, c.seed_count),
        *(answer_lines(c.answers) if c.endpoint is not None else []),
        *settings_lines(list(c.settings)),
        *controls_lines(c),
        *_gamma(c),
        *_typed(c),
        *sharing_lines(c),
        *attribution_lines(c.attribution),
        *counterfactual_part(c.counterfactual),
    ]
    return Section("\n".join(parts), _record(c))


DEFERRED_WHY = (
    "Its verdicts rest on 5-10 seeds of 400 steps from one SFT model of the narrowing task (about an "
    "hour on two cores); the quick version trains GRPO, F-GRPO (γ = 0.5, 1) and low-LR at N = 8 for 40 steps with "
    "one seed, enough to see pass@256 fall below the SFT model's and too little for any verdict."
)
"""Why a report may leave this study out, in its deferral note (the first look shows its quick version)."""


def write(ctx: Context, deferred: tuple[str, ...] = ()) -> Section:
    """The section and its ledger rows, from the cached sweeps (run if missing); the study's writer."""
    return narrowing_text(nc.narrowing_claims(narrowing_data(ctx)))
