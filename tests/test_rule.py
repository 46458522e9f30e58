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


# --- the margin parts: not lower, not higher, same -----------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")
@settings(max_examples=60, deadline=None)
@given(_values, st.data())
def test_the_one_sided_tests_at_the_margin_are_scipys(a, data):
    b = data.draw(st.lists(st.floats(-1.0, 1.0, allow_nan=False, width=32), min_size=len(a), max_size=len(a)))
    x, y = np.array(a), np.array(b)
    d = compare_values(x, y, "dnll", paired=True)  # ΔNLL: the margin is δ whatever the level
    if d.test == "none" or np.std(x - y) < 1e-9:
        return
    assert d.margin == rule.THRESHOLDS["ΔNLL_rare"]
    ref_low = stats.ttest_1samp(x - y + d.margin, 0.0, alternative="greater").pvalue
    ref_high = stats.ttest_1samp(x - y - d.margin, 0.0, alternative="less").pvalue
    assert d.p_not_lower == pytest.approx(ref_low, rel=1e-6, abs=1e-12)
    assert d.p_not_higher == pytest.approx(ref_high, rel=1e-6, abs=1e-12)
    welch = compare_values(x, y, "dnll", paired=False)
    ref = stats.ttest_ind(x + welch.margin, y, equal_var=False, alternative="greater").pvalue
    if np.var(x) + np.var(y) > 1e-12:
        assert welch.p_not_lower == pytest.approx(ref, rel=1e-6, abs=1e-12)


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")
@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-0.08, 0.08, allow_nan=False), min_size=3, max_size=10))
def test_same_holds_exactly_when_the_90_percent_interval_lies_inside_the_margin(diffs):
    """Schuirmann's two one-sided tests, against the interval form: equivalence at α ⇔ the (1 − 2α) t interval of the
    mean difference lies inside (−Δ, Δ)."""
    b = np.full(len(diffs), 0.3)
    a = b + np.array(diffs)
    d = compare_values(a, b, "pass256", paired=True)
    if d.test == "none" or np.std(diffs) < 1e-7:
        return
    s = judge("the same", [(d, "same")])
    half = stats.t.ppf(1 - rule.ALPHA, d.dof) * d.sd / math.sqrt(d.seeds)
    inside = -d.margin < d.mean - half and d.mean + half < d.margin
    assert (s.parts[0].status == "holds") == inside


def test_a_tie_that_is_not_shown_within_the_margin_holds_nothing():
    base = np.array([0.70, 0.72, 0.68, 0.71, 0.69])
    noisy = compare_values(base + [0.03, -0.04, 0.02, -0.03, 0.01], base, "pass256", paired=True)  # a wide tie
    assert noisy.outcome == Outcome.TIE
    assert judge("reaches", [(noisy, "not lower")]).verdict == Verdict.NOT_RESOLVED
    close = compare_values(base + [0.001, -0.001, 0.0005, 0.0, -0.0005], base, "pass256", paired=True)
    assert judge("reaches", [(close, "not lower")]).verdict == Verdict.REPRODUCED
    assert judge("the same", [(close, "same")]).verdict == Verdict.REPRODUCED
    above = compare_values(base + 0.05 + [0.001, -0.001, 0.0, 0.001, 0.0], base, "pass256", paired=True)
    assert judge("reaches", [(above, "not lower")]).verdict == Verdict.REPRODUCED  # higher is not lower
    assert judge("the same", [(above, "same")]).verdict == Verdict.REFUTED
    below = compare_values(base - 0.05 + [0.001, -0.001, 0.0, 0.001, 0.0], base, "pass256", paired=True)
    assert judge("reaches", [(below, "not lower")]).verdict == Verdict.REFUTED
    assert judge("stays below", [(below, "not higher")]).verdict == Verdict.REPRODUCED


def test_near_the_top_of_a_rate_the_margin_is_a_share_of_what_is_left():
    assert rule.margin("pass1", 0.99) == pytest.approx(rule.NEAR_BOUND_SHARE * 0.01)
    assert rule.margin("exact_pass_at_1", 0.5) == rule.THRESHOLDS["pass@1"]
    assert rule.margin("pass_at_16", 0.995) == pytest.approx(0.0005)
    assert rule.margin("dnll", 0.99) == rule.THRESHOLDS["ΔNLL_rare"]  # not a rate: δ
    base = np.array([0.990, 0.991, 0.989, 0.990, 0.992])
    drop = compare_values(base - [0.003, 0.0028, 0.0031, 0.0029, 0.003], base, "pass1", paired=True)
    assert drop.outcome == Outcome.BELOW_DELTA  # resolved, below δ = 0.005: the old rule's "keeps"
    assert judge("keeps pass@1", [(drop, "not lower")]).verdict == Verdict.NOT_RESOLVED


