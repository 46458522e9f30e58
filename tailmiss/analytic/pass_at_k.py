"""Unbiased pass@k and the pass@k of a correct mass (Chen et al. 2021; BroRL)."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from tailmiss._checks import broadcast_named, check_integer, check_interval, check_not_above

_BLOCK = 1024  # terms per block of the direct sum (a power of two: blocks are summed as a fixed binary tree)
_CHUNK_TERMS = 2**16  # terms evaluated at once, whatever the batch: bounds the memory of a call to a few MB
_DIRECT_MAX_TERMS = 2**16  # longer products (min(c, k) above this) go through Stirling's series


def pass_at_k(n, c, k):
    r"""Unbiased pass@k estimate from ``n`` samples of which ``c`` are correct.

    .. math::

        \widehat{\text{pass@}k} = 1 - \binom{n-c}{k} \Big/ \binom{n}{k}
            = 1 - \prod_{i=0}^{m-1} \Big(1 - \frac{\max(c, k)}{n-i}\Big),
        \qquad m = \min(c, k),

    equal to 1 when ``n - c < k`` and to 0 when ``c = 0``; the product form uses
    the symmetry :math:`\binom{n-c}{k}/\binom{n}{k} = \binom{n-k}{c}/\binom{n}{c}`.
    Its logarithm :math:`S` is formed in one of two ways and the result is
    :math:`-\mathrm{expm1}(S)`, so ``1 - ratio`` never cancels and a relative
    error :math:`\epsilon` in :math:`S` gives at most :math:`\epsilon` in the
    result:

    - :math:`m \le 2^{16}`: the sum of the :math:`m` terms
      :math:`\log(1 - x_i)`, each to about an ulp (``log1p(-x)`` for
      :math:`x \le 1/2`, else the log of the exactly formed
      :math:`(n - i - \max(c,k))/(n-i)`), in blocks of 1024 added as a fixed
      binary tree, the blocks combined with compensated (Neumaier) summation;
      the terms share one sign, so the relative error is at most about 15
      roundoffs, :math:`2 \times 10^{-15}` (about 2 per term, 10 tree levels,
      the block sum and ``expm1``; measured below :math:`3 \times 10^{-16}`
      against exact rationals);
    - longer products: Stirling's series with Loader's (2000) deviance form,
      :math:`S = \tfrac12\log(1 + \tfrac{ck}{nd}) + \mathrm{bd0}(n-c, n)
      + \mathrm{bd0}(n-k, d) + c \log(d/n) + \delta(n-c) + \delta(n-k) - \delta(n)
      - \delta(d)` with :math:`d = n - c - k`, whose terms do not cancel
      catastrophically (measured relative error of :math:`S` below
      :math:`2 \times 10^{-15}` against the ``math.fsum`` of the terms, for
      :math:`m` from 20 to :math:`2 \times 10^6` and :math:`n` up to
      :math:`2^{53}`).

    Every element is computed on its own (no result depends on the rest of the
    batch), and the memory of a call is bounded by the size of the batch plus a
    fixed chunk of :math:`2^{16}` terms. Average the result over problems for a
    benchmark score.

    Parameters
    ----------
    n, c, k : array_like of int
        Whole numbers with ``0 <= c <= n``, ``1 <= k <= n`` and
        ``n < 2**53``; broadcast together.

    Returns
    -------
    ndarray or float
        pass@k, broadcast over the arguments.

    References
    ----------
    Chen et al. 2021, "Evaluating Large Language Models Trained on Code"
    (unbiased pass@k, Eq. 1); F-GRPO App. L.4, Eq. 27. C. Loader (2000), "Fast
    and accurate computation of binomial probabilities" (bd0, stirlerr).
    """
    n_arr = check_integer("n", n, 1)
    c_arr = check_integer("c", c, 0)
    k_arr = check_integer("k", k, 1)
    n_arr, c_arr, k_arr = broadcast_named(("n", n_arr), ("c", c_arr), ("k", k_arr))
    check_not_above("c", c_arr, "n", n_arr)
    check_not_above("k", k_arr, "n", n_arr)
    shape = n_arr.shape
    nf, cf, kf = (a.astype(np.float64).ravel() for a in (n_arr, c_arr, k_arr))
    certain = nf - cf < kf
    todo = np.flatnonzero(~certain & (cf > 0))
    log_ratio = np.zeros(nf.size)
    log_ratio[todo] = _log_binomial_ratio(nf[todo], cf[todo], kf[todo])
    out = np.where(certain, 1.0, -np.expm1(log_ratio)).reshape(shape)
    out = np.clip(out, 0.0, 1.0) + 0.0  # + 0.0 turns -0.0 into 0.0
    return out if out.ndim else float(out)


def _log_binomial_ratio(n: np.ndarray, c: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``log(C(n-c, k) / C(n, k))`` for float arrays with ``1 <= c``, ``1 <= k`` and ``c + k <= n``."""
    short, long = np.minimum(c, k), np.maximum(c, k)
    out = np.empty(n.size)
    direct = short <= _DIRECT_MAX_TERMS
    out[direct] = _log_ratio_direct(n[direct], long[direct], short[direct].astype(np.int64))
    out[~direct] = _log_ratio_stirling(n[~direct], short[~direct], long[~direct])
    return out


