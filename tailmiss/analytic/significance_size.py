r"""The size of F-GRPO App. Q's paired subsampling test under its own null.

Under the null of :func:`tailmiss.analytic.significance.paired_subsampling_test`
the two methods are one policy: each null draws two independent outcome sets,
(P, n) Bernoulli(:math:`\mu(x)`) each, from the same per-problem correct masses
:math:`\mu`, and runs the test on them. The share of nulls called significant
is the test's size, which a calibrated test holds at α. :func:`null_sizes`
evaluates several k and several forms on the same draws (one set of subsample
counts per null serves every k), so they compare like for like.

**The estimate.** The true difference is 0, so each rejection is a false
positive and the share of the :math:`N` nulls estimates the size,

.. math::

    \widehat{\text{size}} = \frac1N \sum_{i=1}^N \mathbf 1\{\hat p_i < \alpha\},

a Binomial(:math:`N`, size) / :math:`N` draw (:meth:`NullSize.interval`).
The Monte-Carlo p-value of a test from :math:`I` iterations hardly moves
the size: were the exact subsampling p-value uniform, the count of
subsamples at least as extreme would be uniform on :math:`\{0, …, I\}` and
the test would reject with probability :math:`\lceil \alpha I\rceil/(I+1)`
(0.04995 at I = 1000).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from tailmiss._checks import check_int, check_number
from tailmiss.analytic.significance import (
    _differences,
    _joint_counts,
    _p_values,
    check_form,
    sample_outcomes,
)

__all__ = ["NullSize", "null_size", "null_sizes", "null_draw"]


@dataclass(frozen=True)
class NullSize:
    """The rejection count of :func:`~tailmiss.analytic.significance.paired_subsampling_test` over nulls, for one
    form and one k.

    Attributes
    ----------
    form : str
    k, m, n, problems, nulls, iterations : int
        ``problems`` is P, ``iterations`` the subsamples of each test.
    alpha : float
        The level each test was run at.
    rejections : int
        Nulls called significant.
    """

    form: str
    k: int
    m: int
    n: int
    problems: int
    nulls: int
    iterations: int
    alpha: float
    rejections: int

    @property
    def rate(self) -> float:
        """The rejection share, ``rejections / nulls``: the estimated size."""
        return self.rejections / self.nulls

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        r"""Clopper-Pearson interval of the size at ``level``.

        With :math:`r` rejections of :math:`N` nulls and :math:`a = 1 - \text{level}`: the
        :math:`a/2` quantile of Beta(:math:`r, N - r + 1`) (0 if :math:`r = 0`) and the
        :math:`1 - a/2` quantile of Beta(:math:`r + 1, N - r`) (1 if :math:`r = N`).
        """
        check_number("level", level, 0.0, 1.0, lo_open=True, hi_open=True)
        r, total, tail = self.rejections, self.nulls, (1 - level) / 2
        low = float(special.betaincinv(r, total - r + 1, tail)) if r > 0 else 0.0
        high = float(special.betaincinv(r + 1, total - r, 1 - tail)) if r < total else 1.0
        return low, high


def null_draw(mu, n: int, seed: int, index: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Null ``index`` of :func:`null_sizes` with ``seed``: the two outcome sets and the seed of its test.

    The outcomes come from ``numpy.random.default_rng([seed, index, 0])`` (A's, then B's, by
    :func:`sample_outcomes`), the test's seed is the first word of ``SeedSequence([seed, index, 1])``.
    ``paired_subsampling_test(a, b, k, m, iterations, alpha, test_seed, form).significant`` is then exactly
    what :func:`null_sizes` counts for that null.
    """
    rng = np.random.default_rng([seed, index, 0])
    a = sample_outcomes(mu, n, rng)
    b = sample_outcomes(mu, n, rng)
    return a, b, int(np.random.SeedSequence([seed, index, 1]).generate_state(1)[0])


