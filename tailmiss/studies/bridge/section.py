"""The report's bridge section: F-GRPO Fig. 2's regimes in the simulation beside the transformer, as text.

Numbers and the verdict come from :class:`~tailmiss.studies.bridge.data.BridgeData`; this module only writes
them.
"""

from __future__ import annotations

from tailmiss.analytic.regimes import ZONE_THRESHOLD
from tailmiss.studies.bridge.claims import BRIDGE_SPEARMAN, BridgeVerdict
from tailmiss.studies.bridge.data import BridgeData
from tailmiss.studies.text import table, yes

__all__ = ["HEADING", "bridge_section"]


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


def _comparison_rows(v: BridgeVerdict) -> list[list]:
    """One row per N: M_ret, zone and Q_pos of the transformer and of the simulation."""
    columns = (v.llm_retained_mass, v.sim_retained_mass, v.llm_zones, v.sim_zones, v.llm_q_pos, v.sim_q_pos)
    return [
        [int(n), f"{a:.3f}", f"{b:.3f}", za, zb, f"{qa:.3f}", f"{qb:.3f}"]
        for n, a, b, za, zb, qa, qb in zip(v.group_sizes, *columns)
    ]


def _focal_text(v: BridgeVerdict) -> str:
    return "; ".join(
        f"γ={f.gamma:g} at N={f.group_size}: ΔM_ret transformer {f.llm_delta_retained:+.3f}, "
        f"simulation {f.sim_delta_retained:+.3f}, helps in both: {yes(f.helps_in_both)}"
        for f in v.focal
    )


def _sensitivity(data: BridgeData) -> str:
    """The verdict at every checked simulator learning rate (when only the default was run: where the others are)."""
    if not data.others:
        rest = " and ".join(f"{lr:g}" for lr in data.unchecked)
        return (
            f" Only the simulator rate {data.main.sim_lr:g} was run here; the full report (`tailmiss repro`) checks "
            f"the verdict at {rest} too."
            if rest
            else ""
        )
    rows = [
        [
            f"{b.sim_lr:g}",
            ", ".join(f"{x:.3f}" for x in v.sim_retained_mass),
            " ".join(v.sim_zones),
            f"{v.spearman_retained_mass:+.2f}",
            f"{v.zone_agreement:.0%}",
            ", ".join(f"{f.sim_delta_retained:+.3f}" for f in v.focal),
            yes(v.agrees),
        ]
        for b, v in zip((data.main, *data.others), (data.verdict, *data.others_verdicts))
    ]
    v = data.verdict
    return (
        "\n\nThe simulator's learning rate is the one free setting (the runs fix N, γ, seeds and update count). "
        "The same verdict at other rates (transformer M_ret by N: "
        + ", ".join(f"{x:.3f}" for x in v.llm_retained_mass)
        + f"; zones {' '.join(v.llm_zones)}):\n\n"
        + table(_SENSITIVITY_HEADER, rows)
    )


HEADING = "### Bridge: simulation vs transformer"
"""The start of the heading line of the bridge's part of the small transformer's section (:func:`bridge_section`)."""


def bridge_section(data: BridgeData) -> str:
    """Markdown for the bridge's verdict (:class:`~tailmiss.studies.bridge.data.BridgeData`: F-GRPO Fig. 2's regimes in
    the simulation and the transformer), with the other simulator learning rates."""
    bridge, v = data.main, data.verdict
    return (
        f"{HEADING} (`{bridge.sweep.name}`; figure `bridge.png`)\n\n"
        "Each held-out prompt's exact SFT answer distribution (its well-formed answers plus one off-format "
        f"action) starts a categorical simulation (log-prob surrogate, std-normalised group advantages, Adam lr "
        f"{bridge.sim_lr:g}, one update per RL step, the sweep's seeds) at every N and γ ∈ {{0, 0.5, 1}}; "
        f"zones as in Fig. 2 (II: M_ret < {ZONE_THRESHOLD:g}). "
        "The transformer never trains on these prompts, so they move only "
        "through the shared weights, while each simulated prompt is updated directly: compare orderings, not "
        "magnitudes.\n\n"
        + table(_COMPARISON_HEADER, _comparison_rows(v))
        + "\n\n"
        + f"Spearman over N: M_ret {v.spearman_retained_mass:+.2f}, Q_pos {v.spearman_q_pos:+.2f}; zones "
        f"agree at {v.zone_agreement:.0%} of N; focal: {_focal_text(v)}. "
        f"Regimes agree (M_ret rank ρ > {BRIDGE_SPEARMAN:g} and every "
        f"zone equal): {yes(data.agrees)}." + _sensitivity(data) + "\n"
    )
