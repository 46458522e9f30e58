"""The power of the noise rule's paired tests (:mod:`tailmiss.studies.power`) against Monte Carlo runs of the tests
themselves, and the end point's seed count (:mod:`tailmiss.studies.narrowing.end_point_seeds`) on constructed runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailmiss.studies.comparison import ALPHA, THRESHOLDS
from tailmiss.studies.equivalence import EquivalenceOutcome, equivalent_values
from tailmiss.studies.narrowing.end_point_seeds import (
    END_POINT_ARMS,
    END_POINT_FIRST_SEED,
    END_POINT_MOST_SEEDS,
    END_POINT_POWER,
    end_point_seeds,
)
from tailmiss.studies.power import resolve_power, seeds_for_power, tost_power
from tailmiss.studies.rule import Outcome, compare_values


def _paired(rng, n, mu, sd):
    b = rng.normal(0.5, 0.05, n)
    return b + rng.normal(mu, sd, n), b


@pytest.mark.parametrize(("n", "sd", "mu"), [(5, 0.02, 0.0), (12, 0.02, 0.0), (8, 0.01, 0.008)])
def test_tost_power_is_the_rate_the_equivalence_test_is_shown(n, sd, mu):
    rng = np.random.default_rng(1)
    draws = 600
    shown = 0
    for _ in range(draws):
        a, b = _paired(rng, n, mu, sd)
        shown += equivalent_values(a, b, "pass@1", 0.02).outcome == EquivalenceOutcome.EQUIVALENT
    exact = tost_power(n, sd, 0.02, alpha=ALPHA, true_diff=mu)
    assert abs(shown / draws - exact) < 4 * np.sqrt(exact * (1 - exact) / draws) + 0.01


@pytest.mark.parametrize(("n", "sd", "mu"), [(5, 0.03, 0.041), (10, 0.03, 0.02), (6, 0.01, -0.012)])
def test_resolve_power_is_the_rate_the_noise_rule_resolves_the_difference(n, sd, mu):
    rng = np.random.default_rng(2)
    draws = 600
    want = Outcome.HIGHER if mu > 0 else Outcome.LOWER
    hits = 0
    for _ in range(draws):
        a, b = _paired(rng, n, mu, sd)
        hits += compare_values(a, b, "pass256", paired=True).outcome == want
    exact = resolve_power(n, sd, mu, alpha=ALPHA, threshold=THRESHOLDS["pass@k"])
    assert abs(hits / draws - exact) < 4 * np.sqrt(exact * (1 - exact) / draws) + 0.01


@settings(max_examples=30, deadline=None)
@given(n=st.integers(3, 40), sd=st.floats(0.001, 0.1), bound=st.floats(0.005, 0.05))
def test_powers_are_probabilities_and_rise_with_seeds(n, sd, bound):
    p, q = tost_power(n, sd, bound), tost_power(n + 5, sd, bound)
    assert 0.0 <= p <= q + 1e-9 <= 1.0 + 1e-9
    r, s = resolve_power(n, sd, 2 * bound), resolve_power(n + 5, sd, 2 * bound)
    assert 0.0 <= r <= s + 1e-9 <= 1.0 + 1e-9


def test_power_at_the_limits():
    assert tost_power(5, 0.0, 0.02, true_diff=0.01) == 1.0 and tost_power(5, 0.0, 0.02, true_diff=0.03) == 0.0
    assert resolve_power(5, 0.0, 0.02, threshold=0.01) == 1.0 and resolve_power(5, 0.0, 0.005, threshold=0.01) == 0.0
    assert tost_power(200, 0.001, 0.02) > 0.999  # a tight spread on many seeds shows equivalence
    assert resolve_power(3, 0.05, 0.0) < ALPHA  # no true difference: only the test's false alarms in one direction
    # a true difference below the threshold is never resolved beyond it, however many seeds
    assert resolve_power(500, 0.001, 0.008, threshold=0.01) < 1e-6


@pytest.mark.parametrize(
    ("call", "word"),
    [
        (lambda: tost_power(1, 0.01, 0.02), "n=1"),
        (lambda: tost_power(5, -0.1, 0.02), "sd=-0.1"),
        (lambda: tost_power(5, 0.01, 0.0), "bound=0.0"),
        (lambda: resolve_power(5, float("nan"), 0.02), "sd=nan"),
        (lambda: resolve_power(5, 0.01, 0.02, threshold=-1.0), "threshold=-1.0"),
        (lambda: seeds_for_power(lambda n: 1.0, 1.5), "target=1.5"),
        (lambda: seeds_for_power(lambda n: 1.0, 0.8, first=10, most=5), "first=10"),
    ],
)
def test_bad_settings_are_named(call, word):
    with pytest.raises(ValueError, match=word.replace(".", r"\.")):
        call()


def test_seeds_for_power_is_the_first_count_that_reaches_the_target():
    assert seeds_for_power(lambda n: n / 10, 0.8, first=3, most=20) == 8
    assert seeds_for_power(lambda n: 0.1, 0.8, first=3, most=20) is None


def _history(sd1: float, d256: float, sd256: float = 0.02, seeds=range(10, 15), rng_seed: int = 0) -> pd.DataFrame:
    """End points of every arm the rule reads: every arm's pass@1 spread ``sd1 / √2`` about its seed's, the focal
    arms' pass@256 higher by ``d256`` with sd ``sd256``, two evaluations per run."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for seed in seeds:
        base1, base256 = 0.7 + rng.normal(0, 0.01), 0.8 + rng.normal(0, 0.01)
        for arm in END_POINT_ARMS:
            focal = arm.startswith("F-GRPO")
            p1 = base1 + rng.normal(0, sd1 / np.sqrt(2))
            p256 = base256 + (d256 + rng.normal(0, sd256) if focal else 0.0)
            for step, scale in ((0, 0.0), (1600, 1.0)):
                rows.append({"label": arm, "seed": seed, "step": step, "mu_pos": 0.5 + scale * (p1 - 0.5),
                             "exact_pass_at_256": 0.9 + scale * (p256 - 0.9)})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_seed_count_meets_every_wanted_power_and_no_fewer_seeds_do():
    count = end_point_seeds(_history(sd1=0.02, d256=0.04))
    assert count.reached and count.seeds[0] == END_POINT_FIRST_SEED and len(count.seeds) == count.count
    assert len(count.pairs) == 4 and all(p.seeds == 5 for p in count.pairs)
    for pair in count.pairs:
        p1, p256 = count.power_at(pair)
        assert p1 >= END_POINT_POWER and (p256 is None or p256 >= END_POINT_POWER)
    worst = max(count.pairs, key=lambda p: p.need())
    p1, p256 = count.power_at(worst, count.count - 1)
    assert p1 < END_POINT_POWER or (p256 is not None and p256 < END_POINT_POWER)


