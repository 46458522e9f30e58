"""F-GRPO in verl: the fgrpo estimator, loaded through the verl.plugins entry point and called through verl's own
compute_advantage dispatch and its v1 trainer's multi-trajectory path, equals verl's GRPO times the focal weight.
Skipped where verl is not installed (CI runs them in a second environment built from the `[test,verl]` extra)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402 (a verl dependency)
from verl import DataProto  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402
from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: E402

# uid -> binary scores; groups of different sizes, in shuffled order, with a group of one (verl: mean 0, std 1),
# all-correct and all-wrong groups
GROUPS = {
    "a": [1, 0, 0, 0, 0, 0, 0, 0],
    "b": [1, 1, 1, 0, 0, 0, 1, 0],
    "c": [1, 1, 1, 1, 1, 1, 1, 0],
    "d": [0, 0, 0, 0],
    "e": [1, 1, 1, 1],
    "f": [1],
    "g": [0, 1],
}
T = 5


def _batch(scores_by_uid=GROUPS, seed: int = 0) -> DataProto:
    uid = np.array([u for u, scores in scores_by_uid.items() for _ in scores], dtype=object)
    score = torch.tensor([s for scores in scores_by_uid.values() for s in scores], dtype=torch.float32)
    order = np.random.default_rng(seed).permutation(len(uid))
    uid, score = uid[order], score[order]
    lengths = torch.tensor(np.random.default_rng(seed + 1).integers(1, T + 1, len(uid)))
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    rewards = torch.zeros(len(uid), T)
    rewards[torch.arange(len(uid)), lengths - 1] = score  # outcome reward on the last response token
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask}, non_tensors={"uid": uid}
    )


def _advantages(estimator: str, config, batch: DataProto | None = None) -> torch.Tensor:
    batch = batch or _batch()
    out = compute_advantage(
        batch,
        adv_estimator=estimator,
        norm_adv_by_std_in_grpo=config.get("norm_adv_by_std_in_grpo", True),
        config=config,
    )
    return out.batch["advantages"]


def _focal(batch: DataProto, gamma: float, threshold: float | None = None) -> torch.Tensor:
    """g of each rollout's group, by hand."""
    score = batch.batch["token_level_rewards"].sum(-1).numpy()
    correct = score >= threshold if threshold is not None else score == 1
    uid = batch.non_tensor_batch["uid"]
    mu = {u: correct[uid == u].mean() for u in set(uid)}
    return torch.tensor([(1 - mu[u]) ** gamma for u in uid], dtype=torch.float32)


def test_entry_point_registers_fgrpo():
    from tailmiss.integrations import verl as plugin

    assert core_algos.get_adv_estimator_fn("fgrpo") is plugin.compute_fgrpo_outcome_advantage


