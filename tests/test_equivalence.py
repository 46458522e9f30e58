"""The equivalence test (:mod:`tailmiss.studies.equivalence`): TOST against its interval form, scipy and a Monte Carlo
of its size and power; the identical / cannot-tell cases, bad inputs and the Holm family."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from tailmiss.studies.equivalence import (
    Equivalence,
    EquivalenceOutcome,
    equivalent,
    equivalent_values,
    holm_equivalence,
)
from tailmiss.studies.rule import ALPHA, MIN_SEEDS

_diffs = st.lists(st.integers(-400, 400), min_size=MIN_SEEDS, max_size=12).map(lambda v: np.array(v) / 10_000)
_bounds = st.integers(1, 500).map(lambda v: v / 10_000)


@settings(max_examples=200, deadline=None)
@given(_diffs, _bounds)
def test_tost_is_the_one_minus_two_alpha_interval_inside_the_bounds(d, bound):
    e = equivalent_values(d, np.zeros_like(d), "pass1", bound)
    if e.outcome in (EquivalenceOutcome.IDENTICAL, EquivalenceOutcome.CANNOT_TELL):
        assert e.outcome == EquivalenceOutcome.IDENTICAL and np.all(d == 0)
        return
    lo, hi = e.ci
    assume(min(abs(lo + bound), abs(hi - bound)) > 1e-9)  # not on the edge, where rounding decides
    assert (e.outcome == EquivalenceOutcome.EQUIVALENT) == (-bound < lo and hi < bound)
    assert (e.p < ALPHA) == (e.outcome == EquivalenceOutcome.EQUIVALENT)
    assert e.mean == pytest.approx(float(d.mean())) and e.dof == len(d) - 1 and e.seeds == len(d)
    assert 0.0 <= e.p <= 1.0 and e.p_adjusted == e.p and e.family == 1


def test_tost_p_is_scipys_two_one_sided_tests():
    a = np.array([0.712, 0.705, 0.720, 0.699, 0.716])
    b = np.array([0.708, 0.709, 0.711, 0.702, 0.704])
    e = equivalent_values(a, b, "pass1", 0.02, labels=("F", "G"))
    d = a - b
    lower = stats.ttest_1samp(d, -0.02, alternative="greater").pvalue  # H0: mean <= -0.02
    upper = stats.ttest_1samp(d, 0.02, alternative="less").pvalue  # H0: mean >= +0.02
    assert e.p == pytest.approx(max(lower, upper), rel=1e-9)
    se = d.std(ddof=1) / math.sqrt(5)
    half = stats.t.ppf(0.95, 4) * se
    assert e.ci == pytest.approx((d.mean() - half, d.mean() + half))
    assert (e.a, e.b, e.metric, e.bound, e.dof) == ("F", "G", "pass1", 0.02, 4.0)
    assert e.outcome == EquivalenceOutcome.EQUIVALENT
    assert e.describe() == f"{d.mean():+.4f} within ±0.02 (TOST, df 4, p {e.p:.2g})"


def _rejections(true_diff: float, sd: float, bound: float, n: int, reps: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    d = true_diff + sd * rng.standard_normal((reps, n))
    hits = [equivalent_values(row, np.zeros(n), "pass1", bound).outcome == EquivalenceOutcome.EQUIVALENT for row in d]
    return float(np.mean(hits))


def test_a_true_difference_at_the_bound_is_called_equivalent_at_most_alpha_of_the_time():
    reps = 4000
    rate = _rejections(0.02, 0.01, 0.02, n=5, reps=reps, seed=0)
    assert rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / reps)
    rate = _rejections(-0.02, 0.03, 0.02, n=8, reps=reps, seed=1)  # the other bound, noisier
    assert rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / reps)


def test_no_true_difference_and_small_noise_is_called_equivalent_almost_always():
    assert _rejections(0.0, 0.005, 0.02, n=5, reps=1000, seed=2) > 0.9


def test_one_run_twice_is_identical_and_too_few_pairs_cannot_tell():
    e = equivalent_values([0.5, 0.6, 0.7], [0.5, 0.6, 0.7 + 1e-7], "pass1", 0.02)
    assert e.outcome == EquivalenceOutcome.IDENTICAL and math.isnan(e.p) and e.ci[0] != e.ci[0]
    assert e.describe().endswith("(identical, 3 seeds)")
    e = equivalent_values([0.5, 0.6], [0.51, 0.6], "pass1", 0.02)
    assert e.outcome == EquivalenceOutcome.CANNOT_TELL and e.seeds == 2 and math.isnan(e.p)


def test_a_constant_nonzero_difference_is_equivalent_only_inside_the_bound():
    inside = equivalent_values([0.51, 0.61, 0.71], [0.5, 0.6, 0.7], "pass1", 0.02)
    assert inside.p == 0.0 and inside.outcome == EquivalenceOutcome.EQUIVALENT
    outside = equivalent_values([0.53, 0.63, 0.73], [0.5, 0.6, 0.7], "pass1", 0.02)
    assert outside.p == 1.0 and outside.outcome == EquivalenceOutcome.NOT_SHOWN
    assert "not shown within ±0.02" in outside.describe()


@pytest.mark.parametrize("bound", [0, -0.01, math.nan, math.inf, "wide"])
def test_a_bad_bound_is_refused_by_name(bound):
    with pytest.raises(ValueError, match=f"got {bound!r}".replace("(", r"\(")):
        equivalent_values([0.1, 0.2, 0.3], [0.1, 0.2, 0.4], "pass1", bound)


def test_bad_values_are_refused():
    with pytest.raises(ValueError, match=r"\(3,\) and \(2,\)"):
        equivalent_values([0.1, 0.2, 0.3], [0.1, 0.2], "pass1", 0.02)
    with pytest.raises(ValueError, match="no values"):
        equivalent_values([], [], "pass1", 0.02)
    with pytest.raises(ValueError, match="finite"):
        equivalent_values([0.1, math.nan, 0.3], [0.1, 0.2, 0.3], "pass1", 0.02)


def _rows(values: dict) -> pd.DataFrame:
    return pd.DataFrame([{"label": k, "seed": s, "pass1": v} for k, vs in values.items() for s, v in vs.items()])


def test_from_rows_pairs_on_shared_seeds_only():
    rows = _rows(
        {"F": {0: 0.70, 1: 0.71, 2: 0.72, 3: 0.73, 9: 0.1}, "G": {0: 0.701, 1: 0.708, 2: 0.722, 3: 0.729, 7: 0.9}}
    )
    e = equivalent(rows, "F", "G", "pass1", 0.02)
    ref = equivalent_values([0.70, 0.71, 0.72, 0.73], [0.701, 0.708, 0.722, 0.729], "pass1", 0.02, labels=("F", "G"))
    assert e == ref and e.seeds == 4
    few = _rows({"F": {0: 0.7, 1: 0.8, 2: 0.6}, "G": {0: 0.71, 1: 0.79, 5: 0.6}})
    assert equivalent(few, "F", "G", "pass1", 0.02).outcome == EquivalenceOutcome.CANNOT_TELL
    none = _rows({"F": {0: 0.7, 1: 0.8, 2: 0.6}, "G": {3: 0.71, 4: 0.79, 5: 0.6}})
    e = equivalent(none, "F", "G", "pass1", 0.02)
    assert e.outcome == EquivalenceOutcome.CANNOT_TELL and e.seeds == 0 and math.isnan(e.mean)
    with pytest.raises(ValueError, match="'H'"):
        equivalent(rows, "F", "H", "pass1", 0.02)
    with pytest.raises(ValueError, match="got -1"):
        equivalent(rows, "F", "G", "pass1", -1)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(_diffs, st.just(None)), min_size=1, max_size=6), _bounds)
def test_holm_family_is_monotone_never_below_raw_and_skips_untested(family, bound):
    tests = [
        equivalent_values(d, np.zeros_like(d), "pass1", bound)
        if d is not None
        else equivalent_values([0.1, 0.2], [0.0, 0.1], "pass1", bound)  # cannot tell
        for d in family
    ]
    adjusted = holm_equivalence(tests)
    tested = [i for i, t in enumerate(tests) if t.outcome.tested]
    for raw, adj in zip(tests, adjusted):
        assert (adj.a, adj.b, adj.mean, adj.p) == (raw.a, raw.b, raw.mean, raw.p)
        if raw.outcome.tested:
            assert adj.p_adjusted >= raw.p and adj.p_adjusted <= 1.0 and adj.family == len(tested)
            assert (adj.outcome == EquivalenceOutcome.EQUIVALENT) == (adj.p_adjusted < ALPHA)
        else:
            assert adj == raw
    order = sorted(tested, key=lambda i: tests[i].p)
    ps = [adjusted[i].p_adjusted for i in order]
    assert ps == sorted(ps)
    if len(tested) == 1:
        assert adjusted[tested[0]].p_adjusted == tests[tested[0]].p


def test_holm_on_a_known_family_and_its_description():
    def at(p: float) -> Equivalence:
        return Equivalence("F", "G", "pass1", 0.003, 0.004, 5, 0.02, 4.0, p, p, 1, EquivalenceOutcome.EQUIVALENT)

    out = holm_equivalence([at(0.01), at(0.04), at(0.02)])
    assert [t.p_adjusted for t in out] == pytest.approx([0.03, 0.04, 0.04])
    assert [t.outcome for t in out] == [EquivalenceOutcome.EQUIVALENT] * 3
    assert out[0].describe() == "+0.0030 within ±0.02 (TOST, df 4, Holm p 0.03 of 3)"
    out = holm_equivalence([at(0.03), at(0.04)])  # each equivalent alone, neither in a family of two
    assert [t.p_adjusted for t in out] == pytest.approx([0.06, 0.06])
    assert [str(t.outcome) for t in out] == ["not shown", "not shown"]
