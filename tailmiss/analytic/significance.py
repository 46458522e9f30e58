r"""pass@k from finite samples and the paired m-out-of-n subsampling test of F-GRPO App. Q.

F-GRPO scores each benchmark problem with :math:`n = 1024` samples and the
unbiased pass@k estimator (Chen et al. 2021), and calls a difference between
two methods significant by paired m-out-of-n subsampling (Politis, Romano and
Wolf 1999; F-GRPO App. Q: :math:`m = 256` of the :math:`n` samples drawn
without replacement per problem, 50,000 iterations, two-sided, α = 0.05).
This module holds that test (:func:`paired_subsampling_test`), the benchmark
mean of the estimator (:func:`benchmark_pass_at_k`) and the draw of a policy's
per-sample outcomes from its exact correct masses (:func:`sample_outcomes`):
for a verifier that only looks at the answer, :math:`n` generated answers are
:math:`n` independent Bernoulli(:math:`\mu_{pos}(x)`) outcomes, so drawing
them from the exact masses is the same as generating.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tailmiss._checks import check_int, check_number
from tailmiss.analytic.pass_at_k import pass_at_k

__all__ = ["SubsamplingTest", "sample_outcomes", "benchmark_pass_at_k", "paired_subsampling_test"]

_CHUNK = 2_000_000
"""About this many (iteration, problem) cells are drawn at once."""


def _outcomes(name: str, value) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name} must be a 2-D array (problems, samples), got shape {arr.shape}")
    if arr.dtype != bool and not np.isin(arr, (0, 1)).all():
        raise ValueError(f"{name} must hold booleans or 0/1 outcomes")
    return arr.astype(bool)


def sample_outcomes(mu_pos, n: int, rng: np.random.Generator) -> np.ndarray:
    r"""``n`` sampled outcomes per problem from exact correct masses: a (P, n) bool array.

    Outcome :math:`j` of problem :math:`x` is correct with probability
    :math:`\mu_{pos}(x)`, independently (the :math:`n` answers a policy would
    generate, as a strict verifier scores them).
    """
    mu = np.asarray(mu_pos, dtype=float)
    if mu.ndim != 1 or not np.all((mu >= 0) & (mu <= 1)):
        raise ValueError("mu_pos must be a 1-D array of probabilities in [0, 1]")
    check_int("n", n)
    return rng.random((mu.size, n)) < mu[:, None]


def benchmark_pass_at_k(outcomes, k: int) -> float:
    """The unbiased pass@k (Chen et al. 2021) of each problem from its outcomes, averaged over problems."""
    out = _outcomes("outcomes", outcomes)
    check_int("k", k)
    if k > out.shape[1]:
        raise ValueError(f"k must not exceed the samples per problem ({out.shape[1]}), got {k}")
    return float(np.mean(pass_at_k(out.shape[1], out.sum(1), k)))


@dataclass(frozen=True)
class SubsamplingTest:
    """The result of :func:`paired_subsampling_test`.

    Attributes
    ----------
    difference : float
        :math:`\\hat\\theta_n`: benchmark pass@k of A minus B from all n samples.
    p_value : float
        Two-sided: the share of subsamples with :math:`|T^*_b| \\ge \\sqrt n\\,|\\hat\\theta_n|`.
    ci_low, ci_high : float
        The subsampling confidence interval of the difference at level 1 - α.
    significant : bool
        ``p_value < alpha``.
    k, m, n, iterations : int
    alpha : float
    """

    difference: float
    p_value: float
    ci_low: float
    ci_high: float
    significant: bool
    k: int
    m: int
    n: int
    iterations: int
    alpha: float


def _joint_counts(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per problem, how many sample indices are correct for both, for A only, for B only: (P, 3) int64."""
    return np.stack([(a & b).sum(1), (a & ~b).sum(1), (~a & b).sum(1)], axis=1).astype(np.int64)


def _subsample_counts(cells: np.ndarray, n: int, m: int, iterations: int, rng: np.random.Generator):
    """Correct counts of A and B among one shared draw of ``m`` of the ``n`` sample indices per problem, for
    ``iterations`` independent draws: two (iterations, P) arrays (a multivariate hypergeometric draw, made as
    three nested univariate ones)."""
    both, a_only, b_only = (np.broadcast_to(cells[:, j], (iterations, len(cells))) for j in range(3))
    x11 = rng.hypergeometric(both, n - both, m)
    x10 = rng.hypergeometric(a_only, n - both - a_only, m - x11)
    x01 = rng.hypergeometric(b_only, n - both - a_only - b_only, m - x11 - x10)
    return x11 + x10, x11 + x01


