"""The paper's claims, computed once: each claim's numbers and its yes/no verdict as named fields.

The report (:mod:`tailmiss.repro`, :mod:`tailmiss.repro_llm`) only formats these;
the figures read the same objects, so no verdict is judged twice. The
small-transformer tables' claims are in :mod:`tailmiss.llm.report`, the
ladder's in :mod:`tailmiss.ladder_analysis`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss import analytic
from tailmiss.regimes import ZONE_THRESHOLD
from tailmiss.results.sim import SimulatedMeans

__all__ = [
    "BRIDGE_SPEARMAN",
    "TheoryClaims",
    "theory_claims",
    "Fig2Claims",
    "fig2_claims",
    "BrorlClaims",
    "brorl_claims",
    "bridge_agrees",
    "DapoClaim",
    "dapo_claims",
]

BRIDGE_SPEARMAN = 0.5
"""The bridge's regimes agree when the M_ret rank correlation over N exceeds this and every zone is equal."""


@dataclass(frozen=True)
class TheoryClaims:
    """The closed-form claims of F-GRPO (Fig. 1(a), 3, 4, 5, App. N, Prop. 3.2) and BroRL (Thm. 1 / Cor. 3)."""

    fig1a_mu: float
    fig1a_n: np.ndarray
    fig1a_values: dict
    """Lemma 3.1 at ``fig1a_n`` per ρ (τ = ρ μ)."""
    fig1a_nonmonotone: bool
    fig3_peaks: list
    """Per μ_pos: ``(mu, n_star, peak)`` over ρ = 0.01, 0.05, 0.1, 0.2."""
    fig3_moves_right_and_up: bool
    fig5_p17: float
    fig5_init: object
    """The simulation's exact initial policy (:func:`tailmiss.analytic.initial_distribution`)."""
    fig5_p17_init: float
    fig5_n_star: int
    fig5_peak: float
    fig5_below: bool
    fig4_max_grpo: float
    fig4_max_half: float
    fig4_max_one: float
    lr_scales: np.ndarray
    """m_γ for γ = 0, 0.5, 1, 2 (F-GRPO App. N)."""
    coupling_n: np.ndarray
    coupling: np.ndarray
    coupling_flip: int
    mass_balance: object
    unsampled_change: object


def theory_claims() -> TheoryClaims:
    """Evaluate every closed-form claim (deterministic)."""
    mu, rhos = 0.3, (0.05, 0.1, 0.2)
    n = np.array([1, 2, 8, 32])
    vals = {rho: analytic.tail_miss_probability(mu, rho * mu, n) for rho in rhos}
    nonmono = all(v[0] == 0 and v[1] < v[2] and v[3] < v[2] for v in vals.values())
    peaks = []
    moves = True
    for mu_p in (0.8, 0.5, 0.2):
        n_star, peak = analytic.tail_miss_peak(mu_p, np.array([0.01, 0.05, 0.1, 0.2]) * mu_p, n_max=512)
        moves &= bool(np.all(np.diff(n_star) <= 0) and np.all(np.diff(peak) < 0))
        peaks.append((mu_p, n_star, peak))
    p17 = analytic.tail_miss_probability(0.64, 6.3e-5, 2**17)
    n20, p20 = analytic.tail_miss_peak(0.64, 6.3e-5)
    init = analytic.initial_distribution()
    p17i = analytic.tail_miss_probability(init.q_pos, init.tau_leaf, 2**17)
    mags = analytic.advantage_magnitudes(np.linspace(0.01, 0.99, 99))
    g_half = analytic.focal_weight(np.linspace(0.01, 0.99, 99), 0.5) * mags.negative
    g_one = analytic.focal_weight(np.linspace(0.01, 0.99, 99), 1.0) * mags.negative
    m = analytic.lr_matched_scale(np.array([0.0, 0.5, 1.0, 2.0]))
    ns = np.array([2, 512, 51200, 131072])
    coupling = analytic.expected_unsampled_coupling(init.probs, init.correct, ns)
    sign_n = np.arange(50_000, 50_300)
    flip = sign_n[np.argmax(analytic.expected_unsampled_coupling(init.probs, init.correct, sign_n) > 0)]
    mb = analytic.mass_balance(
        [0.4, 0.1, 0.05, 0.3, 0.15], np.array([1, 1, 1, 0, 0], bool), np.array([1, 0, 0, 1, 0], bool), r_c=1.0, r_w=0.0
    )
    uc = analytic.unsampled_correct_change(
        [0.4, 0.1, 0.05, 0.3, 0.15], np.array([1, 1, 1, 0, 0], bool), np.array([1, 0, 0, 1, 0], bool), r_c=1.0, r_w=0.0
    )
    return TheoryClaims(
        fig1a_mu=mu,
        fig1a_n=n,
        fig1a_values=vals,
        fig1a_nonmonotone=nonmono,
        fig3_peaks=peaks,
        fig3_moves_right_and_up=moves,
        fig5_p17=p17,
        fig5_init=init,
        fig5_p17_init=p17i,
        fig5_n_star=n20,
        fig5_peak=p20,
        fig5_below=bool(p17 < 1e-3),
        fig4_max_grpo=mags.negative.max(),
        fig4_max_half=g_half.max(),
        fig4_max_one=g_one.max(),
        lr_scales=m,
        coupling_n=ns,
        coupling=coupling,
        coupling_flip=flip,
        mass_balance=mb,
        unsampled_change=uc,
    )


