"""The report's shared-rung section: does a policy that shares parameters across prompts, and nothing more, narrow?

Its text states the policy and the rules (:data:`ABOUT`, :data:`RULES`); the numbers come from
:func:`tailmiss.studies.narrowing.sharing.sharing_claims` over the four rungs' runs
(:func:`tailmiss.studies.sharing.data.shared_rung_data`)."""

from __future__ import annotations

import numpy as np

from tailmiss.studies import ledger
from tailmiss.studies.context import Context
from tailmiss.studies.narrowing.sharing import RUNG_NAMES, narrows_word, sharing_claims
from tailmiss.studies.narrowing.sharing import describe as describe_difference
from tailmiss.studies.rule import Outcome, Verdict, compare_values, judge
from tailmiss.studies.sharing.data import SharedRungData, rung_kind, shared_rung_data
from tailmiss.studies.sharing.frontier import RULES as FRONTIER_RULES
from tailmiss.studies.sharing.frontier import frontier_rows, plateau_history
from tailmiss.studies.sharing.frontier import reproduces as reproduces_frontier
from tailmiss.studies.sharing.nshape import RULES as N_RULES
from tailmiss.studies.sharing.nshape import n_shape_rows, reproduces
from tailmiss.studies.sharing.simulator import RULES as SIMULATOR_RULES
from tailmiss.studies.sharing.simulator import SIMULATOR, simulator_bridge
from tailmiss.studies.text import Section, blocks, table

__all__ = ["HEADING", "DEFERRED_WHY", "MODELS", "ABOUT", "RULES", "shared_rung_section", "zones_row", "write"]

HEADING = "## Sharing across prompts: the shared rung on the narrowing task"
"""The start of the section's heading line."""
DEFERRED_WHY = "The shared rung trains its own ladder on the narrowing task's SFT model."
"""Why the report may leave this study out, in its deferral note."""
MODELS = {**RUNG_NAMES, "shared": "shared (log-linear across prompts)"}
"""The rungs' models in the report's words."""
ABOUT = (
    "The shared rung (`tailmiss.llm.tabular.SharedPolicy`) has logits z(x, a) = c(x, a) + φ(x)ᵀ W ψ(a): c holds the "
    "SFT model's exact log-probabilities (frozen, so the rung starts at the SFT model's law exactly: the fit's KL is "
    "0), W is trained from zero, φ(x) marks which digits the prompt lists (and a constant), ψ(a) the answer's digit "
    "at each position. An update on one prompt moves every prompt that lists the same digits: the interference "
    "between prompts the narrowing task's conflict works through. The table (one softmax per prompt) has none."
)
"""What the shared rung is, in the report's words."""
RULES = (
    "**Rules** (the narrowing ladder's, `tailmiss.studies.narrowing.sharing`; they were committed with the shared "
    "rung's results (6a65856), not before them, and amended on 2026-12-06 to the report's one rule; the shared rung's "
    "rate came from the learning ladder's calibration rule, not from this task): a rung *narrows* a prompt type when "
    "the type's final pass@256 is *lower* than the SFT model's by the noise rule, paired by seed, and *does not* when "
    "it is shown *not lower* (a tie: cannot tell); the focal weight's effect on a rung is F-GRPO (γ = 1) − GRPO on "
    "the type's final pass@256, paired by seed, every rung and type of the table one Holm family (amended on "
    "2026-12-07: each effect was a family of its own). *Sharing of this kind is enough to narrow* when the shared "
    "rung's minority change under GRPO is *lower* and the table's *not lower*, one Holm family. The focal weight "
    "*acts on the shared rung as on the transformer* when both effects on the minority are *higher* and the two "
    "effects are the *same* within the margin (two one-sided Welch tests on the per-seed effects), one Holm family."
)
"""The section's rules, in the report's words."""


def _ms(mean: float, sd: float) -> str:
    return f"{mean:.3f}" if not np.isfinite(sd) else f"{mean:.3f}±{sd:.3f}"


def _row(r) -> list[str]:
    """A table row: the policy, the run and prompt type, pass@1 and pass@256 from the SFT model to the end (seed
    mean ± sd), the change of pass@256, whether it narrows, the seeds."""
    pass1 = f"{r.sft_pass1:.3f} → {r.final_pass1:.3f}"
    pass256 = f"{r.sft_pass256:.3f} → {_ms(r.final_pass256, r.final_pass256_sd)}"
    model = MODELS.get(rung_kind(r.rung), r.rung)
    return [model, r.label, r.type, pass1, pass256, f"{r.change256:+.3f}", narrows_word(r.narrows), str(r.seeds)]


