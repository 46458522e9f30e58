"""Reward transforms (DS-GRPO's differential smoothing) and the control arms of a sweep.

The DS example is computed by hand from the rule of Gai et al. (2025): correct rollouts get
r - beta * log pi(y), incorrect ones keep r; then GRPO's group advantage (Bessel std, eps 1e-6).
"""

from __future__ import annotations

import math

import pytest
import torch

from tailmiss import analytic
from tailmiss.experiments.presets import DS_COEF, llm_sweep
from tailmiss.experiments.sweep_config import LLMSweep, Variant
from tailmiss.llm import RLConfig, train_rl
from tailmiss.llm.optim import OptimConfig
from tailmiss.llm.rl_update import advantages
from tailmiss.objectives import (
    REWARD_TRANSFORMS,
    differential_smoothing,
    group_advantages,
    register_reward_transform,
    transform_rewards,
)

DS = "differential-smoothing"
REWARDS = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
LOGP = torch.tensor([[-1.0, -3.0, -2.0, -5.0], [-0.5, -1.0, -2.0, -4.0]], dtype=torch.float64)
# by hand, beta = 0.1: group 1 -> 1.1, 1.3, 0, 0 (incorrect untouched); group 2 -> 1.05, 1.1, 1.2, 1.4
HAND_REWARDS = [[1.1, 1.3, 0.0, 0.0], [1.05, 1.1, 1.2, 1.4]]
# group 1: mean 0.6, deviations 0.5, 0.7, -0.6, -0.6, Bessel variance 1.46 / 3, std 0.6976149
# group 2: mean 1.1875, deviations -0.1375, -0.0875, 0.0125, 0.2125, Bessel variance 0.071875 / 3, std 0.1547848
HAND_ADV = [[0.716731, 1.003423, -0.860078, -0.860078], [-0.888329, -0.565300, 0.080757, 1.372872]]


def test_differential_smoothing_matches_the_hand_computed_example():
    shaped = transform_rewards(DS, REWARDS, REWARDS > 0.5, LOGP, 0.1)
    assert torch.allclose(shaped, torch.tensor(HAND_REWARDS, dtype=torch.float64), atol=1e-12)
    adv = group_advantages(shaped, "std", "bessel", 1e-6)
    assert torch.allclose(adv, torch.tensor(HAND_ADV, dtype=torch.float64), atol=2e-6)
    # vanilla GRPO: the all-correct group is silent; DS orders it by -log pi (the rarest correct rollout first)
    assert torch.all(group_advantages(REWARDS, "std", "bessel", 1e-6)[1] == 0)
    assert adv[1].argsort().tolist() == [0, 1, 2, 3]


def test_differential_smoothing_leaves_incorrect_rollouts_and_zero_coef_alone():
    correct = REWARDS > 0.5
    shaped = differential_smoothing(REWARDS, correct, LOGP, 0.3)
    assert torch.equal(shaped[~correct], REWARDS[~correct])
    assert torch.equal(transform_rewards(DS, REWARDS, correct, LOGP, 0.0), REWARDS)
    # the log-probability is a constant of the reward: no gradient flows through it
    logp = LOGP.clone().requires_grad_(True)
    assert not transform_rewards(DS, REWARDS, correct, logp, 0.1).requires_grad


