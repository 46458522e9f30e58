"""The paired m-out-of-n subsampling test (F-GRPO App. Q) against a brute-force enumeration of every subsample."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailmiss.analytic.significance import FORMS, benchmark_pass_at_k, paired_subsampling_test, sample_outcomes


def _estimator(c: int, n: int, k: int) -> float:
    """Unbiased pass@k by the definition, with exact integers."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _brute_force(a: np.ndarray, b: np.ndarray, k: int, m: int):
    """The exact subsampling law: every choice of m of the n indices per problem (shared by A and B), equally likely.
    Returns the full-sample difference and the list of subsample differences theta* (one per joint choice)."""
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
    return theta, np.array([np.mean(combo) for combo in itertools.product(*per_problem)])


def _exact(theta: float, stars: np.ndarray, n: int, m: int, form: str):
    """The exact p-value and interval of each form from the enumerated subsample differences, by the formulas."""
    if form == "percentile":
        p = min(1.0, 2 * min(np.mean(stars <= 1e-12), np.mean(stars >= -1e-12)))
        lo, hi = np.quantile(stars, [0.025, 0.975])
        return p, lo, hi
    tau = math.sqrt(m) if form == "uncorrected" else math.sqrt(m * (n - 1) / (n - m))
    t = tau * (stars - theta)
    q_lo, q_hi = np.quantile(t, [0.025, 0.975])
    return (
        float(np.mean(np.abs(t) >= math.sqrt(n) * abs(theta) - 1e-12)),
        theta - q_hi / math.sqrt(n),
        theta - q_lo / math.sqrt(n),
    )


