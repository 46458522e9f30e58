"""The size of F-GRPO App. Q's paired subsampling test under its own null (:mod:`tailmiss.analytic.significance_size`).

The masses: a fixed draw of P problems from Beta(0.6, 0.4) (numpy seed 0), the first tenth set to 0 and the next
tenth to 1 (problems a policy never or always solves), as in ``benchmarks/appq_size.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tailmiss.analytic.significance import FORMS, paired_subsampling_test
from tailmiss.analytic.significance_size import NullSize, null_draw, null_size, null_sizes

ALPHA = 0.05
NULLS = 2000
ITERATIONS = 500
SLACK = 0.005
"""The band below is the 99.9 % two-sided binomial interval of NULLS draws at p = α, widened by half a point on each
side: it is drawn for a test whose size is exactly α, and the test here deviates from that by (i) the Monte-Carlo
p-value of ITERATIONS subsamples (were the exact p-value uniform it would reject with probability
ceil(α I)/(I + 1) = 0.0499) and (ii) the finite-sample error of the subsampling law at P = 30 problems, each a few
tenths of a point at most."""


def _masses(problems: int, seed: int = 0) -> np.ndarray:
    mu = np.random.default_rng(seed).beta(0.6, 0.4, problems)
    tenth = problems // 10
    mu[:tenth], mu[tenth : 2 * tenth] = 0.0, 1.0
    return mu


def _band(nulls: int = NULLS) -> tuple[float, float]:
    lo = stats.binom.ppf(0.0005, nulls, ALPHA) / nulls
    hi = stats.binom.isf(0.0005, nulls, ALPHA) / nulls
    return lo - SLACK, hi + SLACK


@pytest.fixture(scope="module")
def beta30() -> dict:
    """Every form at k = 1 and k = m = 256 on the same 2,000 nulls at P = 30 (about 15 s)."""
    sizes = null_sizes(_masses(30), ks=(1, 256), nulls=NULLS, iterations=ITERATIONS, forms=FORMS, seed=0)
    return {(s.form, s.k): s for s in sizes}


def test_corrected_test_holds_its_size_at_k1(beta30):
    size = beta30[("corrected", 1)]
    lo, hi = _band()
    assert (size.nulls, size.problems, size.n, size.m) == (NULLS, 30, 1024, 256)
    assert lo <= size.rate <= hi, (size.rate, (lo, hi))


def test_uncorrected_test_over_rejects_at_k1(beta30):
    """The sqrt(m) scaling understates the spread by sqrt(1 - m/n): about 10 % rejections at a nominal 5 %.
    This documents the defect the corrected form removes; it would fail on a calibrated test."""
    size = beta30[("uncorrected", 1)]
    assert size.rate > _band()[1]
    assert size.interval(0.999)[0] > _band()[1]


def test_percentile_form_is_very_conservative(beta30):
    """The literal reading (0 outside the percentiles of theta* unscaled) has about sqrt(3) times the spread."""
    assert beta30[("percentile", 1)].rate <= 0.01
    assert beta30[("percentile", 256)].rate == 0.0


def test_at_k_equal_m_the_corrected_test_is_conservative_where_pass_at_m_varies():
    """At k = m each subsample's estimator is an indicator (any correct among the m) and the subsampling law is too
    wide: on hard problems (masses 0.0005-0.01, where pass@256 is far from 0 and 1) the test rejects below α."""
    mu = np.random.default_rng(1).uniform(0.0005, 0.01, 30)
    sizes = {s.form: s for s in null_sizes(mu, ks=(256,), nulls=400, iterations=ITERATIONS, forms=FORMS, seed=1)}
    assert sizes["corrected"].rate <= ALPHA
    assert sizes["corrected"].rate <= sizes["uncorrected"].rate
    assert sizes["percentile"].rate <= 0.005


def test_at_k_equal_m_the_scaled_test_rejects_whenever_theta_is_not_zero_on_easy_masses(beta30):
    """The other face of k = m: where nearly every problem is solved in any m samples, theta* is 0 in nearly every
    subsample (an atom) while theta_n is a small non-zero number, and tau_m < sqrt(n) puts the atom below the
    observed statistic: the p-value is the rare subsamples that miss, and the scaled forms reject nearly always.
    This documents a defect that neither scaling removes."""
    assert beta30[("corrected", 256)].rate > 0.9
    assert beta30[("uncorrected", 256)].rate > 0.9


@pytest.mark.slow
def test_corrected_test_holds_its_size_at_k1_on_500_problems():
    size = null_size(_masses(500), k=1, nulls=NULLS, iterations=ITERATIONS, seed=0)
    lo, hi = _band()
    assert lo <= size.rate <= hi, (size.rate, (lo, hi))


def test_null_sizes_count_exactly_what_the_test_calls():
    """One code path: each null's calls are those of paired_subsampling_test on null_draw's outcomes and seed."""
    mu, n, m, ks, nulls, iterations = _masses(10, seed=3), 64, 16, (1, 4, 16), 25, 200
    sizes = null_sizes(mu, n=n, ks=ks, m=m, nulls=nulls, iterations=iterations, alpha=0.2, forms=FORMS, seed=5)
    assert [(s.form, s.k) for s in sizes] == [(f, k) for f in FORMS for k in ks]
    for s in sizes:
        calls = 0
        for i in range(nulls):
            a, b, test_seed = null_draw(mu, n, 5, i)
            calls += paired_subsampling_test(a, b, s.k, m, iterations, 0.2, test_seed, s.form).significant
        assert s.rejections == calls, (s.form, s.k)
    single = null_size(mu, n=n, k=4, m=m, nulls=nulls, iterations=iterations, alpha=0.2, form="percentile", seed=5)
    assert single == next(s for s in sizes if (s.form, s.k) == ("percentile", 4))


@pytest.mark.parametrize("rejections, nulls", [(0, 50), (3, 50), (50, 50), (100, 2000)])
def test_interval_is_clopper_pearson(rejections, nulls):
    size = NullSize("corrected", 1, 256, 1024, 30, nulls, 100, 0.05, rejections)
    lo, hi = size.interval(0.95)
    want_lo = stats.beta.ppf(0.025, rejections, nulls - rejections + 1) if rejections else 0.0
    want_hi = stats.beta.ppf(0.975, rejections + 1, nulls - rejections) if rejections < nulls else 1.0
    assert (lo, hi) == pytest.approx((want_lo, want_hi), abs=1e-10)
    assert lo <= size.rate <= hi
    with pytest.raises(ValueError, match="level"):
        size.interval(1.0)


@settings(max_examples=25, deadline=None)
@given(form=st.one_of(st.text(max_size=12), st.none(), st.integers()).filter(lambda f: f not in FORMS))
def test_null_size_validates_form(form):
    with pytest.raises(ValueError, match="form must be one of") as info:
        null_size(np.array([0.5]), n=8, k=1, m=4, nulls=1, iterations=10, form=form)
    assert repr(form) in str(info.value)
    with pytest.raises(ValueError, match="form must be one of"):
        null_sizes(np.array([0.5]), n=8, ks=(1,), m=4, nulls=1, iterations=10, forms=("corrected", form))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(mu=[1.5]), "mu must be"),
        (dict(mu=[]), "mu must be"),
        (dict(mu=[[0.5]]), "mu must be"),
        (dict(m=8), "m must be smaller"),
        (dict(ks=(5,)), "k must not exceed m"),
        (dict(ks=()), "ks must name"),
        (dict(forms=()), "forms must name"),
        (dict(nulls=0), "nulls"),
        (dict(iterations=0), "iterations"),
        (dict(alpha=0.0), "alpha"),
        (dict(seed=-1), "seed"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    args = dict(mu=[0.5, 0.2], n=8, ks=(1,), m=4, nulls=2, iterations=10)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        null_sizes(**args)