def test_ds_beta_cancels_in_all_correct_groups_and_moves_mixed_ones_little():
    """Why the narrowing study's two DS arms (β = 0.1, 0.2) end alike: with the std-normalised advantage an
    all-correct group's advantages are the standardised −log π whatever β (up to eps), and a mixed group's move by
    O(β |log π|) against the 0/1 gap."""
    correct = REWARDS > 0.5
    adv = {
        b: group_advantages(transform_rewards(DS, REWARDS, correct, LOGP, b), "std", "bessel", 1e-6) for b in (0.1, 0.2)
    }
    assert torch.allclose(adv[0.1][1], adv[0.2][1], atol=1e-4)  # the all-correct group: β cancels
    z = -LOGP[1]
    assert torch.allclose(adv[0.1][1], (z - z.mean()) / z.std(), atol=1e-4)
    shift = (adv[0.2][0] - adv[0.1][0]).abs().max()
    assert 0 < shift < 0.2 * LOGP[0].abs().max()  # the mixed group: a small move, bounded by β |log π|


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "smoothing"}, "unknown reward transform 'smoothing'"),
        ({"coef": -0.1}, "coef must be"),
        ({"coef": math.nan}, "coef must be"),
        ({"seq_logp": None}, "needs the rollouts' sequence log-probabilities"),
        ({"seq_logp": LOGP[:, :3]}, r"seq_logp must have the rewards' shape \(2, 4\)"),
        ({"correct": (REWARDS > 0.5)[:1]}, "correct must have the rewards' shape"),
    ],
)
def test_transform_rewards_refuses_bad_input(kwargs, match):
    args = dict(name=DS, rewards=REWARDS, correct=REWARDS > 0.5, seq_logp=LOGP, coef=0.1) | kwargs
    with pytest.raises(ValueError, match=match):
        transform_rewards(**args)


def test_registering_a_transform_and_a_taken_name():
    @register_reward_transform("test-flat-bonus", needs_logprobs=False)
    def flat(rewards, correct, seq_logp, coef):
        return rewards + coef * correct.to(rewards.dtype)

    try:
        out = transform_rewards("test-flat-bonus", REWARDS, REWARDS > 0.5, None, 0.5)
        assert out[0].tolist() == [1.5, 1.5, 0.0, 0.0]
        assert RLConfig(reward_transform="test-flat-bonus", transform_coef=0.5).reward_transform == "test-flat-bonus"
        with pytest.raises(ValueError, match="already registered"):
            register_reward_transform(DS, needs_logprobs=True)(flat)
    finally:
        REWARD_TRANSFORMS.remove("test-flat-bonus")


def test_trainer_advantages_take_the_transform_and_count_the_original_correct():
    cfg = RLConfig(reward_transform=DS, transform_coef=0.1)
    adv, g = advantages(REWARDS.float(), cfg, LOGP)
    assert torch.allclose(adv.double(), torch.tensor(HAND_ADV, dtype=torch.float64), atol=2e-5)
    # with the focal weight, X counts the correct rollouts, not the shaped rewards: the all-correct group gets g = 0
    adv_f, g_f = advantages(REWARDS.float(), cfg.replace(gamma=1.0), LOGP)
    assert g_f.tolist() == [0.5, 0.0]
    assert torch.all(adv_f[1] == 0)
    assert torch.allclose(adv_f[0].double(), 0.5 * torch.tensor(HAND_ADV[0], dtype=torch.float64), atol=2e-5)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"reward_transform": "smoothing"}, "reward_transform must be one of"),
        ({"transform_coef": 0.1}, "needs a reward_transform"),
        ({"reward_transform": DS, "transform_coef": -1.0}, "transform_coef"),
    ],
)
def test_rl_config_refuses_bad_transform_settings(changes, match):
    with pytest.raises(ValueError, match=match):
        RLConfig(**changes)


def test_rl_config_toml_round_trip_keeps_the_transform(tmp_path):
    cfg = RLConfig(reward_transform=DS, transform_coef=0.05)
    cfg.to_toml(tmp_path / "rl.toml")
    assert RLConfig.from_toml(tmp_path / "rl.toml") == cfg


def _weights(path) -> dict:
    return torch.load(path / "checkpoint.pt", map_location="cpu", weights_only=False)["model"]


@pytest.mark.usefixtures("one_torch_thread")
def test_ds_with_zero_coef_trains_exactly_as_grpo_and_a_positive_coef_differs(sft_run, tmp_path):
    base = RLConfig(group_size=8, prompts_per_step=4, steps=2, eval_every=2, eval_prompts=4, optim=OptimConfig(lr=1e-3))
    runs = {
        "grpo": base,
        "ds0": base.replace(reward_transform=DS),
        "ds": base.replace(reward_transform=DS, transform_coef=0.5),
    }
    w = {k: _weights(train_rl(c, sft_run, tmp_path / k, device="cpu", progress=False)) for k, c in runs.items()}
    assert all(torch.equal(w["grpo"][k], w["ds0"][k]) for k in w["grpo"])
    assert any(not torch.equal(w["grpo"][k], w["ds"][k]) for k in w["grpo"])