@dataclass(frozen=True)
class Fig2Claims:
    """F-GRPO Fig. 2's claims on one simulated preset (:class:`~tailmiss.results.sim.SimulatedMeans`)."""

    final: pd.DataFrame
    """The final step's seed means, one row per (N, γ)."""
    zone: tuple[float, float] | None
    """Zone II: the N interval where the final γ = 0 M_ret is below :data:`~tailmiss.regimes.ZONE_THRESHOLD`."""
    rises: bool
    """Q_pos ends above its start for every (N, γ)."""
    argmin: int
    min_mret: float
    nmax: int
    largest_min_mret: float
    """The smallest M_ret over steps at the largest N, γ = 0."""
    lift_in: float
    """Mean ΔM_ret (γ = 1 − γ = 0) inside zone II (NaN without γ = 1 runs or without a zone)."""
    lift_out: float
    ends: tuple[float, float]
    """Final γ = 0 M_ret at the smallest and the largest N."""
    nonmonotone: bool
    """M_ret dips into zone II and both ends lie more than 0.3 above the dip."""


def fig2_claims(means: SimulatedMeans) -> Fig2Claims:
    """F-GRPO Fig. 2's claims (Q_pos rises, M_ret is non-monotone in N, γ = 1 lifts it in zone II, the largest N
    keeps it) on one simulated preset."""
    frame = means.means
    start = frame[frame["step"] == 0].set_index(["group_size", "gamma"])
    final = frame[frame["step"] == means.final_step].set_index(["group_size", "gamma"])
    g0 = final.xs(0.0, level="gamma")
    zone = means.zone
    rises = bool((final["q_pos"] > start["q_pos"]).all())
    argmin = int(g0["retained_mass"].idxmin())
    nmax = int(g0.index.max())
    largest = frame[(frame["group_size"] == nmax) & (frame["gamma"] == 0)]
    lift_in = lift_out = float("nan")
    if 1.0 in final.index.get_level_values("gamma"):
        lift = final.xs(1.0, level="gamma")["retained_mass"] - g0["retained_mass"]
        if zone is not None:
            inside = (lift.index > zone[0]) & (lift.index < zone[1])
            lift_in = float(lift[inside].mean()) if inside.any() else float("nan")
            lift_out = float(lift[~inside].mean()) if (~inside).any() else float("nan")
    min_mret = float(g0["retained_mass"].min())
    ends = (float(g0["retained_mass"].iloc[0]), float(g0["retained_mass"].iloc[-1]))
    return Fig2Claims(
        final=final.reset_index(),
        zone=zone,
        rises=rises,
        argmin=argmin,
        min_mret=min_mret,
        nmax=nmax,
        largest_min_mret=float(largest["retained_mass"].min()),
        lift_in=lift_in,
        lift_out=lift_out,
        ends=ends,
        nonmonotone=min_mret < ZONE_THRESHOLD and min(ends) > min_mret + 0.3,
    )


@dataclass(frozen=True)
class BrorlClaims:
    """BroRL Fig. 3's claims on its simulated preset: the final values by N (ascending)."""

    group_sizes: np.ndarray
    gains: np.ndarray
    """ΔQ_pos from step 0 to the final step."""
    worst_drop: np.ndarray
    improved: np.ndarray
    """Final fraction of correct actions whose probability rose."""
    gains_increase: bool
    """ΔQ_pos strictly increases with N."""


def brorl_claims(means: SimulatedMeans) -> BrorlClaims:
    """BroRL Fig. 3's claims: larger N raises Q_pos faster, drops vanish, more correct actions improve."""
    frame = means.means
    bfinal = frame[frame["step"] == means.final_step].sort_values("group_size")
    gains = bfinal["q_pos"].to_numpy() - frame[frame["step"] == 0].sort_values("group_size")["q_pos"].to_numpy()
    return BrorlClaims(
        group_sizes=bfinal["group_size"].to_numpy(),
        gains=gains,
        worst_drop=bfinal["worst_drop"].to_numpy(),
        improved=bfinal["frac_correct_improved"].to_numpy(),
        gains_increase=bool(np.all(np.diff(gains) > 0)),
    )


def bridge_agrees(verdict: dict) -> bool:
    """The bridge's yes/no: M_ret's rank correlation over N above :data:`BRIDGE_SPEARMAN` and every zone equal.

    ``verdict`` is a :attr:`tailmiss.bridge.BridgeResult.verdict`.
    """
    return verdict["spearman_retained_mass"] > BRIDGE_SPEARMAN and verdict["zone_agreement"] == 1.0


@dataclass(frozen=True)
class DapoClaim:
    """Does a DAPO variant differ from GRPO? Run by run (same seed and γ), on the final exact metrics."""

    method: str
    name: str
    runs: int
    """Runs with a GRPO twin."""
    differ: int
    """Of those, runs whose final metrics differ from their twin's in any digit."""
    gap: pd.Series
    """Largest |Δ| over the twins, per metric."""

    @property
    def differs(self) -> bool:
        return self.differ > 0


def dapo_claims(objectives) -> list[DapoClaim]:
    """One :class:`DapoClaim` per DAPO variant of an objective sweep (F-GRPO Table 1) that has GRPO twins."""
    from tailmiss.llm import report

    final = objectives.final
    cols = [c for c in report.header_cols() if c in final]
    keys = ["gamma", "group_size", "seed"]
    grpo = final[final["method"] == "grpo"].set_index(keys)[cols]
    claims = []
    for method, name in (("dapo", "DAPO (clip-higher only)"), ("dapo+ds", "DAPO with dynamic sampling")):
        runs = final[final["method"] == method].set_index(keys)[cols]
        twins = runs.index.intersection(grpo.index)
        if not len(twins):
            continue
        equal = [bool((runs.loc[k] == grpo.loc[k]).all()) for k in twins]
        gap = (runs.loc[twins] - grpo.loc[twins]).abs().max()
        claims.append(DapoClaim(method, name, len(equal), len(equal) - sum(equal), gap))
    return claims
