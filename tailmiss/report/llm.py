"""The report's small-transformer sections (F-GRPO Tables 1, 2 and 4 in miniature, and the bridge), as text.

Numbers and verdicts come from :mod:`tailmiss.results.claims.llm` and
:mod:`tailmiss.results.claims` over the cached sweeps and bridges of
:mod:`tailmiss.results`; this module only writes them.
"""

from __future__ import annotations

from tailmiss.analytic.regimes import ZONE_THRESHOLD
from tailmiss.report.text import table, yes
from tailmiss.results import BridgeData, Context, bridge_data, sweep_result
from tailmiss.results.claims import BRIDGE_SPEARMAN
from tailmiss.results.claims import llm as report
from tailmiss.results.claims.llm import dapo_claims

__all__ = ["OBJECTIVES_HEADING", "llm_section", "objectives_section", "bridge_section"]


def llm_section(ctx: Context) -> str:
    """Markdown for the small-transformer sweeps (F-GRPO Tables 1, 2, 4 in miniature) and the bridge."""
    nsweep, objectives, maze = (sweep_result(f, ctx) for f in ("nsweep", "objectives", "maze"))
    sft = nsweep.final[nsweep.final["method"] == "sft"].iloc[0]
    mode = "quick sweeps (`--quick`)" if ctx.quick else "full sweeps"
    parts = ["## Small transformer (F-GRPO Tables 1, 2 and 4 in miniature)\n"]
    parts.append(
        f"A {nsweep.meta['sft']['params']:,}-parameter transformer trained from scratch (`{nsweep.config.sft.name}`) "
        f"on task (a), the multi-solution digit task, then group-relative RL from it; {mode}. Held-out SFT "
        f"μ_pos {sft['mu_pos']:.3f}, off-format mass {sft['off_format']:.1e}. Task (a) metrics are exact (every "
        "well-formed answer scored in float64 on the same held-out prompts for every run): pass@k = mean "
        "1 − (1 − μ_pos(x))^k; *rare hit@256* = mean 1 − (1 − τ(x))^256, where τ(x) is the current mass of the "
        "prompt's rare-correct set (the correct answers of smallest SFT mass holding ≤ 10% of its SFT μ_pos), "
        "the analog of what pass@256 measures on math benchmarks. Entries are mean ± sd over seeds; a difference "
        "inside the seed spread is called a tie. Reproduce with `tailmiss llm sweep --preset NAME` "
        "(and `tailmiss figures make llm-nsweep llm-objectives maze bridge`).\n"
    )
    header, rows = report.nsweep_table(nsweep)
    parts.append(f"### Group-size sweep `{nsweep.config.name}` (Table 2 analog; figure `llm-nsweep.png`)\n")
    parts.append(table(header, rows) + "\n")
    parts.append(table(["Table 2 claim", "ours"], report.nsweep_claims(nsweep)) + "\n")
    parts.append(objectives_section(objectives))
    header, rows = report.maze_table(maze)
    maze_cfg = maze.config
    parts.append(
        f"### Maze `{maze_cfg.name}` (Table 4 / Fig. 6 analog; figure `maze.png`)\n\n"
        f"{maze_cfg.sft.task.size}×{maze_cfg.sft.task.size} mazes, {maze.meta['sft']['params']:,} parameters, "
        f"{maze_cfg.rl.steps} RL steps of {maze_cfg.rl.prompts_per_step} prompts (the paper: 17×17, about 3M, "
        "20K steps of 256; the paper-scale sweep `maze-nsweep` is a GPU job). Sampled unbiased pass@k, "
        f"{maze_cfg.rl.eval_samples} samples on {maze_cfg.rl.eval_prompts} held-out mazes, in %.\n"
    )
    parts.append(table(header, rows) + "\n")
    parts.append(table(["Table 4 claim", "ours"], report.maze_claims(maze)) + "\n")
    parts.append(bridge_section(bridge_data(ctx, nsweep)))
    compute = [report.compute_row(r) for r in (nsweep, objectives, maze)]
    parts.append(
        "### Compute\n\n" + table(["sweep", "RL runs", "rollouts", "tokens", "training time", "device"], compute) + "\n"
    )
    return "\n".join(parts)


OBJECTIVES_HEADING = "### Objectives"