# ---- the control arms of a sweep ---------------------------------------------------------------------------


def test_variant_overrides_name_the_arm_and_reach_its_config():
    v = Variant("grpo", 0.0, 8, tag="KL", overrides={"kl_coef": 1e-3})
    assert v.label == "GRPO N=8 KL" and v.slug == "grpo-n8-g0-kl"
    sweep = llm_sweep("paper-protocol").replace(name="t", variants=(Variant("grpo", 0.0, 8), v))
    (_, _, plain), (_, _, kl) = sweep.runs()[0], sweep.runs()[len(sweep.seeds)]
    assert kl.kl_coef == 1e-3 and kl.replace(kl_coef=0.0, name=plain.name) == plain


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"overrides": {"optim.lr": 1e-6}}, "needs a tag"),
        ({"overrides": {"lr": 1e-6}, "tag": "s"}, r"'lr' is an \[rl.optim\] setting: write 'optim.lr'"),
        ({"overrides": {"optim.rate": 1e-6}, "tag": "s"}, "'optim.rate' cannot be overridden"),
        ({"overrides": {"seed": 3}, "tag": "s"}, "'seed' cannot be overridden"),
        ({"overrides": {"learning_rate": 3}, "tag": "s"}, "'learning_rate' cannot be overridden"),
        ({"tag": "two words"}, "variant tag must be"),
    ],
)
def test_variant_refuses_bad_overrides(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Variant("grpo", 0.0, 8, **kwargs)


def test_a_bad_override_value_names_the_variant():
    with pytest.raises(ValueError, match="variant 'GRPO N=8 bad'.*lr"):
        bad = Variant("grpo", 0.0, 8, tag="bad", overrides={"optim.lr": -1.0})
        llm_sweep("paper-protocol").replace(variants=(bad,))


def test_controls_sweep_round_trips_through_toml(tmp_path):
    sweep = llm_sweep("paper-protocol-controls")
    sweep.to_toml(tmp_path / "s.toml")
    assert LLMSweep.from_toml(tmp_path / "s.toml") == sweep


def test_controls_and_gamma_sweeps_pair_with_paper_protocol():
    paper = llm_sweep("paper-protocol")
    controls, gamma = llm_sweep("paper-protocol-controls"), llm_sweep("paper-protocol-gamma")
    assert controls.sft == paper.sft == gamma.sft
    assert controls.seeds == gamma.seeds == tuple(range(5)) and set(controls.seeds) <= set(paper.seeds)
    by_tag = {v.tag: dict(v.overrides) for v in controls.variants}
    assert by_tag["low-LR"] == {"optim.lr": pytest.approx(paper.rl.optim.lr * analytic.lr_matched_scale(0.5))}
    assert by_tag["entropy"] == {"entropy_coef": 1e-3} and by_tag["KL"] == {"kl_coef": 1e-3}
    assert by_tag["DS"] == {"reward_transform": DS, "transform_coef": DS_COEF}
    for _, _, cfg in controls.runs() + gamma.runs():
        assert cfg.group_size == 8 and cfg.steps == paper.rl.steps and cfg.train_prompts == paper.rl.train_prompts
    grid = {(v.method, v.gamma, v.dynamic_sampling) for v in gamma.variants}
    have = grid | {(v.method, v.gamma, False) for v in paper.variants if v.group_size == 8}
    for method, ds in (("grpo", False), ("dapo", True), ("cispo", False)):
        assert {(method, g, ds) for g in (0.0, 0.5, 1.0, 2.0)} <= have


def test_an_optim_override_changes_that_setting_of_the_base_config_alone():
    sweep = llm_sweep("paper-protocol-controls")
    (low,) = [cfg for v, s, cfg in sweep.runs() if v.tag == "low-LR" and s == 0]
    assert low.optim == sweep.rl.optim.replace(lr=sweep.rl.optim.lr * analytic.lr_matched_scale(0.5))
    assert low.optim.warmup_steps == sweep.rl.optim.warmup_steps == 2  # the paper protocol's warm-up is kept