_ANSWER = {Verdict.REPRODUCED: "**yes**", Verdict.REFUTED: "**no**"}


def _answer(s) -> str:
    """A sentence's answer: **yes** (reproduced), **no** (refuted), else *cannot tell* with why, and its cell."""
    if s is None:
        return "cannot tell (a rung or its comparison is missing)"
    why = "too few seeds or identical runs" if s.verdict == Verdict.CANNOT_TELL else f"{s.verdict}: a tie is not a *no*"
    word = _ANSWER.get(s.verdict, f"cannot tell ({why})")
    return f"{word} ({s.cell()})"


def _answers(c, ladder: dict) -> tuple[str, str]:
    """The two answers ("enough to narrow?", "the focal weight as on the transformer?") in words."""
    minority = c.table[(c.table["type"] == "minority") & (c.table["label"] == "GRPO N=8")]
    changes = {rung_kind(r.rung): r.change for r in minority.itertuples()}
    narrow = None
    if {"shared", "table"} <= set(changes):
        parts = [(changes["shared"], "lower"), (changes["table"], "not lower")]
        narrow = judge("the shared rung narrows the minority and the table does not", parts)
    focal = {rung_kind(rung): d for (rung, kind), d in c.focal.items() if kind == "minority"}
    same = None
    if {"shared", "transformer"} <= set(focal):
        effects = {k: _effects(ladder, k) for k in ("shared", "transformer")}
        gap = compare_values(effects["shared"], effects["transformer"], "pass256", paired=False,
                             labels=("shared focal effect", "transformer focal effect"))  # fmt: skip
        parts = [(focal["shared"], "higher"), (focal["transformer"], "higher"), (gap, "same")]
        same = judge("the focal weight acts on the shared rung as on the transformer", parts)
    return _answer(narrow), _answer(same)


def _effects(ladder: dict, kind: str):
    """Per seed, F-GRPO − GRPO final minority pass@256 of the rung of model ``kind``."""
    import pandas as pd

    typed = next(t for name, t in ladder.items() if rung_kind(name) == kind)
    part = typed[typed["type"] == "minority"]
    last = part.groupby(["label", "seed"])["step"].transform("max")
    wide = part[part["step"] == last].pivot_table(index="seed", columns="label", values="pass256")
    return pd.Series(wide["F-GRPO γ=1 N=8"] - wide["GRPO N=8"]).dropna().to_numpy()


def shared_rung_section(data: SharedRungData) -> str:
    """The section's markdown from :func:`tailmiss.studies.sharing.data.shared_rung_data`."""
    c = sharing_claims(data.ladder)
    rows = [_row(r) for r in c.table[c.table["type"] != "all"].itertuples()]
    focal = [
        f"- {MODELS.get(rung_kind(rung), rung)}, {kind}: {describe_difference(d)}"
        for (rung, kind), d in c.focal.items()
    ]
    narrow, same = _answers(c, data.ladder)
    return blocks(
        HEADING,
        ABOUT,
        RULES,
        f"Every rung from the {'first look' if data.quick else 'study'}'s SFT model (exact per-prompt distributions), "
        f"{c.steps} steps on a fixed pool of 64 prompts that is also the evaluation set, GRPO and F-GRPO (γ = 1) at "
        f"N = 8 (presets `{data.names[0]}` and `{data.names[1]}`; the rungs' rates: the learning ladder's rule). The "
        "table, factorized and transformer rows are this section's own runs of the narrowing ladder: CPU float results "
        "depend on the host and the thread count, down to the SFT model itself, so they need not match the narrowing "
        "section's table of the same preset digit for digit; every row here starts from one SFT model.",
        table(["policy", "run", "prompts", "pass@1", "pass@256", "change", "narrows", "seeds"], rows),
        f"Is sharing of this simple kind enough to narrow? {narrow}.",
        f"Does the focal weight act on the shared rung as on the transformer? {same}. F-GRPO − GRPO, final pass@256:",
        focal,
        *_simulator_part(data),
        *_n_shape_part(data),
        *_frontier_part(data),
    )


_POLICY = {"shared": "shared rung"}


