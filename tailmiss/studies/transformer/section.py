"""The report's small-transformer sections (F-GRPO Tables 1, 2 and 4 in miniature), as text.

Numbers and verdicts come from :mod:`tailmiss.studies.transformer.claims` over the
cached sweeps of :mod:`tailmiss.studies`; this module only writes them (the
bridge's section is :mod:`tailmiss.studies.bridge.section`).
"""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.bridge.data import bridge_data
from tailmiss.studies.bridge.section import bridge_section
from tailmiss.studies.context import Context
from tailmiss.studies.rule import Verdict
from tailmiss.studies.runs import full_preset, sweep_result
from tailmiss.studies.text import Section, fenced, quick_note, table
from tailmiss.studies.transformer.claims import (
    METRIC_NAMES,
    NsweepClaims,
    ObjectivesClaims,
    dapo_claims,
    maze_claims,
    nsweep_claims,
    objectives_claims,
)
from tailmiss.studies.transformer.tables import (
    _by_n,
    _diff,
    compute_row,
    maze_rows,
    maze_table,
    nsweep_rows,
    nsweep_table,
    objectives_rows,
    objectives_table,
    verdict_word,
)

__all__ = [
    "HEADING",
    "OBJECTIVES_HEADING",
    "MAZE_HEADING",
    "PARTS_DEFERRED_WHY",
    "write",
    "objectives_section",
    "maze_section",
    "verdict_word",
    "zones_caveat",
]


HEADING = "## Small transformer"
"""The start of the section's heading line."""


def write(ctx: Context, deferred: tuple[str, ...] = ()) -> Section:
    """Markdown for the small-transformer sweeps (F-GRPO Tables 1, 2, 4 in miniature) and the bridge.

    ``deferred`` may hold ``"objectives"`` and ``"maze"``: those parts then say that the first look leaves them out
    (their sweeps are neither run nor read).
    """
    from tailmiss.studies.runs import SWEEPS
    from tailmiss.studies.text import deferred as deferred_text

    nsweep = sweep_result("nsweep", ctx)
    others = {f: sweep_result(f, ctx) for f in ("objectives", "maze") if f not in deferred}
    sft = nsweep.final[nsweep.final["method"] == "sft"].iloc[0]
    mode = "quick sweeps (`--quick`)" if ctx.quick else "full sweeps"
    parts = [f"{HEADING} (F-GRPO Tables 1, 2 and 4 in miniature)\n"]
    parts.append(
        f"A {nsweep.meta['sft']['params']:,}-parameter transformer trained from scratch (`{nsweep.config.sft.name}`) "
        f"on task (a), the multi-solution digit task, then group-relative RL from it; {mode}. Held-out SFT "
        f"μ_pos {sft['mu_pos']:.3f}, off-format mass {sft['off_format']:.1e}. Task (a) metrics are exact (every "
        "well-formed answer scored on the same held-out prompts for every run: the model's forward pass, each "
        "next-token law normalised and the answer's log-probability summed in float64): pass@k = mean "
        "1 − (1 − μ_pos(x))^k; *rare hit@256* = mean 1 − (1 − τ(x))^256, where τ(x) is the current mass of the "
        "prompt's rare-correct set (the correct answers of smallest SFT mass holding ≤ 10% of its SFT μ_pos), "
        "the analog of what pass@256 measures on math benchmarks. Entries are mean ± sd over seeds; every "
        "comparison is judged by the report's noise rule (stated at the top) and printed with its test and outcome. "
        "Reproduce with `tailmiss llm sweep --preset NAME` "
        "(and `tailmiss figures make llm-nsweep llm-objectives maze bridge`).\n"
    )
    header, rows = nsweep_table(nsweep)
    parts.append(f"### Group-size sweep `{nsweep.config.name}` (Table 2 analog; figure `llm-nsweep.png`)\n")
    parts.append(table(header, rows) + "\n")
    nclaims = nsweep_claims(nsweep)
    ledger_rows = _record_nsweep(nclaims)
    parts.append(table(["Table 2 claim", "ours"], nsweep_rows(nclaims)) + "\n")
    for family, heading, write_part in (
        ("objectives", f"{OBJECTIVES_HEADING} (Table 1 analog)", objectives_section),
        ("maze", f"{MAZE_HEADING} (Table 4 / Fig. 6 analog)", maze_section),
    ):
        if family in others:
            part = write_part(others[family])
            parts.append(fenced(family, quick_note(part.text, _quick(others[family])) if ctx.quick else part.text))
            ledger_rows += part.rows
        else:
            parts.append(
                fenced(family, deferred_text(heading, family, f"`{SWEEPS[family][0]}`", PARTS_DEFERRED_WHY[family]))
            )
    bridge = bridge_data(ctx, nsweep)
    zones = (
        f"zones agree at {bridge.verdict.zone_agreement:.0%} of N, M_ret rank ρ "
        f"{bridge.verdict.spearman_retained_mass:+.2f}; regimes agree: {'yes' if bridge.agrees else 'no'}"
    )
    caveat = f"the simulator from each prompt's SFT distribution against the transformer: {zones}"
    ledger_rows += ledger.row("fig2-zones", caveat, Verdict.CAVEAT)
    parts.append(bridge_section(bridge) + "\n" + zones_caveat(bridge.agrees, zones) + "\n")
    compute = [compute_row(r) for r in (nsweep, *others.values())]
    parts.append(
        "### Compute\n\n" + table(["sweep", "RL runs", "rollouts", "tokens", "training time", "device"], compute) + "\n"
    )
    return Section("\n".join(parts), ledger_rows)


