"""The closed-form claims of F-GRPO (Fig. 1(a), 3, 4, 5, App. N, Prop. 3.2) and BroRL (Thm. 1 / Cor. 3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tailmiss import analytic

__all__ = ["TheoryClaims", "theory_claims"]


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
    """The smallest N where the coupling is positive (``_first_positive``; 0 if none up to 2^17)."""
    coupling_sign_changes: int
    """Sign changes of the coupling over ``SIGN_GRID`` (one: the flip is the only one there)."""
    mass_balance: object
    unsampled_change: object


SIGN_GRID = np.unique(np.geomspace(2, 2**17, 400).round().astype(int))
"""The N on which the coupling's sign is read before the flip is bisected: 400 points from 2 to 2^17 on a log scale."""


def _first_positive(init) -> tuple[int, int]:
    """BroRL Cor. 3 on the simulation's initial policy: the smallest N with a positive expected coupling
    :math:`E[Q_{pos} U_{neg,2} - Q_{neg} U_{pos,2}]`, and the sign changes over ``SIGN_GRID``. The first positive
    grid point's bracket is bisected on the integers, so the flip is exact when the grid sees one change (0 and the
    count when no grid point is positive)."""
    coupling = analytic.expected_unsampled_coupling(init.probs, init.correct, SIGN_GRID)
    positive = coupling > 0
    changes = int(np.sum(positive[1:] != positive[:-1]))
    if not positive.any():
        return 0, changes
    i = int(np.argmax(positive))
    if i == 0:
        return int(SIGN_GRID[0]), changes
    lo, hi = int(SIGN_GRID[i - 1]), int(SIGN_GRID[i])  # coupling(lo) <= 0 < coupling(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if analytic.expected_unsampled_coupling(init.probs, init.correct, np.array([mid]))[0] > 0:
            hi = mid
        else:
            lo = mid
    return hi, changes


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
    flip, changes = _first_positive(init)
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
        coupling_sign_changes=changes,
        mass_balance=mb,
        unsampled_change=uc,
    )
