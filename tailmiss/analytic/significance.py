r"""pass@k from finite samples and the paired m-out-of-n subsampling test of F-GRPO App. Q.

F-GRPO scores each benchmark problem with :math:`n = 1024` samples and the
unbiased pass@k estimator (Chen et al. 2021), and calls a difference between
two methods significant by paired m-out-of-n subsampling (Politis, Romano and
Wolf 1999; F-GRPO App. Q: :math:`m = 256` of the :math:`n` samples drawn
without replacement per problem, 50,000 iterations, two-sided, α = 0.05).
This module holds that test (:func:`paired_subsampling_test`, in three forms:
see :data:`FORMS`), the benchmark mean of the estimator
(:func:`benchmark_pass_at_k`) and the draw of a policy's per-sample outcomes
from its exact correct masses (:func:`sample_outcomes`): for a verifier that
only looks at the answer, :math:`n` generated answers are :math:`n`
independent Bernoulli(:math:`\mu_{pos}(x)`) outcomes, so drawing them from the
exact masses is the same as generating. The test's rejection rate under its
own null is measured by :mod:`tailmiss.analytic.significance_size`.

**The test** (:func:`paired_subsampling_test`). Each method has :math:`n`
sampled outcomes on each of the same :math:`P` problems. The statistic is the
benchmark difference of the unbiased estimator (Chen et al. 2021)

.. math::

    \hat\theta_n = \frac1P \sum_x \big[\hat p_k(c_A(x), n) - \hat p_k(c_B(x), n)\big],
    \qquad \hat p_k(c, n) = 1 - \binom{n-c}{k} \Big/ \binom{n}{k}.

Each iteration draws, per problem and independently across problems, one
set of :math:`m` of the :math:`n` sample indices without replacement,
shared by the two methods (the pairing), and recomputes the difference
:math:`\hat\theta^*_b` from those :math:`m` samples. By Politis, Romano and
Wolf (1999) the law of :math:`T^*_b = \tau_m(\hat\theta^*_b - \hat\theta_n)`
approximates that of :math:`\sqrt n(\hat\theta_n - \theta)`, so

* two-sided p-value: :math:`\Pr^*\big(|T^*_b| \ge \sqrt n\,|\hat\theta_n|\big)`;
* interval: :math:`[\hat\theta_n - q_{1-\alpha/2}/\sqrt n,\ \hat\theta_n - q_{\alpha/2}/\sqrt n]`
  with :math:`q` the quantiles of :math:`T^*_b`.

**The scaling** (``form="corrected"``, the default). Write
:math:`d_j(x) \in \{-1, 0, 1\}` for the paired per-sample difference at
k = 1, so :math:`\hat\theta_n` is a mean of :math:`d` and, with
:math:`s_x^2` the variance of problem x's :math:`n` values :math:`d_j(x)`
(divisor n), :math:`\operatorname{Var}(\sqrt n\,\hat\theta_n)` is estimated
by the plug-in :math:`\hat\sigma^2 = P^{-2}\sum_x s_x^2`. A mean of
:math:`m` of the :math:`n` values drawn without replacement has variance
:math:`\frac{s_x^2}{m}\frac{n-m}{n-1}` (the finite-population correction), so

.. math::

    \operatorname{Var}^*\big(\sqrt m(\hat\theta^*_b - \hat\theta_n)\big)
        = \frac{n-m}{n-1}\,\hat\sigma^2,
    \qquad
    \tau_m = \sqrt{\frac{m\,(n-1)}{n-m}}
    \ \Rightarrow\ \operatorname{Var}^*(T^*_b) = \hat\sigma^2 .

The corrected :math:`\tau_m` is therefore exact for the linear k = 1
statistic (the subsampling variance equals the plug-in variance; the
unbiased one is larger by :math:`n/(n-1)`, 0.1 % at n = 1024). Politis,
Romano and Wolf's :math:`\tau_m = \sqrt m` (``form="uncorrected"``) assumes
:math:`m/n \to 0`; at :math:`m/n = 1/4` it understates the spread by
:math:`\sqrt{1 - m/n} \approx 0.87` and the test over-rejects (8-10 %
at a nominal 5 % for k = 1). For k > 1 the per-problem estimator is a
U-statistic of degree k, and the factor corrects its linear (Hajek) term
only: the higher-order terms weigh more in a subsample of m than in n, so
the subsampling law is too wide and the test errs conservative, most at
k = m, where each subsample's estimator is an indicator (any correct among
the m), as long as that indicator varies between subsamples. Where it
hardly does (every problem with a non-zero mass is solved in nearly every
m-subsample) :math:`\hat\theta^*_b` is 0 in nearly every subsample while
:math:`\hat\theta_n` is a small non-zero number; as :math:`\tau_m < \sqrt n`
that atom never reaches the observed statistic, and the test, in either
scaling, rejects nearly every non-zero :math:`\hat\theta_n`, however small
(:mod:`tailmiss.analytic.significance_size` measures it).

``form="percentile"`` is the literal reading of F-GRPO App. Q: significant
when 0 lies outside the α/2 and 1 - α/2 percentiles of the subsample
differences :math:`\hat\theta^*_b` themselves (no rescaling); p-value
:math:`\min\{1, 2\min(\Pr^*(\hat\theta^*_b \le 0), \Pr^*(\hat\theta^*_b \ge 0))\}`,
interval those percentiles. Its law is about :math:`\sqrt{n/m - 1} = \sqrt 3`
times wider than that of :math:`\hat\theta_n`, so it is very conservative.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tailmiss._checks import check_int, check_number
from tailmiss.analytic.pass_at_k import pass_at_k

__all__ = [
    "FORMS",
    "check_form",
    "SubsamplingTest",
    "DegenerateSubsampling",
    "ATOM_WARN",
    "sample_outcomes",
    "benchmark_pass_at_k",
    "paired_subsampling_test",
]

FORMS = ("corrected", "uncorrected", "percentile")
"""The forms of :func:`paired_subsampling_test`: finite-population corrected (default), the plain √m scaling,
and the percentiles of the subsample differences themselves."""

_CHUNK = 2_000_000
"""About this many (iteration, problem) cells are drawn at once."""
_TIE = 1e-12
"""Differences and statistics within this of the threshold count as reaching it (float noise of exact ties)."""


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
    r"""The result of :func:`paired_subsampling_test`.

    Attributes
    ----------
    difference : float
        :math:`\hat\theta_n`: benchmark pass@k of A minus B from all n samples.
    p_value : float
        Two-sided. ``"corrected"`` and ``"uncorrected"``: the share of
        subsamples with :math:`|T^*_b| \ge \sqrt n\,|\hat\theta_n|`;
        ``"percentile"``: :math:`\min\{1, 2\min(\Pr^*(\hat\theta^*_b \le 0), \Pr^*(\hat\theta^*_b \ge 0))\}`.
    ci_low, ci_high : float
        The subsampling confidence interval of the difference at level 1 - α.
    significant : bool
        ``p_value < alpha``.
    k, m, n, iterations : int
    alpha : float
    form : str
        One of :data:`FORMS`.
    atom : float
        The largest share of subsamples whose difference :math:`\hat\theta^*_b` takes one value (within float
        noise). Near 1 the subsampling law is degenerate (at k = m, where each subsample's pass@k is an indicator,
        on problems nearly every subsample solves) and the scaled forms reject nearly every non-zero difference:
        :func:`paired_subsampling_test` warns (:class:`DegenerateSubsampling`).
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
    form: str
    atom: float = math.nan


