"""Active groups and the tail-miss probability (F-GRPO §3.1, Lemma 3.1)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tailmiss._checks import check_integer, check_interval


def _one_minus_two_powers(v: np.ndarray, u: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``1 - u**n - v**n`` for ``u + v = 1`` without cancellation.

    The larger base goes through ``-expm1(n log b)`` (no ``1 - (1 - x)``), and its
    log is taken as ``log1p(-other)`` so that a base close to 1 keeps its digits.
    The smaller power is at most half of the result's leading term, so the final
    subtraction loses at most about one bit.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        v_small = v <= u
        log_big = np.where(v_small, np.log1p(-v), np.log1p(-u))
        log_small = np.where(v_small, np.log(v), np.log(u))
        out = -np.expm1(n * log_big) - np.exp(n * log_small)
    out = np.where(n == 1, 0.0, out)  # exactly zero: one draw is never a mixed group
    return np.clip(out, 0.0, 1.0)  # rounding only; the exact value lies in [0, 1]


def active_probability(mu_pos, n):
    r"""Probability that a group of ``n`` rollouts has mixed rewards.

    .. math::

        \Pr(A_N) = 1 - \mu_{pos}^N - (1-\mu_{pos})^N

    Parameters
    ----------
    mu_pos : array_like
        Probability that one rollout is correct, in ``[0, 1]``.
    n : array_like of int
        Group size ``N >= 1``.

    Returns
    -------
    ndarray or float
        ``Pr(0 < X < N)``, broadcast over the arguments.

    References
    ----------
    F-GRPO §3.1, Eq. 7.
    """
    mu = check_interval("mu_pos", mu_pos, 0.0, 1.0, lo_open=False, hi_open=False)
    n_arr = check_integer("n", n, 1).astype(np.float64)
    mu, n_arr = np.broadcast_arrays(mu, n_arr)
    out = _one_minus_two_powers(mu, 1.0 - mu, n_arr)
    return out if out.ndim else float(out)


def _check_mu_tau(mu_pos, tau):
    mu = check_interval("mu_pos", mu_pos, 0.0, 1.0, lo_open=True, hi_open=False)
    tau_arr = check_interval("tau", tau, 0.0, 1.0, lo_open=True, hi_open=True)
    mu, tau_arr = np.broadcast_arrays(mu, tau_arr)
    bad = tau_arr >= mu
    if bad.any():
        tau_bad, mu_bad = tau_arr[bad].flat[0].item(), mu[bad].flat[0].item()
        raise ValueError(f"tau must be smaller than mu_pos, got tau={tau_bad!r} with mu_pos={mu_bad!r}")
    return mu, tau_arr


def tail_miss_probability(mu_pos, tau, n):
    r"""Probability that a group is active yet never samples the rare-correct set E.

    .. math::

        \Pr(B_{E,N}) = (1-\tau)^N - (\mu_{pos}-\tau)^N - (1-\mu_{pos})^N

    Each draw lands in E (probability :math:`\tau`), in C\\E (:math:`\mu_{pos}-\tau`)
    or among the incorrect rollouts (:math:`1-\mu_{pos}`). It is evaluated as
    :math:`(1-\tau)^N \cdot \Pr(\text{mixed} \mid \text{no draw in } E)`, i.e.
    :math:`(1-\tau)^N [1 - u^N - v^N]` with :math:`v = (\mu_{pos}-\tau)/(1-\tau)`,
    :math:`u = 1 - v`; both factors are computed without cancellation, so the
    value keeps full relative accuracy for ``n`` up to 1e7 and ``tau`` down to
    1e-15 and never leaves ``[0, 1]``.

    Parameters
    ----------
    mu_pos : array_like
        Correct probability, ``0 < mu_pos <= 1``.
    tau : array_like
        Mass of the rare-correct subset, ``0 < tau < mu_pos``.
    n : array_like of int
        Group size ``N >= 1``.

    Returns
    -------
    ndarray or float
        Broadcast over the three arguments. Exactly 0 at ``N = 1``.

    References
    ----------
    F-GRPO Lemma 3.1 (Eq. 8; proof in App. D).
    """
    mu, tau_arr = _check_mu_tau(mu_pos, tau)
    n_arr = check_integer("n", n, 1).astype(np.float64)
    mu, tau_arr, n_arr = np.broadcast_arrays(mu, tau_arr, n_arr)
    one_minus_tau = 1.0 - tau_arr
    v = (mu - tau_arr) / one_minus_tau  # P(correct, not in E | not in E)
    u = (1.0 - mu) / one_minus_tau  # P(incorrect | not in E)
    coverage_miss = np.exp(n_arr * np.log1p(-tau_arr))  # (1 - tau)^N without rounding 1 - tau
    out = coverage_miss * _one_minus_two_powers(v, u, n_arr)
    return out if out.ndim else float(out)


class TailMissPeak(NamedTuple):
    """Location and height of the tail-miss peak."""

    n_star: np.ndarray | int
    """Smallest group size attaining the maximum."""
    peak: np.ndarray | float
    """Lemma 3.1 at ``n_star``."""


def tail_miss_peak(mu_pos, tau, n_max: int = 10**7, grid=None) -> TailMissPeak:
    r"""Exact integer argmax :math:`N^*` of Lemma 3.1 and the peak value.

    The search is exhaustive over ``N = 1, 2, ...`` in growing chunks and stops
    as soon as no larger N can win: since
    :math:`\Pr(B_{E,N}) \le (1-\tau)^N`, no N beyond
    :math:`\log(\text{best}) / \log(1-\tau)` can beat the best value found so
    far. The result is therefore the global argmax over ``1..n_max`` with no
    unimodality assumption. Ties go to the smallest N.

    Parameters
    ----------
    mu_pos, tau : array_like
        As in :func:`tail_miss_probability`; broadcast together.
    n_max : int, default 10**7
        Largest group size considered.
    grid : array_like of int, optional
        If given, the argmax is taken over these group sizes only (for example
        powers of two) instead of every integer.

    Returns
    -------
    TailMissPeak
        ``(n_star, peak)`` with the broadcast shape of ``mu_pos`` and ``tau``.

    References
    ----------
    F-GRPO Lemma 3.1; the paper gives no closed-form argmax.
    """
    mu, tau_arr = _check_mu_tau(mu_pos, tau)
    n_max = int(check_integer("n_max", n_max, 1))
    shape = mu.shape
    mu, tau_arr = mu.ravel(), tau_arr.ravel()
    if grid is not None:
        g = np.unique(check_integer("grid", grid, 1).ravel())
        vals = tail_miss_probability(mu[:, None], tau_arr[:, None], g[None, :])
        idx = np.argmax(vals, axis=1)
        n_star, peak = g[idx], vals[np.arange(mu.size), idx]
    else:
        n_star = np.ones(mu.size, dtype=np.int64)
        peak = np.zeros(mu.size)
        todo = mu < 1.0  # mu_pos = 1: every group is all-correct, Pr = 0 for all N
        searched, chunk = 1, 256
        while todo.any() and searched < n_max:
            hi = min(n_max, searched + chunk)
            ns = np.arange(searched + 1, hi + 1)
            idx = np.flatnonzero(todo)
            vals = tail_miss_probability(mu[idx, None], tau_arr[idx, None], ns[None, :])
            j = np.argmax(vals, axis=1)
            best = vals[np.arange(idx.size), j]
            better = best > peak[idx]
            peak[idx[better]] = best[better]
            n_star[idx[better]] = ns[j[better]]
            searched = hi
            with np.errstate(divide="ignore"):
                bound = np.log(peak) / np.log1p(-tau_arr)  # beyond it, (1-tau)^N < best
            todo = todo & (bound > searched)
            chunk = min(chunk * 2, max(256, 2**22 // max(1, int(todo.sum()))))
    n_star, peak = n_star.reshape(shape), peak.reshape(shape)
    if not shape:
        return TailMissPeak(int(n_star), float(peak))
    return TailMissPeak(n_star, peak)
