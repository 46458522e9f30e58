"""The first-order attribution of one RL step to its groups (:mod:`tailmiss.studies.narrowing.attribution`): the parts
add up to the batch's, the focal weight scales each group's part, and a small gradient step on one group moves the
target by what its part predicts."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch

from tailmiss import objectives
from tailmiss.llm.config import RLConfig
from tailmiss.llm.model import GPT, ModelConfig, answer_logprobs
from tailmiss.llm.rl_update import advantages
from tailmiss.llm.tasks.narrowing import NarrowingTask
from tailmiss.studies.narrowing.attribution import (
    BUCKETS,
    attribute,
    attribution_table,
    bucket,
    group_contributions,
    log_correct_mass,
    sample_batch,
)

TASK = NarrowingTask(conflict_share=0.25, conflict_strength=0.5)


def _model(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    cfg = ModelConfig(n_layer=1, n_head=2, n_embd=16)
    return GPT(cfg, len(TASK.vocab), TASK.prompt_len + TASK.max_answer_len).double()


def _cfg(gamma: float = 0.0) -> RLConfig:
    return RLConfig(name="attr", gamma=gamma, group_size=4, prompts_per_step=6)


def _held():
    prompts = TASK.prompts("test", 24, seed=3, distinct=True)
    mask = TASK.minority_mask(prompts)
    return {"minority": [p for p, m in zip(prompts, mask) if m], "rest": [p for p, m in zip(prompts, mask) if not m]}


def _flat(value, params):
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(value, params)])


def _mixed(batch):
    """The batch with rewards set so that every success count 0..4 appears (an untrained model rarely succeeds; the
    attribution's arithmetic does not read where rewards come from)."""
    rewards = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 1]])
    return dataclasses.replace(batch, rewards=rewards.double())


def test_buckets():
    assert [bucket(x, 8) for x in (0, 1, 3, 4, 7, 8)] == [
        BUCKETS[0],
        BUCKETS[1],
        BUCKETS[1],
        BUCKETS[2],
        BUCKETS[2],
        BUCKETS[3],
    ]


def test_the_groups_parts_add_up_to_the_batch_and_the_focal_weight_scales_each():
    model, cfg = _model(), _cfg()
    params = list(model.parameters())
    target = _flat(log_correct_mass(model, TASK, _held()["minority"]), params).double()
    batch = _mixed(sample_batch(model, TASK, cfg, TASK.prompts("train", 6, seed=1), seed=1))
    parts = group_contributions(model, cfg, batch, {"t": target})
    # the batch's loss in one piece, as the trainer's first mini-batch computes it (ratio 1)
    adv, _ = advantages(batch.rewards, cfg)
    logp = answer_logprobs(model, batch.prompt_ids, batch.answers, cfg.temperature)
    loss = objectives.policy_loss(cfg.method, logp, logp.detach(), adv.reshape(-1, 1), batch.mask, cfg.resolved_loss())
    whole = -float(torch.dot(target, _flat(loss, params).double()))
    assert whole != 0 and (parts["t"] != 0).sum() == 4  # the silent groups (X = 0, N) add nothing
    assert parts["t"].sum() == pytest.approx(whole, rel=1e-9, abs=1e-12)
    # F-GRPO at the same model and batch: each group's part times its focal weight
    focal = group_contributions(model, _cfg(gamma=1.0), batch, {"t": target})
    assert torch.allclose(torch.tensor(focal["t"].to_numpy()), torch.tensor((parts["t"] * focal["focal"]).to_numpy()))
    assert ((focal["focal"] - (1 - parts["correct"] / 4)).abs() < 1e-12).all()


def test_a_small_step_on_one_group_moves_the_target_by_its_part():
    model, cfg = _model(1), _cfg()
    params = list(model.parameters())
    held = _held()["minority"]
    before = log_correct_mass(model, TASK, held)
    target = _flat(before, params).double()
    batch = _mixed(sample_batch(model, TASK, cfg, TASK.prompts("train", 6, seed=2), seed=2))
    parts = group_contributions(model, cfg, batch, {"t": target})
    j = int(parts["t"].abs().idxmax())
    assert abs(parts.loc[j, "t"]) > 0
    # the group's loss gradient, then a plain step of size eta against it
    n, eta = cfg.group_size, 1e-3
    adv, _ = advantages(batch.rewards, cfg)
    idx = slice(j * n, (j + 1) * n)
    logp = answer_logprobs(model, batch.prompt_ids[idx], batch.answers[idx], cfg.temperature)
    loss_cfg = cfg.resolved_loss()
    agg = objectives.AGGREGATIONS[loss_cfg.aggregation]
    share = int(agg.denominator(batch.mask[idx], loss_cfg)) / int(agg.denominator(batch.mask, loss_cfg))
    part = objectives.policy_loss(cfg.method, logp, logp.detach(), adv.reshape(-1, 1)[idx], batch.mask[idx], loss_cfg)
    grads = torch.autograd.grad(part * share, params)
    with torch.no_grad():
        for p, g in zip(params, grads):
            p -= eta * g
    moved = float((log_correct_mass(model, TASK, held) - before).detach())
    assert moved == pytest.approx(eta * parts.loc[j, "t"], rel=0.05)


def test_attribute_labels_every_group_and_the_table_splits_by_type():
    rows = attribute(_model(2), TASK, {"GRPO": _cfg(), "F-GRPO": _cfg(1.0)}, _held(), batches=2, seed=4)
    assert len(rows) == 2 * 2 * 6 and set(rows["type"]) <= {"minority", "rest"}
    assert set(rows["label"]) == {"GRPO", "F-GRPO"} and set(rows["bucket"]) <= set(BUCKETS)
    t = attribution_table(pd.concat([rows.assign(checkpoint="SFT model", seed=0)]))
    assert len(t) == 2
    sums = t.iloc[0]
    assert sums["minority_groups"] + sums["rest_groups"] == pytest.approx(sums["total"])
    assert sums["rest_rare"] + sums["rest_frequent"] == pytest.approx(sums["rest_groups"])  # silent groups add 0
