"""Active groups and the tail-miss probability (F-GRPO §3.1, Lemma 3.1)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tailmiss._checks import broadcast_named, broadcast_shapes_named, check_integer, check_interval, check_scalar


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
        Group size, a whole number with ``1 <= N < 2**53`` (``inf`` is
        rejected).

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
    mu, n_arr = broadcast_named(("mu_pos", mu), ("n", n_arr))
    out = _one_minus_two_powers(mu, 1.0 - mu, n_arr)
    return out if out.ndim else float(out)


def _check_mu_tau(mu_pos, tau, *others: tuple[str, tuple[int, ...]]):
    """``mu_pos`` and ``tau`` checked and broadcast together; they must also broadcast against ``others``."""
    mu = check_interval("mu_pos", mu_pos, 0.0, 1.0, lo_open=True, hi_open=False)
    tau_arr = check_interval("tau", tau, 0.0, 1.0, lo_open=True, hi_open=True)
    broadcast_shapes_named(("mu_pos", mu.shape), ("tau", tau_arr.shape), *others)
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
        Group size, a whole number with ``1 <= N < 2**53``.

    Returns
    -------
    ndarray or float
        Broadcast over the three arguments. Exactly 0 at ``N = 1``.

    References
    ----------
    F-GRPO Lemma 3.1 (Eq. 8; proof in App. D).
    """
    n_arr = check_integer("n", n, 1).astype(np.float64)
    mu, tau_arr = _check_mu_tau(mu_pos, tau, ("n", n_arr.shape))
    out = _tail_miss(mu, tau_arr, n_arr)
    return out if out.ndim else float(out)


def _tail_miss(mu: np.ndarray, tau: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Lemma 3.1 on validated float arrays (``n`` as float64), broadcast together."""
    mu, tau, n = np.broadcast_arrays(mu, tau, n)
    one_minus_tau = 1.0 - tau
    v = (mu - tau) / one_minus_tau  # P(correct, not in E | not in E)
    u = (1.0 - mu) / one_minus_tau  # P(incorrect | not in E)
    coverage_miss = np.exp(n * np.log1p(-tau))  # (1 - tau)^N without rounding 1 - tau
    return coverage_miss * _one_minus_two_powers(v, u, n)


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
    far. Ties go to the smallest N.

    The search range must contain the peak, and this is checked: Lemma 3.1 is
    :math:`(1-\tau)^N h(N)` with :math:`h(N) = 1 - u^N - v^N` (notation of
    :func:`tail_miss_probability`), and :math:`h` is concave in real
    :math:`N`, so :math:`\log \Pr(B_{E,N})` is concave for :math:`N > 1`
    and the sequence is unimodal. Hence the peak lies beyond the range exactly
    when the value just past its end, at ``n_max + 1`` (or the largest grid
    value plus one), exceeds the best value inside; that raises ``ValueError``
    instead of returning the end of the range.

    Parameters
    ----------
    mu_pos, tau : array_like
        As in :func:`tail_miss_probability`; broadcast together.
    n_max : int, default 10**7
        Largest group size searched, a single whole number in ``[1, 2**53)``.
        The search visits every N up to the peak (or the bound above), so its
        cost grows with :math:`N^*`: peaks beyond ~1e9 (``mu_pos`` within ~1e-8
        of 1 with a tiny ``tau``) take minutes.
    grid : array_like of int, optional
        If given, the argmax is taken over these group sizes only (for example
        powers of two) instead of every integer; ``n_max`` is then unused. The
        grid must be non-empty and reach past the peak.

    Returns
    -------
    TailMissPeak
        ``(n_star, peak)`` with the broadcast shape of ``mu_pos`` and ``tau``.

    Raises
    ------
    ValueError
        For invalid arguments, and when the peak lies beyond ``n_max`` (or
        beyond the largest grid value) for some element.

    References
    ----------
    F-GRPO Lemma 3.1; the paper gives no closed-form argmax.
    """
    mu, tau_arr = _check_mu_tau(mu_pos, tau)
    n_max_arr = check_integer("n_max", n_max, 1)
    check_scalar("n_max", n_max_arr)
    n_max = int(n_max_arr)
    shape = mu.shape
    mu, tau_arr = mu.ravel(), tau_arr.ravel()
    if grid is not None:
        g = np.unique(check_integer("grid", grid, 1).ravel())
        if g.size == 0:
            raise ValueError(f"grid must hold at least one group size, got {grid!r}")
        n_star, peak = _grid_peak(mu, tau_arr, g)
        last, what = int(g[-1]), f"the largest grid value {int(g[-1])}; extend grid"
    else:
        n_star, peak = _exhaustive_peak(mu, tau_arr, n_max)
        last, what = n_max, f"n_max={n_max}; pass a larger n_max"
    past_end = _tail_miss(mu, tau_arr, np.float64(last + 1))  # last + 1 <= 2**53 is exact
    beyond = past_end > peak
    if beyond.any():
        i = int(np.flatnonzero(beyond)[0])
        raise ValueError(
            f"the tail-miss peak lies beyond {what} (mu_pos={mu[i].item()!r}, tau={tau_arr[i].item()!r}: "
            f"Pr = {past_end[i].item():.17g} at N={last + 1} exceeds the best {peak[i].item():.17g} "
            f"at N={int(n_star[i])})"
        )
    n_star, peak = n_star.reshape(shape), peak.reshape(shape)
    if not shape:
        return TailMissPeak(int(n_star), float(peak))
    return TailMissPeak(n_star, peak)


def _grid_peak(mu: np.ndarray, tau: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    vals = _tail_miss(mu[:, None], tau[:, None], g[None, :].astype(np.float64))
    idx = np.argmax(vals, axis=1)
    return g[idx], vals[np.arange(mu.size), idx]


def _exhaustive_peak(mu: np.ndarray, tau: np.ndarray, n_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Global argmax over ``1..n_max`` (no unimodality assumed), stopping at the ``(1-tau)^N`` bound."""
    n_star = np.ones(mu.size, dtype=np.int64)
    peak = np.zeros(mu.size)
    todo = mu < 1.0  # mu_pos = 1: every group is all-correct, Pr = 0 for all N
    searched, chunk = 1, 256
    while todo.any() and searched < n_max:
        hi = min(n_max, searched + chunk)
        ns = np.arange(searched + 1, hi + 1)
        idx = np.flatnonzero(todo)
        vals = _tail_miss(mu[idx, None], tau[idx, None], ns[None, :].astype(np.float64))
        j = np.argmax(vals, axis=1)
        best = vals[np.arange(idx.size), j]
        better = best > peak[idx]
        peak[idx[better]] = best[better]
        n_star[idx[better]] = ns[j[better]]
        searched = hi
        with np.errstate(divide="ignore"):
            bound = np.log(peak) / np.log1p(-tau)  # beyond it, (1-tau)^N < best
        todo = todo & (bound > searched)
        chunk = min(chunk * 2, max(256, 2**22 // max(1, int(todo.sum()))))
    return n_star, peak
