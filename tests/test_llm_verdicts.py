"""Verdicts of the small-transformer claims, each by the report's one noise rule (:mod:`tailmiss.studies.rule`)
on per-seed values: F-GRPO Table 1 (the focal weight raises rare hit@256 and keeps pass@1: :func:`objectives_claims`;
"DAPO differs from GRPO": :func:`dapo_claims`), Table 2 (:func:`nsweep_claims`; "F-GRPO N = 8 reaches GRPO N = 32"
cannot be judged where N = 32 is GRPO's worst N) and Table 4 ("F-GRPO beats GRPO at every N" on the maze, paired by
seed at each N; one seed cannot tell: :func:`maze_claims`). The tests marked *old rule* fail on the rules these
replaced (a tie within the larger seed sd; "keeps" = a pass@1 drop below max(0.01, sd); a t-test on one degree of
freedom)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tailmiss.studies.rule import MIN_SEEDS, Outcome, Verdict
from tailmiss.studies.transformer.claims import (
    METRICS,
    VACUOUS,
    combine,
    dapo_claims,
    maze_claims,
    nsweep_claims,
    objectives_claims,
)

R = Verdict


def _final(dapo_shift, seeds=(0, 1, 2, 3), noise=None):
    """GRPO and DAPO runs at γ = 0 and 0.5, N = 8; DAPO = GRPO + ``dapo_shift`` (+ ``noise[seed]``) on every metric."""
    rows = []
    for gamma in (0.0, 0.5):
        for seed in seeds:
            base = {m: 0.5 + 0.01 * seed + 0.1 * gamma for m in METRICS}
            rows.append({"method": "grpo", "gamma": gamma, "group_size": 8, "seed": seed, **base})
            extra = (noise or {}).get(seed, 0.0)
            rows.append(
                {"method": "dapo", "gamma": gamma, "group_size": 8, "seed": seed}
                | {m: v + dapo_shift + extra for m, v in base.items()}
            )
    return SimpleNamespace(final=pd.DataFrame(rows))


# ---- DAPO differs from GRPO ---------------------------------------------------------------------------------------


def test_identical_runs_refute_dapo_differs_with_the_reason():
    """A DAPO variant identical to GRPO: *refuted*, a fact (the same runs), not a test, at any number of seeds."""
    for seeds in ((0, 1, 2, 3), (0, 1), (0,)):
        (claim,) = dapo_claims(_final(0.0, seeds=seeds))
        assert claim.differ == 0 and claim.identical and claim.resolved == ()
        assert claim.differs == R.REFUTED and "equals its GRPO twin" in claim.reason
        assert all(d.outcome == Outcome.IDENTICAL for _, d in claim.diffs)
    assert len(claim.diffs) == 2 * len(METRICS) and {g for g, _ in claim.diffs} == {0.0, 0.5}


def test_a_dapo_difference_within_noise_is_not_resolved_and_one_beyond_it_is_reproduced():
    """Old rule: a difference within the seed spread was "no" (refuted); now not resolved."""
    (within,) = dapo_claims(_final(0.0, noise={0: 0.01, 1: -0.01, 2: 0.0, 3: 0.0}))
    assert within.differ > 0 and within.resolved == () and within.differs == R.NOT_RESOLVED
    (beyond,) = dapo_claims(_final(0.06, noise={0: 0.001, 1: -0.001, 2: 0.0005, 3: 0.0}))
    assert beyond.differs == R.REPRODUCED and len(beyond.resolved) == 2 * len(METRICS)  # 0.06 ≥ every δ
    assert all(d.outcome == Outcome.HIGHER and d.seeds == 4 for _, d in beyond.resolved)
    # every variant − GRPO comparison of the variant is one Holm family
    assert {d.family for _, d in beyond.diffs} == {2 * len(METRICS)}
    assert all(d.p_adjusted >= d.p for _, d in beyond.diffs)


def test_dapo_with_two_seeds_cannot_tell():
    """Old rule: a paired t-test on one degree of freedom called this "no" (refuted)."""
    (claim,) = dapo_claims(_final(0.02, seeds=(0, 1), noise={0: 0.01, 1: -0.005}))
    assert claim.seeds == 2 < MIN_SEEDS and claim.differ == 4
    assert claim.differs == R.CANNOT_TELL and "fewer than the rule's 3" in claim.reason
    assert all(d.outcome == Outcome.CANNOT_TELL for _, d in claim.diffs)


def test_one_seed_cannot_tell():
    (claim,) = dapo_claims(_final(0.05, seeds=(0,)))
    assert claim.differ == 2 and claim.differs == R.CANNOT_TELL


@pytest.mark.parametrize("method", ["dapo+ds"])
def test_each_variant_is_judged_on_its_own_twins(method):
    final = _final(0.02, noise={0: 0.001, 1: -0.001, 2: 0.0005, 3: 0.0}).final
    final = pd.concat([final, final[final["method"] == "dapo"].assign(method=method)])
    names = [c.method for c in dapo_claims(SimpleNamespace(final=final))]
    assert names == ["dapo", method]


# ---- Table 1: the focal weight raises rare hit@256 and keeps pass@1 ----------------------------------------------


def _objectives(values: dict, seeds=(0, 1, 2)):
    """An objective sweep at N = 8, γ ∈ {0, 0.5}: ``values[(method, γ)]`` maps a metric to its per-seed values
    (every other metric 0.5 + a wobble by γ and seed)."""
    rows = [{"method": "sft", "gamma": 0.0, "group_size": 0, "seed": 0} | dict.fromkeys(METRICS, 0.1)]
    for (method, gamma), given in values.items():
        for i, seed in enumerate(seeds):
            row = {m: 0.5 + 0.001 * ((i + int(10 * gamma)) % 3) for m in METRICS}
            row |= {m: v[i] for m, v in given.items()}
            rows.append({"method": method, "gamma": gamma, "group_size": 8, "seed": seed} | row)
    return SimpleNamespace(final=pd.DataFrame(rows))


def test_raises_is_paired_by_seed_where_seed_effects_are_shared():
    """Old rule: a difference smaller than the larger seed sd is a tie. Paired by seed, a steady +0.05 over seed
    effects of sd 0.1 is higher; a +0.06 whose per-seed differences scatter (the sides' sds 0.01 and 0.05) is not
    resolved."""
    base = [0.2, 0.3, 0.4]
    steady = {
        ("grpo", 0.0): {"rare_pass_at_256": base},
        ("grpo", 0.5): {"rare_pass_at_256": [b + 0.05 + e for b, e in zip(base, (0.001, -0.001, 0.0005))]},
    }
    c = objectives_claims(_objectives(steady))
    (p,) = c.methods
    assert p.base_rare.sd == pytest.approx(0.1) and p.covers.mean < p.base_rare.sd  # a tie by the old rule
    assert p.covers.test == "paired t" and p.covers.outcome == Outcome.HIGHER and c.raises == R.REPRODUCED
    scattered = {
        ("grpo", 0.0): {"rare_pass_at_256": [0.50, 0.60, 0.55]},
        ("grpo", 0.5): {"rare_pass_at_256": [0.60, 0.61, 0.62]},
    }
    c = objectives_claims(_objectives(scattered))
    (q,) = c.methods
    assert q.covers.mean > max(q.base_rare.sd, q.focal_rare.sd)  # "yes" by the old rule
    assert q.covers.outcome == Outcome.TIE and c.raises == R.NOT_RESOLVED


def test_keeps_fails_for_a_resolved_drop_of_a_point_at_pass1_near_099():
    """Old rule: kept when pass@1 drops by less than max(0.01, the seed sd) (here the sd is 0.012). By the noise
    rule a resolved drop of 0.01 ≥ δ = 0.005 is lower: refuted. "Keeps" must be shown at the margin, a tenth of
    what is left to gain near 0.99 (0.0013 here): a resolved drop of 0.003, below δ, is not shown kept (the old
    rules kept it); a drop of 0.0003 with a small paired spread is."""
    base = [0.975, 0.987, 0.999]
    drop = {
        ("grpo", 0.0): {"exact_pass_at_1": base},
        ("grpo", 0.5): {"exact_pass_at_1": [b - 0.01 + e for b, e in zip(base, (0.0004, -0.0004, 0.0))]},
    }
    c = objectives_claims(_objectives(drop))
    (p,) = c.methods
    assert p.base_pass1.sd > 0.01 and -p.keeps.mean < max(0.01, p.base_pass1.sd)  # kept by the old rule
    assert p.keeps.outcome == Outcome.LOWER and c.keeps == R.REFUTED
    assert c.keeps_sentence.parts[0].status == "fails"

    def keeps(shift):
        focal = [b + shift + e for b, e in zip(base, (0.0001, -0.0001, 0.0))]
        values = {("grpo", 0.0): {"exact_pass_at_1": base}, ("grpo", 0.5): {"exact_pass_at_1": focal}}
        return objectives_claims(_objectives(values))

    small = keeps(-0.003)
    (s,) = small.methods
    assert s.keeps.outcome == Outcome.BELOW_DELTA and s.keeps.margin == pytest.approx(0.1 * (1 - np.mean(base)))
    assert small.keeps_sentence.parts[0].status == "open" and small.keeps == R.NOT_RESOLVED
    tiny = keeps(-0.0003)
    assert tiny.keeps_sentence.parts[0].status == "holds" and tiny.keeps == R.REPRODUCED


def test_table1_counts_only_methods_not_identical_to_grpo():
    grpo = {
        ("grpo", 0.0): {"rare_pass_at_256": [0.2, 0.3, 0.4]},
        ("grpo", 0.5): {"rare_pass_at_256": [0.3, 0.41, 0.5]},
    }
    same = {("dapo", g): v for (_, g), v in grpo.items()}
    cispo = {
        ("cispo", 0.0): {"rare_pass_at_256": [0.2, 0.3, 0.4]},
        ("cispo", 0.5): {"rare_pass_at_256": [0.21, 0.29, 0.405]},
    }
    c = objectives_claims(_objectives(grpo | same | cispo))
    assert c.same_as_grpo == ("dapo",) and [p.method for p in c.counted] == ["grpo", "cispo"]
    assert [p.covers.outcome for p in c.methods] == [Outcome.HIGHER, Outcome.HIGHER, Outcome.TIE]
    assert [p.difference.a for p in c.raises_sentence.parts] == ["grpo γ=0.5 N=8", "cispo γ=0.5 N=8"]
    assert [p.status for p in c.raises_sentence.parts] == ["holds", "open"]
    assert c.raises == R.PARTLY  # GRPO yes, CISPO a tie; DAPO (a copy of GRPO) not counted
    two = objectives_claims(_objectives(grpo | cispo, seeds=(0, 1)))
    assert two.raises == R.CANNOT_TELL and two.keeps == R.CANNOT_TELL  # 2 seeds: the full preset today


def test_combine_per_method_verdicts():
    assert combine([R.REPRODUCED, R.REPRODUCED]) == R.REPRODUCED
    assert combine([R.REPRODUCED, R.REFUTED]) == R.REFUTED
    assert combine([R.REPRODUCED, R.NOT_RESOLVED, R.CANNOT_TELL]) == R.PARTLY
    assert combine([R.NOT_RESOLVED, R.CANNOT_TELL]) == R.CANNOT_TELL
    assert combine([R.NOT_RESOLVED]) == R.NOT_RESOLVED and combine([]) == R.NOT_TESTABLE


# ---- Table 2: the group-size sweep --------------------------------------------------------------------------------


def _nsweep(rare_by_n: dict, focal_rare=None, pass1_by_n=None, dnll_by_n=None, seeds=(0, 1, 2)):
    """A group-size sweep, per seed: GRPO γ = 0 at each N (rare hit@256 ``rare_by_n[N]``, pass@1 ``pass1_by_n[N]``,
    ΔNLL_rare ``dnll_by_n[N]``; keys ``"F"`` for F-GRPO γ = 0.5 at N = 8) plus a seed effect of 0.03 shared by
    every run and a per-run wobble of about 0.002."""
    rng = np.random.default_rng(0)
    variants = [("grpo", 0.0, n) for n in rare_by_n] + ([("grpo", 0.5, 8)] if focal_rare is not None else [])
    rows = [{"method": "sft", "gamma": 0.0, "group_size": 0, "seed": 0, "rollouts": 0} | dict.fromkeys(METRICS, 0.1)]
    for method, gamma, n in variants:
        key = "F" if gamma else n
        mean = {
            "rare_pass_at_256": focal_rare if gamma else rare_by_n[n],
            "exact_pass_at_1": (pass1_by_n or {}).get(key, 0.4),
            "dnll_rare": (dnll_by_n or {}).get(key, 0.3),
        }
        for seed in seeds:
            row = {m: 0.5 + 0.03 * seed + rng.normal(0, 0.002) for m in METRICS}
            row |= {m: v + 0.03 * seed + rng.normal(0, 0.002) for m, v in mean.items()}
            rows.append({"method": method, "gamma": gamma, "group_size": n, "seed": seed, "rollouts": 100.0 * n} | row)
    return SimpleNamespace(final=pd.DataFrame(rows))


def test_reaching_grpo_n32_cannot_be_judged_where_n32_is_grpos_worst():
    worst_at_32 = nsweep_claims(_nsweep({2: 0.9, 8: 0.5, 32: 0.1}, focal_rare=0.6)).focal_reach
    assert worst_at_32.vacuous and worst_at_32.comparison.outcome == Outcome.HIGHER
    assert worst_at_32.verdict == R.NOT_RESOLVED and worst_at_32.reason == VACUOUS
    below = nsweep_claims(_nsweep({2: 0.9, 8: 0.5, 32: 0.1}, focal_rare=0.02)).focal_reach
    assert below.vacuous and below.verdict == R.REFUTED  # lower than even GRPO's worst N
    recovered = nsweep_claims(_nsweep({2: 0.9, 8: 0.3, 32: 0.6}, focal_rare=0.6)).focal_reach
    assert not recovered.vacuous and recovered.reason == ""
    assert recovered.comparison.outcome in (Outcome.TIE, Outcome.BELOW_DELTA) and recovered.verdict == R.REPRODUCED
    assert recovered.grpo32_rollouts / recovered.focal_rollouts == 4


def test_pass1_rises_by_the_rule():
    """Old rule: a rise in rank with a step down was "partly"; a step resolved lower now refutes it."""
    rare = {2: 0.9, 8: 0.3, 32: 0.6}

    def rises(pass1, **kw):
        return nsweep_claims(_nsweep(rare, pass1_by_n=pass1, **kw))

    up = rises({2: 0.30, 8: 0.35, 32: 0.40})
    assert up.pass1_rise.outcome == Outcome.HIGHER and up.pass1_rises == R.REPRODUCED
    assert len(up.pass1_steps) == 2 and up.pass1_steps == up.pass1_sentence.differences[1:]
    # the rise (higher) and each step (not lower) one Holm family
    assert [p.wanted for p in up.pass1_sentence.parts] == ["higher", "not lower", "not lower"]
    assert {p.family for p in up.pass1_sentence.parts} == {3}
    down = rises({2: 0.30, 8: 0.45, 32: 0.40})
    assert down.pass1_spearman > 0 and down.pass1_rise.outcome == Outcome.HIGHER
    assert down.pass1_steps[1].outcome == Outcome.LOWER and down.pass1_rises == R.REFUTED
    assert rises({2: 0.30, 8: 0.30, 32: 0.301}).pass1_rises == R.NOT_RESOLVED
    assert rises({2: 0.30, 8: 0.35, 32: 0.40}, seeds=(0, 1)).pass1_rises == R.CANNOT_TELL


def test_the_rare_dip_needs_a_recovery_beyond_noise():
    dip = nsweep_claims(_nsweep({2: 0.9, 4: 0.6, 8: 0.3, 16: 0.4, 32: 0.6}))
    assert (dip.rare_best_n, dip.rare_worst_n) == (2, 8) and dip.recovery.outcome == Outcome.HIGHER
    assert dip.dip == R.REPRODUCED
    # the smallest N against each other N (not lower), both ends against N = 8 and N = 16 (higher): one family
    parts = dip.dip_sentence.parts
    assert [p.wanted for p in parts] == ["not lower"] * 4 + ["higher"] * 4 and {p.family for p in parts} == {8}
    # the trough at N = 4, N = 8 and 16 as high as the largest N: no dip near 8, the recovery not shown
    elsewhere = nsweep_claims(_nsweep({2: 0.9, 4: 0.3, 8: 0.7, 16: 0.7, 32: 0.7}))
    assert elsewhere.rare_worst_n == 4 and elsewhere.dip == R.PARTLY
    flat = nsweep_claims(_nsweep({2: 0.9, 8: 0.3, 32: 0.301}))
    # best at N = 2 and below it at N = 8 hold; the recovery is a tie: open
    assert flat.recovery.outcome != Outcome.HIGHER and flat.dip == R.PARTLY
    assert [p.status for p in flat.dip_sentence.parts] == ["holds", "holds", "holds", "open"]
    falling = nsweep_claims(_nsweep({2: 0.9, 8: 0.5, 32: 0.1}))
    assert falling.recovery.outcome == Outcome.LOWER and falling.dip == R.REFUTED
    assert nsweep_claims(_nsweep({2: 0.9, 8: 0.3, 32: 0.6}, seeds=(0, 1))).dip == R.CANNOT_TELL
    assert nsweep_claims(_nsweep({2: 0.9, 32: 0.6})).dip == R.NOT_TESTABLE


def test_the_dnll_order_is_two_gaps_each_lower():
    rare = {2: 0.9, 8: 0.3, 32: 0.6}
    ordered = nsweep_claims(_nsweep(rare, 0.6, dnll_by_n={2: 0.2, 32: 0.5, 8: 0.7, "F": 0.45})).dnll
    assert [(p.outcome, p.wanted) for p in ordered.order.parts] == [(Outcome.LOWER, "lower")] * 2
    assert {p.family for p in ordered.order.parts} == {2}
    assert ordered.ordered == R.REPRODUCED and ordered.between.verdict == R.REPRODUCED
    swapped = nsweep_claims(_nsweep(rare, 0.6, dnll_by_n={2: 0.2, 32: 0.7, 8: 0.5, "F": 0.9})).dnll
    assert swapped.ordered == R.REFUTED and swapped.between.verdict == R.REFUTED
    assert nsweep_claims(_nsweep({2: 0.9, 4: 0.3, 8: 0.6})).dnll is None


def test_every_ledger_row_of_the_section_is_a_verdict_from_the_rule():
    """The section's rows reach the ledger as :class:`Verdict` (``ledger.row`` refuses anything else)."""
    from tailmiss.studies.transformer import section as report_llm

    nsweep = nsweep_claims(_nsweep({2: 0.9, 8: 0.3, 32: 0.6}, 0.6, dnll_by_n={2: 0.2, 32: 0.5, 8: 0.7}))
    objectives = _objectives(
        {(m, g): {"rare_pass_at_256": [0.2 + g, 0.3 + g, 0.4 + g]} for m in ("grpo", "dapo") for g in (0.0, 0.5)}
    )
    rows = report_llm._record_nsweep(nsweep) + report_llm._record_objectives(objectives, objectives_claims(objectives))
    got = {key: verdict.value for key, _, verdict in rows}
    assert got == {
        "t2-pass1": "not resolved",
        "t2-dip": "reproduced",
        "t2-reach": "reproduced",
        "t2-tradeoff": "reproduced",
        "t2-dnll": "reproduced",
        "t1-pass256": "reproduced",
        "t1-pass1": "reproduced",
    }
    ours = {key: text for key, text, _ in rows}
    assert "left out, its runs identical to GRPO's: DAPO" in ours["t1-pass256"]
    assert "paired t" in ours["t2-dip"]


def test_the_zone_caveat_is_never_reproduced_and_the_sources_cite_v2():
    from tailmiss.studies.transformer import section as report_llm

    assert "consistent with the caveat" in report_llm.zones_caveat(False, "zones agree at 33% of N")
    for agrees in (False, True):
        assert "reproduc" not in report_llm.zones_caveat(agrees, "zones agree at 100% of N")
    root = Path(report_llm.__file__).resolve().parent
    for rel in ("section.py", "tables.py", "claims.py", "objectives.py"):
        text = (root / rel).read_text()
        assert "§7.1" not in text and "§J" not in text and "called a tie" not in text, rel


def test_the_large_n_regime_is_zone_iii_or_a_recovery_and_zone_iii_keeps_fig2s_meaning():
    """The ladder's composite (zone III, or a significant dip and recovery) has its own name: a curve whose zones read
    I I I can recover without being called zone III."""
    from tailmiss.analytic.regimes import zones
    from tailmiss.studies.ladder.claims import has_large_n_regime

    flat = tuple(zones([2, 8, 32], [0.88, 0.83, 0.883]))
    assert flat == ("I", "I", "I")
    assert has_large_n_regime({"recovers": True, "zones": flat}) and "III" not in flat
    assert not has_large_n_regime({"recovers": False, "zones": flat})
    fig2 = tuple(zones([2, 8, 32], [0.6, 0.4, 0.7]))
    assert fig2 == ("I", "II", "III") and has_large_n_regime({"recovers": False, "zones": fig2})


def test_fig2_alone_and_the_lift_need_their_rules():
    """F-GRPO Fig. 2: "N = 131,072 alone keeps M_ret ≈ 1" fails its "alone" when a small N keeps it too; "γ = 1 lifts
    M_ret, mostly in zone II" needs a positive lift larger inside the zone than outside."""
    from tailmiss.studies.simulation.claims import Fig2Claims

    def claims(keepers, lift_in=0.2, lift_out=0.01):
        return Fig2Claims(
            final=pd.DataFrame(), zone=(64.0, 4096.0), rises=True, argmin=512, min_mret=0.03, nmax=131072,
            largest_min_mret=0.995, lift_in=lift_in, lift_out=lift_out, ends=(0.994, 0.995), nonmonotone=True,
            keepers=keepers,
        )  # fmt: skip

    assert claims((131072,)).alone and claims((131072,)).largest_keeps
    both = claims((2, 131072))
    assert both.largest_keeps and not both.alone
    assert not claims((2,)).largest_keeps
    assert claims(()).lifts_in_zone and not claims((), lift_in=0.02, lift_out=0.11).lifts_in_zone


def test_brorl_regression_concavity_drops_and_improvement_rules():
    import numpy as np

    from tailmiss.studies.simulation.claims import BrorlClaims

    n = np.array([4, 8, 16, 512, 51200])
    ours = BrorlClaims(
        group_sizes=n,
        gains=np.array([-0.028, -0.0272, -0.0226, 0.004, 0.0172]),
        worst_drop=np.array([-1.43e-4, -1.58e-4, -5.75e-6, -4.98e-6, 3.07e-7]),
        improved=np.array([0.112, 0.227, 0.316, 0.626, 1.0]),
        gains_increase=True,
    )
    assert ours.falls_at == (4, 8, 16)
    np.testing.assert_allclose(ours.slopes[0], 0.0008)  # one doubling from 4 to 8
    assert not ours.concave  # the gain per doubling grows from 4 to 512, then shrinks
    assert ours.drops_vanish and ours.improved_increase
    concave = BrorlClaims(n, np.log2(n) ** 0.5, -np.array([1e-4, 5e-5, 1e-5, 1e-6, 1e-7]), ours.improved, True)
    assert concave.concave and concave.falls_at == ()
    kept = BrorlClaims(n, concave.gains, -np.array([1e-4, 5e-5, 1e-5, 1e-6, 2e-6]), ours.improved, True)
    assert not kept.drops_vanish


def _maze(shift_by_n: dict, seeds=(0, 1, 2), wobble: dict | None = None):
    """A maze sweep: GRPO γ = 0 and 0.5 at each N; γ = 0.5 = γ = 0 + ``shift_by_n[N]`` (+ ``wobble[N]`` × ±1 by
    seed) on sampled pass@1 and pass@256."""
    rows = []
    for n, shift in shift_by_n.items():
        for seed in seeds:
            base = 0.5 + 0.01 * seed
            noise = (wobble or {}).get(n, 0.001) * (-1) ** seed
            rows.append({"method": "grpo", "gamma": 0.0, "group_size": n, "seed": seed, "pass_at_1": base})
            rows.append(
                {"method": "grpo", "gamma": 0.5, "group_size": n, "seed": seed, "pass_at_1": base + shift + noise}
            )
    return SimpleNamespace(final=pd.DataFrame(rows).assign(pass_at_256=lambda f: f["pass_at_1"] + 0.4))


def test_the_maze_claim_is_paired_by_seed_at_each_n_and_one_seed_cannot_tell():
    # one seed: a positive difference at every N is still "cannot tell"
    one = maze_claims(_maze({4: 0.05, 8: 0.05}, seeds=(0,)))
    assert [c.k for c in one] == [1, 256] and all(c.verdict == R.CANNOT_TELL and c.seeds == 1 for c in one)
    assert (
        one[0].deltas == ((4, pytest.approx(0.05, abs=0.002)), (8, pytest.approx(0.05, abs=0.002))) and one[0].wins == 0
    )
    # three seeds, higher beyond noise at every N (the N one Holm family): reproduced
    (yes, _) = maze_claims(_maze({4: 0.05, 8: 0.05, 16: 0.05}))
    assert yes.verdict == R.REPRODUCED and yes.wins == 3 and yes.seeds == 3
    assert {d.family for _, d in yes.diffs} == {3} and all(d.test == "paired t" for _, d in yes.diffs)
    # lower beyond noise at one N: refuted
    (no, _) = maze_claims(_maze({4: 0.05, 8: -0.05, 16: 0.05}))
    assert no.verdict == R.REFUTED and no.wins == 2
    # a difference within noise at one N (a tie): partly
    (tie, _) = maze_claims(_maze({4: 0.05, 8: 0.002, 16: 0.05}, wobble={8: 0.05}))
    assert tie.verdict == R.PARTLY and [d.outcome for _, d in tie.diffs] == [
        Outcome.HIGHER,
        Outcome.TIE,
        Outcome.HIGHER,
    ]
