"""The controls, γ sensitivity, pass@k and trade-off claims (:mod:`tailmiss.results.claims.controls`).

The rules are checked on hand-made histories whose answers are known: a paired t-test over seeds, sentences from
their parts, the §7.1 γ selection, pass@k exact and from 1024 samples, the crossing of two pass@k curves.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tailmiss import analytic
from tailmiss.results.claims import controls as cc
from tailmiss.results.claims.paired import judge_sentence

T975_4 = 2.7764451051977987  # t_{0.975, 4} (tables)


def _chosen(values: dict, metric: str = "pass1") -> pd.DataFrame:
    rows = [{"label": lab, "seed": s, metric: v} for lab, vals in values.items() for s, v in enumerate(vals)]
    return pd.DataFrame(rows)


def test_paired_diff_applies_the_t_rule():
    base = [0.40, 0.41, 0.39, 0.42, 0.40]
    up = [b + d for b, d in zip(base, [0.010, 0.012, 0.008, 0.011, 0.009])]
    d = cc.paired_diff(_chosen({"a": up, "b": base}), "a", "b", "pass1")
    diffs = np.array(up) - np.array(base)
    assert d.mean == pytest.approx(diffs.mean()) and d.sd == pytest.approx(diffs.std(ddof=1)) and d.seeds == 5
    assert d.threshold == pytest.approx(T975_4 * diffs.std(ddof=1) / math.sqrt(5))
    assert d.outcome == "higher"
    assert cc.paired_diff(_chosen({"a": up, "b": base}), "b", "a", "pass1").outcome == "lower"
    # a mean difference within t * sd / sqrt(n): a tie, even though every seed's difference is positive but one
    noisy = [b + d for b, d in zip(base, [0.02, -0.015, 0.001, 0.002, 0.001])]
    assert cc.paired_diff(_chosen({"a": noisy, "b": base}), "a", "b", "pass1").outcome == "tie"


def test_paired_diff_pairs_by_seed_and_refuses_what_it_cannot_compare():
    # seed effects shared by both rows cancel: unpaired sds of 0.1 would hide a 0.01 difference
    base = [0.2, 0.4, 0.6, 0.3, 0.5]
    d = cc.paired_diff(_chosen({"a": [b + 0.01 for b in base], "b": base}), "a", "b", "pass1")
    assert d.outcome == "higher" and d.sd == pytest.approx(0.0, abs=1e-12)
    one = cc.paired_diff(_chosen({"a": [0.5], "b": [0.4]}), "a", "b", "pass1")
    assert one.outcome is None and one.seeds == 1 and math.isnan(one.threshold)
    with pytest.raises(ValueError, match="no run of 'c'"):
        cc.paired_diff(_chosen({"a": base, "b": base}), "a", "c", "pass1")


def _part(outcome):
    return (cc.PairedDiff("a", "b", "pass1", 0.0, 0.0, 5, 0.0, outcome), "higher")


@pytest.mark.parametrize(
    ("outcomes", "verdict"),
    [
        (["higher", "higher"], "yes"),
        (["higher", "tie"], "not resolved"),
        (["higher", "lower"], "no"),
        (["tie", "lower"], "no"),
        ([None, "higher"], "cannot tell"),
    ],
)
def test_a_sentence_needs_every_part_its_way(outcomes, verdict):
    assert judge_sentence("s", [_part(o) for o in outcomes]).verdict == verdict


def _history(label, method, gamma, seed, steps_pass1, pass256=0.7):
    """Evaluation rows of one run: pass@1 per step as given, pass@k from a constant mass curve."""
    rows = []
    for step, p1 in steps_pass1.items():
        row = dict(label=label, method=method, gamma=gamma, group_size=8, seed=seed, step=step, mu_pos=p1)
        row.update(retained_mass=1.0, dnll_rare=0.0, rare_pass_at_256=0.5, exact_pass_at_256=pass256)
        row.update({f"exact_pass_at_{k}": min(1.0, p1 + 0.001 * k) for k in cc.KS if k != 256})
        rows.append(row)
    return rows


def test_chosen_checkpoints_select_per_run_and_keep_the_shared_seeds():
    paper = pd.DataFrame(
        _history("GRPO N=8", "grpo", 0.0, 0, {0: 0.3, 8: 0.5, 16: 0.4})
        + _history("GRPO N=8", "grpo", 0.0, 1, {0: 0.3, 8: 0.4, 16: 0.6})
        + _history("F-GRPO γ=0.5 N=8", "grpo", 0.5, 0, {0: 0.3, 8: 0.4, 16: 0.9})  # 16 is past its baseline's 8
        + _history("F-GRPO γ=0.5 N=8", "grpo", 0.5, 1, {0: 0.3, 8: 0.4, 16: 0.9})
        + _history("GRPO N=8", "grpo", 0.0, 2, {0: 0.3, 8: 0.4, 16: 0.6})  # a seed the other rows lack
    )
    controls = pd.DataFrame(
        _history("GRPO N=8 KL", "grpo", 0.0, 0, {0: 0.3, 8: 0.6, 16: 0.5})
        + _history("GRPO N=8 KL", "grpo", 0.0, 1, {0: 0.3, 8: 0.6, 16: 0.5})
    )
    gamma = pd.DataFrame(_history("F-GRPO γ=2 N=8", "grpo", 2.0, 0, {0: 0.3, 8: 0.2, 16: 0.1}))
    gamma = pd.concat([gamma, pd.DataFrame(_history("F-GRPO γ=2 N=8", "grpo", 2.0, 1, {0: 0.3, 8: 0.2, 16: 0.1}))])
    chosen = cc.chosen_checkpoints(
        {"paper-protocol": paper, "paper-protocol-controls": controls, "paper-protocol-gamma": gamma}
    )
    assert sorted(set(chosen["seed"])) == [0, 1]
    step = chosen.set_index(["label", "seed"])["step"]
    assert step[("GRPO N=8", 0)] == 8 and step[("GRPO N=8", 1)] == 16
    assert step[("F-GRPO γ=0.5 N=8", 0)] == 8 and step[("F-GRPO γ=0.5 N=8", 1)] == 16
    assert step[("F-GRPO γ=2 N=8", 0)] == 8  # its best pass@1 among steps after 0, within the baseline's 8
    assert step[("GRPO N=8 KL", 0)] == 8  # a control is its own baseline


def test_gamma_selection_is_among_the_focal_values_and_says_whether_it_is_resolved():
    values = {
        "GRPO N=8": [0.50, 0.51, 0.49, 0.50, 0.52],  # the best pass@1 overall, but γ = 0 is not a choice
        "F-GRPO γ=0.5 N=8": [0.45, 0.46, 0.44, 0.45, 0.47],
        "F-GRPO γ=1 N=8": [0.44, 0.45, 0.43, 0.44, 0.461],
        "F-GRPO γ=2 N=8": [0.40, 0.41, 0.39, 0.40, 0.42],
    }
    chosen = _chosen(values).assign(pass256=0.7, mret=1.0, dnll=0.0, rare256=0.5, step=8)
    _, choices = cc._gamma(chosen)
    grpo = choices[0]
    assert grpo.method == "GRPO" and grpo.selected == 0.5 and grpo.best["pass1"] == 0.0
    assert grpo.resolved["pass1"] is True  # γ = 0 beats every other γ on every seed
    assert grpo.selected_beats[1.0].outcome == "higher" and grpo.selected_beats[2.0].outcome == "higher"
    assert [c.method for c in choices] == ["GRPO"]  # DAPO and CISPO have no runs here


def test_passk_curves_are_exact_and_the_papers_estimator():
    mu = np.array([0.0, 1.0, 0.05, 0.5])
    history = pd.DataFrame(_history("GRPO N=8", "grpo", 0.0, 0, {8: 0.3}))
    exact = analytic.pass_at_k_from_mass(mu[:, None], np.array(cc.KS)[None, :]).mean(0)
    for k, v in zip(cc.KS, exact):
        history[f"exact_pass_at_{k}"] = v
    chosen = pd.DataFrame([dict(label="GRPO N=8", seed=0, step=8)])
    curves = cc.passk_curves(chosen, history, {("GRPO N=8", 0): (np.array([0, 8]), np.stack([mu * 0, mu]))})
    got = curves[curves["scoring"] == "exact"].set_index("k")["value"]
    np.testing.assert_allclose(got.loc[list(cc.KS)], exact)
    sampled = curves[curves["scoring"] == "sampled"].set_index("k")["value"]
    # prompts at mass 0 and 1 are exact under sampling; the others are near their exact value at 1024 samples
    assert ((sampled >= 0.25) & (sampled <= 1.0)).all()
    assert abs(sampled.loc[1] - exact[0]) < 0.03 and abs(sampled.loc[256] - exact[-1]) < 0.03


def test_crossings_find_the_sign_change_and_where_the_difference_is_resolved():
    rows = []
    for seed in range(5):
        for i, k in enumerate(cc.KS):
            rows.append(("GRPO N=8", seed, "exact", k, 0.5))
            # F-GRPO is behind at small k and ahead from k = 8 on, by more than the seeds' noise
            rows.append(("F-GRPO γ=0.5 N=8", seed, "exact", k, 0.5 + 0.01 * (i - 2.5) + 0.0005 * seed))
    curves = pd.DataFrame(rows, columns=["label", "seed", "scoring", "k", "value"])
    crossings = cc._crossings_for(curves, "grpo", "exact")
    assert crossings.cross_k == 8 and crossings.resolved == "higher" and crossings.resolved_k == 8
    assert crossings.diffs[0].outcome == "lower"


def test_controls_claims_on_the_tiny_sweeps(tmp_path):
    """End to end on the tiny sweeps: every part present, two seeds per row, verdict words from the rule."""
    from conftest import tiny_llm_sweeps

    from tailmiss.options import RunOptions
    from tailmiss.results import Context, controls_data

    ctx = Context(quick=True, cache_dir=tmp_path, llm_sweeps=tiny_llm_sweeps(), options=RunOptions(progress=False))
    claims = cc.controls_claims(controls_data(ctx))
    assert set(claims.controls["seeds"]) == {2}
    assert list(claims.controls["label"])[:2] == ["GRPO N=8", "F-GRPO γ=0.5 N=8"]
    assert {s.verdict for s in claims.sentences} <= {"yes", "no", "not resolved"}
    assert [c.method for c in claims.choices] == ["GRPO", "DAPO"]  # the quick γ sweep has no CISPO
    assert set(claims.curves["k"]) == set(cc.KS) and set(claims.curves["scoring"]) == {"exact", "sampled"}
    assert len(claims.crossings) == 4 and claims.prompts == 34  # GRPO and DAPO, exact and sampled
    assert set(claims.tradeoff_diffs) == {"vs GRPO N=8", "vs GRPO N=32"}
    assert claims.tradeoff["label"].tolist()[:4] == ["GRPO N=2", "GRPO N=8", "GRPO N=32", "F-GRPO γ=0.5 N=8"]
    assert isinstance(claims, cc.ControlsClaims) and not isinstance(claims, SimpleNamespace)