def _log_ratio_direct(n: np.ndarray, long: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``sum_{i<m} log(1 - long/(n-i))``: full blocks of ``_BLOCK`` terms in order, then the tail block."""
    total, comp = np.zeros(n.size), np.zeros(n.size)
    n_full = m // _BLOCK
    for j in range(int(n_full.max(initial=0))):
        rows = np.flatnonzero(n_full > j)
        _add_blocks(total, comp, rows, n, long, np.full(rows.size, j * _BLOCK), _BLOCK, np.full(rows.size, _BLOCK))
    rest = m - n_full * _BLOCK
    width = np.ones_like(rest)  # the tail block is padded to the next power of two
    while (width < rest).any():
        width = np.where(width < rest, 2 * width, width)
    for w in np.unique(width[rest > 0]):
        rows = np.flatnonzero((rest > 0) & (width == w))
        _add_blocks(total, comp, rows, n, long, n_full[rows] * _BLOCK, int(w), rest[rows])
    return total + comp


def _add_blocks(total, comp, rows, n, long, start, width: int, count) -> None:
    """Add one block of terms ``start .. start + count - 1`` (padded to ``width``) to each row's running sum."""
    per_chunk = max(1, _CHUNK_TERMS // width)
    offsets = np.arange(width)
    for lo in range(0, rows.size, per_chunk):
        r = rows[lo : lo + per_chunk]
        valid = offsets[None, :] < count[lo : lo + per_chunk, None]
        i = np.where(valid, start[lo : lo + per_chunk, None] + offsets[None, :], 0).astype(np.float64)
        rem = n[r, None] - i  # exact: integers below 2**53
        x = long[r, None] / rem
        # 1 - x loses digits for x near 1; there the numerator rem - long is formed exactly instead
        terms = np.where(x <= 0.5, np.log1p(-np.minimum(x, 0.5)), np.log((rem - long[r, None]) / rem))
        terms = np.where(valid, terms, 0.0)
        while terms.shape[1] > 1:  # fixed binary tree: the same rounding whatever the rest of the batch
            terms = terms[:, 0::2] + terms[:, 1::2]
        _neumaier_add(total, comp, r, terms[:, 0])


def _neumaier_add(total: np.ndarray, comp: np.ndarray, rows: np.ndarray, value: np.ndarray) -> None:
    s = total[rows]
    t = s + value
    comp[rows] += np.where(np.abs(s) >= np.abs(value), (s - t) + value, (value - t) + s)
    total[rows] = t


def _log_ratio_stirling(n: np.ndarray, c: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``log(C(n-c, k) / C(n, k))`` from Stirling's series in deviance form (Loader 2000); ``c <= k`` is best.

    With ``a = n-c``, ``b = n-k``, ``d = n-c-k`` and ``log x! = log sqrt(2 pi x) + x log x - x + delta(x)``,
    ``log a! + log b! - log n! - log d!`` regroups into terms without catastrophic cancellation. ``d = 0``
    means ``C(n-c, k) / C(n, k) = 1 / C(n, k)``; it is only reached with ``c, k > 2**16``, where that ratio
    is far below the smallest double, so its log is ``-inf``.
    """
    out = np.full(n.size, -np.inf)
    ok = n - c - k >= 1
    n, c, k = n[ok], c[ok], k[ok]
    a, b, d = n - c, n - k, n - c - k  # exact: integers below 2**53
    y = (c + k) / n
    log_d_over_n = np.where(y <= 0.5, np.log1p(-np.minimum(y, 0.5)), np.log(d / n))
    out[ok] = (
        0.5 * np.log1p(c * k / (n * d))
        + _bd0(a, n)
        + _bd0(b, d)
        + c * log_d_over_n
        + (_stirlerr(a) + _stirlerr(b))
        - (_stirlerr(n) + _stirlerr(d))
    )
    return out


def _bd0(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Deviance term ``x log(x/m) + m - x >= 0`` without cancellation (Loader 2000).

    For ``|v| < 1/4``, ``v = (x-m)/(x+m)``: ``(x-m) v + 2x (v^3/3 + v^5/5 + ...)``, 14 terms (each at most
    1/16 of the previous one); otherwise the direct formula, which then loses at most a few bits.
    """
    diff = x - m  # exact
    v = diff / (x + m)
    small = np.abs(v) < 0.25
    vs = np.where(small, v, 0.0)
    v2 = vs * vs
    power, series = 2.0 * x * vs, np.zeros(x.size)
    for j in range(1, 15):
        power = power * v2
        series = series + power / (2 * j + 1)
    with np.errstate(divide="ignore", invalid="ignore"):  # the branch not taken may see x/m far from 1
        direct = x * np.log(x / m) - diff
    return np.where(small, diff * vs + series, direct)


_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_STIRLING = (1.0 / 12, 1.0 / 360, 1.0 / 1260, 1.0 / 1680, 1.0 / 1188)


def _stirlerr(x: np.ndarray) -> np.ndarray:
    """``delta(x) = log x! - log sqrt(2 pi x) - x log x + x`` for whole ``x >= 1``.

    The asymptotic series up to ``x^-9`` for ``x >= 16`` (truncation below 1.2e-16 absolute), the definition
    through ``gammaln`` below (absolute error ~1e-15, used only where the ratio is astronomically small).
    """
    xs = np.maximum(x, 16.0)
    inv2 = 1.0 / (xs * xs)
    s0, s1, s2, s3, s4 = _STIRLING
    series = (s0 - (s1 - (s2 - (s3 - s4 * inv2) * inv2) * inv2) * inv2) / xs
    xl = np.minimum(x, 16.0)
    exact = special.gammaln(xl + 1.0) - (xl + 0.5) * np.log(xl) + xl - _HALF_LOG_2PI
    return np.where(x >= 16.0, series, exact)


def pass_at_k_from_mass(q_pos, k):
    r"""pass@k of a policy whose correct mass on the prompt is ``q_pos``.

    .. math::

        \text{pass@}k = 1 - (1 - Q_{pos})^k

    evaluated as ``-expm1(k * log1p(-q_pos))`` so that tiny masses and huge ``k``
    keep their digits.

    Parameters
    ----------
    q_pos : array_like
        Correct mass in ``[0, 1]``.
    k : array_like of int
        Number of attempts, a whole number in ``[1, 2**53)``; broadcast against
        ``q_pos``.

    References
    ----------
    BroRL §3 (pass@k link); Chen et al. 2021 (pass@k).
    """
    q = check_interval("q_pos", q_pos, 0.0, 1.0, lo_open=False, hi_open=False)
    k_arr = check_integer("k", k, 1).astype(np.float64)
    q, k_arr = broadcast_named(("q_pos", q), ("k", k_arr))
    with np.errstate(divide="ignore"):
        out = -np.expm1(k_arr * np.log1p(-q))  # 1 - (1-q)^k for tiny q and huge k
    return out if np.ndim(out) else float(out)
