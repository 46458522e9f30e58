r"""The mixture of Lemma 3.1 curves over a set of groups, and its exact peak :math:`N^*`.

For groups with success rates :math:`\hat\mu_g` and a rare share :math:`\rho`, the risk at a
common group size :math:`N` is the mixture
:math:`\bar P(N) = \sum_g w_g \Pr(B_{E,N} \mid \hat\mu_g, \rho\hat\mu_g)` (F-GRPO Lemma 3.1,
Eq. 8). Each term is unimodal in :math:`N`, so the mixture rises up to its smallest component peak
and falls past its largest; its argmax is found exactly on the integers up to the largest, for one
set of groups (:func:`pooled_risk`) or for every step of a run at once (:func:`mixture_peaks`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["support", "mixture", "mixture_peaks", "pooled_risk"]

_CHUNK = 1 << 15
_CELLS = 1 << 22
"""Values of the mixture computed at once when searching for the peaks of many steps (32 MB)."""


def analytic():
    # imported when first needed: scipy's import is a quarter of the time a bad log takes to be refused
    from tailmiss import analytic

    return analytic


def support(mu_hat: np.ndarray, row: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct :math:`\\hat\\mu` and the weight of each in each row (its share of the row's groups), ``(rows, M)``."""
    mu, column = np.unique(mu_hat, return_inverse=True)
    weights = np.zeros((rows, mu.size))
    np.add.at(weights, (row, column.reshape(-1)), 1.0)
    return mu, weights / np.maximum(weights.sum(axis=1, keepdims=True), 1.0)


def mixture(mu: np.ndarray, weights: np.ndarray, rho: float, ns: np.ndarray) -> np.ndarray:
    """``weights @ P`` with ``P[m, j]`` Lemma 3.1 at ``(mu[m], rho*mu[m], ns[j])``: each row's mixture, ``(rows, J)``.

    Summed term by term in ``mu``'s order, so a row's value does not depend on the other rows.
    """
    weights = np.atleast_2d(weights)
    out = np.zeros((weights.shape[0], ns.size))
    for lo in range(0, ns.size, _CHUNK):
        block = ns[lo : lo + _CHUNK]
        vals = analytic().tail_miss_probability(mu[:, None], rho * mu[:, None], block[None, :])
        for m in range(mu.size):
            out[:, lo : lo + _CHUNK] += weights[:, m, None] * vals[m]
    return out


def mixture_peaks(mu: np.ndarray, weights: np.ndarray, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact argmax over the integers and height of each row's :func:`mixture` (NaN, 0 for a row with no risk).

    Each curve is unimodal with its exact argmax from :func:`tailmiss.analytic.tail_miss_peak`, so a row's
    mixture rises up to its smallest component peak and falls past its largest: its argmax lies at or below the
    largest, and the rows are searched together up to the largest over all rows, in blocks.
    """
    interior = mu < 1.0  # mu_hat = 1 contributes 0 at every N
    mu, weights = mu[interior], weights[:, interior]
    n_star = np.full(weights.shape[0], np.nan)
    peak = np.zeros(weights.shape[0])
    if mu.size == 0:
        return n_star, peak
    n_hi = int(np.max(analytic().tail_miss_peak(mu, rho * mu).n_star))
    width = max(64, _CELLS // max(1, weights.shape[0]))
    for lo in range(1, n_hi + 1, width):
        ns = np.arange(lo, min(lo + width, n_hi + 1))
        curve = mixture(mu, weights, rho, ns)
        best = np.argmax(curve, axis=1)
        height = curve[np.arange(curve.shape[0]), best]
        better = height > peak  # strictly: the first of equal heights wins, as argmax over all N would pick
        n_star[better], peak[better] = ns[best[better]], height[better]
    return n_star, peak


def pooled_risk(mu_hat, rho: float) -> dict:
    r"""Exact argmax :math:`N^*` and height of the run's mixture of Lemma 3.1 curves.

    Parameters
    ----------
    mu_hat : array_like
        :math:`\hat\mu` of the solved groups (:math:`X > 0`).
    rho : float
        Rare share, :math:`\tau = \rho\hat\mu`.

    Returns
    -------
    dict
        ``n_star`` (None when every group is all-correct: the risk is 0 for every N), ``peak``,
        and ``support`` (the distinct :math:`\hat\mu` and their weights, for curves).
    """
    mu_hat = np.asarray(mu_hat, np.float64).ravel()
    mu, weights = support(mu_hat, np.zeros(mu_hat.size, dtype=np.int64), 1)
    n_star, peak = mixture_peaks(mu, weights, rho)
    found = not np.isnan(n_star[0])
    return {"n_star": int(n_star[0]) if found else None, "peak": float(peak[0]), "support": (mu, weights[0])}
