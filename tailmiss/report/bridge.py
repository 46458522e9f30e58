"""The report's bridge section: F-GRPO Fig. 2's regimes in the simulation beside the transformer, as text.

Numbers and the verdict come from :class:`~tailmiss.results.bridge.BridgeData`; this module only writes them.
"""

from __future__ import annotations

from tailmiss.analytic.regimes import ZONE_THRESHOLD
from tailmiss.report.text import table, yes
from tailmiss.results import BridgeData
from tailmiss.results.claims import BRIDGE_SPEARMAN

__all__ = ["bridge_section"]


_COMPARISON_HEADER = [
    "N",
    "M_ret transformer",
    "M_ret simulation",
    "zone transformer",
    "zone simulation",
    "Q_pos transformer",
    "Q_pos simulation",
]
_SENSITIVITY_HEADER = ["sim lr", "simulated M_ret by N", "zones", "Spearman", "zones agree", "focal ΔM_ret", "agree"]


def _comparison_rows(v: dict) -> list[list]:
    """One row per N: M_ret, zone and Q_pos of the transformer and of the simulation."""
    columns = ("llm_retained_mass", "sim_retained_mass", "llm_zones", "sim_zones", "llm_q_pos", "sim_q_pos")
    return [
        [int(n), f"{a:.3f}", f"{b:.3f}", za, zb, f"{qa:.3f}", f"{qb:.3f}"]
        for n, a, b, za, zb, qa, qb in zip(v["group_sizes"], *(v[c] for c in columns))
    ]


def _focal_text(v: dict) -> str:
    return "; ".join(
        f"γ={f['gamma']:g} at N={f['group_size']}: ΔM_ret transformer {f['llm_delta_retained']:+.3f}, "
        f"simulation {f['sim_delta_retained']:+.3f}, helps in both: {yes(f['helps_in_both'])}"
        for f in v["focal"]
    )


def _sensitivity(data: BridgeData) -> str:
    """The verdict at every checked simulator learning rate (empty when only the default was run)."""
    if not data.others:
        return ""
    rows = [
        [
            f"{b.sim_lr:g}",
            ", ".join(f"{x:.3f}" for x in b.verdict["sim_retained_mass"]),
            " ".join(b.verdict["sim_zones"]),
            f"{b.verdict['spearman_retained_mass']:+.2f}",
            f"{b.verdict['zone_agreement']:.0%}",
            ", ".join(f"{f['sim_delta_retained']:+.3f}" for f in b.verdict["focal"]),
            yes(agrees),
        ]
        for b, agrees in zip((data.main, *data.others), (data.agrees, *data.others_agree))
    ]
    v = data.main.verdict
    return (
        "\n\nThe simulator's learning rate is the one free setting (the runs fix N, γ, seeds and update count). "
        "The same verdict at other rates (transformer M_ret by N: "
        + ", ".join(f"{x:.3f}" for x in v["llm_retained_mass"])
        + f"; zones {' '.join(v['llm_zones'])}):\n\n"
        + table(_SENSITIVITY_HEADER, rows)
    )


def bridge_section(data: BridgeData) -> str:
    """Markdown for the bridge's verdict (:class:`~tailmiss.results.bridge.BridgeData`: F-GRPO Fig. 2's regimes in
    the simulation and the transformer), with the other simulator learning rates."""
    bridge = data.main
    v = bridge.verdict
    return (
        f"### Bridge: simulation vs transformer (`{bridge.sweep.name}`; figure `bridge.png`)\n\n"
        "Each held-out prompt's exact SFT answer distribution (its well-formed answers plus one off-format "
        f"action) starts a categorical simulation (log-prob surrogate, std-normalised group advantages, Adam lr "
        f"{bridge.sim_lr:g}, one update per RL step, the sweep's seeds) at every N and γ ∈ {{0, 0.5, 1}}; "
        f"zones as in Fig. 2 (II: M_ret < {ZONE_THRESHOLD:g}). "
        "The transformer never trains on these prompts, so they move only "
        "through the shared weights, while each simulated prompt is updated directly: compare orderings, not "
        "magnitudes.\n\n"
        + table(_COMPARISON_HEADER, _comparison_rows(v))
        + "\n\n"
        + f"Spearman over N: M_ret {v['spearman_retained_mass']:+.2f}, Q_pos {v['spearman_q_pos']:+.2f}; zones "
        f"agree at {v['zone_agreement']:.0%} of N; focal: {_focal_text(v)}. "
        f"Regimes agree (M_ret rank ρ > {BRIDGE_SPEARMAN:g} and every "
        f"zone equal): {yes(data.agrees)}." + _sensitivity(data) + "\n"
    )