def test_a_wide_spread_asks_for_the_most_seeds_and_says_the_power_falls_short():
    count = end_point_seeds(_history(sd1=0.08, d256=0.0, sd256=0.002))
    assert not count.reached and count.count == END_POINT_MOST_SEEDS
    assert all(not p.asks_pass256 for p in count.pairs)  # a tie below the threshold asks nothing of pass@256


def test_the_seed_count_names_an_arm_it_lacks():
    history = _history(0.02, 0.04)
    with pytest.raises(ValueError, match="low-LR-m1"):
        end_point_seeds(history[history["label"] != "GRPO N=8 low-LR-m1"])


def test_the_end_point_presets_seeds_are_the_rules_count_on_the_archived_plateau_runs():
    """``narrowing-endpoint`` trains the seeds the rule sets from the plateau runs the checkout's archive holds."""
    from pathlib import Path

    from tailmiss.experiments.presets import llm_sweep
    from tailmiss.studies.narrowing.data import archived_history

    history = archived_history("narrowing-plateau", Path(__file__).resolve().parents[1] / "evidence")
    count = end_point_seeds(history)
    sweep = llm_sweep("narrowing-endpoint")
    assert sweep.seeds == count.seeds and {v.label for v in sweep.variants} == set(END_POINT_ARMS)
    assert sweep.sft == llm_sweep("narrowing-plateau").sft and sweep.rl == llm_sweep("narrowing-plateau").rl