@pytest.mark.parametrize("gamma", [0.0, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("norm_by_std", [True, False])
def test_fgrpo_is_grpo_times_g_through_compute_advantage(gamma, norm_by_std):
    config = OmegaConf.create({"adv_estimator": "fgrpo", "fgrpo_gamma": gamma, "norm_adv_by_std_in_grpo": norm_by_std})
    batch = _batch()
    fgrpo = _advantages("fgrpo", config, batch)
    grpo = _advantages("grpo", config, _batch())
    expected = grpo * _focal(batch, gamma)[:, None]
    diff = (fgrpo - expected).abs().max().item()
    print(f"gamma={gamma}, norm_by_std={norm_by_std}: max |fgrpo - grpo * g| = {diff:.3g}")
    assert diff <= 1e-7 * max(1.0, grpo.abs().max().item())
    assert torch.all(fgrpo[batch.batch["response_mask"] == 0] == 0)
    if gamma == 0:
        assert torch.equal(fgrpo, grpo)
    else:
        assert (fgrpo - grpo).abs().max().item() > 0.1  # the focal weight changed something


def test_hydra_override_sets_gamma():
    import os

    import verl
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    overrides = ["algorithm.adv_estimator=fgrpo", "+algorithm.fgrpo_gamma=0.25"]
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=overrides)
    batch = _batch()
    out = compute_advantage(batch, adv_estimator=cfg.algorithm.adv_estimator, config=cfg.algorithm)
    grpo = _advantages("grpo", cfg.algorithm, _batch())
    torch.testing.assert_close(out.batch["advantages"], grpo * _focal(batch, 0.25)[:, None], rtol=0, atol=1e-7)


def test_default_gamma_and_shaped_scores_need_a_threshold():
    batch = _batch()
    grpo = _advantages("grpo", OmegaConf.create({}), _batch())
    fgrpo = _advantages("fgrpo", OmegaConf.create({}), batch)
    torch.testing.assert_close(fgrpo, grpo * _focal(batch, 0.5)[:, None], rtol=0, atol=1e-7)

    shaped = {u: [s - 0.2 * (i == 0) for i, s in enumerate(v)] for u, v in GROUPS.items()}  # a length penalty
    with pytest.raises(ValueError, match=r"add \+algorithm\.fgrpo_success_threshold=T to verl's command line") as info:
        _advantages("fgrpo", OmegaConf.create({"fgrpo_gamma": 1.0}), _batch(shaped))
    assert "correct' column" not in str(info.value)  # a diagnose log's way out means nothing inside verl
    config = OmegaConf.create({"fgrpo_gamma": 1.0, "fgrpo_success_threshold": 0.5})
    batch = _batch(shaped)
    fgrpo = _advantages("fgrpo", config, batch)
    grpo = _advantages("grpo", config, _batch(shaped))
    torch.testing.assert_close(fgrpo, grpo * _focal(batch, 1.0, 0.5)[:, None], rtol=0, atol=1e-7)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), "0.5", True])
def test_bad_gamma_is_refused(bad):
    with pytest.raises(ValueError, match="fgrpo_gamma"):
        _advantages("fgrpo", {"fgrpo_gamma": bad})


# --- the v1 trainer's multi-trajectory path ----------------------------------------------------------------


SESSIONS = {"a": 8, "b": 8, "c": 4, "d": 1, "e": 3}
"""uid -> sessions (rollouts of the prompt); every session of an agent loop holds OUTPUTS outputs."""
OUTPUTS = 2


def _multi_trajectory_batch(seed: int = 0) -> tuple[DataProto, list[str], torch.Tensor]:
    """Rows keyed ``<uid>_<session>_<output>`` in shuffled order, each output scored 0/1; and the g of each row's
    group at gamma = 1 by hand, from the final outputs only (the rollouts verl's GRPO scores)."""
    rng = np.random.default_rng(seed)
    rows = [(u, s, k) for u, n in SESSIONS.items() for s in range(n) for k in range(OUTPUTS)]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    score = torch.tensor(rng.integers(0, 2, len(rows)), dtype=torch.float32)
    lengths = torch.tensor(rng.integers(1, T + 1, len(rows)))
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    rewards = torch.zeros(len(rows), T)
    rewards[torch.arange(len(rows)), lengths - 1] = score
    final = [k == OUTPUTS - 1 for _, _, k in rows]
    mu = {u: np.mean([float(score[i]) for i, (v, _, _) in enumerate(rows) if v == u and final[i]]) for u in SESSIONS}
    g = torch.tensor([1.0 - mu[u] for u, _, _ in rows], dtype=torch.float32)
    batch = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask},
        non_tensors={"uid": np.array([u for u, _, _ in rows], dtype=object)},
    )
    return batch, [f"{u}_{s}_{k}" for u, s, k in rows], g


def _multi(function, estimator: str, gamma: float) -> torch.Tensor:
    batch, keys, _ = _multi_trajectory_batch()
    config = OmegaConf.create({"adv_estimator": estimator, "fgrpo_gamma": gamma, "norm_adv_by_std_in_grpo": True})
    out = function(batch, batch_keys=keys, adv_estimator=estimator, num_repeat=8, config=config)
    return out.batch["advantages"]