ATOM_WARN = 0.5
"""At k = m, a subsampling law with more than this share of its subsamples at one value draws a warning."""


class DegenerateSubsampling(UserWarning):
    """The paired subsampling test's law is degenerate (k = m, most subsamples at one value): its p-value means
    little, and the test over-rejects (module docstring; its size: :mod:`tailmiss.analytic.significance_size`)."""


def _atom(stars: np.ndarray) -> float:
    """The largest share of ``stars`` (one row) at one value, values within float noise counted as one."""
    values = np.sort(np.round(stars / _TIE) * _TIE)
    _, counts = np.unique(values, return_counts=True)
    return float(counts.max() / values.size) if values.size else math.nan


def check_form(form) -> str:
    """``form`` if it is one of :data:`FORMS`, else a ``ValueError`` that names it."""
    if not isinstance(form, str) or form not in FORMS:
        raise ValueError(f"form must be one of {', '.join(map(repr, FORMS))}, got {form!r}")
    return form


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


@lru_cache(maxsize=64)
def _table(m: int, k: int) -> np.ndarray:
    """The estimator of pass@k at every count ``0..m`` of ``m`` samples (read-only, cached)."""
    table = pass_at_k(m, np.arange(m + 1), k)
    table.flags.writeable = False
    return table


def _differences(cells: np.ndarray, n: int, ks, m: int, iterations: int, rng: np.random.Generator):
    r"""The full-sample differences :math:`\hat\theta_n` and the subsample differences :math:`\hat\theta^*_b`
    of every ``k`` in ``ks``, all from one set of subsample draws: a (len(ks),) and a (len(ks), iterations)
    array. The one code path of :func:`paired_subsampling_test` and of the size measurement."""
    count_a, count_b = cells[:, 0] + cells[:, 1], cells[:, 0] + cells[:, 2]
    theta = np.array([np.mean(pass_at_k(n, count_a, k) - pass_at_k(n, count_b, k)) for k in ks])
    tables = [_table(m, k) for k in ks]
    stars = np.empty((len(ks), iterations))
    per_chunk = max(1, _CHUNK // len(cells))
    for lo in range(0, iterations, per_chunk):
        ca, cb = _subsample_counts(cells, n, m, min(per_chunk, iterations - lo), rng)
        for j, table in enumerate(tables):
            stars[j, lo : lo + len(ca)] = (table[ca] - table[cb]).mean(1)
    return theta, stars


def _scale(n: int, m: int, form: str) -> float:
    """:math:`\\tau_m`, the factor of :math:`T^*_b = \\tau_m(\\hat\\theta^*_b - \\hat\\theta_n)`."""
    return math.sqrt(m * (n - 1) / (n - m)) if form == "corrected" else math.sqrt(m)


def _p_values(theta: np.ndarray, stars: np.ndarray, n: int, m: int, form: str) -> np.ndarray:
    """Two-sided p-values of each row of ``stars`` (subsample differences) about its ``theta``."""
    if form == "percentile":
        below, above = np.mean(stars <= _TIE, axis=-1), np.mean(stars >= -_TIE, axis=-1)
        return np.minimum(1.0, 2 * np.minimum(below, above))
    t = _scale(n, m, form) * (stars - theta[:, None])
    return np.mean(np.abs(t) >= np.sqrt(n) * np.abs(theta)[:, None] - _TIE, axis=-1)


def paired_subsampling_test(
    correct_a,
    correct_b,
    k: int,
    m: int = 256,
    iterations: int = 50_000,
    alpha: float = 0.05,
    seed: int = 0,
    form: str = "corrected",
) -> SubsamplingTest:
    r"""Paired m-out-of-n subsampling test of a pass@k difference between two methods (F-GRPO App. Q).

    Each method has :math:`n` sampled outcomes on each of the same :math:`P` problems. The statistic, the benchmark
    difference :math:`\hat\theta_n` of the unbiased pass@k estimator (Chen et al. 2021), is recomputed in each
    iteration (:math:`\hat\theta^*_b`) from :math:`m` of the :math:`n` sample indices per problem, drawn without
    replacement and shared by the two methods (the pairing). P-value, interval, scaling: module docstring, "The test".

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
        Seeds the draws (the same draws for every form).
    form : {"corrected", "uncorrected", "percentile"}
        The scaling (module docstring).

    Returns
    -------
    SubsamplingTest

    Warns
    -----
    DegenerateSubsampling
        At ``k == m`` (the paper's pass@256 with m = 256) in the scaled forms when more than :data:`ATOM_WARN` of the
        subsample differences take one value: the test is then not calibrated (it rejects up to 99.9 % of true nulls
        on easy problems), so it warns rather than refuse, since the paper's own setting is this one and
        :mod:`tailmiss.analytic.significance_size` measures the size a reader must set beside its calls.

    References
    ----------
    D. N. Politis, J. P. Romano and M. Wolf (1999), *Subsampling*, Springer.
    F-GRPO App. Q. Chen et al. 2021 (the unbiased pass@k).
    """
    a, b = _checked_outcomes(correct_a, correct_b, k, m)
    _check_settings(iterations, alpha, seed, form)
    n = a.shape[1]
    theta, stars = _differences(_joint_counts(a, b), n, [k], m, iterations, np.random.default_rng(seed))
    p_value = float(_p_values(theta, stars, n, m, form)[0])
    tau = None if form == "percentile" else _scale(n, m, form)
    ci_low, ci_high = _interval(theta[0], stars[0], n, tau, alpha)
    atom = _atom(stars[0])
    if k == m and form != "percentile" and atom > ATOM_WARN:
        warnings.warn(
            f"paired_subsampling_test at k = m = {m}: each subsample's pass@k is an indicator, and {atom:.0%} of the "
            f"{iterations} subsample differences sit at one value; the {form} test then rejects nearly every non-zero "
            "difference, true nulls included (its size at your masses: tailmiss.analytic.significance_size."
            "null_size). Compare at k < m, or read the test's size beside its calls.",
            DegenerateSubsampling,
            stacklevel=2,
        )
    settings = dict(k=int(k), m=int(m), n=int(n), iterations=int(iterations), alpha=float(alpha), form=form)
    return SubsamplingTest(
        difference=float(theta[0]),
        p_value=p_value,
        ci_low=float(ci_low),
        ci_high=float(ci_high),
        significant=p_value < alpha,
        atom=atom,
        **settings,
    )


def _checked_outcomes(correct_a, correct_b, k: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The two methods' outcomes as (P, n) bool arrays of one shape, with ``m < n`` and ``k <= m`` checked."""
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
    return a, b


def _check_settings(iterations: int, alpha: float, seed: int, form: str) -> None:
    """``ValueError`` naming the first bad one of the iterations, the level, the seed and the form."""
    check_int("iterations", iterations)
    check_number("alpha", alpha, 0.0, 1.0, lo_open=True, hi_open=True)
    check_int("seed", seed, 0)
    check_form(form)


def _interval(theta, stars: np.ndarray, n: int, tau: float | None, alpha: float):
    """The 1 - alpha interval: the subsample differences' percentiles (``tau`` None), else from the scaled law."""
    if tau is None:
        return np.quantile(stars, [alpha / 2, 1 - alpha / 2])
    q_lo, q_hi = np.quantile(tau * (stars - theta), [alpha / 2, 1 - alpha / 2])
    return theta - q_hi / np.sqrt(n), theta - q_lo / np.sqrt(n)
