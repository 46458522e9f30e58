"""The first-order attribution of one RL step to its groups (:mod:`tailmiss.experiments.attribution`): the parts add
up to the batch's, the focal weight scales each group's part, a small gradient step on one group moves the target by
what its part predicts; as a unit of the store it is saved, reused and keyed by the runs and batches it reads."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch

from tailmiss import objectives
from tailmiss.experiments.attribution import (
    BUCKETS,
    attribute,
    attribution_name,
    bucket,
    group_contributions,
    log_correct_mass,
    run_attribution,
    sample_batch,
)
from tailmiss.experiments.units import attribution_unit
from tailmiss.llm.config import RLConfig
from tailmiss.llm.model import GPT, ModelConfig, answer_logprobs
from tailmiss.llm.rl_update import advantages
from tailmiss.llm.tasks.narrowing import NarrowingTask
from tailmiss.options import RunOptions
from tailmiss.studies.narrowing.attribution_text import ARMS, attribution_lines
from tailmiss.studies.narrowing.data import attribution_table

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
    t = attribution_table(rows.assign(checkpoint="SFT model", seed=0, as_archived=pd.array([True] * len(rows))))
    assert len(t) == 2
    sums = t.iloc[0]
    assert sums["minority_groups"] + sums["rest_groups"] == pytest.approx(sums["total"])
    assert sums["rest_rare"] + sums["rest_frequent"] == pytest.approx(sums["rest_groups"])  # silent groups add 0


def test_the_unit_is_saved_reused_and_keyed_by_the_runs_and_batches_it_reads(trained_narrowing):
    root, result = trained_narrowing
    sweep = result.config
    first = run_attribution(sweep, root, ARMS, (0,), batches=1, sft_batches=1, options=RunOptions(progress=False))
    groups, g = first.groups, sweep.rl.prompts_per_step
    assert set(groups["checkpoint"]) == {"SFT model", f"step {sweep.rl.steps}"}
    assert len(groups) == (2 + 2) * g  # one SFT batch read under both arms, one batch of each run
    runs = {cfg.name for v, s, cfg in sweep.runs() if v.label in ARMS and s == 0}
    assert first.as_archived == dict.fromkeys(sorted(runs))  # no archive holds these runs
    sft = groups[groups["checkpoint"] == "SFT model"]
    assert (sft.groupby("label")["correct"].apply(list).map(tuple).nunique()) == 1  # both arms read the same rollouts
    stored = root / attribution_name(sweep) / "groups.csv"
    when = stored.stat().st_mtime_ns
    again = run_attribution(sweep, root, ARMS, (0,), batches=1, sft_batches=1, options=RunOptions(progress=False))
    assert stored.stat().st_mtime_ns == when  # reused, not recomputed
    pd.testing.assert_frame_equal(again.groups, groups)
    other = run_attribution(sweep, root, ARMS, (0, 1), batches=1, options=RunOptions(progress=False))
    assert other.seeds == (0, 1) and set(other.groups["checkpoint"]) == {f"step {sweep.rl.steps}"}
    assert len(other.groups) == 4 * g
    lines = "\n".join(attribution_lines(attribution_table(groups.assign(as_archived=pd.NA))))
    assert "1 batches at the SFT model" in lines and "seeds 0" in lines


def test_the_unit_refuses_runs_the_sweep_lacks_and_names_what_it_reads(trained_narrowing):
    root, result = trained_narrowing
    sweep = result.config
    with pytest.raises(ValueError, match="GRPO N=3"):
        run_attribution(sweep, root, ("GRPO N=3",), (0,), batches=1)
    with pytest.raises(ValueError, match=r"\[7\]"):
        run_attribution(sweep, root, ARMS, (7,), batches=1)
    with pytest.raises(ValueError, match="batches"):
        run_attribution(sweep, root, ARMS, (0,), batches=0)
    spec = attribution_unit(sweep, ARMS, (0,), 1, 1)
    runs = {cfg.name for v, s, cfg in sweep.runs() if v.label in ARMS and s == 0}
    assert spec.kind == "attribution" and spec.weights and spec.reads[0] == sweep.sft.name
    assert set(spec.reads[1:]) == runs and len(runs) == 2
    assert spec.key == {"labels": list(ARMS), "seeds": [0], "batches": 1, "sft_batches": 1}


def test_the_part_counts_active_groups_and_says_which_final_models_are_the_archived_runs():
    rows = []
    for label in ARMS:
        for seed, archived in ((0, True), (1, False)):
            for group, (kind, correct, value) in enumerate((("minority", 1, 0.5), ("rest", 6, -2.0 + seed * 3))):
                rows.append(
                    {
                        "checkpoint": "step 400",
                        "label": label,
                        "seed": seed,
                        "batch": 0,
                        "group": group,
                        "type": kind,
                        "correct": correct,
                        "bucket": bucket(correct, 8),
                        "minority": value,
                        "as_archived": archived,
                    }
                )
    t = attribution_table(pd.DataFrame(rows).astype({"as_archived": "boolean"}))
    assert list(t["groups"]) == [2] * 4 and list(t["batches"]) == [1] * 4
    assert t["rest_frequent"].tolist() == t["rest_groups"].tolist()  # 6 of 8: the frequent bucket
    text = "\n".join(attribution_lines(t))
    assert "per batch of 2 prompts" in text
    assert list(t["active"]) == [2.0] * 4  # X = 1 and X = 6 of 8: both groups carry an advantage
    assert "as few as 2.0 of 2 per batch" in text and "| step 400 | GRPO N=8 | 2.0 |" in text
    assert "2 of 4 came out bit for bit as the archived runs" in text
