"""The plateau runs' rules (:mod:`tailmiss.studies.narrowing.plateau`) on constructed histories: the plateau check,
the levels to the third-highest reach, the frontier words, the end points and their words."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailmiss.studies.equivalence import EquivalenceOutcome
from tailmiss.studies.narrowing.frontier import at_levels, frontier_levels
from tailmiss.studies.narrowing.plateau import (
    PLATEAU_LEVELS,
    end_point_family,
    end_point_verdict,
    end_points,
    plateau_frontier,
    plateau_levels,
    plateaued,
)
from tailmiss.studies.rule import Outcome


def _history(paths: dict, seeds=range(5), tops=None, noise: float = 0.0) -> pd.DataFrame:
    """Runs whose pass@1 rises linearly from 0.3 to their top (0.7 unless ``tops[label][seed]``) over 10 evaluations
    (every 10 steps, a row without an evaluation between) and whose pass@256 is ``f(pass@1)``."""
    rng = np.random.default_rng(1)
    rows = []
    for label, f in paths.items():
        for seed in seeds:
            top = (tops or {}).get(label, {}).get(seed, 0.7)
            for i, p1 in enumerate(np.linspace(0.3, top, 11)):
                p256 = f(p1) + (noise * rng.standard_normal() if i else 0.0)
                rows.append({"label": label, "seed": seed, "step": 10 * i, "mu_pos": p1, "exact_pass_at_256": p256})
                rows.append({"label": label, "seed": seed, "step": 10 * i + 5, "mu_pos": math.nan})
    return pd.DataFrame(rows)


# --- plateau ------------------------------------------------------------------------------------------------------


def _curve(label: str, f, steps, seeds=range(3)) -> pd.DataFrame:
    return pd.DataFrame(
        [{"label": label, "seed": s, "step": t, "mu_pos": f(t) + 0.001 * s} for s in seeds for t in steps]
    )


def test_a_saturating_curve_has_plateaued_and_a_rising_one_has_not():
    steps = range(0, 1601, 20)
    flat = plateaued(_curve("F", lambda t: 0.72 - 0.4 * math.exp(-t / 200), steps), "F")
    assert flat.plateaued and flat.steps == 1600
    assert flat.gain == pytest.approx(0.4 * (math.exp(-6) - math.exp(-8)))
    rising = plateaued(_curve("G", lambda t: 0.3 + 0.4 * t / 1600, steps), "G")
    assert not rising.plateaued and rising.gain == pytest.approx(0.1)
    assert rising.describe().startswith("not plateaued (pass@1 +0.1000")
    assert not plateaued(_curve("G", lambda t: 0.3 + 0.4 * t / 1600, steps), "G", gain=0.1 - 1e-9).plateaued
    assert plateaued(_curve("G", lambda t: 0.3 + 0.4 * t / 1600, steps), "G", gain=0.1 + 1e-9).plateaued


def test_the_plateau_reads_the_last_evaluation_at_or_before_the_quarter_and_skips_missing_ones():
    h = _curve("G", lambda t: 0.3 + 0.4 * t / 1600, range(0, 1591, 30))  # last 1590; 0.75 × 1590 = 1192.5 -> 1170
    check = plateaued(h, "G")
    assert check.steps == 1590 and check.gain == pytest.approx(0.4 * (1590 - 1170) / 1600)
    gaps = pd.concat([h, pd.DataFrame({"label": "G", "seed": 0, "step": [1600], "mu_pos": [math.nan]})])
    gaps = gaps[~((gaps["seed"] == 1) & (gaps["step"] == 1170))]  # a run without the evaluation at 1170
    check = plateaued(gaps, "G")
    assert check.steps == 1590 and check.gain == pytest.approx(0.4 * (1590 - 1140) / 1600)
    with pytest.raises(ValueError, match="last_quarter"):
        plateaued(h, "G", last_quarter=1.0)
    with pytest.raises(ValueError, match="'H'"):
        plateaued(h, "H")


# --- levels and frontier ------------------------------------------------------------------------------------------


def test_levels_and_matched_values_are_exact_on_linear_paths():
    h = _history({"F": lambda p: 1.25 - p, "G": lambda p: 1.2 - p})
    levels = plateau_levels(h, "F", "G")
    assert np.allclose(levels, 0.3 + 0.4 * np.arange(1, PLATEAU_LEVELS + 1) / PLATEAU_LEVELS)
    v = plateau_frontier(h, "F", "G")
    assert v.word == "above" and len(v.diffs) == len(v.levels) == PLATEAU_LEVELS
    assert v.covered == pytest.approx((0.35, 0.7))
    assert [d.mean for d in v.diffs] == pytest.approx([0.05] * PLATEAU_LEVELS)
    pts = at_levels(h, ["G"], levels)
    assert np.allclose(pts.groupby("level")["pass256"].mean().to_numpy(), 1.2 - levels)
    assert v.describe().startswith("above (8 of 8 levels higher, 0 lower, 0 cannot tell; largest +0.050")


def test_a_slow_seed_no_longer_caps_the_range():
    tops = {"F": {0: 0.70, 1: 0.68, 2: 0.66, 3: 0.64, 4: 0.50}}  # F's third-highest reach: 0.66
    h = _history({"F": lambda p: 1.25 - p, "G": lambda p: 1.2 - p}, tops=tops, noise=0.002)
    assert frontier_levels(h, ["F", "G"])[-1] == pytest.approx(0.5)  # the study's frontier stops at the slow seed
    levels = plateau_levels(h, "F", "G")
    assert levels[-1] == pytest.approx(0.66) and np.allclose(np.diff(levels), 0.36 / PLATEAU_LEVELS)
    assert plateau_levels(h, "F", "G", min_seeds=2)[-1] == pytest.approx(0.68)
    v = plateau_frontier(h, "F", "G")
    # levels 0.345, 0.39, ..., 0.66: seed 4 of F drops out above 0.50, seed 3 above 0.64; three pairs at the top
    assert [d.seeds for d in v.diffs] == [5, 5, 5, 5, 4, 4, 4, 3] and v.word == "above"


def test_a_level_reached_by_two_seeds_of_one_side_cannot_tell_there():
    tops = {"F": {0: 0.70, 1: 0.70, 2: 0.66, 3: 0.66, 4: 0.66}}
    h = _history({"F": lambda p: 1.25 - p, "G": lambda p: 1.2 - p}, tops=tops, noise=0.002)
    v = plateau_frontier(h, "F", "G", levels=[0.5, 0.69, 0.75])
    assert [d.outcome for d in v.diffs] == [Outcome.HIGHER, Outcome.CANNOT_TELL, Outcome.CANNOT_TELL]
    assert [d.seeds for d in v.diffs] == [5, 2, 0] and math.isnan(v.diffs[2].mean)
    assert v.word == "cannot tell" and v.diffs[0].family == 1  # the untested levels are no part of the family
    assert "2 cannot tell" in v.describe()


def test_a_level_is_read_on_the_seeds_both_arms_reach_not_welch():
    """Three seeds of each arm reach 0.65, but only seed 2 of both: that level cannot tell, and the levels stop at
    0.6, which every seed reaches in both arms (not at 0.7, which three seeds of each arm reach)."""
    tops = {"F": {0: 0.7, 1: 0.7, 2: 0.7, 3: 0.6, 4: 0.6}, "G": {0: 0.6, 1: 0.6, 2: 0.7, 3: 0.7, 4: 0.7}}
    h = _history({"F": lambda p: 1.25 - p, "G": lambda p: 1.2 - p}, tops=tops, noise=0.002)
    assert plateau_levels(h, "F", "G")[-1] == pytest.approx(0.6)
    assert plateau_frontier(h, "F", "G").diffs[-1].seeds == 5  # the top level has its pairs
    v = plateau_frontier(h, "F", "G", levels=[0.5, 0.65])
    assert v.diffs[0].outcome == Outcome.HIGHER and v.diffs[1].outcome == Outcome.CANNOT_TELL
    assert v.diffs[1].seeds == 1 and v.word == "cannot tell"


@pytest.mark.parametrize(
    ("f", "noise", "word"),
    [
        (lambda p: 1.2 - p + 0.05, 0.005, "above"),
        (lambda p: 1.2 - p - 0.05, 0.005, "below"),
        (lambda p: 1.2 - p + 0.4 * (0.52 - p), 0.001, "crosses"),
        (lambda p: 1.2 - p, 0.02, "on"),
    ],
)
def test_frontier_words(f, noise, word):
    h = _history({"F": f, "G": lambda p: 1.2 - p}, noise=noise, seeds=range(8))
    v = plateau_frontier(h, "F", "G")
    assert v.word == word and v.describe().startswith(word)
    assert all(d.family == PLATEAU_LEVELS for d in v.diffs)


def test_too_few_seeds_or_no_rise_has_no_level():
    h = _history({"F": lambda p: 1.25 - p, "G": lambda p: 1.2 - p}, seeds=range(2))
    with pytest.raises(ValueError, match="'F' against 'G'.*fewer than 3"):
        plateau_levels(h, "F", "G")
    assert plateau_frontier(h, "F", "G").levels == ()
    flat = _history({"F": lambda p: 1.25 - p, "G": lambda p: 1.2 - p}).assign(mu_pos=lambda r: r["mu_pos"] * 0 + 0.3)
    with pytest.raises(ValueError, match="'F' against 'G'.*never raise pass@1"):
        plateau_levels(flat, "F", "G")
    v = plateau_frontier(flat, "F", "G")
    assert (v.word, v.levels, v.diffs) == ("cannot tell", (), ()) and "no pass@1 level" in v.describe()
    with pytest.raises(ValueError, match="'H'"):
        plateau_frontier(h, "F", "H", levels=[0.5])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(35, 80), min_size=3, max_size=6), st.lists(st.integers(35, 80), min_size=3, max_size=6))
def test_the_top_level_is_the_third_highest_reach_of_both_arms(tops_f, tops_g):
    """The top level is the third highest, over the seeds both arms ran, of the lower of a seed's two reaches."""
    tops = {"F": {s: t / 100 for s, t in enumerate(tops_f)}, "G": {s: t / 100 for s, t in enumerate(tops_g)}}
    h = _history({"F": lambda p: 1.25 - p, "G": lambda p: 1.2 - p}, seeds=range(6), tops=tops)
    h = h[h["seed"] < h["label"].map({"F": len(tops_f), "G": len(tops_g)})]
    reach = sorted(min(f, g) for f, g in zip(tops_f, tops_g))[-3] / 100  # zip: the seeds both arms ran
    assert plateau_levels(h, "F", "G")[-1] == pytest.approx(reach)