def test_fgrpo_is_grpo_times_g_on_the_multi_trajectory_path():
    pytest.importorskip("transfer_queue", reason="verl's v1 trainer needs TransferQueue (the [verl] extra has it)")
    from verl.trainer.ppo.v1 import trainer_base, utils

    multi = utils.compute_advantage_for_multi_trajectories
    assert trainer_base.compute_advantage_for_multi_trajectories is multi  # what the v1 trainer calls
    _, _, g = _multi_trajectory_batch()
    grpo = _multi(multi, "grpo", 0.0)
    assert torch.equal(_multi(multi, "fgrpo", 0.0), grpo)
    fgrpo = _multi(multi, "fgrpo", 1.0)
    diff = (fgrpo - grpo * g[:, None]).abs().max().item()
    print(f"multi-trajectory path: max |fgrpo - grpo * g| = {diff:.3g}")
    assert diff <= 1e-7 and (fgrpo - grpo).abs().max().item() > 0.1
    # verl's own function, unwrapped, sends fgrpo over every output: not GRPO even at gamma = 0
    unwrapped = (_multi(multi.__wrapped__, "fgrpo", 0.0) - grpo).abs().max().item()
    print(f"without the wrap: max |fgrpo(gamma=0) - grpo| = {unwrapped:.3g}")
    assert unwrapped > 0.05


# --- reward transforms (DS-GRPO) around compute_advantage ---------------------------------------------------

DS = {"reward_transform": "differential-smoothing", "reward_transform_coef": 0.1}


def _with_logprobs(batch: DataProto, seed: int = 0) -> DataProto:
    """Add old_log_probs: negative inside the response, junk (-9) outside it, which the transform must ignore."""
    mask = batch.batch["response_mask"]
    logp = -torch.from_numpy(np.random.default_rng(seed).uniform(0.05, 1.5, tuple(mask.shape))).float()
    batch.batch["old_log_probs"] = torch.where(mask > 0, logp, torch.full_like(logp, -9.0))
    return batch


def _ds_batch() -> DataProto:
    """Two groups of 4: p scores 1, 1, 0, 0 and q 1, 1, 1, 1, with known old log-probs (T = 4)."""
    lengths = torch.tensor([3, 4, 2, 4, 1, 2, 3, 4])
    mask = (torch.arange(4)[None, :] < lengths[:, None]).float()
    rewards = torch.zeros(8, 4)
    rewards[torch.arange(8), lengths - 1] = torch.tensor([1.0, 1, 0, 0, 1, 1, 1, 1])
    logp = torch.tensor(
        [
            [-0.2, -0.3, -0.5, -7.0],  # sum over the mask -1.0
            [-1.0, -1.0, -0.5, -0.5],  # -3.0
            [-0.4, -0.4, -7.0, -7.0],  # incorrect: no bonus
            [-0.1, -0.1, -0.1, -0.1],  # incorrect
            [-1.0, -7.0, -7.0, -7.0],  # -1.0
            [-1.5, -0.5, -7.0, -7.0],  # -2.0
            [-0.25, -0.125, -0.125, -7.0],  # -0.5
            [-0.5, -0.5, -0.25, -0.25],  # -1.5
        ]
    )
    uid = np.array(["p"] * 4 + ["q"] * 4, dtype=object)
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask, "old_log_probs": logp},
        non_tensors={"uid": uid},
    )


def _grpo_by_hand(scores: list[float], group: list[str], mask: torch.Tensor) -> torch.Tensor:
    """verl's GRPO formula: (r - group mean) / (Bessel std + 1e-6), on every response token."""
    r, group = np.array(scores), np.array(group)
    adv = np.array([(r[i] - r[group == g].mean()) / (r[group == g].std(ddof=1) + 1e-6) for i, g in enumerate(group)])
    return torch.tensor(adv, dtype=torch.float32)[:, None] * mask