PARTS_DEFERRED_WHY = {
    "objectives": "The first look shows the transformer once, through the group-size sweep above; this sweep adds "
    "DAPO, CISPO and DAPO with dynamic sampling, each with and without the focal weight, at N = 8.",
    "maze": "At quick size (one seed, a few held-out mazes, a 500-step SFT model) its differences sit within the "
    "sampling noise: one maze moves pass@256 by several points.",
}
"""Why the first look (``tailmiss repro --quick``) leaves the objective sweep and the maze out."""

MAZE_HEADING = "### Maze"
"""The start of the heading line of the maze's part of the section (F-GRPO Table 4 / Fig. 6 analog)."""


def zones_caveat(agrees: bool, zones: str) -> str:
    """F-GRPO §5.1 (v2) beside the bridge: the simulation's zone boundaries are a caveat, not a prediction."""
    ours = (
        "here the regimes disagree, which is consistent with the caveat"
        if not agrees
        else "here the regimes agree, which tests nothing the paper predicts (the caveat stands)"
    )
    return (
        "F-GRPO §5.1 (v2) says the simulation's zone boundaries depend on the initial distribution and are not "
        f"predictions for LLMs: a caveat, not a prediction to test. Ours: {zones}; {ours}."
    )


def maze_section(maze) -> Section:
    """Markdown for the maze sweep (F-GRPO Table 4 / Fig. 6 analog): sampled pass@k by N, GRPO against F-GRPO, and
    its ledger rows."""
    header, rows = maze_table(maze)
    ledger_rows = []
    for c in maze_claims(maze):
        key = {1: "t4-pass1", 256: "t4-pass256"}.get(c.k)
        if key is not None:
            deltas = ", ".join(f"{n}: {100 * d:+.1f}" for n, d in c.deltas)
            cell = "" if c.sentence is None else f"; {c.sentence.cell(most=2)}"
            ledger_rows += ledger.row(key, f"Δpass@{c.k} (points) by N {deltas}{cell}", c.verdict)
    cfg = maze.config
    text = (
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
    return Section(text, ledger_rows)


OBJECTIVES_HEADING = "### Objectives"
"""The start of the heading line of the objective sweep's part of the section (F-GRPO Table 1 analog)."""


def objectives_section(objectives) -> Section:
    """Markdown for the objective sweep (F-GRPO Table 1 analog), DAPO with and without dynamic sampling included, and
    its ledger rows."""
    header, rows = objectives_table(objectives)
    oclaims = objectives_claims(objectives)
    claims = objectives_rows(oclaims)
    said = {row[0] for row in claims}
    claims += [row for row in _dapo_rows(objectives) if row[0] not in said]
    text = (
        f"{OBJECTIVES_HEADING} `{objectives.config.name}` (Table 1 analog; figure `llm-objectives.png`)\n\n"
        + table(header, rows)
        + "\n\n"
        + table(["Table 1 claim", "ours"], claims)
        + "\n"
    )
    return Section(text, _record_objectives(objectives, oclaims))


def _dapo_rows(objectives) -> list[list[str]]:
    """Does each DAPO variant differ from GRPO? Run by run (same seed and γ), then by the noise rule at each γ."""
    rows = []
    for c in dapo_claims(objectives):
        resolved = ", ".join(f"γ = {g:g} {METRIC_NAMES.get(d.metric, d.metric)} {_diff(d)}" for g, d in c.resolved)
        rows.append(
            [
                f"{c.method.upper()} differs from GRPO",
                f"{c.name}: {c.differ} of {c.runs} runs differ from their GRPO twin (same seed and γ); largest |Δ|: "
                f"pass@1 {c.gap['exact_pass_at_1']:.4f}, rare hit@256 {c.gap['rare_pass_at_256']:.3f}, M_ret "
                f"{c.gap['retained_mass']:.3f}. Rule: the variant − GRPO difference of each metric at each γ, paired "
                f"by seed over {c.seeds} seed(s), the {len(c.diffs)} comparisons one Holm family, by the report's "
                f"noise rule (stated at the top): {verdict_word(c.differs)}: {c.reason}"
                + (f" ({resolved})" if resolved else ""),
            ]
        )
    return rows


def _record_nsweep(c: NsweepClaims) -> list:
    """F-GRPO Table 2's verdicts on the group-size sweep, for the claims ledger."""
    rows = []
    rows += ledger.row("t2-pass1", f"pass@1 by N {_by_n(c, c.pass1)}; {c.pass1_sentence.cell(most=2)}",
                  c.pass1_rises)  # fmt: skip
    dip = "" if c.dip_sentence is None else f"; {c.dip_sentence.cell(most=2)}"
    rows += ledger.row("t2-dip", f"rare hit@256 by N {_by_n(c, c.rare)} (exact pass@256 {c.pass256_range[0]:.3f}–"
                  f"{c.pass256_range[1]:.3f}){dip}", c.dip)  # fmt: skip
    if c.focal_reach is not None:
        f = c.focal_reach
        rows += ledger.row("t2-reach", f"rare hit@256 {f.focal.mean:.3f} vs {f.grpo32.mean:.3f}; {f.sentence.cell()}"
                      + (f" ({f.reason})" if f.reason else ""), f.verdict)  # fmt: skip
    else:
        rows += ledger.row("t2-reach", "the sweep has no F-GRPO N = 8 or no GRPO N = 32", Verdict.NOT_TESTABLE)
    if c.tradeoff is not None:
        rows += ledger.row("t2-tradeoff", c.tradeoff.cell(), c.tradeoff.verdict)
    else:
        rows += ledger.row("t2-tradeoff", "the sweep has no F-GRPO N = 8 or no GRPO N = 32", Verdict.NOT_TESTABLE)
    if c.dnll is not None:
        d = c.dnll
        gaps = d.order.cell()
        rows += ledger.row("t2-dnll", f"N=2 {d.n2.mean:.2f}, N=32 {d.n32.mean:.2f}, N=8 {d.n8.mean:.2f}; {gaps}",
                      d.ordered)  # fmt: skip
    else:
        rows += ledger.row("t2-dnll", "the sweep lacks GRPO at N = 2, 8 or 32", Verdict.NOT_TESTABLE)
    return rows


def _record_objectives(objectives, c: ObjectivesClaims) -> list:
    """F-GRPO Table 1's verdicts on the objective sweep, for the claims ledger: the methods identical to GRPO are
    not counted (a copy of GRPO is no second method)."""
    rows = []
    same = ", ".join(m.upper() for m in c.same_as_grpo)
    left = f" (left out, its runs identical to GRPO's: {same})" if same else ""
    floor = ", ".join(m.upper() for m in c.at_floor)
    at_floor = f" (left out, rare hit@256 at the floor with and without the focal weight: {floor})" if floor else ""
    for key, s in (("t1-pass256", c.raises_sentence), ("t1-pass1", c.keeps_sentence)):
        cell = s.cell(most=6) if s is not None else "no method to count"
        rows += ledger.row(key, f"γ = 0 → {c.gamma:g}: {cell}{left}{at_floor if key == 't1-pass256' else ''}",
                           s.verdict if s is not None else Verdict.NOT_TESTABLE)  # fmt: skip
    # "DAPO differs from GRPO" is this project's check of its own DAPO, not a claim of the paper: the section
    # shows it (its Table 1 rows), the ledger does not
    return rows


def _quick(result) -> list[tuple[str, str]]:
    """``(quick, full)`` of a part's sweep when it is a quick preset."""
    full = full_preset(result.config.name)
    return [(result.config.name, full)] if full else []


def write_objectives(ctx: Context, deferred: tuple[str, ...] = ()) -> Section:
    """The objective sweep's part alone (``tailmiss repro --only objectives``)."""
    return objectives_section(sweep_result("objectives", ctx))


def write_maze(ctx: Context, deferred: tuple[str, ...] = ()) -> Section:
    """The maze sweep's part alone (``tailmiss repro --only maze``)."""
    return maze_section(sweep_result("maze", ctx))