def objectives_section(objectives) -> str:
    """Markdown for the objective sweep (F-GRPO Table 1 analog), DAPO with and without dynamic sampling included."""
    from tailmiss.results.claims import llm as report

    header, rows = report.objectives_table(objectives)
    claims = report.objectives_claims(objectives)
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
    """Does each DAPO variant differ from GRPO? Run by run (same seed and γ), on the final exact metrics."""
    return [
        [
            f"{c.method.upper()} differs from GRPO",
            f"{c.name}: {c.differ} of {c.runs} runs differ from their GRPO twin "
            f"(same seed and γ); largest |Δ|: pass@1 {c.gap['exact_pass_at_1']:.4f}, rare hit@256 "
            f"{c.gap['rare_pass_at_256']:.3f}, M_ret {c.gap['retained_mass']:.3f}: " + yes(c.differs),
        ]
        for c in dapo_claims(objectives)
    ]


def bridge_section(data: BridgeData) -> str:
    """Markdown for the bridge's verdict (:class:`~tailmiss.results.bridge.BridgeData`: F-GRPO Fig. 2's regimes in
    the simulation and the transformer), with the other simulator learning rates."""
    bridge, others = data.main, data.others
    v = bridge.verdict
    sizes = v["group_sizes"]
    rows = [
        [
            int(n),
            f"{a:.3f}",
            f"{b:.3f}",
            za,
            zb,
            f"{qa:.3f}",
            f"{qb:.3f}",
        ]
        for n, a, b, za, zb, qa, qb in zip(
            sizes,
            v["llm_retained_mass"],
            v["sim_retained_mass"],
            v["llm_zones"],
            v["sim_zones"],
            v["llm_q_pos"],
            v["sim_q_pos"],
        )
    ]
    focal = "; ".join(
        f"γ={f['gamma']:g} at N={f['group_size']}: ΔM_ret transformer {f['llm_delta_retained']:+.3f}, "
        f"simulation {f['sim_delta_retained']:+.3f}, helps in both: {yes(f['helps_in_both'])}"
        for f in v["focal"]
    )
    sens_rows = [
        [
            f"{b.sim_lr:g}",
            ", ".join(f"{x:.3f}" for x in b.verdict["sim_retained_mass"]),
            " ".join(b.verdict["sim_zones"]),
            f"{b.verdict['spearman_retained_mass']:+.2f}",
            f"{b.verdict['zone_agreement']:.0%}",
            ", ".join(f"{f['sim_delta_retained']:+.3f}" for f in b.verdict["focal"]),
            yes(agrees),
        ]
        for b, agrees in zip((bridge, *others), (data.agrees, *data.others_agree))
    ]
    sensitivity = (
        "\n\nThe simulator's learning rate is the one free setting (the runs fix N, γ, seeds and update count). "
        "The same verdict at other rates (transformer M_ret by N: "
        + ", ".join(f"{x:.3f}" for x in v["llm_retained_mass"])
        + f"; zones {' '.join(v['llm_zones'])}):\n\n"
        + table(
            ["sim lr", "simulated M_ret by N", "zones", "Spearman", "zones agree", "focal ΔM_ret", "agree"], sens_rows
        )
        if others
        else ""
    )
    return (
        f"### Bridge: simulation vs transformer (`{bridge.sweep.name}`; figure `bridge.png`)\n\n"
        "Each held-out prompt's exact SFT answer distribution (its well-formed answers plus one off-format "
        f"action) starts a categorical simulation (log-prob surrogate, std-normalised group advantages, Adam lr "
        f"{bridge.sim_lr:g}, one update per RL step, the sweep's seeds) at every N and γ ∈ {{0, 0.5, 1}}; "
        f"zones as in Fig. 2 (II: M_ret < {ZONE_THRESHOLD:g}). "
        "The transformer never trains on these prompts, so they move only "
        "through the shared weights, while each simulated prompt is updated directly: compare orderings, not "
        "magnitudes.\n\n"
        + table(
            [
                "N",
                "M_ret transformer",
                "M_ret simulation",
                "zone transformer",
                "zone simulation",
                "Q_pos transformer",
                "Q_pos simulation",
            ],
            rows,
        )
        + "\n\n"
        + f"Spearman over N: M_ret {v['spearman_retained_mass']:+.2f}, Q_pos {v['spearman_q_pos']:+.2f}; zones "
        f"agree at {v['zone_agreement']:.0%} of N; focal: {focal}. "
        f"Regimes agree (M_ret rank ρ > {BRIDGE_SPEARMAN:g} and every "
        f"zone equal): {yes(data.agrees)}." + sensitivity + "\n"
    )