def paired_subsampling_test(
    correct_a,
    correct_b,
    k: int,
    m: int = 256,
    iterations: int = 50_000,
    alpha: float = 0.05,
    seed: int = 0,
) -> SubsamplingTest:
    r"""Paired m-out-of-n subsampling test of a pass@k difference between two methods (F-GRPO App. Q).

    Each method has :math:`n` sampled outcomes on each of the same :math:`P`
    problems. The statistic is the benchmark difference of the unbiased
    estimator (Chen et al. 2021)

    .. math::

        \hat\theta_n = \frac1P \sum_x \big[\hat p_k(c_A(x), n) - \hat p_k(c_B(x), n)\big],
        \qquad \hat p_k(c, n) = 1 - \binom{n-c}{k} \Big/ \binom{n}{k}.

    Each iteration draws, per problem and independently across problems, one
    set of :math:`m` of the :math:`n` sample indices without replacement,
    shared by the two methods (the pairing), and recomputes the difference
    :math:`\hat\theta^*_b` from those :math:`m` samples. By Politis, Romano and
    Wolf (1999) the law of :math:`T^*_b = \sqrt m(\hat\theta^*_b - \hat\theta_n)`
    approximates that of :math:`\sqrt n(\hat\theta_n - \theta)`, so

    * two-sided p-value: :math:`\Pr^*\big(|T^*_b| \ge \sqrt n\,|\hat\theta_n|\big)`;
    * interval: :math:`[\hat\theta_n - q_{1-\alpha/2}/\sqrt n,\ \hat\theta_n - q_{\alpha/2}/\sqrt n]`
      with :math:`q` the quantiles of :math:`T^*_b`.

    Parameters
    ----------
    correct_a, correct_b : array_like of bool, shape (P, n)
        Per-sample outcomes of the two methods on the same problems, in any
        sample order (row ``x`` of both arrays is problem ``x``).
    k : int
        The pass@k to compare, ``k <= m``.
    m : int
        Samples per subsample, ``1 <= m < n`` (F-GRPO: 256 of 1024).
    iterations : int
        Subsamples drawn (F-GRPO: 50,000).
    alpha : float
        Two-sided level.
    seed : int
        Seeds the draws.

    Returns
    -------
    SubsamplingTest
    """
    a, b = _outcomes("correct_a", correct_a), _outcomes("correct_b", correct_b)
    if a.shape != b.shape:
        raise ValueError(f"correct_a and correct_b must have one shape, got {a.shape} and {b.shape}")
    n = a.shape[1]
    check_int("m", m)
    if m >= n:
        raise ValueError(f"m must be smaller than the samples per problem (n = {n}), got {m}")
    check_int("k", k)
    if k > m:
        raise ValueError(f"k must not exceed m ({m}), got {k}")
    check_int("iterations", iterations)
    check_number("alpha", alpha, 0.0, 1.0, lo_open=True, hi_open=True)
    check_int("seed", seed, 0)
    theta = float(np.mean(pass_at_k(n, a.sum(1), k) - pass_at_k(n, b.sum(1), k)))
    table = pass_at_k(m, np.arange(m + 1), k)  # the estimator at every count of m samples
    cells = _joint_counts(a, b)
    rng = np.random.default_rng(seed)
    per_chunk = max(1, _CHUNK // len(cells))
    stats = []
    for lo in range(0, iterations, per_chunk):
        ca, cb = _subsample_counts(cells, n, m, min(per_chunk, iterations - lo), rng)
        stats.append(np.sqrt(m) * ((table[ca] - table[cb]).mean(1) - theta))
    t = np.concatenate(stats)
    p_value = float(np.mean(np.abs(t) >= np.sqrt(n) * abs(theta) - 1e-12))
    q_lo, q_hi = np.quantile(t, [alpha / 2, 1 - alpha / 2])
    return SubsamplingTest(
        difference=theta,
        p_value=p_value,
        ci_low=float(theta - q_hi / np.sqrt(n)),
        ci_high=float(theta - q_lo / np.sqrt(n)),
        significant=p_value < alpha,
        k=int(k),
        m=int(m),
        n=int(n),
        iterations=int(iterations),
        alpha=float(alpha),
    )
