"""The simulator at the edges of its settings: every logged value finite, or a clear ValueError before the run.

Extremes: two actions, N = 1, N = 2**17, lr = 1 (SGD and Adam), gamma = 5, 1,000 steps, V = 2**20, std
advantages of both kinds, every surrogate, both dtypes, epsilons at the smallest normal number.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from tailmiss.objectives import binary_group_advantages
from tailmiss.sim import METRICS, SimConfig, simulate

F32_TINY = float(np.finfo(np.float32).tiny)
# METRICS' docstring: these describe the draws taken *at* a step, so they are NaN by design at the final step
DRAW_COLUMNS = ("q_u_pos", "mu_hat", "mb_sampled_correct", "mb_sampled_incorrect", "mb_unsampled")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_draw_columns_are_the_engines():
    assert set(DRAW_COLUMNS) <= set(METRICS)


def assert_all_finite(cfg: SimConfig) -> None:
    """Simulate ``cfg`` on the CPU and check every logged value that is defined.

    Not defined, so not checked: the draw columns at the final step (no draws follow it) and
    ``anchor_prob`` when the initial policy has no anchor (``init`` other than ``"seeded"``).
    Everything else must be finite at every logged step.
    """
    history = simulate(cfg, device="cpu", progress=False).history
    assert history["step"].max() == cfg.steps
    before_last = history["step"] < cfg.steps
    for column in METRICS:
        if column == "anchor_prob" and cfg.init != "seeded":
            assert history[column].isna().all()
            continue
        values = history.loc[before_last, column] if column in DRAW_COLUMNS else history[column]
        bad = history.loc[values.index[~np.isfinite(values.to_numpy())], ["run", "group_size", "gamma", "step"]]
        assert bad.empty, f"{column} not finite for {cfg}:\n{bad.head()}"
    assert history.loc[~before_last, list(DRAW_COLUMNS)].isna().all().all()  # the design, checked too
    q_pos = history["q_pos"].to_numpy()
    assert ((q_pos >= -1e-6) & (q_pos <= 1 + 1e-6)).all()


# every valid (surrogate, optimizer, advantage, std_kind), at lr = 1 with N = 1, 2, 16 and gamma = 0, 5
_METHODS = [
    (surrogate, optimizer, advantage, std_kind)
    for surrogate, optimizer, advantage, std_kind in itertools.product(
        ("logprob", "prob", "theory"), ("sgd", "adam", "adamw"), ("none", "mean", "std"), ("population", "bessel")
    )
    if (surrogate != "theory" or (optimizer, advantage) == ("sgd", "none"))
    and (advantage == "std" or std_kind == "population")
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("surrogate", "optimizer", "advantage", "std_kind"), _METHODS)
def test_every_method_at_lr_one(surrogate, optimizer, advantage, std_kind, dtype):
    cfg = SimConfig(
        num_actions=8,
        num_correct=2,
        init="zero",
        surrogate=surrogate,
        optimizer=optimizer,
        advantage=advantage,
        std_kind=std_kind,
        lr=1.0,
        reward_incorrect=0.0 if surrogate == "theory" else -1.0,
        group_sizes=(1, 2, 16),
        gammas=(0.0, 5.0),
        steps=12,
        log_every=1,
        dtype=dtype,
    )
    assert_all_finite(cfg)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("advantage", ["mean", "std"])
def test_two_actions(optimizer, advantage):
    # one correct, one incorrect action: every draw group is all-correct, all-incorrect or a 50/50 split
    cfg = SimConfig(
        num_actions=2,
        num_correct=1,
        init="zero",
        optimizer=optimizer,
        advantage=advantage,
        std_kind="bessel",
        lr=1.0,
        group_sizes=(1, 2, 8),
        gammas=(0.0, 5.0),
        steps=40,
        log_every=1,
    )
    assert_all_finite(cfg)


@pytest.mark.parametrize("std_kind", ["population", "bessel"])
def test_group_of_one_with_std_advantage(std_kind):
    # Bessel's 1/(N-1) at N = 1 is taken as sigma = 1; population sigma is 0, guarded by adv_eps
    cfg = SimConfig(
        num_actions=6,
        num_correct=2,
        init="seeded",
        advantage="std",
        std_kind=std_kind,
        adv_eps=F32_TINY,
        optimizer="sgd",
        lr=1.0,
        group_sizes=(1,),
        gammas=(0.0, 5.0),
        steps=30,
        log_every=1,
    )
    assert_all_finite(cfg)


@pytest.mark.parametrize(
    ("optimizer", "advantage", "std_kind"),
    [("adam", "mean", "population"), ("sgd", "std", "bessel"), ("adamw", "std", "population")],
)
def test_thousand_steps_tiny_space(optimizer, advantage, std_kind):
    cfg = SimConfig(
        num_actions=4,
        num_correct=1,
        init="zero",
        optimizer=optimizer,
        advantage=advantage,
        std_kind=std_kind,
        lr=1.0,
        weight_decay=0.01 if optimizer == "adamw" else 0.0,
        group_sizes=(1, 2, 64),
        gammas=(0.0, 5.0),
        steps=1000,
        log_every=50,
    )
    assert_all_finite(cfg)


@pytest.mark.parametrize("surrogate", ["logprob", "prob"])
def test_group_size_two_to_the_seventeen(surrogate):
    cfg = SimConfig(
        num_actions=16,
        num_correct=4,
        init="seeded",
        surrogate=surrogate,
        advantage="std",
        lr=1.0,
        group_sizes=(2**17,),
        gammas=(0.0, 5.0),
        steps=8,
        log_every=1,
    )
    assert_all_finite(cfg)


def test_million_actions_on_cpu():
    cfg = SimConfig(
        num_actions=2**20,
        num_correct=2**10,
        init="seeded",
        lr=1.0,
        group_sizes=(2, 2**17),
        gammas=(5.0,),
        steps=2,
        log_every=1,
    )
    assert_all_finite(cfg)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_epsilons_at_the_smallest_normal_number(dtype):
    tiny = float(np.finfo(dtype).tiny)
    cfg = SimConfig(
        num_actions=6,
        num_correct=2,
        init="zero",
        advantage="std",
        std_kind="population",
        eps=tiny,
        adv_eps=tiny,
        lr=1.0,
        group_sizes=(1, 2, 16),
        gammas=(0.0, 5.0),
        steps=30,
        log_every=1,
        dtype=dtype,
    )
    assert_all_finite(cfg)
    assert_all_finite(cfg.replace(optimizer="sgd", reward_correct=0.9, reward_incorrect=0.2))


def test_large_rewards_at_the_accepted_bound():
    cfg = SimConfig(
        num_actions=6,
        num_correct=2,
        init="zero",
        advantage="none",
        reward_correct=2e18,
        reward_incorrect=-2e18,
        group_sizes=(1, 16),
        gammas=(0.0,),
        steps=20,
        log_every=1,
    )
    assert_all_finite(cfg)
    history = simulate(cfg, device="cpu", progress=False).history
    final = history[history["step"] == cfg.steps]
    assert (final["q_pos"] > 1 / 3).all()  # Adam still learns (its squared gradient did not overflow)


def test_extreme_logits_within_the_dtype():
    cfg = SimConfig(
        num_actions=6,
        num_correct=2,
        init="seeded",
        anchor_logit=3e38,
        correct_logit=0.0,
        incorrect_logit=-3e38,
        group_sizes=(2,),
        gammas=(0.0,),
        steps=5,
        log_every=1,
    )
    assert_all_finite(cfg)


@pytest.mark.parametrize(
    "changes",
    [
        {"eps": 1e-50},
        {"adv_eps": 1e-50, "advantage": "std"},
        {"adv_eps": 1.2e-38, "advantage": "std", "reward_correct": 5.0, "reward_incorrect": -5.0},
        {"anchor_logit": float("inf")},
        {"reward_correct": float("nan")},
        {"reward_correct": 1e30, "reward_incorrect": -1e30},
        {"weight_decay": float("inf")},
        {"anchor_logit": 1e39},
    ],
    ids=str,
)
def test_configs_that_crashed_the_run_are_refused(changes):
    # each of these passed validation and crashed the sampler on NaN probabilities or froze Adam
    with pytest.raises(ValueError, match=next(iter(changes))):
        SimConfig(num_actions=6, num_correct=2, group_sizes=(2,), gammas=(0.0,), steps=3, **changes)


@pytest.mark.parametrize(("r_c", "r_w"), [(0.9, 0.2), (1.0, -1.0), (0.7, 0.1), (3.3, -0.1)])
@pytest.mark.parametrize("mode", ["mean", "std"])
@pytest.mark.parametrize("std", ["population", "bessel"])
def test_uniform_groups_have_exactly_zero_advantage(r_c, r_w, mode, std):
    # 0.2 + (0.9 - 0.2) != 0.9 in binary: the group mean missed R_c by 1e-16, which eps = 1e-38 made 1e22
    n = torch.tensor([1.0, 2.0, 16.0, 2.0**17], dtype=torch.float64)
    a_pos, _ = binary_group_advantages(n, n, r_c, r_w, mode=mode, std=std, eps=F32_TINY)
    _, a_neg = binary_group_advantages(torch.zeros_like(n), n, r_c, r_w, mode=mode, std=std, eps=F32_TINY)
    assert (a_pos == 0).all() and (a_neg == 0).all()


def test_a_run_whose_logits_overflow_stops_with_a_clear_error():
    """No config rule bounds Adam's steps in general: a diverging run is stopped, naming the run and the step."""
    config = SimConfig(
        num_actions=8,
        num_correct=2,
        init="zero",
        group_sizes=(1, 2, 16),
        gammas=(0.0,),
        steps=50,
        log_every=5,
        optimizer="adam",
        lr=1e38,
        eps=1e-30,
    )
    with pytest.raises(ValueError, match=r"run \d+ \(N=\d+, gamma=0, seed=0\) diverged by step \d+.*lower lr"):
        simulate(config, device="cpu", progress=False)
