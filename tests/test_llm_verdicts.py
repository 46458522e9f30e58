"""Verdicts of the small-transformer claims that must not claim more than their numbers: F-GRPO Table 1's "DAPO
differs from GRPO" (run by run, then paired by seed: :func:`dapo_claims`), Table 2's "F-GRPO N = 8 reaches GRPO
N = 32" (cannot be judged where N = 32 is GRPO's worst N: :func:`nsweep_claims`) and Table 4's "F-GRPO beats GRPO
at every N" on the maze (paired by seed at each N; one seed cannot tell: :func:`maze_claims`)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from tailmiss.results.claims.llm import METRICS, dapo_claims, maze_claims, nsweep_claims


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


def test_identical_runs_are_no():
    (claim,) = dapo_claims(_final(0.0))
    assert claim.differ == 0 and claim.differs is False and claim.resolved == ()
    assert len(claim.diffs) == 2 * len(METRICS) and {g for g, _ in claim.diffs} == {0.0, 0.5}


def test_a_difference_within_the_seed_spread_is_no_and_one_beyond_it_is_yes():
    # differences of ±0.01 around 0: one run in four differs from its twin, nothing resolved
    (within,) = dapo_claims(_final(0.0, noise={0: 0.01, 1: -0.01, 2: 0.0, 3: 0.0}))
    assert within.differ > 0 and within.resolved == () and within.differs is False
    # a steady +0.02 with small noise: resolved "higher" on every metric at both γ
    (beyond,) = dapo_claims(_final(0.02, noise={0: 0.001, 1: -0.001, 2: 0.0005, 3: 0.0}))
    assert beyond.differs is True and len(beyond.resolved) == 2 * len(METRICS)
    assert all(d.outcome == "higher" and d.seeds == 4 for _, d in beyond.resolved)


def test_one_seed_cannot_tell():
    (claim,) = dapo_claims(_final(0.05, seeds=(0,)))
    assert claim.differ == 2 and claim.differs is None


@pytest.mark.parametrize("method", ["dapo+ds"])
def test_each_variant_is_judged_on_its_own_twins(method):
    final = _final(0.02, noise={0: 0.001, 1: -0.001, 2: 0.0005, 3: 0.0}).final
    final = pd.concat([final, final[final["method"] == "dapo"].assign(method=method)])
    names = [c.method for c in dapo_claims(SimpleNamespace(final=final))]
    assert names == ["dapo", method]


def _nsweep(rare_by_n: dict, focal_rare: float):
    """A group-size sweep's seed means: GRPO at each N with rare hit@256 ``rare_by_n[N]``, F-GRPO γ = 0.5 at N = 8."""
    rows = [
        {"label": f"GRPO N={n}", "method": "grpo", "gamma": 0.0, "group_size": n, "rare_pass_at_256": r}
        for n, r in rare_by_n.items()
    ]
    rows.append({"label": "F", "method": "grpo", "gamma": 0.5, "group_size": 8, "rare_pass_at_256": focal_rare})
    frame = pd.DataFrame(rows)
    for metric in METRICS:
        frame[metric] = frame.get(metric, 0.5)
        frame[f"{metric}_sd"] = 0.0
    frame["rollouts"] = frame["group_size"] * 100.0
    return SimpleNamespace(seed_mean=lambda: frame)


def test_reaching_grpo_n32_cannot_be_judged_where_n32_is_grpos_worst():
    worst_at_32 = nsweep_claims(_nsweep({2: 0.9, 8: 0.5, 32: 0.1}, focal_rare=0.6)).focal_reach
    assert worst_at_32.vacuous and worst_at_32.comparison.diff > 0
    recovered = nsweep_claims(_nsweep({2: 0.9, 8: 0.3, 32: 0.6}, focal_rare=0.6)).focal_reach
    assert not recovered.vacuous


def test_the_large_n_regime_is_zone_iii_or_a_recovery_and_zone_iii_keeps_fig2s_meaning():
    """The ladder's composite (zone III, or a significant dip and recovery) has its own name: a curve whose zones read
    I I I can recover without being called zone III."""
    from tailmiss.analytic.regimes import zones
    from tailmiss.results.claims.ladder import has_large_n_regime

    flat = tuple(zones([2, 8, 32], [0.88, 0.83, 0.883]))
    assert flat == ("I", "I", "I")
    assert has_large_n_regime({"recovers": True, "zones": flat}) and "III" not in flat
    assert not has_large_n_regime({"recovers": False, "zones": flat})
    fig2 = tuple(zones([2, 8, 32], [0.6, 0.4, 0.7]))
    assert fig2 == ("I", "II", "III") and has_large_n_regime({"recovers": False, "zones": fig2})


def test_fig2_alone_and_the_lift_need_their_rules():
    """F-GRPO Fig. 2: "N = 131,072 alone keeps M_ret ≈ 1" fails its "alone" when a small N keeps it too; "γ = 1 lifts
    M_ret, mostly in zone II" needs a positive lift larger inside the zone than outside."""
    from tailmiss.results.claims.sim import Fig2Claims

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

    from tailmiss.results.claims.sim import BrorlClaims

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
    assert [c.k for c in one] == [1, 256] and all(c.verdict is None and c.seeds == 1 for c in one)
    assert (
        one[0].deltas == ((4, pytest.approx(0.05, abs=0.002)), (8, pytest.approx(0.05, abs=0.002))) and one[0].wins == 0
    )
    # three seeds, higher beyond the spread at every N: yes
    (yes, _) = maze_claims(_maze({4: 0.05, 8: 0.05, 16: 0.05}))
    assert yes.verdict is True and yes.wins == 3 and yes.seeds == 3
    # lower beyond the spread at one N: no
    (no, _) = maze_claims(_maze({4: 0.05, 8: -0.05, 16: 0.05}))
    assert no.verdict is False and no.wins == 2
    # a difference within its seed spread at one N (a tie): not resolved
    (tie, _) = maze_claims(_maze({4: 0.05, 8: 0.002, 16: 0.05}, wobble={8: 0.05}))
    assert tie.verdict is None and [d.outcome for _, d in tie.diffs] == ["higher", "tie", "higher"]