def _with_full_report(heading: str, runs: str) -> list:
    """A part the first look leaves out: its ``heading`` and the note that ``runs`` (the presets, what they train and
    the verb) with the full report."""
    return [heading, f"Not at the first look's size: {runs} with the full report."]


def _frontier_part(data: SharedRungData) -> list:
    """The frontier of the shared rung, its simulator and the transformer: the rules, the table, the answers."""
    if data.frontier is None:
        runs = "`narrowing-ladder-frontier` and `narrowing-ladder-frontier-low` (1,600 steps, five seeds) run"
        return _with_full_report("### The frontier", runs)
    rows = frontier_rows({name: plateau_history(typed) for name, typed in data.frontier.items()})
    body = [
        [
            MODELS.get(r.policy, r.policy),
            f"{r.a} against {r.b}",
            "; ".join(f"{c.label}: {c.describe()}" for c in r.plateau),
            r.frontier.describe(),
            r.end.describe() if r.end is not None else r.end_word,
        ]
        for r in rows
    ]
    theirs = {(r.a, r.b): r for r in rows if r.policy == "transformer"}
    answers = []
    for policy in ("shared", SIMULATOR):
        words = []
        for r in (r for r in rows if r.policy == policy and (r.a, r.b) in theirs):
            flag = reproduces_frontier(r, theirs[(r.a, r.b)])
            word = "cannot tell (the transformer's answer is not resolved)" if flag is None else (
                "**yes**" if flag else f"**no** ({r.frontier.word}, {r.end_word})"
            )  # fmt: skip
            words.append(f"against {r.b}: {word}")
        answers.append(
            f"Does the {_POLICY.get(policy, policy)} reproduce the transformer's frontier answer? "
            f"{'; '.join(words) or 'cannot tell'}."
        )
    return [
        "### The frontier",
        FRONTIER_RULES,
        "All 64 prompts of the pool, F-GRPO (γ = 1) against GRPO and against GRPO at half the rate, N = 8:",
        table(["policy", "pair", "plateau", "frontier", "end point"], body),
        *answers,
    ]


def _untold(mine, theirs) -> str:
    """Why ``mine`` cannot tell whether it reproduces ``theirs`` (the transformer's N shape): the first side whose N
    effect is not resolved, else a dip that cannot be told."""
    for who, row in (("the transformer's", theirs), ("its own", mine)):
        if row.effect is None or row.effect.outcome not in (Outcome.HIGHER, Outcome.LOWER):
            return f"{who} N effect: {row.effect.outcome if row.effect is not None else 'one N'}"
    return "a dip cannot be told"


def _n_shape_part(data: SharedRungData) -> list:
    """The N shape of the shared rung, its simulator and the transformer: the rules, the table, the answers."""
    if data.n_shape is None:
        runs = "`narrowing-ladder-shared-n` (the shared rung and the transformer, GRPO at N = 2 … 32, five seeds) runs"
        return _with_full_report("### The N shape", runs)
    rows = n_shape_rows(data.n_shape)
    ns = max((r.ns for r in rows), key=len, default=())
    body = [
        [
            MODELS.get(r.policy, r.policy),
            r.type,
            *(_ms(m, sd) for m, sd in zip(r.means, r.sds)),
            describe_difference(r.effect) if r.effect is not None else "—",
            str(r.worst_n),
            {Verdict.REPRODUCED: "yes", Verdict.REFUTED: "**no**"}.get(r.dip, "cannot tell"),
            str(r.seeds),
        ]
        for r in rows
    ]
    header = ["policy", "prompts", *(f"N={n}" for n in ns), f"N={ns[-1]} − N={ns[0]}" if ns else "", "worst N"]
    header += ["dip", "seeds"]
    theirs = {r.type: r for r in rows if r.policy == "transformer"}
    answers = []
    for policy in ("shared", SIMULATOR):
        words = []
        for r in (r for r in rows if r.policy == policy and r.type in theirs):
            flag = reproduces(r, theirs[r.type])
            if flag is None:
                words.append(f"{r.type}: cannot tell ({_untold(r, theirs[r.type])})")
            else:
                words.append(f"{r.type}: " + ("**yes**" if flag else "**no**"))
        name = _POLICY.get(policy, policy)
        answers.append(f"Does the {name} reproduce the transformer's N shape? {'; '.join(words) or 'cannot tell'}.")
    return [
        "### The N shape",
        N_RULES,
        "Final pass@256 on the pool under GRPO (seed mean ± sd):",
        table(header, body),
        *answers,
    ]