@pytest.mark.parametrize("form", ["uncorrected", "corrected", "percentile"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_subsampling_law_matches_brute_force_enumeration(k, form):
    rng = np.random.default_rng(k)
    a = rng.random((3, 6)) < np.array([[0.3], [0.6], [0.5]])
    b = rng.random((3, 6)) < np.array([[0.5], [0.2], [0.5]])
    a[0, 0], b[0, 0] = True, False  # the two methods differ on every draw's first problem
    theta, stars = _brute_force(a, b, k, m=3)
    exact_p, exact_lo, exact_hi = _exact(theta, stars, 6, 3, form)
    iterations = 200_000
    test = paired_subsampling_test(a, b, k, m=3, iterations=iterations, seed=1, form=form)
    assert test.difference == pytest.approx(theta, abs=1e-12) and test.form == form
    # Monte Carlo p-value within 5 standard errors of the exact one
    assert abs(test.p_value - exact_p) <= 5 * math.sqrt(exact_p * (1 - exact_p) / iterations) + 1e-9
    # the interval from the exact quantiles (up to the Monte Carlo error of a quantile of a discrete law)
    assert test.ci_low == pytest.approx(exact_lo, abs=0.05)
    assert test.ci_high == pytest.approx(exact_hi, abs=0.05)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_corrected_scaling_gives_the_plug_in_variance_at_k1(seed):
    """At k = 1, Var*(sqrt(m (n-1)/(n-m)) (theta* - theta)) over every subsample equals P^-2 sum_x s_x^2 (s_x^2 the
    divisor-n variance of problem x's paired differences) exactly; sqrt(m) gives (n-m)/(n-1) of it."""
    rng = np.random.default_rng(seed)
    a, b = rng.random((3, 7)) < 0.5, rng.random((3, 7)) < 0.4
    n, m = 7, 3
    theta, stars = _brute_force(a, b, 1, m)
    plug_in = np.sum(np.var(a.astype(float) - b, axis=1)) / len(a) ** 2
    assert np.mean(stars) == pytest.approx(theta, abs=1e-12)
    assert np.var(math.sqrt(m * (n - 1) / (n - m)) * stars) == pytest.approx(plug_in, rel=1e-9)
    assert np.var(math.sqrt(m) * stars) == pytest.approx(plug_in * (n - m) / (n - 1), rel=1e-9)


@pytest.mark.parametrize(
    "k, want",
    [
        (1, (0.005859375, 0.609, -0.017252604166666668, 0.029622395833333332)),
        (8, (0.04434716729423898, 0.01275, 0.009896100728554756, 0.08236638188932535)),
        (32, (0.031609118467732907, 0.11225, -0.03591965563173397, 0.08908034436826603)),
    ],
)
def test_uncorrected_form_repeats_the_earlier_numbers(k, want):
    """(difference, p-value, interval) of the sqrt(m)-scaled test as the implementation before the forms gave them:
    the p-value (a count of draws) exactly, the floats to rounding. The floats were bit for bit until numpy 2.4.6 /
    scipy 1.17.1, which give k = 8's in their last one or two bits (2026-11-29); the draws are the same."""
    rng = np.random.default_rng(11)
    mu = rng.beta(0.6, 0.4, 12)
    a, b = rng.random((12, 128)) < mu[:, None], rng.random((12, 128)) < mu[:, None]
    test = paired_subsampling_test(a, b, k, m=32, iterations=4000, seed=7, form="uncorrected")
    assert test.p_value == want[1]
    assert (test.difference, test.ci_low, test.ci_high) == pytest.approx((want[0], *want[2:]), rel=1e-13, abs=1e-16)


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
    form = data.draw(st.sampled_from(FORMS))
    rng = np.random.default_rng(seed)
    a, b = rng.random((problems, n)) < 0.4, rng.random((problems, n)) < 0.6
    test = paired_subsampling_test(a, b, k, m=m, iterations=500, seed=seed, form=form)
    want = np.mean([_estimator(a[x].sum(), n, k) - _estimator(b[x].sum(), n, k) for x in range(problems)])
    assert test.difference == pytest.approx(want, abs=1e-12)
    assert test.difference == pytest.approx(benchmark_pass_at_k(a, k) - benchmark_pass_at_k(b, k), abs=1e-12)
    assert 0.0 <= test.p_value <= 1.0
    assert test.ci_low <= test.ci_high
    assert test.significant == (test.p_value < 0.05)


@pytest.mark.parametrize("form", FORMS)
def test_identical_methods_are_never_significant(form):
    a = np.random.default_rng(0).random((20, 64)) < 0.3
    test = paired_subsampling_test(a, a.copy(), 4, m=16, iterations=2_000, form=form)
    assert test.difference == 0.0
    assert test.p_value == 1.0 and not test.significant


@pytest.mark.parametrize("form", FORMS)
def test_a_large_difference_is_significant(form):
    rng = np.random.default_rng(0)
    a, b = rng.random((50, 128)) < 0.6, rng.random((50, 128)) < 0.1
    test = paired_subsampling_test(a, b, 1, m=32, iterations=2_000, form=form)
    assert test.significant and test.p_value < 0.01
    assert test.ci_low > 0


def test_forms_share_one_draw_and_the_corrected_interval_is_wider():
    """The same seed gives every form the same subsamples: the corrected statistic is the uncorrected one times
    sqrt((n-1)/(n-m)), so its p-value is at least as large and its interval wider by that factor."""
    rng = np.random.default_rng(3)
    a, b = rng.random((40, 256)) < 0.5, rng.random((40, 256)) < 0.47
    plain = paired_subsampling_test(a, b, 2, m=64, iterations=3_000, seed=4, form="uncorrected")
    fixed = paired_subsampling_test(a, b, 2, m=64, iterations=3_000, seed=4)
    assert fixed.form == "corrected" and plain.form == "uncorrected"
    assert fixed.difference == plain.difference and fixed.p_value >= plain.p_value
    factor = math.sqrt(255 / 192)
    assert fixed.ci_high - fixed.ci_low == pytest.approx(factor * (plain.ci_high - plain.ci_low), rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(form=st.one_of(st.text(max_size=12), st.none(), st.integers(), st.sampled_from(["Corrected", "percentile "])))
def test_form_is_validated(form):
    a = np.ones((2, 8), dtype=bool)
    if form in FORMS:
        assert paired_subsampling_test(a, a, 1, m=4, iterations=10, form=form).form == form
        return
    with pytest.raises(ValueError, match="form must be one of") as info:
        paired_subsampling_test(a, a, 1, m=4, iterations=10, form=form)
    assert repr(form) in str(info.value)


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
        (dict(form="bootstrap"), "'bootstrap'"),
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


def test_at_k_equal_to_m_the_test_warns_that_its_law_is_degenerate():
    """F-GRPO App. Q at its own setting (n = 1024, m = 256, pass@256) on problems a policy nearly always solves: each
    subsample's pass@256 is 1, the subsampling law an atom, and the scaled test would reject a true null without a
    word; it warns, and reports the atom. At k < m, or in the percentile form, it does not."""
    from tailmiss.analytic.significance import ATOM_WARN, DegenerateSubsampling

    rng = np.random.default_rng(0)
    mu = np.full(30, 0.2)
    a, b = (sample_outcomes(mu, 1024, rng) for _ in range(2))
    with pytest.warns(DegenerateSubsampling, match="k = m = 256"):
        t = paired_subsampling_test(a, b, 256, m=256, iterations=500)
    assert t.atom > ATOM_WARN
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateSubsampling)
        low = paired_subsampling_test(a, b, 1, m=256, iterations=500)
        paired_subsampling_test(a, b, 256, m=256, iterations=500, form="percentile")
    assert low.atom < ATOM_WARN
