"""The one noise rule (:mod:`tailmiss.studies.rule`) against scipy and a brute-force Holm procedure."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tailmiss.studies import rule
from tailmiss.studies.rule import Outcome, Verdict, compare, compare_values, holm, judge, practical_threshold

_values = st.lists(st.floats(-1.0, 1.0, allow_nan=False, width=32), min_size=3, max_size=12)


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")
@settings(max_examples=60, deadline=None)
@given(_values, st.data())
def test_the_paired_test_is_scipys(a, data):
    b = data.draw(st.lists(st.floats(-1.0, 1.0, allow_nan=False, width=32), min_size=len(a), max_size=len(a)))
    x, y = np.array(a), np.array(b)
    d = compare_values(x, y, "pass1", paired=True)
    if np.all(np.abs(x - y) <= rule.IDENTICAL_TOL):
        assert d.outcome == Outcome.IDENTICAL
        return
    ref = stats.ttest_rel(x, y)
    if np.std(x - y) > 1e-9:
        assert d.p == pytest.approx(ref.pvalue, rel=1e-6, abs=1e-12) and d.dof == len(a) - 1
    assert d.test == "paired t" and d.mean == pytest.approx(float(np.mean(x - y)))
    resolved = d.p < rule.ALPHA and abs(d.mean) >= rule.THRESHOLDS["pass@1"]
    assert d.outcome.resolved == resolved


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")
@settings(max_examples=60, deadline=None)
@given(_values, _values)
def test_welchs_test_is_scipys(a, b):
    x, y = np.array(a), np.array(b)
    d = compare_values(x, y, "pass256", paired=False)
    ref = stats.ttest_ind(x, y, equal_var=False)
    if np.var(x) + np.var(y) > 1e-12:
        assert d.p == pytest.approx(ref.pvalue, rel=1e-6, abs=1e-12)
        assert d.dof == pytest.approx(float(ref.df), rel=1e-9)
    assert d.test == "Welch t" and d.mean == pytest.approx(float(x.mean() - y.mean()))


def _brute_holm(p: list[float], alpha: float) -> list[bool]:
    """Holm's step-down procedure as stated: reject the smallest p-values in order while p_(i) < α / (m − i + 1)."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    reject = [False] * m
    for rank, i in enumerate(order):
        if p[i] < alpha / (m - rank):
            reject[i] = True
        else:
            break
    return reject


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=9))
def test_holm_rejects_what_the_step_down_procedure_rejects(ps):
    diffs = [
        rule.Difference("a", "b", "pass256", 0.5, 0.1, 5, "paired t", 4.0, p, p, 1, 0.01, 0.1, Outcome.TIE) for p in ps
    ]
    out = holm(diffs)
    assert [d.outcome == Outcome.HIGHER for d in out] == _brute_holm(ps, rule.ALPHA)
    assert all(d.family == len(ps) and d.p_adjusted >= d.p for d in out)


def test_holm_leaves_untested_comparisons_out_of_the_family():
    tested = compare_values([0.1, 0.2, 0.3, 0.4], [0.0, 0.05, 0.1, 0.12], "pass256", paired=True)
    one = compare_values([0.5], [0.1], "pass256", paired=True)
    out = holm([tested, one])
    assert out[0].family == 1 and out[1].outcome == Outcome.CANNOT_TELL


def test_three_seeds_are_needed_and_copies_are_no_evidence():
    assert compare_values([0.6, 0.7], [0.1, 0.2], "pass1", paired=True).outcome == Outcome.CANNOT_TELL
    assert compare_values([0.6, 0.7], [0.1, 0.2, 0.3], "pass1", paired=False).outcome == Outcome.CANNOT_TELL
    assert compare_values([0.5, 0.6, 0.7], [0.5, 0.6, 0.7 + 1e-9], "pass1", paired=True).outcome == Outcome.IDENTICAL


def test_a_resolved_difference_below_delta_is_a_tie():
    base = np.array([0.90, 0.91, 0.92, 0.93, 0.94])
    d = compare_values(base + 0.002 + np.array([0, 1e-5, -1e-5, 2e-5, 0]), base, "pass1", paired=True)
    assert d.p < rule.ALPHA and d.outcome == Outcome.BELOW_DELTA and d.delta == 0.005


def test_compare_pairs_shared_seeds_and_falls_back_to_welch():
    rows = pd.DataFrame(
        [("a", s, 0.5 + 0.01 * s) for s in range(5)] + [("b", s, 0.4 + 0.01 * s) for s in range(5, 10)],
        columns=["label", "seed", "pass1"],
    )
    assert compare(rows, "a", "b", "pass1").test == "Welch t"
    shared = rows.assign(seed=list(range(5)) * 2)
    d = compare(shared, "a", "b", "pass1")
    assert d.test == "paired t" and d.outcome == Outcome.HIGHER  # a constant +0.1 on every seed


def test_practical_thresholds_name_every_metric_the_report_compares():
    for metric in ("pass1", "pass256", "exact_pass_at_1", "pass_at_16", "exact_pass_at_64", "rare_pass_at_256",
                   "retained_mass", "mret", "dnll_rare", "q_pos", "frac_correct_improved", "worst_drop"):  # fmt: skip
        assert practical_threshold(metric) > 0, metric
    with pytest.raises(ValueError, match="'entropy'"):
        practical_threshold("entropy")


@pytest.mark.parametrize("states", list(itertools.product(["higher", "lower", "tie", "cannot tell"], repeat=2)))
def test_judge_covers_every_combination(states):
    parts = [(compare_values(*_pair(s), "pass1", paired=True), "higher") for s in states]
    v = judge("s", parts).verdict
    assert isinstance(v, Verdict)
    if "lower" in states:
        assert v == Verdict.REFUTED
    elif "cannot tell" in states:
        assert v == Verdict.CANNOT_TELL
    elif states == ("higher", "higher"):
        assert v == Verdict.REPRODUCED
    elif "higher" in states:
        assert v == Verdict.PARTLY
    else:
        assert v == Verdict.NOT_RESOLVED


def _pair(state: str):
    base = np.array([0.50, 0.52, 0.48, 0.51, 0.49])
    return {
        "higher": (base + [0.05, 0.051, 0.049, 0.05, 0.052], base),
        "lower": (base - [0.05, 0.051, 0.049, 0.05, 0.052], base),
        "tie": (base + [0.05, -0.05, 0.01, -0.02, 0.0], base),
        "cannot tell": (base[:1] + 0.1, base[:1]),
    }[state]


def test_the_rule_is_stated_once_with_its_numbers():
    text = rule.rule_text()
    assert "Holm" in text and "Welch" in text and f"α = {rule.ALPHA}" in text and str(rule.MIN_SEEDS) in text
    assert all(f"{name} {value:g}" in text for name, value in rule.THRESHOLDS.items())
    assert math.isclose(rule.ALPHA, 0.05)
