"""The ladder judged by the report's one noise rule (:mod:`tailmiss.studies.rule`).

Each test below builds per-seed data where the ladder's old rules (focal "> 2 se", recovery "> twice the
combined seed sd", matched "range > 2 × the largest sd") and the rule disagree, and checks the rule wins: in the
results layer (:mod:`tailmiss.studies.ladder.claims`) and in the words the report prints.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tailmiss.analytic.regimes import n_shape
from tailmiss.studies.ladder import section as report
from tailmiss.studies.ladder.claims import focal_table, has_large_n_regime, matched_shape_table, shape_table
from tailmiss.studies.rule import Outcome, Verdict

SEED_EFFECT = (0.0, 0.1, 0.2)
"""A large per-seed offset shared by every cell: the paired test cancels it, a spread-based rule does not."""


def _result(final=None, history=None, seeds=(0, 1, 2)):
    rung = SimpleNamespace(name="r", model="table")
    return SimpleNamespace(final=final, history=history, ladder=SimpleNamespace(rungs=(rung,), seeds=seeds))


def _final(values: dict, metric: str = "retained_mass", gamma: float = 0.0, extra: dict | None = None) -> pd.DataFrame:
    """Rows of one curve: ``values[N]`` is the per-seed metric at N."""
    rows = [
        {"rung": "r", "set": "pool", "gamma": gamma, "group_size": n, "seed": s, metric: v, **(extra or {})}
        for n, per_seed in values.items()
        for s, v in enumerate(per_seed)
    ]
    return pd.DataFrame(rows)


# ---- the focal table: one paired t per cell, one Holm family over the table ---------------------------------

FOCAL = {  # N: the per-seed ΔM_ret = M_ret(γ = 1) − M_ret(0)
    2: (0.100, 0.101, 0.099),  # resolved, even after Holm
    4: (0.04, 0.05, 0.06),  # paired p ≈ 0.013 alone, not after Holm over 6 cells; far beyond 2 se
    8: (0.02, 0.05, 0.08),  # beyond 2 se (0.05 > 0.035), paired p ≈ 0.10
    16: (0.01, -0.012, 0.003),
    32: (-0.01, 0.008, 0.0),
    64: (0.004, -0.002, -0.003),
}


def _focal_final() -> pd.DataFrame:
    base = {n: tuple(0.5 + e for e in SEED_EFFECT) for n in FOCAL}
    lifted = {n: tuple(0.5 + e + d for e, d in zip(SEED_EFFECT, FOCAL[n])) for n in FOCAL}
    return pd.concat([_final(base), _final(lifted, gamma=1.0)], ignore_index=True)


def test_focal_helps_by_the_holm_corrected_paired_t_not_by_two_se():
    focal = focal_table(_focal_final()).set_index("group_size")
    se = focal["sd"] / np.sqrt(3)
    old = focal.index[focal["mean"] > 2 * se].tolist()
    assert old == [2, 4, 8]  # the old rule: three N where the focal weight "helps"
    assert (focal["test"] == "paired t").all() and (focal["dof"] == 2).all() and (focal["family"] == 6).all()
    assert focal.loc[2, "outcome"] == Outcome.HIGHER
    assert focal.loc[4, "p"] < 0.05 < focal.loc[4, "p_adjusted"] and focal.loc[4, "outcome"] == Outcome.TIE
    assert focal.loc[8, "p"] > 0.05 and focal.loc[8, "outcome"] == Outcome.TIE
    assert focal.index[focal["outcome"] == Outcome.HIGHER].tolist() == [2]
    np.testing.assert_allclose(focal.loc[2, "mean"], 0.1)
    assert focal.loc[2, "diff"].p_adjusted == focal.loc[2, "p_adjusted"]


def test_the_report_counts_where_it_helps_by_the_rule_and_names_the_family():
    result = _result(_focal_final())
    block = report._focal_block(result)
    assert "N where it helps (paired t, Holm over the table's 6 cells, δ = 0.01)" in block
    assert "| 1/6 |" in block  # the old "> 2 se" column read 3/6
    assert "paired t on 2 df" in block and "one Holm family" in block


def test_focal_cells_with_too_few_seeds_cannot_tell_and_identical_cells_leave_the_family():
    final = _focal_final()
    final = final[final["seed"] < 2]
    held = final.assign(set="heldout", retained_mass=1.0)
    focal = focal_table(pd.concat([final, held], ignore_index=True))
    assert set(focal.loc[focal["set"] == "pool", "outcome"]) == {Outcome.CANNOT_TELL}
    assert set(focal.loc[focal["set"] == "heldout", "outcome"]) == {Outcome.IDENTICAL}
    assert (focal["test"] == "none").all() and report._family(focal) == 0
    block = report._focal_block(_result(final, seeds=(0, 1)))
    assert "| 0/6 (6 cannot tell) |" in block and "6 cannot tell (< 3 seeds)" in block
    assert "N where it helps (paired t, no cell has 3 seeds, δ = 0.01)" in block


# ---- dip and recovery: both ends against some interior N, paired by seed, one Holm family ----------------------


def test_a_gap_beyond_twice_the_seed_sd_is_no_recovery_when_the_paired_test_does_not_resolve_it():
    # the worst N and the largest N move against each other across seeds: each sd 0.1, the differences' sd 0.2
    curve = {2: (0.9, 0.9, 0.9), 8: (0.30, 0.40, 0.50), 32: (0.80, 0.70, 0.60)}
    old = n_shape([2, 8, 32], [0.9, 0.4, 0.7], [0.0, 0.1, 0.1])
    assert old.worst_n == 8 and old.recovers  # 0.30 > 0.05 and > 2 × hypot(0.1, 0.1)
    row = shape_table(_final(curve)).iloc[0]
    assert row["worst_n"] == 8 and not row["recovers"]
    s = row["recovery"]
    first, last = s.parts  # N=2 − N=8 and N=32 − N=8, one family of two
    assert first.family == last.family == 2 and first.status == "holds" and last.status == "open"
    assert last.difference.test == "paired t" and last.difference.dof == 2
    np.testing.assert_allclose(last.difference.mean, 0.3)
    assert s.verdict == Verdict.PARTLY and report._recovered(row) == "**no**"


def test_a_gap_inside_the_seed_spread_recovers_when_seed_effects_cancel():
    curve = {2: (0.52, 0.71, 0.9), 8: (0.3, 0.5, 0.7), 32: (0.36, 0.561, 0.759)}
    old = n_shape([2, 8, 32], [0.71, 0.5, 0.56], [0.19, 0.2, 0.2])
    assert old.worst_n == 8 and not old.recovers  # 0.06 is inside 2 × hypot(0.2, 0.2)
    row = shape_table(_final(curve)).iloc[0]
    assert row["recovers"] and row["recovery"].verdict == Verdict.REPRODUCED
    assert all(p.difference.test == "paired t" and p.status == "holds" for p in row["recovery"].parts)
    assert has_large_n_regime(row) and row["zones"] == ("I", "I", "I")


def test_the_trough_is_not_picked_from_the_seed_means():
    """Every interior N is a candidate in one Holm family: a curve whose lowest seed mean is at N = 8 but whose dip is
    resolved only at N = 16 recovers, and the family counts both candidates' tests."""
    curve = {2: (0.9, 0.91, 0.92), 8: (0.5, 0.85, 0.3), 16: (0.6, 0.61, 0.62), 32: (0.9, 0.92, 0.94)}
    row = shape_table(_final(curve)).iloc[0]
    assert row["worst_n"] == 8 and row["recovers"]
    assert len(row["recovery"].parts) == 4 and {p.family for p in row["recovery"].parts} == {4}