def null_sizes(
    mu,
    n: int = 1024,
    ks=(1,),
    m: int = 256,
    nulls: int = 2000,
    iterations: int = 1000,
    alpha: float = 0.05,
    forms=("corrected",),
    seed: int = 0,
) -> list[NullSize]:
    r"""Rejection counts of the paired subsampling test under its null, for every (form, k) at once.

    For each of ``nulls`` nulls, two independent outcome sets are drawn from the same correct masses ``mu``
    (:func:`null_draw`) and tested as :func:`tailmiss.analytic.significance.paired_subsampling_test` would test them
    (F-GRPO App. Q; Politis, Romano and Wolf 1999), with ``iterations`` subsamples of ``m``; the subsample counts are
    drawn once per null and serve every k and form. What the rejection share estimates: the module docstring.

    Parameters
    ----------
    mu : array_like, shape (P,)
        Per-problem correct masses of the one policy.
    n : int
        Samples per problem, ``n >= 2`` (F-GRPO: 1024).
    ks : sequence of int
        The pass@k to test, each ``<= m``.
    m : int
        Samples per subsample, ``1 <= m < n`` (F-GRPO: 256).
    nulls : int
        Null draws N.
    iterations : int
        Subsamples per test.
    alpha : float
        Two-sided level of each test.
    forms : sequence of str
        Forms of the test (:data:`tailmiss.analytic.significance.FORMS`).
    seed : int
        Seeds every draw (:func:`null_draw`).

    Returns
    -------
    list of NullSize
        One per (form, k), forms outer.
    """
    mu = _checked_mu(mu)
    ks, forms = _checked_grid(n, m, ks, forms)
    _check_counts(nulls, iterations, alpha, seed)
    rejections = np.zeros((len(forms), len(ks)), dtype=np.int64)
    for index in range(nulls):
        a, b, test_seed = null_draw(mu, n, seed, index)
        theta, stars = _differences(_joint_counts(a, b), n, ks, m, iterations, np.random.default_rng(test_seed))
        for i, form in enumerate(forms):
            rejections[i] += _p_values(theta, stars, n, m, form) < alpha
    common = dict(m=m, n=n, problems=len(mu), nulls=nulls, iterations=iterations, alpha=float(alpha))
    return [
        NullSize(form=form, k=k, rejections=int(rejections[i, j]), **common)
        for i, form in enumerate(forms)
        for j, k in enumerate(ks)
    ]


def _checked_mu(mu) -> np.ndarray:
    """``mu`` as a non-empty 1-D float array of probabilities (``ValueError`` otherwise)."""
    mu = np.asarray(mu, dtype=float)
    if mu.ndim != 1 or mu.size < 1 or not np.all((mu >= 0) & (mu <= 1)):
        raise ValueError(f"mu must be a non-empty 1-D array of probabilities in [0, 1], got {mu!r}")
    return mu


def _checked_grid(n: int, m: int, ks, forms) -> tuple[list[int], list[str]]:
    """``n``, ``m < n``, then the ks (each ``<= m``) and the forms checked: the ks as ints and the forms as a list."""
    check_int("n", n, 2)
    check_int("m", m)
    if m >= n:
        raise ValueError(f"m must be smaller than the samples per problem (n = {n}), got {m}")
    ks = [int(check_int("k", k)) for k in ks]
    if not ks:
        raise ValueError("ks must name at least one k, got none")
    for k in ks:
        if k > m:
            raise ValueError(f"k must not exceed m ({m}), got {k}")
    forms = [check_form(f) for f in ([forms] if isinstance(forms, str) else forms)]
    if not forms:
        raise ValueError("forms must name at least one form, got none")
    return ks, forms


def _check_counts(nulls: int, iterations: int, alpha: float, seed: int) -> None:
    """``ValueError`` naming the first bad one of the null count, the iterations, the level and the seed."""
    check_int("nulls", nulls)
    check_int("iterations", iterations)
    check_number("alpha", alpha, 0.0, 1.0, lo_open=True, hi_open=True)
    check_int("seed", seed, 0)


def null_size(
    mu,
    n: int = 1024,
    k: int = 1,
    m: int = 256,
    nulls: int = 2000,
    iterations: int = 1000,
    alpha: float = 0.05,
    form: str = "corrected",
    seed: int = 0,
) -> NullSize:
    """:func:`null_sizes` for one k and one form: the size of the test under its null.

    Parameters and draws as :func:`null_sizes` (``k`` and ``form`` single); ``rate`` is the rejection share
    and ``rejections`` of ``nulls`` its count, for :meth:`NullSize.interval`.
    """
    check_form(form)
    return null_sizes(mu, n, (k,), m, nulls, iterations, alpha, (form,), seed)[0]