# --- end points ---------------------------------------------------------------------------------------------------

_J = np.array([0.001, -0.002, 0.0015, -0.0005, 0.001])


def _ends(**arms) -> pd.DataFrame:
    """Runs of each arm (``name=(pass1, pass256)`` per seed): an SFT evaluation, the final one at step 100 and a
    step-110 row without an evaluation."""
    rows = []
    for label, (p1, p256) in arms.items():
        for seed, (x, y) in enumerate(zip(np.broadcast_to(p1, 5), np.broadcast_to(p256, 5))):
            rows.append({"label": label, "seed": seed, "step": 0, "mu_pos": 0.3, "exact_pass_at_256": 0.9})
            rows.append({"label": label, "seed": seed, "step": 100, "mu_pos": x, "exact_pass_at_256": y})
            rows.append({"label": label, "seed": seed, "step": 110, "mu_pos": math.nan, "exact_pass_at_256": 0.0})
    return pd.DataFrame(rows)


def test_end_points_are_each_runs_final_evaluation():
    pts = end_points(_ends(G=(0.7, 0.5), F=(0.7 + _J, 0.55 + _J)), ["F", "G"])
    assert list(pts.columns) == ["label", "seed", "step", "pass1", "pass256"] and len(pts) == 10
    assert (pts["step"] == 100).all() and pts.loc[pts["label"] == "G", "pass256"].eq(0.5).all()


