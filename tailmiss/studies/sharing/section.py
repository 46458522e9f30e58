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
from tailmiss.studies.rule import Outcome, Verdict
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
    "**Rules** (the narrowing ladder's, `tailmiss.studies.narrowing.sharing`, written with that ladder before the "
    "shared rung existed; the shared rung's rate came from the learning ladder's calibration rule, not from this "
    "task): a rung *narrows* a prompt type when the type's final pass@256 lies below the SFT model's by more than two "
    "seed sds (one seed: not judged); the focal weight's effect on a rung is F-GRPO (γ = 1) − GRPO on the type's "
    "final pass@256, paired by seed (the report's noise rule). *Sharing of this kind is enough to narrow* when the "
    "shared rung narrows the minority under GRPO and the table does not. The focal weight *acts on the shared rung as "
    "on the transformer* when both effects on the minority are *higher* (direction only: the sizes are not compared); "
    "this last reading was written after the shared rung's runs were seen."
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


def _answers(c) -> tuple[str, str]:
    """The two answers ("enough to narrow?", "the focal weight as on the transformer?") in words."""
    minority = c.table[(c.table["type"] == "minority") & (c.table["label"] == "GRPO N=8")]
    flags = {rung_kind(r.rung): r.narrows for r in minority.itertuples()}
    if any(flags.get(k) is None for k in ("shared", "table")):
        narrow = "cannot tell (a rung is missing, or one seed: no spread to judge a fall against)"
    elif flags["shared"] and not flags["table"]:
        narrow = "**yes**: the shared rung narrows the minority under GRPO and the table does not"
    else:
        narrow = "**no**: " + ("the table narrows too" if flags["table"] else "the shared rung does not narrow it")
    focal = {rung_kind(rung): d for (rung, kind), d in c.focal.items() if kind == "minority"}
    if not {"shared", "transformer"} <= set(focal):
        same = "cannot tell (a rung's focal comparison is missing)"
    elif any(focal[k].outcome == Outcome.CANNOT_TELL for k in ("shared", "transformer")):
        same = "cannot tell (too few seeds for the rule)"
    elif all(focal[k].outcome == Outcome.HIGHER for k in ("shared", "transformer")):
        same = "**yes, in direction**: F-GRPO raises the minority's pass@256 on both (sizes not compared)"
    else:
        same = f"**no**: shared {focal['shared'].outcome}, transformer {focal['transformer'].outcome}"
    return narrow, same


def shared_rung_section(data: SharedRungData) -> str:
    """The section's markdown from :func:`tailmiss.studies.sharing.data.shared_rung_data`."""
    c = sharing_claims(data.ladder)
    rows = [_row(r) for r in c.table[c.table["type"] != "all"].itertuples()]
    focal = [
        f"- {MODELS.get(rung_kind(rung), rung)}, {kind}: {describe_difference(d)}"
        for (rung, kind), d in c.focal.items()
    ]
    narrow, same = _answers(c)
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


def _frontier_part(data: SharedRungData) -> list:
    """The frontier of the shared rung, its simulator and the transformer: the rules, the table, the answers."""
    if data.frontier is None:
        return [
            "### The frontier",
            "Not at the first look's size: `narrowing-ladder-frontier` and `narrowing-ladder-frontier-low` (1,600 "
            "steps, five seeds) run with the full report.",
        ]
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


def _n_shape_part(data: SharedRungData) -> list:
    """The N shape of the shared rung, its simulator and the transformer: the rules, the table, the answers."""
    if data.n_shape is None:
        return [
            "### The N shape",
            "Not at the first look's size: `narrowing-ladder-shared-n` (the shared rung and the transformer, GRPO at "
            "N = 2 … 32, five seeds) runs with the full report.",
        ]
    rows = n_shape_rows(data.n_shape)
    ns = max((r.ns for r in rows), key=len, default=())
    body = [
        [
            MODELS.get(r.policy, r.policy),
            r.type,
            *(_ms(m, sd) for m, sd in zip(r.means, r.sds)),
            describe_difference(r.effect) if r.effect is not None else "—",
            str(r.worst_n),
            "yes" if r.dip else "no",
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
                why = theirs[r.type].effect.outcome if theirs[r.type].effect is not None else "one N"
                words.append(f"{r.type}: cannot tell (the transformer's N effect: {why})")
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


_TYPES_WORDS = {True: "narrows", False: "does not narrow", None: "not judged"}


def _word(flag) -> str:
    return _TYPES_WORDS[None if flag is None or flag != flag else bool(flag)]


def _verb(flag) -> str:
    """``narrows it``, ``does not narrow it`` or ``is not judged on it`` (one seed)."""
    word = _word(flag)
    return "is not judged on it" if word == "not judged" else f"{word} it"


def _agreement(mine, theirs) -> str:
    if any(w is None or w != w for w in (mine, theirs)):
        return "cannot tell"
    return "agree" if bool(mine) == bool(theirs) else "disagree"


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
    if b.predicts_minority is None:
        predicts = "cannot tell (one seed on a side: no spread to judge a fall against)"
    elif b.predicts_minority:
        predicts = "**yes**: it narrows the minority under GRPO, as the transformer does"
    else:
        predicts = f"**no**: the simulator {_word(b.words['minority'][0])} the minority, the transformer " + _word(
            b.words["minority"][1]
        )
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
    size = b.versus.get(("transformer", "GRPO N=8", "minority"))
    gap = f"; the minority's final pass@256, simulator − transformer: {size.mean:+.3f} ({size.outcome})" if size else ""
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
