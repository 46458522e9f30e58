r"""Regimes of a retained-mass curve over the group size N (F-GRPO Fig. 2): zones I / II / III and recovery.

One definition of each, shared by the simulation's claims, the bridge, the ladder and the figures: the zone of
each N (:func:`zones`), zone II as an N interval (:func:`concentration_zone`), the agreement of two zone labellings
(:func:`zone_agreement`), a guarded rank correlation (:func:`spearman`) and a curve's shape (:func:`n_shape`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "ZONE_THRESHOLD",
    "RECOVERY_MARGIN",
    "zones",
    "concentration_zone",
    "zone_agreement",
    "spearman",
    "NShape",
    "n_shape",
]

ZONE_THRESHOLD = 0.5
"""M_ret below this marks the concentration zone (zone II), as in F-GRPO Fig. 2."""
RECOVERY_MARGIN = 0.05
"""How far M_ret at the largest N must rise above its minimum (and above twice the seed spread) to count as
recovery: the large-N regime (zone III) of F-GRPO Fig. 2, read from the curve's shape rather than a threshold."""


def zones(group_sizes, retained) -> list[str]:
    """Regime of each group size from its final M_ret (F-GRPO Fig. 2).

    Zone II: :math:`M_{ret} <` :data:`ZONE_THRESHOLD`; zone I: not zone II and
    smaller than every zone-II group size (or there is no zone II); zone III:
    not zone II and larger than some zone-II group size.
    """
    n = np.asarray(group_sizes)
    m = np.asarray(retained, dtype=float)
    if n.shape != m.shape:
        raise ValueError(f"group_sizes and retained must have the same shape, got {n.shape} and {m.shape}")
    low = m < ZONE_THRESHOLD
    first = n[low].min() if low.any() else np.inf
    return ["II" if lo else ("I" if size < first else "III") for size, lo in zip(n, low)]


def concentration_zone(group_sizes, retained, threshold: float = ZONE_THRESHOLD) -> tuple[float, float] | None:
    """Zone II as an interval of group sizes, its bounds at geometric midpoints to the neighbouring N (F-GRPO Fig. 2).

    ``retained`` is the final γ = 0 retained mass at each of ``group_sizes``
    (any order). Zone II spans the smallest to the largest N whose retained
    mass is below ``threshold``; a bound at the end of the sweep is that N
    itself. Returns ``None`` when no N falls below ``threshold``.
    """
    n = np.asarray(group_sizes, dtype=float)
    m = np.asarray(retained, dtype=float)
    if n.shape != m.shape:
        raise ValueError(f"group_sizes and retained must have the same shape, got {n.shape} and {m.shape}")
    order = np.argsort(n, kind="stable")
    n, low = n[order], m[order] < threshold
    if not low.any():
        return None
    first, last = np.flatnonzero(low)[[0, -1]]
    lo = np.sqrt(n[first - 1] * n[first]) if first > 0 else n[first]
    hi = np.sqrt(n[last] * n[last + 1]) if last + 1 < n.size else n[last]
    return float(lo), float(hi)


def zone_agreement(a, b) -> float:
    """The share of positions where two zone labellings (:func:`zones`) of the same group sizes agree."""
    if len(a) != len(b) or not len(a):
        raise ValueError(f"zone labellings must be non-empty and of one length, got {len(a)} and {len(b)}")
    return float(np.mean([x == y for x, y in zip(a, b)]))


def spearman(a, b) -> float:
    """Spearman rank correlation of ``a`` and ``b``; NaN when it is undefined (fewer than 3 points, or either is
    constant), rather than scipy's warning."""
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(stats.spearmanr(a, b).statistic)


@dataclass(frozen=True)
class NShape:
    """The shape of a metric's curve over N (:func:`n_shape`).

    Attributes
    ----------
    spearman : float
        Rank correlation of the metric with N (NaN for a flat curve).
    worst_n : int
        The N of the worst value (lowest, or highest when higher is worse).
    worst, at_max_n : float
        The worst value and the value at the largest N.
    recovers : bool
        The worst N lies strictly inside the sweep and the largest N is better than it beyond the margin.
    """

    spearman: float
    worst_n: int
    worst: float
    at_max_n: float
    recovers: bool


def n_shape(group_sizes, mean, sd=None, lower_is_worse: bool = True) -> NShape:
    r"""The shape of a metric's curve over N: rank trend, worst N and whether the largest N recovers.

    Parameters
    ----------
    group_sizes, mean : array_like
        The curve (any order; sorted by N here).
    sd : array_like, optional
        Seed standard deviation of each point (0 if absent).
    lower_is_worse : bool
        True for :math:`M_{ret}` and rare hit@k (a dip is the loss of rare
        mass); False for :math:`\Delta\mathrm{NLL}_{rare}` (a peak is).

    Returns
    -------
    NShape
        ``recovers``: the worst N lies strictly inside the sweep (a dip, not a
        monotone trend) and the largest N is better than the worst by more than
        :data:`RECOVERY_MARGIN` × the metric's scale and more than twice the two
        points' combined seed spread.
    """
    n = np.asarray(group_sizes, dtype=float)
    m = np.asarray(mean, dtype=float)
    s = np.zeros_like(m) if sd is None else np.nan_to_num(np.asarray(sd, dtype=float))
    if n.shape != m.shape or s.shape != m.shape:
        raise ValueError(f"group_sizes, mean and sd must have one shape, got {n.shape}, {m.shape}, {s.shape}")
    order = np.argsort(n)
    n, m, s = n[order], m[order], s[order]
    sign = 1.0 if lower_is_worse else -1.0
    worst = int(np.argmin(sign * m))
    gain = sign * (m[-1] - m[worst])
    scale = max(float(np.ptp(m)), 1e-12) if not lower_is_worse else 1.0
    margin = max(RECOVERY_MARGIN * scale, 2.0 * float(np.hypot(s[-1], s[worst])))
    return NShape(
        spearman=spearman(n, m),
        worst_n=int(n[worst]),
        worst=float(m[worst]),
        at_max_n=float(m[-1]),
        recovers=bool(0 < worst < len(n) - 1 and gain > margin),
    )