def test_a_sentence_is_one_holm_family_whatever_its_parts_carried():
    base = np.array([0.50, 0.52, 0.48, 0.51, 0.49])
    parts = [
        compare_values(base + [0.05, 0.04, 0.06, 0.03, 0.07], base, "pass256", paired=True),
        compare_values(base + [0.02, -0.01, 0.04, 0.0, 0.03], base, "pass256", paired=True),
        compare_values(base + [0.001, 0.0, -0.001, 0.0005, 0.0], base, "pass256", paired=True),
    ]
    wanted = ["higher", "higher", "not lower"]
    alone = judge("s", list(zip(parts, wanted)))
    again = judge("s", list(zip(holm(parts + parts), wanted)))  # an outside family's adjustment is not used
    assert [p.p for p in alone.parts] == [p.p for p in again.parts]
    assert all(p.family == 3 for p in alone.parts)
    raw = [parts[0].p, parts[1].p, parts[2].p_not_lower]
    order = sorted(range(3), key=raw.__getitem__)
    assert alone.parts[order[0]].p == pytest.approx(3 * raw[order[0]])


def test_a_part_describes_the_pair_the_metric_the_number_the_interval_the_test_and_the_outcome():
    base = np.array([0.50, 0.52, 0.48, 0.51, 0.49])
    d = compare_values(base + 0.05, base + [0.0, 0.001, -0.001, 0.0, 0.0], "pass256", paired=True, labels=("F", "G"))
    text = judge("s", [(d, "higher"), (d, "not lower")]).cell()
    assert text.count("F − G pass256 +0.0500 [") == 2 and "paired t, 5 seeds" in text and "Holm p" in text
    assert text.endswith("not lower") and ": higher;" in text and "one-sided at −0.01" in text
    with pytest.raises(ValueError, match="'bigger'"):
        judge("s", [(d, "bigger")])


_BASE = np.array([0.50, 0.52, 0.48, 0.51, 0.49])


def _diff(shift, label="a"):
    """A paired pass@256 difference of about ``shift`` on five seeds (a spread of 0.001: resolved when |shift| ≥ δ)."""
    return compare_values(_BASE + shift + np.array([0.001, -0.001, 0.0005, 0.0, -0.0005]), _BASE, "pass256",
                          paired=True, labels=(label, "b"))  # fmt: skip


def test_any_alternative_holding_whole_reproduces_and_every_candidate_counts_in_the_family():
    up, down, flat = _diff(0.05, "up"), _diff(-0.05, "down"), _diff(0.0, "flat")
    s = rule.judge_any("some N dips", [[(down, "higher")], [(up, "higher")]])
    assert s.verdict == Verdict.REPRODUCED and {p.family for p in s.parts} == {2}
    assert rule.judge_any("s", [[(down, "higher")], [(flat, "higher")]]).verdict == Verdict.NOT_RESOLVED  # open, fails
    assert rule.judge_any("s", [[(down, "higher")], [(down, "higher"), (up, "higher")]]).verdict == Verdict.REFUTED
    # an alternative that holds in part, the others failing: partly; a part two alternatives share counts once
    shared = rule.judge_any("s", [[(up, "higher"), (flat, "higher")], [(up, "higher"), (down, "higher")]])
    assert shared.verdict == Verdict.PARTLY and len(shared.parts) == 3 and {p.family for p in shared.parts} == {3}
    few = compare_values([0.6, 0.7], [0.5, 0.5], "pass256", paired=True)
    assert rule.judge_any("s", [[(down, "higher")], [(few, "higher")]]).verdict == Verdict.CANNOT_TELL
    with pytest.raises(ValueError, match="alternatives"):
        rule.judge_any("s", [[]])


def test_clauses_count_their_groups_with_all_any_or_most():
    up, down, flat = _diff(0.05), _diff(-0.05), _diff(0.0)
    # "γ = 2 sometimes adds pass@256 but more often costs pass@1": any of the methods higher, most of them lower
    s = rule.judge_clauses("s", [("any", [[(flat, "higher")], [(up, "higher")]]),
                                 ("most", [[(down, "lower")], [(down, "lower")], [(flat, "lower")]])])  # fmt: skip
    assert s.verdict == Verdict.REPRODUCED and {p.family for p in s.parts} == {4}  # a part per (comparison, want)
    most_fail = rule.judge_clauses("s", [("most", [[(up, "lower")], [(down, "lower")]])])
    assert most_fail.verdict == Verdict.REFUTED  # half fail
    assert rule.judge_clauses("s", [("all", [[(up, "higher")], [(flat, "higher")]])]).verdict == Verdict.PARTLY
    # a group that holds in part (a lead that holds, a growth that is open) is partly, as in judge
    part = rule.judge_clauses("s", [("all", [[(up, "higher"), (flat, "higher")]])])
    assert part.verdict == judge("s", [(up, "higher"), (flat, "higher")]).verdict == Verdict.PARTLY
    assert rule.judge_clauses("s", [("any", [[(flat, "higher")]])]).verdict == Verdict.NOT_RESOLVED
    with pytest.raises(ValueError, match="'some'"):
        rule.judge_clauses("s", [("some", [[(up, "higher")]])])


@pytest.mark.parametrize(
    "readings, merged",
    [
        ((Verdict.REPRODUCED, Verdict.REPRODUCED), Verdict.REPRODUCED),
        ((Verdict.REFUTED, Verdict.REFUTED), Verdict.REFUTED),
        ((Verdict.REPRODUCED, Verdict.REFUTED), Verdict.PARTLY),
        ((Verdict.REPRODUCED, Verdict.CANNOT_TELL), Verdict.CANNOT_TELL),
    ],
)
def test_two_readings_keep_the_verdict_they_share(readings, merged):
    assert rule.both_readings(readings) == merged
