"""The paired m-out-of-n subsampling test (F-GRPO App. Q) against a brute-force enumeration of every subsample."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailmiss.analytic.significance import benchmark_pass_at_k, paired_subsampling_test, sample_outcomes


def _estimator(c: int, n: int, k: int) -> float:
    """Unbiased pass@k by the definition, with exact integers."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _brute_force(a: np.ndarray, b: np.ndarray, k: int, m: int):
    """The exact subsampling law: every choice of m of the n indices per problem (shared by A and B), equally likely.
    Returns the full-sample difference and the list of T* values (one per joint choice)."""
    n = a.shape[1]
    theta = np.mean([_estimator(a[x].sum(), n, k) - _estimator(b[x].sum(), n, k) for x in range(len(a))])
    per_problem = []
    for x in range(len(a)):
        per_problem.append(
            [
                _estimator(a[x, list(s)].sum(), m, k) - _estimator(b[x, list(s)].sum(), m, k)
                for s in itertools.combinations(range(n), m)
            ]
        )
    t = [math.sqrt(m) * (np.mean(combo) - theta) for combo in itertools.product(*per_problem)]
    return theta, np.array(t)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_subsampling_law_matches_brute_force_enumeration(k):
    rng = np.random.default_rng(k)
    a = rng.random((3, 6)) < np.array([[0.3], [0.6], [0.5]])
    b = rng.random((3, 6)) < np.array([[0.5], [0.2], [0.5]])
    a[0, 0], b[0, 0] = True, False  # the two methods differ on every draw's first problem
    theta, t = _brute_force(a, b, k, m=3)
    exact_p = float(np.mean(np.abs(t) >= math.sqrt(6) * abs(theta) - 1e-12))
    iterations = 200_000
    test = paired_subsampling_test(a, b, k, m=3, iterations=iterations, seed=1)
    assert test.difference == pytest.approx(theta, abs=1e-12)
    # Monte Carlo p-value within 5 standard errors of the exact one
    assert abs(test.p_value - exact_p) <= 5 * math.sqrt(exact_p * (1 - exact_p) / iterations) + 1e-9
    # the interval from the exact quantiles (up to the Monte Carlo error of a quantile of a discrete law)
    q_lo, q_hi = np.quantile(t, [0.025, 0.975])
    assert test.ci_low == pytest.approx(theta - q_hi / math.sqrt(6), abs=0.05)
    assert test.ci_high == pytest.approx(theta - q_lo / math.sqrt(6), abs=0.05)


def test_joint_subsample_counts_follow_the_enumerated_law():
    """The pair (correct of A, correct of B) in one shared subsample: the nested hypergeometric draws against the
    frequencies of every m-subset of the indices."""
    from tailmiss.analytic.significance import _joint_counts, _subsample_counts

    a = np.array([[1, 1, 0, 1, 0, 0, 1]], dtype=bool)
    b = np.array([[1, 0, 1, 1, 1, 0, 0]], dtype=bool)
    n, m = 7, 4
    subsets = list(itertools.combinations(range(n), m))
    exact: dict = {}
    for s in subsets:
        key = (int(a[0, list(s)].sum()), int(b[0, list(s)].sum()))
        exact[key] = exact.get(key, 0) + 1 / len(subsets)
    draws = 400_000
    ca, cb = _subsample_counts(_joint_counts(a, b), n, m, draws, np.random.default_rng(0))
    keys, counts = np.unique(np.stack([ca[:, 0], cb[:, 0]], 1), axis=0, return_counts=True)
    seen = {tuple(map(int, key)): c / draws for key, c in zip(keys, counts)}
    assert set(seen) <= set(exact)
    for key, p in exact.items():
        assert seen.get(key, 0.0) == pytest.approx(p, abs=5 * math.sqrt(p * (1 - p) / draws) + 1e-9)


@settings(max_examples=30, deadline=None)
@given(
    problems=st.integers(1, 5),
    n=st.integers(3, 12),
    data=st.data(),
)
def test_difference_is_the_benchmark_difference_and_p_is_a_probability(problems, n, data):
    m = data.draw(st.integers(1, n - 1))
    k = data.draw(st.integers(1, m))
    seed = data.draw(st.integers(0, 100))
    rng = np.random.default_rng(seed)
    a, b = rng.random((problems, n)) < 0.4, rng.random((problems, n)) < 0.6
    test = paired_subsampling_test(a, b, k, m=m, iterations=500, seed=seed)
    want = np.mean([_estimator(a[x].sum(), n, k) - _estimator(b[x].sum(), n, k) for x in range(problems)])
    assert test.difference == pytest.approx(want, abs=1e-12)
    assert test.difference == pytest.approx(benchmark_pass_at_k(a, k) - benchmark_pass_at_k(b, k), abs=1e-12)
    assert 0.0 <= test.p_value <= 1.0
    assert test.ci_low <= test.ci_high
    assert test.significant == (test.p_value < 0.05)


def test_identical_methods_are_never_significant():
    a = np.random.default_rng(0).random((20, 64)) < 0.3
    test = paired_subsampling_test(a, a.copy(), 4, m=16, iterations=2_000)
    assert test.difference == 0.0
    assert test.p_value == 1.0 and not test.significant


def test_a_large_difference_is_significant():
    rng = np.random.default_rng(0)
    a, b = rng.random((50, 128)) < 0.6, rng.random((50, 128)) < 0.1
    test = paired_subsampling_test(a, b, 1, m=32, iterations=2_000)
    assert test.significant and test.p_value < 0.01
    assert test.ci_low > 0


def test_sample_outcomes_draw_bernoulli_masses():
    mu = np.array([0.0, 0.25, 1.0])
    out = sample_outcomes(mu, 40_000, np.random.default_rng(0))
    assert out.shape == (3, 40_000) and out.dtype == bool
    assert out[0].sum() == 0 and out[2].all()
    assert out[1].mean() == pytest.approx(0.25, abs=0.01)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(m=8), "m must be smaller"),
        (dict(m=4, k=5), "k must not exceed m"),
        (dict(m=0), "m must be"),
        (dict(iterations=0), "iterations"),
        (dict(alpha=1.0), "alpha"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    a = np.ones((2, 8), dtype=bool)
    args = dict(k=1, m=4)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        paired_subsampling_test(a, a, **args)


def test_bad_outcome_arrays_are_refused():
    with pytest.raises(ValueError, match="one shape"):
        paired_subsampling_test(np.ones((2, 8), bool), np.ones((3, 8), bool), 1, m=4)
    with pytest.raises(ValueError, match="0/1"):
        paired_subsampling_test(np.full((2, 8), 0.5), np.ones((2, 8), bool), 1, m=4)
    with pytest.raises(ValueError, match="2-D"):
        paired_subsampling_test(np.ones(8, bool), np.ones(8, bool), 1, m=4)
    with pytest.raises(ValueError, match="mu_pos"):
        sample_outcomes(np.array([1.5]), 4, np.random.default_rng(0))
