"""Unbiased pass@k and the pass@k of a correct mass (Chen et al. 2021; BroRL)."""

from __future__ import annotations

import numpy as np
from scipy import special

from tailmiss._checks import check_integer, check_interval, check_not_above

_PASS_AT_K_MAX_TERMS = 50_000_000


def _log_binomial_ratio(n, c, k, terms):
    """Sum of ``log1p(-x)`` over the factors of ``C(n-c, k) / C(n, k)``, ``terms`` factors per element."""
    owner = np.repeat(np.arange(n.size), terms)
    j = np.arange(terms.sum()) - np.repeat(np.cumsum(terms) - terms, terms)
    use_c = c <= k  # factors 1 - k/i for i = n-c+1..n; else 1 - c/(n-j) for j = 0..k-1
    i = n[owner] - j
    x = np.where(use_c[owner], k[owner] / i, c[owner] / i)
    sums = np.zeros(n.size)
    np.add.at(sums, owner, np.log1p(-x))
    return sums


def pass_at_k(n, c, k):
    r"""Unbiased pass@k estimate from ``n`` samples of which ``c`` are correct.

    .. math::

        \widehat{\text{pass@}k} = 1 - \binom{n-c}{k} \Big/ \binom{n}{k}
            = 1 - \prod_{i=n-c+1}^{n} \Big(1 - \frac{k}{i}\Big)

    equal to 1 when ``n - c < k``. The product (over ``min(c, k)`` factors) is
    summed as ``log1p`` terms and closed with ``-expm1``, so neither the
    factorials nor ``1 - ratio`` lose digits; only beyond 5e7 factors in one
    call does it fall back to ``betaln`` (about 1e-11 absolute error). Average
    the result over problems for a benchmark score.

    Parameters
    ----------
    n, c, k : array_like of int
        ``0 <= c <= n`` and ``1 <= k <= n``; broadcast together.

    References
    ----------
    Chen et al. 2021 (pass@k); F-GRPO App. L.4, Eq. 27.
    """
    n_arr = check_integer("n", n, 1)
    c_arr = check_integer("c", c, 0)
    k_arr = check_integer("k", k, 1)
    n_arr, c_arr, k_arr = np.broadcast_arrays(n_arr, c_arr, k_arr)
    check_not_above("c", c_arr, "n", n_arr)
    check_not_above("k", k_arr, "n", n_arr)
    shape = n_arr.shape
    nf, cf, kf = (a.astype(np.float64).ravel() for a in (n_arr, c_arr, k_arr))
    certain = nf - cf < kf
    log_ratio = np.zeros(nf.size)
    todo = np.flatnonzero(~certain & (cf > 0))
    # C(n-c, k) / C(n, k) = prod_{j<k} (1 - c/(n-j)) = prod_{i=n-c+1}^{n} (1 - k/i): take the shorter product
    terms = np.minimum(cf[todo], kf[todo]).astype(np.int64)
    if terms.sum() <= _PASS_AT_K_MAX_TERMS:
        log_ratio[todo] = _log_binomial_ratio(nf[todo], cf[todo], kf[todo], terms)
    else:  # astronomically long products: betaln, accurate to ~1e-11 absolute
        t = todo
        log_ratio[t] = (
            special.betaln(kf[t] + 1.0, nf[t] - kf[t] + 1.0)
            - special.betaln(kf[t] + 1.0, nf[t] - cf[t] - kf[t] + 1.0)
            - np.log1p(-cf[t] / (nf[t] + 1.0))
        )
    out = np.where(certain, 1.0, -np.expm1(log_ratio)).reshape(shape)
    out = np.clip(out, 0.0, 1.0) + 0.0  # + 0.0 turns -0.0 into 0.0
    return out if out.ndim else float(out)


def pass_at_k_from_mass(q_pos, k):
    r"""pass@k of a policy whose correct mass on the prompt is ``q_pos``.

    .. math::

        \text{pass@}k = 1 - (1 - Q_{pos})^k

    References
    ----------
    BroRL §3 (pass@k link).
    """
    q = check_interval("q_pos", q_pos, 0.0, 1.0, lo_open=False, hi_open=False)
    k_arr = check_integer("k", k, 1).astype(np.float64)
    with np.errstate(divide="ignore"):
        out = -np.expm1(k_arr * np.log1p(-q))  # 1 - (1-q)^k for tiny q and huge k
    return out if np.ndim(out) else float(out)
