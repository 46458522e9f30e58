"""The bridge's claim: F-GRPO Fig. 2's regimes in the simulation and in the transformer agree.

From a bridge's summary (:attr:`tailmiss.experiments.bridge.BridgeResult.summary`: per source, N and γ, the means
over prompts then seeds), :func:`bridge_verdict` compares across the GRPO group sizes the transformer's retained
positive mass M_ret (F-GRPO Eq. 26) and Q_pos with the simulation's: Spearman rank agreement, each N's zone (I / II /
III, as in F-GRPO Fig. 2) in both, and whether the focal weight raises M_ret in both. The regimes agree when M_ret's
rank correlation exceeds :data:`BRIDGE_SPEARMAN` and every zone is equal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss.analytic.regimes import spearman, zone_agreement, zones

__all__ = ["BRIDGE_SPEARMAN", "FocalEffect", "BridgeVerdict", "bridge_verdict", "per_prompt_spearman"]

BRIDGE_SPEARMAN = 0.5
"""The bridge's regimes agree when the M_ret rank correlation over N exceeds this and every zone is equal."""


@dataclass(frozen=True)
class FocalEffect:
    """ΔM_ret = M_ret(γ) − M_ret(0) at one N, in the transformer and in the simulation."""

    gamma: float
    group_size: int
    llm_delta_retained: float
    sim_delta_retained: float

    @property
    def helps_in_both(self) -> bool:
        return bool(self.llm_delta_retained > 0 and self.sim_delta_retained > 0)


@dataclass(frozen=True)
class BridgeVerdict:
    """The transformer against the simulation across the GRPO group sizes (γ = 0), and the focal effect."""

    group_sizes: tuple[int, ...]
    llm_retained_mass: tuple[float, ...]
    sim_retained_mass: tuple[float, ...]
    llm_q_pos: tuple[float, ...]
    sim_q_pos: tuple[float, ...]
    spearman_retained_mass: float
    spearman_q_pos: float
    llm_zones: tuple[str, ...]
    sim_zones: tuple[str, ...]
    zone_agreement: float
    focal: tuple[FocalEffect, ...]

    @property
    def agrees(self) -> bool:
        """M_ret's rank correlation over N above :data:`BRIDGE_SPEARMAN` and every zone equal."""
        return bool(self.spearman_retained_mass > BRIDGE_SPEARMAN and self.zone_agreement == 1.0)


def bridge_verdict(summary: pd.DataFrame, focal_n: int | None = None) -> BridgeVerdict:
    """The bridge's verdict from its summary (``source, group_size, gamma, retained_mass, q_pos`` rows).

    ``focal_n``: the N of the focal comparison (default: that of the transformer's first focal run).
    """
    llm = summary[(summary["source"] == "llm") & (summary["gamma"] == 0)].sort_values("group_size")
    sim = summary[(summary["source"] == "sim") & (summary["gamma"] == 0)].set_index("group_size")
    sizes = llm["group_size"].to_numpy()
    sim = sim.loc[sizes]
    curves = {
        f"{source}_{metric}": tuple(float(x) for x in frame[metric])
        for source, frame in (("llm", llm), ("sim", sim))
        for metric in ("retained_mass", "q_pos")
    }
    llm_zones = tuple(zones(sizes, llm["retained_mass"].to_numpy()))
    sim_zones = tuple(zones(sizes, sim["retained_mass"].to_numpy()))
    return BridgeVerdict(
        group_sizes=tuple(int(n) for n in sizes),
        **curves,
        spearman_retained_mass=spearman(llm["retained_mass"], sim["retained_mass"]),
        spearman_q_pos=spearman(llm["q_pos"], sim["q_pos"]),
        llm_zones=llm_zones,
        sim_zones=sim_zones,
        zone_agreement=zone_agreement(llm_zones, sim_zones),
        focal=_focal_effects(summary, focal_n),
    )


def _focal_effects(summary: pd.DataFrame, focal_n: int | None) -> tuple[FocalEffect, ...]:
    focal = summary[(summary["source"] == "llm") & (summary["gamma"] > 0)]
    if focal_n is None and not focal.empty:
        focal_n = int(focal["group_size"].iloc[0])
    out = []
    for g in sorted(focal.loc[focal["group_size"] == focal_n, "gamma"].unique()):
        delta = {}
        for source in ("llm", "sim"):
            sel = summary[(summary["source"] == source) & (summary["group_size"] == focal_n)].set_index("gamma")
            delta[source] = float(sel.loc[g, "retained_mass"] - sel.loc[0.0, "retained_mass"])
        out.append(FocalEffect(float(g), int(focal_n), delta["llm"], delta["sim"]))
    return tuple(out)


def per_prompt_spearman(per_prompt: pd.DataFrame) -> float:
    """Over the γ = 0 prompts with a rare set: the rank correlation of Lemma 3.1's tail-miss probability with the
    observed log change of the rare-set mass, log(τ / τ_SFT) (NaN with fewer than 3 such prompts)."""
    base = per_prompt[(per_prompt["gamma"] == 0) & per_prompt["tail_miss"].notna() & (per_prompt["tau0"] > 0)]
    return spearman(base["tail_miss"], np.log(base["tau"] / base["tau0"]))