def test_recovery_needs_an_interior_dip_the_metrics_direction_and_delta():
    rising = shape_table(_final({2: (0.3, 0.5, 0.7), 8: (0.4, 0.6, 0.8), 32: (0.5, 0.7, 0.9)})).iloc[0]
    assert rising["worst_n"] == 2 and rising["recovery"].verdict == Verdict.REFUTED and not rising["recovers"]
    falling = shape_table(_final({2: (0.9, 0.9, 0.8), 8: (0.6, 0.6, 0.5), 32: (0.3, 0.3, 0.2)})).iloc[0]
    assert falling["worst_n"] == 32 and falling["recovery"].verdict == Verdict.REFUTED and not falling["recovers"]
    two = shape_table(_final({2: (0.9, 0.9, 0.8), 8: (0.6, 0.6, 0.5)})).iloc[0]
    assert two["recovery"] is None and not two["recovers"] and report._recovered(two) == "cannot tell"
    # ΔNLL_rare: higher is worse, so a peak that comes back down is a recovery (LOWER), with ΔNLL's δ = 0.05
    extra = {"retained_mass": 1.0, "q_pos": 0.9, "rare_hit_at_256": 0.5}
    peak = _final({2: (0.1, 0.21, 0.3), 8: (0.9, 1.0, 1.1), 32: (0.5, 0.61, 0.7)}, "dnll_rare", extra=extra)
    row = shape_table(peak, "dnll_rare").iloc[0]
    assert row["worst_n"] == 8 and row["recovers"]
    assert [p.outcome for p in row["recovery"].parts] == [Outcome.LOWER, Outcome.LOWER]
    small = _final({2: (0.1, 0.21, 0.3), 8: (0.9, 1.0, 1.1), 32: (0.87, 0.98, 1.07)}, "dnll_rare", extra=extra)
    row = shape_table(small, "dnll_rare").iloc[0]
    assert row["recovery"].parts[1].outcome == Outcome.BELOW_DELTA and not row["recovers"]
    hit = shape_table(peak.assign(rare_hit_at_256=peak["dnll_rare"]), "rare_hit_at_256").iloc[0]
    d = hit["recovery"].parts[0].difference
    assert d.delta == 0.02 and d.metric == "rare hit@256"