@pytest.mark.parametrize(
    ("p1", "p256", "word"),
    [
        (0.7 + _J, 0.55 + _J, "dominates"),  # pass@1 equivalent, pass@256 higher
        (0.75 + _J, 0.55 + _J, "dominates"),  # pass@1 higher
        (0.7 + _J, 0.45 + _J, "is dominated"),
        (0.65 + _J, 0.45 + _J, "is dominated"),
        (0.7 + _J, 0.5 + _J / 2, "same point"),
        (0.75 + _J, 0.45 + _J, "cannot tell"),  # a trade: more pass@1, less pass@256
        (0.7 + _J, 0.5 + 0.02 * np.sign(_J), "cannot tell"),  # pass@256 neither resolved nor within ±0.01
    ],
)
def test_end_point_words(p1, p256, word):
    v = end_point_verdict(_ends(F=(p1, p256), G=(0.7, 0.5)), "F", "G")
    assert v.word == word and v.describe().startswith(word + ": pass@256 ")
    assert v.pass1.metric == "pass1" and v.pass1.delta == 0.005 and v.pass256.delta == 0.01
    assert v.pass1_equivalence.bound == 0.02 and v.pass256_equivalence.bound == 0.01


def test_end_point_with_too_few_seeds_cannot_tell():
    h = _ends(F=(0.7 + _J, 0.55 + _J), G=(0.7, 0.5))
    v = end_point_verdict(h[h["seed"] < 2], "F", "G")
    assert v.word == "cannot tell" and v.pass1_equivalence.outcome == EquivalenceOutcome.CANNOT_TELL


def test_end_point_family_holms_each_test_over_the_pairs():
    h = _ends(
        G=(0.7, 0.5), F1=(0.7 + _J, 0.55 + _J), F2=(0.7 + _J, 0.5 + _J / 2), F3=(0.75 + _J, 0.45 + _J)
    )  # fmt: skip
    pairs = [("F1", "G"), ("F2", "G"), ("F3", "G")]
    family = end_point_family(h, pairs)
    alone = [end_point_verdict(h, a, b) for a, b in pairs]
    assert [v.word for v in family] == ["dominates", "same point", "cannot tell"]
    for v, one in zip(family, alone):
        for test in ("pass1_equivalence", "pass1", "pass256", "pass256_equivalence"):
            fam, raw = getattr(v, test), getattr(one, test)
            assert fam.p == raw.p and fam.family == 3 and fam.p_adjusted >= raw.p_adjusted
    with pytest.raises(ValueError, match="'H'"):
        end_point_family(h, [("F1", "H")])