def test_ds_grpo_advantages_by_hand():
    batch = _ds_batch()
    task = batch.batch["token_level_rewards"]
    kept = task.clone()
    out = compute_advantage(batch, adv_estimator="grpo", config=OmegaConf.create(DS))
    # r - 0.1 * log pi_old(y) for the correct rollouts (sequence log-probs -1, -3 | -1, -2, -0.5, -1.5)
    ds_scores = [1.1, 1.3, 0.0, 0.0, 1.1, 1.2, 1.05, 1.15]
    expected = _grpo_by_hand(ds_scores, ["p"] * 4 + ["q"] * 4, batch.batch["response_mask"])
    print(f"DS-GRPO by hand: {expected[:, 0].tolist()}")
    torch.testing.assert_close(out.batch["advantages"], expected, rtol=1e-5, atol=1e-6)
    assert expected[4:].abs().max() > 0.3  # the all-correct group q is no longer silent
    assert out.batch["token_level_rewards"] is task and torch.equal(task, kept)  # the task's rewards, restored

    # fgrpo under DS: the DS advantages times g, X counted over the task's rewards (p: 2 of 4, q: 4 of 4)
    config = OmegaConf.create({**DS, "fgrpo_gamma": 1.0})
    fgrpo = compute_advantage(_ds_batch(), adv_estimator="fgrpo", config=config).batch["advantages"]
    g = torch.tensor([0.5] * 4 + [0.0] * 4)[:, None]
    torch.testing.assert_close(fgrpo, expected * g, rtol=1e-5, atol=1e-6)


def test_transformed_token_rewards_keep_the_other_tokens():
    from tailmiss.integrations.verl import transformed_token_rewards

    batch = _ds_batch()
    batch.batch["token_level_rewards"][:, 0] += 0.25  # a per-token shaping term before the outcome token
    config = OmegaConf.create({**DS, "fgrpo_success_threshold": 1.0})
    out = transformed_token_rewards(batch, config)
    before = batch.batch["token_level_rewards"]
    changed = (out != before).nonzero().tolist()
    assert changed == [[0, 2], [1, 3], [4, 0], [5, 1], [6, 2], [7, 3]]  # the correct rows' last valid token only
    bonus = torch.tensor([0.1, 0.3, 0.0, 0.0, 0.1, 0.2, 0.05, 0.15])
    torch.testing.assert_close(out.sum(-1), before.sum(-1) + bonus, rtol=0, atol=1e-6)


@pytest.mark.parametrize("estimator", ["grpo", "fgrpo", "rloo"])
def test_no_transform_or_coef_zero_is_verls_result(estimator):
    from verl.trainer.ppo import ray_trainer

    wrapped = ray_trainer.compute_advantage
    plain = {"fgrpo_gamma": 0.5, "norm_adv_by_std_in_grpo": True}
    verl_own = wrapped.__wrapped__(_with_logprobs(_batch()), adv_estimator=estimator, config=OmegaConf.create(plain))
    for extra in ({}, {"reward_transform": None}, {**DS, "reward_transform_coef": 0.0}):
        config = OmegaConf.create({**plain, **extra})
        out = wrapped(_with_logprobs(_batch()), adv_estimator=estimator, config=config)
        assert torch.equal(out.batch["advantages"], verl_own.batch["advantages"]), extra
    ds = wrapped(_with_logprobs(_batch()), adv_estimator=estimator, config=OmegaConf.create({**plain, **DS}))
    assert (ds.batch["advantages"] - verl_own.batch["advantages"]).abs().max() > 0.01  # and DS changes them


def test_compute_advantage_is_wrapped_once_where_the_trainers_call_it():
    from verl.trainer.ppo import ray_trainer

    from tailmiss.integrations import verl as plugin

    wrapped = ray_trainer.compute_advantage
    assert wrapped is compute_advantage and wrapped._tailmiss_reward_transform  # the name RayPPOTrainer.fit calls
    assert plugin._with_reward_transform(wrapped) is wrapped and wrapped.__name__ == "compute_advantage"
    plugin._wrap_compute_advantage()  # idempotent
    assert ray_trainer.compute_advantage is wrapped and not hasattr(wrapped.__wrapped__, "__wrapped__")
    try:
        from verl.trainer.ppo.v1 import utils
    except ImportError:
        return
    assert utils.compute_advantage is wrapped  # what the v1 trainer's multi-trajectory path calls