def test_one_or_two_seeds_cannot_tell_a_recovery():
    row = shape_table(_final({2: (0.95, 0.95), 8: (0.8, 0.85), 32: (0.9, 0.95)})).iloc[0]
    assert row["zones"] == ("I", "I", "I")
    assert not row["recovers"] and row["recovery"].verdict == Verdict.CANNOT_TELL
    assert report._recovered(row) == "cannot tell" and report._regime(row) == "cannot tell"


# ---- matched Q_pos: does N matter, some pair of N ---------------------------------------------------------------


def _matched_history(values: dict) -> pd.DataFrame:
    """Runs that all learn at one speed (Q_pos 0.5 → 0.9) with M_ret held at ``values[N][seed]``."""
    rows = [
        {"rung": "r", "set": "pool", "gamma": 0.0, "group_size": n, "seed": s, "step": step}
        | {"q_pos": 0.5 + 0.04 * step, "retained_mass": v}
        for n, per_seed in values.items()
        for s, v in enumerate(per_seed)
        for step in range(11)
    ]
    return pd.DataFrame(rows)


def test_n_matters_at_matched_qpos_when_some_pair_of_n_differs_by_the_rule():
    values = {2: (0.6, 0.7, 0.8), 8: (0.55, 0.65, 0.75), 32: (0.65, 0.751, 0.852)}
    table = matched_shape_table(_matched_history(values))
    (row,) = table.itertuples()
    # the old rule: range 0.10 is not beyond 2 × the largest seed sd (0.2)
    assert np.ptp(row.means) < 2 * max(row.sds)
    assert row.best_n == 32 and row.worst_n == 8 and row.n_matters and row.recovers
    # every pair, higher seed mean first, one family of three
    assert [(p.difference.a, p.difference.b) for p in row.spread.parts] == [
        ("N=32", "N=2"),
        ("N=32", "N=8"),
        ("N=2", "N=8"),
    ]
    assert {p.family for p in row.spread.parts} == {3} and row.spread.parts[0].difference.test == "paired t"
    cells = report._matched_rows(_result(history=_matched_history(values)))[0]
    assert cells[5].startswith("yes: 3 comparisons, one Holm family: 3 holds") and "paired t" in cells[5]
    assert cells[7].startswith("yes: ")


def test_n_does_not_matter_when_the_best_and_worst_n_swap_across_seeds():
    values = {2: (0.5, 0.7, 0.6), 8: (0.7, 0.5, 0.62)}
    (row,) = matched_shape_table(_matched_history(values)).itertuples()
    assert np.ptp(row.means) == pytest.approx(0.02 / 3) and not row.n_matters
    assert row.spread.verdict == Verdict.NOT_RESOLVED and row.spread.parts[0].outcome == Outcome.TIE


def test_the_claims_text_speaks_the_rule():
    history = _matched_history({2: (0.6, 0.7, 0.8), 8: (0.55, 0.65, 0.75), 32: (0.65, 0.751, 0.852)})
    text = report._claims_text(_result(_focal_final(), history), [])
    assert "beyond noise (some pair of N, every pair in one Holm family, the noise rule) on `r`" in text
    assert "Holm over the focal table's 6 cells, δ = 0.01) at most N on 0 of them" in text
    assert "2 se" not in text and "seed spread" not in text