_TYPES_WORDS = {Verdict.REPRODUCED: "narrows", Verdict.REFUTED: "does not narrow"}


def _word(verdict) -> str:
    return _TYPES_WORDS.get(verdict, "cannot tell")


def _verb(verdict) -> str:
    """``narrows it``, ``does not narrow it`` or ``cannot tell whether it narrows it``."""
    word = _word(verdict)
    return "cannot tell whether it narrows it" if word == "cannot tell" else f"{word} it"


def _agreement(mine, theirs) -> str:
    if any(w not in _TYPES_WORDS for w in (mine, theirs)):
        return "cannot tell"
    return "agree" if mine == theirs else "disagree"


def _simulator_part(data: SharedRungData) -> list:
    """The shared simulator beside the rungs: its rules, its run, its rows, the comparisons and the answers."""
    if data.simulator is None:
        return []
    b = simulator_bridge(data.simulator, data.ladder)
    meta = data.sim_meta or {}
    runs = b.claims.table.groupby("label", sort=False)["seeds"].max()
    rows = [_row(r) for r in b.claims.table[b.claims.table["type"] != "all"].itertuples()]
    versus = [
        f"- {SIMULATOR} − {MODELS.get(against, against)}, {label}, {kind}: {describe_difference(d)}"
        for (against, label, kind), d in b.versus.items()
    ]
    focal = [f"- {SIMULATOR}, {kind}: {describe_difference(d)}" for (_, kind), d in b.claims.focal.items()]
    kind = {True: "yes, in kind (both narrow the minority under GRPO)", False: "no, not in kind"}.get(
        b.predicts_minority, "cannot tell in kind"
    )
    predicts = f"{kind}; in kind and size: {_answer(b.predicts)}"
    agree = "; ".join(
        f"{kind}: the simulator {_verb(mine)}, the transformer {_verb(theirs)} ({_agreement(mine, theirs)})"
        for kind, (mine, theirs) in b.words.items()
    )
    return [
        "### The shared simulator beside the transformer",
        SIMULATOR_RULES,
        f"The simulator (`tailmiss.experiments.shared_bridge.simulate_rung`) ran {int(runs.sum())} runs "
        f"({', '.join(f'{label}: {n} seeds' for label, n in runs.items())}) of {data.simulator_shape[0]} prompts × "
        f"{data.simulator_shape[1]:,} actions on {meta.get('device', '?')} (its wall time is not part of the report: "
        f"it differs from run to run). The trainer's gradient norm peaked at {data.grad_norm_max:.3f} over the shared "
        f"rung's runs, below its clip of {data.grad_clip:g}, so the clip never acted.",
        table(["policy", "run", "prompts", "pass@1", "pass@256", "change", "narrows", "seeds"], rows),
        f"Does the shared simulator predict the transformer's minority loss? {predicts}. By type under GRPO: {agree}.",
        "Simulator − rung, final pass@256 (Welch):",
        versus,
        "The focal weight in the simulator, F-GRPO − GRPO, final pass@256:",
        focal,
    ]


def zones_row(data: SharedRungData) -> list:
    """The ledger's row on F-GRPO §5.1's caveat in the narrowing regime (``fig2-zones-narrowing``): whether the
    shared simulator from the SFT model's law predicts the transformer's narrowing, by prompt type (none without the
    simulator)."""
    if data.simulator is None:
        return []
    b = simulator_bridge(data.simulator, data.ladder)
    words = ", ".join(
        f"{kind} {_word(mine)} / {_word(theirs)} ({_agreement(mine, theirs)})"
        for kind, (mine, theirs) in b.words.items()
    )
    gap = (
        f"; the minority's loss predicted in kind and in size: {b.predicts.cell()}: {b.predicts.verdict}"
        if (b.predicts is not None)
        else ""
    )
    ours = (
        "section “Sharing across prompts”: the shared simulator from the shared rung's start (the SFT model's law; "
        "prompts interfere through shared "
        f"parameters) against the transformer under GRPO, simulator / transformer: {words}{gap}"
    )
    return ledger.row("fig2-zones-narrowing", ours, Verdict.CAVEAT)


def write(ctx: Context, deferred: tuple[str, ...] = ()) -> Section:
    """The section, and its ledger row on F-GRPO §5.1's caveat in the narrowing regime (:func:`zones_row`)."""
    data = shared_rung_data(ctx)
    return Section(shared_rung_section(data), zones_row(data))
