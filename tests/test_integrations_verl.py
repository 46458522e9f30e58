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
    with pytest.raises(ValueError, match=r"fgrpo_success_threshold"):
        _advantages("fgrpo", OmegaConf.create({"fgrpo_gamma": 1.0}), _batch(shaped))
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