def test_hydra_keys_set_the_transform():
    import os

    import verl
    from hydra import compose, initialize_config_dir

    from tailmiss.integrations.verl import transformed_token_rewards

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    overrides = [
        "algorithm.adv_estimator=grpo",
        "+algorithm.reward_transform=differential-smoothing",
        "+algorithm.reward_transform_coef=0.05",
    ]
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=overrides)
    out = compute_advantage(_with_logprobs(_batch()), adv_estimator=cfg.algorithm.adv_estimator, config=cfg.algorithm)
    manual = _with_logprobs(_batch())
    manual.batch["token_level_rewards"] = transformed_token_rewards(
        manual, OmegaConf.create({**DS, "reward_transform_coef": 0.05})
    )
    expected = compute_advantage.__wrapped__(manual, adv_estimator="grpo", config=OmegaConf.create({}))
    assert torch.equal(out.batch["advantages"], expected.batch["advantages"])
    assert (out.batch["advantages"] - _advantages("grpo", OmegaConf.create({}))).abs().max() > 0.01


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"reward_transform": "smoothing"}, r"algorithm\.reward_transform .*'smoothing'"),
        ({"reward_transform_coef": -0.1}, r"algorithm\.reward_transform_coef .*-0\.1"),
        ({"reward_transform_coef": float("nan")}, r"algorithm\.reward_transform_coef"),
        ({"reward_transform": None, "reward_transform_coef": 0.1}, r"reward_transform_coef = 0\.1 needs"),
    ],
)
def test_bad_transform_settings_are_refused(extra, match):
    batch = _with_logprobs(_batch())
    task = batch.batch["token_level_rewards"]
    with pytest.raises(ValueError, match=match):
        compute_advantage(batch, adv_estimator="grpo", config=OmegaConf.create({**DS, **extra}))
    assert batch.batch["token_level_rewards"] is task


def test_ds_needs_old_log_probs():
    batch = _batch()
    with pytest.raises(ValueError, match=r"'differential-smoothing' needs the rollouts' old_log_probs"):
        compute_advantage(batch, adv_estimator="grpo", config=OmegaConf.create(DS))
    assert "advantages" not in batch.batch.keys()


def test_ds_on_the_multi_trajectory_path():
    """DS is per rollout, so transforming every row first, then verl's path without DS, is the same thing."""
    pytest.importorskip("transfer_queue", reason="verl's v1 trainer needs TransferQueue (the [verl] extra has it)")
    from verl.trainer.ppo.v1 import utils

    from tailmiss.integrations.verl import transformed_token_rewards

    batch, keys, _ = _multi_trajectory_batch()
    # fgrpo at gamma = 1: a threshold of 0.5 counts X alike over the task's and the transformed rewards
    plain = {"norm_adv_by_std_in_grpo": True, "fgrpo_gamma": 1.0, "fgrpo_success_threshold": 0.5}
    config = OmegaConf.create({**plain, **DS})
    multi = utils.compute_advantage_for_multi_trajectories
    for estimator in ("grpo", "fgrpo"):
        data = _with_logprobs(batch.select_idxs(np.arange(len(batch))))  # a copy
        out = multi(data, batch_keys=keys, adv_estimator=estimator, config=config)
        manual = _with_logprobs(batch.select_idxs(np.arange(len(batch))))
        manual.batch["token_level_rewards"] = transformed_token_rewards(manual, config)
        expected = multi(manual, batch_keys=keys, adv_estimator=estimator, config=OmegaConf.create(plain))
        without = multi(
            _with_logprobs(batch.select_idxs(np.arange(len(batch)))),
            batch_keys=keys,
            adv_estimator=estimator,
            config=OmegaConf.create(plain),
        )
        assert torch.equal(out.batch["advantages"], expected.batch["advantages"]), estimator
        assert (out.batch["advantages"] - without.batch["advantages"]).abs().max() > 0.01  # DS changed them
        assert torch.equal(out.batch["token_level_rewards"], batch.batch["token_level_rewards"])  # restored
