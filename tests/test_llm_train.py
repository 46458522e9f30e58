"""Tests of the SFT and RL loops (:mod:`tailmiss.llm.sft`, :mod:`tailmiss.llm.train`) and their run folders.

Every run is tiny and on the CPU. The RL tests start from one shared SFT run
(module fixture) trained just enough that rewards are mixed (mu_pos about 0.2),
so that advantages, clipping and the KL terms are not all zero.
"""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from tailmiss.experiments.sweep import Variant
from tailmiss.llm import LoadedRun, MazeTask, ModelConfig, MultiSolutionTask, RLConfig, SFTConfig, train_rl, train_sft
from tailmiss.llm.optim import SFT_OPTIM, OptimConfig
from tailmiss.objectives import AGGREGATIONS, POLICY_LOSSES, register_aggregation, register_policy_loss
from tailmiss.options import RunOptions

TINY_SFT = SFTConfig(
    task=MultiSolutionTask(num_digits=2),
    model=ModelConfig(1, 2, 16),
    steps=6,
    batch_size=8,
    eval_every=3,
    eval_prompts=4,
    checkpoint_every=2,
    log_every=1,
)
# group_size 8 on a mu_pos ~ 0.2 start: most steps have groups with mixed rewards
TINY_RL = RLConfig(group_size=8, prompts_per_step=4, steps=4, eval_every=2, eval_prompts=4, checkpoint_every=2)
RUN_FILES = {"config.toml", "history.csv", "meta.json", "checkpoint.pt"}


class Interrupt:
    """``on_step`` callback that raises ``KeyboardInterrupt`` after step ``at``."""

    def __init__(self, at: int):
        self.at = at

    def __call__(self, step: int) -> None:
        if step == self.at:
            raise KeyboardInterrupt


def _history(path) -> pd.DataFrame:
    return pd.read_csv(path / "history.csv")


def _meta(path) -> dict:
    return json.loads((path / "meta.json").read_text())


def _state(path) -> dict:
    return torch.load(path / "checkpoint.pt", map_location="cpu", weights_only=False)


def _assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_sft_run(tmp_path_factory):
    """``TINY_SFT`` run uninterrupted (read only: copy it before changing anything)."""
    return train_sft(TINY_SFT, tmp_path_factory.mktemp("tiny") / "run", device="cpu", progress=False)


RESUME_RL = TINY_RL.replace(
    minibatches=2, optim=OptimConfig(lr=1e-3), dynamic_sampling=True, method="dapo", max_refills=1
)


@pytest.fixture(scope="module")
def resume_rl_run(sft_run, tmp_path_factory):
    """``RESUME_RL`` run uninterrupted from ``sft_run``."""
    return train_rl(RESUME_RL, sft_run, tmp_path_factory.mktemp("rl-a") / "run", device="cpu", progress=False)


@pytest.fixture(scope="module")
def rl_run(sft_run, tmp_path_factory):
    return train_rl(TINY_RL, sft_run, tmp_path_factory.mktemp("rl") / "run", device="cpu", progress=False)


# --- SFT ------------------------------------------------------------------------------------


def test_sft_tiny_run_writes_run_folder(tiny_sft_run):
    out = tiny_sft_run
    assert out.name == "run"
    assert {p.name for p in out.iterdir() if not p.name.startswith(".")} == RUN_FILES
    assert SFTConfig.from_toml(out / "config.toml") == TINY_SFT
    meta = _meta(out)
    assert meta["complete"] is True
    assert meta["kind"] == "sft" and meta["steps"] == 6 and meta["resumed_from"] == 0
    assert meta["params"] > 0 and meta["device"] == "cpu"

    h = _history(out)
    assert h["step"].tolist() == list(range(7))
    assert {"step", "loss", "lr", "grad_norm", "mu_pos", "off_format"} <= set(h.columns)
    assert h["loss"].iloc[:6].notna().all() and np.isfinite(h["loss"].iloc[:6]).all()
    assert pd.isna(h["loss"].iloc[6])  # the final row is the evaluation after the last update
    on_eval = h["step"].isin([0, 3, 6])
    assert h.loc[on_eval, ["mu_pos", "off_format"]].notna().all().all()
    assert h.loc[~on_eval, ["mu_pos", "off_format"]].isna().all().all()
    assert ((h.loc[on_eval, "mu_pos"] >= 0) & (h.loc[on_eval, "mu_pos"] <= 1)).all()

    run = LoadedRun(out)
    assert run.kind == "sft" and run.step == 6 and run.config == TINY_SFT and run.task == TINY_SFT.task
    assert run.reference is None
    # the checkpoint carries the history that history.csv shows
    pd.testing.assert_frame_equal(pd.DataFrame(_state(out)["history"]), h, check_dtype=False, rtol=1e-9)


def test_sft_log_every(tmp_path):
    cfg = TINY_SFT.replace(steps=7, log_every=3, eval_every=5)
    h = _history(train_sft(cfg, tmp_path / "sft", device="cpu", progress=False))
    # logged steps 0, 3, 6 plus the eval steps 0, 5 and the final evaluation at 7
    assert h["step"].tolist() == [0, 3, 5, 6, 7]


def test_sft_loss_decreases(sft_run):
    h = _history(sft_run)
    loss = h.dropna(subset=["loss"])
    assert len(loss) >= 5
    assert loss["loss"].iloc[-1] < loss["loss"].iloc[0] - 0.5
    mu = h.dropna(subset=["mu_pos"])
    assert mu["step"].tolist() == [0, 30, 60]
    assert mu["mu_pos"].iloc[-1] > mu["mu_pos"].iloc[0]
    assert _meta(sft_run)["complete"] is True


def test_sft_rejects_rl_config(tmp_path):
    with pytest.raises(ValueError, match="SFTConfig"):
        train_sft(TINY_RL, tmp_path / "x", device="cpu", progress=False)
    assert not (tmp_path / "x").exists()


# --- RL ---------------------------------------------------------------------------------------


def test_rl_tiny_run_history_and_meta(rl_run, sft_run):
    cfg = TINY_RL
    assert {p.name for p in rl_run.iterdir() if not p.name.startswith(".")} == RUN_FILES
    assert RLConfig.from_toml(rl_run / "config.toml") == cfg
    h = _history(rl_run)
    assert h["step"].tolist() == list(range(cfg.steps + 1))
    assert {"step", "reward_mean", "frac_zero_std", "entropy", "response_len"} <= set(h.columns)
    assert {"mu_pos", "retained_mass", "dnll_rare", "kl_ref", "loss", "clip_frac", "approx_kl"} <= set(h.columns)
    train_rows = h[h["step"] < cfg.steps]
    assert train_rows[["reward_mean", "frac_zero_std", "entropy", "response_len"]].notna().all().all()
    assert ((train_rows["reward_mean"] >= 0) & (train_rows["reward_mean"] <= 1)).all()
    assert ((train_rows["response_len"] >= 1) & (train_rows["response_len"] <= TINY_SFT.task.max_answer_len)).all()

    on_eval = h["step"].isin([0, 2, 4])
    assert h.loc[on_eval, ["mu_pos", "retained_mass", "dnll_rare"]].notna().all().all()
    assert h.loc[~on_eval, ["mu_pos", "retained_mass", "dnll_rare"]].isna().all().all()
    first = h.iloc[0]
    assert first["retained_mass"] == 1.0
    assert first["dnll_rare"] == 0.0

    per_step = cfg.prompts_per_step * cfg.group_size
    assert train_rows["rollouts"].tolist() == [per_step * (s + 1) for s in range(cfg.steps)]
    assert h["rollouts"].iloc[-1] == per_step * cfg.steps
    meta = _meta(rl_run)
    assert meta["complete"] is True and meta["kind"] == "rl"
    assert meta["rollouts"] == per_step * cfg.steps
    assert meta["tokens"] == h["tokens"].iloc[-1] > 0
    assert meta["elapsed_s"] >= 0
    assert meta["method"] == "grpo" and meta["group_size"] == 8 and meta["steps"] == 4
    assert meta["init"] == str(sft_run)


def test_rl_start_has_mixed_rewards(rl_run):
    # guard for the tests below: the fixture's SFT model must give non-degenerate groups
    h = _history(rl_run)
    assert (h["frac_zero_std"].dropna() < 1).any()


def test_rl_checkpoint_keeps_the_sft_reference(rl_run, sft_run):
    run = LoadedRun(rl_run)
    assert run.kind == "rl" and run.step == TINY_RL.steps and run.config == TINY_RL
    sft = LoadedRun(sft_run)
    _assert_same_weights(run.reference.state_dict(), sft.model.state_dict())


def _finite(h: pd.DataFrame, cols) -> None:
    rows = h[h["step"] < h["step"].max()]
    for col in cols:
        values = rows[col].to_numpy(dtype=float)
        assert np.isfinite(values).all(), (col, values)


@pytest.mark.parametrize(
    "changes",
    [
        {"method": "grpo"},
        {"method": "dapo"},
        {"method": "cispo"},
        {"method": "drgrpo"},
        {"method": "grpo", "gamma": 1.0},
        {"method": "cispo", "gamma": 1.0, "minibatches": 2},
    ],
    ids=["grpo", "dapo", "cispo", "drgrpo", "grpo-gamma1", "cispo-gamma1-k2"],
)
def test_each_method_runs(sft_run, tmp_path, changes):
    cfg = TINY_RL.replace(steps=2, eval_every=2, **changes)
    out = train_rl(cfg, sft_run, tmp_path / "rl", device="cpu", progress=False)
    h = _history(out)
    assert h["step"].tolist() == [0, 1, 2]
    _finite(h, ["loss", "clip_frac", "approx_kl", "grad_norm", "entropy", "kl_ref", "reward_mean"])
    assert _meta(out)["method"] == cfg.method
    if cfg.gamma > 0:
        focal = h["focal_mean"].dropna()
        assert ((focal > 0) & (focal <= 1)).all()
    else:
        assert (h["focal_mean"].dropna() == 1).all()


@pytest.fixture
def reinforce_loss():
    """A REINFORCE token loss -A log pi with its own aggregation, registered from outside the package."""
    calls: list[dict] = []

    @register_aggregation("test-seq-sum-mean", denominator=lambda mask, config: mask.shape[0])
    def seq_sum_mean(per_token, mask, config=None):  # sum over each sequence's tokens, mean over sequences
        return torch.where(mask.bool(), per_token, 0.0).sum() / max(mask.shape[0], 1)

    @register_policy_loss("test-reinforce", advantage="mean", aggregation="test-seq-sum-mean")
    def reinforce(logp, old_logp, adv, mask, config):
        per_token = -adv * logp
        calls.append(dict(per_token=per_token.detach().clone(), mask=mask.clone(), config=config))
        return per_token

    yield calls
    POLICY_LOSSES.remove("test-reinforce")
    AGGREGATIONS.remove("test-seq-sum-mean")


def test_registered_loss_trains(sft_run, tmp_path, reinforce_loss):
    cfg = TINY_RL.replace(method="test-reinforce", steps=2, eval_every=2)
    assert cfg.advantage_mode == "mean"  # the registration's advantage mode
    assert Variant("test-reinforce", 0.5, 8).method == "test-reinforce"  # sweeps accept it too
    out = train_rl(cfg, sft_run, tmp_path / "rl", device="cpu", progress=False)
    h = _history(out)
    assert _meta(out)["method"] == "test-reinforce"
    assert RLConfig.from_toml(out / "config.toml") == cfg
    # one mini-batch per step, so one kernel call per step; each with the mask and the registration's settings
    assert len(reinforce_loss) == cfg.steps
    rows = cfg.prompts_per_step * cfg.group_size
    for call in reinforce_loss:
        assert call["mask"].dtype == torch.bool and call["mask"].shape == call["per_token"].shape
        assert call["mask"].shape[0] == rows and call["mask"].any()
        assert call["config"].aggregation == "test-seq-sum-mean"
    # the logged loss is the kernel's per-token loss reduced by the registered aggregation
    for step, call in enumerate(reinforce_loss):
        expected = float(torch.where(call["mask"], call["per_token"], 0.0).sum() / rows)
        assert h.loc[h["step"] == step, "loss"].item() == pytest.approx(expected, rel=1e-6, abs=1e-9)
    assert (h["clip_frac"].dropna() == 0).all()  # a kernel without a clip reports none


def test_unregistered_method_is_refused():
    with pytest.raises(ValueError, match="method must be one of 'grpo', 'dapo', 'cispo', 'drgrpo'"):
        RLConfig(method="test-reinforce")


def test_dapo_dynamic_sampling(sft_run, tmp_path):
    cfg = TINY_RL.replace(method="dapo", dynamic_sampling=True, max_refills=2, steps=3, eval_every=3)
    h = _history(train_rl(cfg, sft_run, tmp_path / "rl", device="cpu", progress=False))
    rows = h[h["step"] < cfg.steps]
    assert {"refills", "groups"} <= set(h.columns)
    assert ((rows["groups"] >= 0) & (rows["groups"] <= cfg.prompts_per_step)).all()
    assert ((rows["refills"] >= 0) & (rows["refills"] <= cfg.max_refills)).all()
    # every round draws prompts_per_step groups
    per_round = cfg.prompts_per_step * cfg.group_size
    spent = np.diff(np.concatenate([[0], rows["rollouts"].to_numpy()]))
    assert spent.tolist() == ((rows["refills"] + 1) * per_round).tolist()
    # a step that kept fewer groups than asked must have used every refill
    short = rows["groups"] < cfg.prompts_per_step
    assert (rows.loc[short, "refills"] == cfg.max_refills).all()
    _finite(h, ["reward_mean", "frac_zero_std"])


@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning")
def test_dapo_keeps_no_group_without_crashing(sft_run, tmp_path):
    # near-greedy sampling makes every group's rollouts identical: all groups are filtered out
    cfg = TINY_RL.replace(method="dapo", dynamic_sampling=True, max_refills=1, steps=2, eval_every=2, top_p=1e-6)
    h = _history(train_rl(cfg, sft_run, tmp_path / "rl", device="cpu", progress=False))
    rows = h[h["step"] < cfg.steps]
    assert (rows["frac_zero_std"] == 1).all()
    assert (rows["groups"] == 0).all() and (rows["refills"] == cfg.max_refills).all()
    assert rows["loss"].isna().all() and rows["focal_mean"].isna().all()
    assert h["rollouts"].iloc[-1] == cfg.steps * (cfg.max_refills + 1) * cfg.prompts_per_step * cfg.group_size
    assert h["retained_mass"].iloc[-1] == pytest.approx(1.0, abs=1e-3)  # only weight decay moved the model


def test_one_minibatch_is_on_policy(sft_run, tmp_path):
    cfg = TINY_RL.replace(steps=2, eval_every=2, optim=OptimConfig(lr=1e-3))
    h = _history(train_rl(cfg, sft_run, tmp_path / "rl", device="cpu", progress=False))
    rows = h[h["step"] < cfg.steps]
    assert (rows["frac_zero_std"] < 1).any()
    assert (rows["approx_kl"] == 0).all()
    assert (rows["clip_frac"] == 0).all()


def test_two_minibatches_move_off_policy(sft_run, tmp_path):
    cfg = TINY_RL.replace(steps=2, eval_every=2, optim=OptimConfig(lr=1e-3), minibatches=2)
    h = _history(train_rl(cfg, sft_run, tmp_path / "rl", device="cpu", progress=False))
    _finite(h, ["clip_frac", "approx_kl", "loss"])
    rows = h[h["step"] < cfg.steps]
    assert ((rows["clip_frac"] >= 0) & (rows["clip_frac"] <= 1)).all()
    # the second mini-batch sees a policy the first one moved
    assert (rows["approx_kl"] != 0).any()


def test_kl_and_entropy_terms(sft_run, tmp_path):
    cfg = TINY_RL.replace(steps=2, eval_every=2, optim=OptimConfig(lr=1e-3), kl_coef=0.1, entropy_coef=0.01)
    h = _history(train_rl(cfg, sft_run, tmp_path / "rl", device="cpu", progress=False))
    _finite(h, ["loss", "kl_ref", "entropy", "grad_norm"])
    rows = h[h["step"] < cfg.steps]
    assert rows["kl_ref"].iloc[0] == 0.0  # the policy is the SFT model before the first update
    assert (rows["kl_ref"] >= 0).all()
    assert (rows["entropy"] > 0).all()


def test_rl_rejects_sft_config(sft_run, tmp_path):
    with pytest.raises(ValueError, match="RLConfig"):
        train_rl(TINY_SFT, sft_run, tmp_path / "x", device="cpu", progress=False)


def test_rl_init_must_be_an_sft_run(rl_run, tmp_path):
    with pytest.raises(ValueError, match="SFT"):
        train_rl(TINY_RL, rl_run, tmp_path / "x", device="cpu", progress=False)
    assert not (tmp_path / "x").exists()


def test_rl_missing_init(tmp_path):
    with pytest.raises(ValueError, match="nowhere"):
        train_rl(TINY_RL, tmp_path / "nowhere", tmp_path / "x", device="cpu", progress=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="config.toml"):
        train_rl(TINY_RL, tmp_path / "empty", tmp_path / "x", device="cpu", progress=False)
    assert not (tmp_path / "x").exists()


# --- run folders and resume -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "at", [0, 2, 3, 5], ids=["before-first-checkpoint", "after-checkpoint", "at-checkpoint", "last"]
)
def test_sft_resume_equals_uninterrupted(tiny_sft_run, tmp_path, at):
    a = tiny_sft_run
    with pytest.raises(KeyboardInterrupt):
        train_sft(TINY_SFT, tmp_path / "b", device="cpu", progress=False, on_step=Interrupt(at))
    assert not (tmp_path / "b" / "meta.json").exists()
    done = (at + 1) // TINY_SFT.checkpoint_every * TINY_SFT.checkpoint_every  # steps in the last checkpoint
    if done:
        assert _state(tmp_path / "b")["step"] == done
        partial = _history(tmp_path / "b")
        pd.testing.assert_frame_equal(partial, _history(a).iloc[: len(partial)][partial.columns])
    b = train_sft(TINY_SFT, tmp_path / "b", device="cpu", progress=False, resume=True)
    pd.testing.assert_frame_equal(_history(a), _history(b), check_exact=True)
    _assert_same_weights(_state(a)["model"], _state(b)["model"])
    assert _meta(b)["complete"] is True
    assert _meta(b)["resumed_from"] == done


@pytest.mark.parametrize("at", [1, 2], ids=["at-checkpoint", "after-checkpoint"])
def test_rl_resume_equals_uninterrupted(sft_run, resume_rl_run, tmp_path, at):
    cfg, a = RESUME_RL, resume_rl_run
    with pytest.raises(KeyboardInterrupt):
        train_rl(cfg, sft_run, tmp_path / "b", device="cpu", progress=False, on_step=Interrupt(at))
    assert _state(tmp_path / "b")["step"] == 2
    b = train_rl(cfg, sft_run, tmp_path / "b", device="cpu", progress=False, resume=True)
    pd.testing.assert_frame_equal(_history(a), _history(b), check_exact=True)
    sa, sb = _state(a), _state(b)
    _assert_same_weights(sa["model"], sb["model"])
    _assert_same_weights(sa["reference"], sb["reference"])
    meta_a, meta_b = _meta(a), _meta(b)
    assert meta_b["resumed_from"] == 2
    assert (meta_a["rollouts"], meta_a["tokens"]) == (meta_b["rollouts"], meta_b["tokens"])


def test_sft_resume_of_finished_run_changes_nothing(tiny_sft_run, tmp_path):
    out = tmp_path / "a"
    shutil.copytree(tiny_sft_run, out)
    before, weights = _history(out), _state(out)["model"]
    train_sft(TINY_SFT, out, device="cpu", progress=False, resume=True)
    _assert_same_weights(weights, _state(out)["model"])
    pd.testing.assert_frame_equal(before, _history(out), check_exact=True)


def test_rl_resume_of_finished_run_changes_nothing(rl_run, sft_run, tmp_path):
    out = tmp_path / "rl"
    shutil.copytree(rl_run, out)
    before = _history(out)
    train_rl(TINY_RL, sft_run, out, device="cpu", progress=False, resume=True)
    pd.testing.assert_frame_equal(before, _history(out), check_exact=True)


def _interrupted_rl(sft_run, out, cfg=TINY_RL):
    with pytest.raises(KeyboardInterrupt):
        train_rl(cfg, sft_run, out, device="cpu", progress=False, on_step=Interrupt(1))
    return out


def test_rl_resume_with_other_init_is_refused(sft_run, rl_run, tmp_path):
    other = train_sft(
        TINY_SFT.replace(model=ModelConfig(1, 2, 32), seed=1, steps=1), tmp_path / "other", device="cpu", progress=False
    )
    out = _interrupted_rl(sft_run, tmp_path / "b")
    with pytest.raises(ValueError, match="init"):
        train_rl(TINY_RL, other, out, device="cpu", progress=False, resume=True)


def test_rl_resume_with_init_of_other_shape_is_a_value_error(sft_run, tiny_sft_run, rl_run, tmp_path):
    out = tmp_path / "b"
    shutil.copytree(rl_run, out)
    with pytest.raises(ValueError):
        train_rl(TINY_RL, tiny_sft_run, out, device="cpu", progress=False, resume=True)


def test_existing_run_needs_resume(tiny_sft_run, sft_run):
    out = tiny_sft_run
    with pytest.raises(ValueError, match="--resume"):
        train_sft(TINY_SFT, out, device="cpu", progress=False)
    with pytest.raises(ValueError, match="--resume"):
        train_rl(TINY_RL, sft_run, out, device="cpu", progress=False)


def test_resume_with_other_config_is_refused(tiny_sft_run, rl_run, sft_run, tmp_path):
    shutil.copytree(tiny_sft_run, tmp_path / "a")
    before = (tmp_path / "a" / "config.toml").read_text()
    with pytest.raises(ValueError, match="differs"):
        train_sft(
            TINY_SFT.replace(optim=TINY_SFT.optim.replace(lr=2e-3)),
            tmp_path / "a",
            device="cpu",
            progress=False,
            resume=True,
        )
    assert (tmp_path / "a" / "config.toml").read_text() == before
    with pytest.raises(ValueError):
        train_sft(TINY_SFT, rl_run, device="cpu", progress=False, resume=True)
    with pytest.raises(ValueError, match="differs"):
        train_rl(TINY_RL.replace(gamma=1.0), sft_run, rl_run, device="cpu", progress=False, resume=True)


def test_out_is_a_file(tmp_path, sft_run):
    target = tmp_path / "afile"
    target.write_text("x")
    with pytest.raises(ValueError, match="file"):
        train_sft(TINY_SFT, target, device="cpu", progress=False)
    with pytest.raises(ValueError, match="file"):
        train_rl(TINY_RL, sft_run, target, device="cpu", progress=False)
    assert target.read_text() == "x"


def test_folder_with_foreign_files_is_refused(tmp_path, sft_run):
    victim = tmp_path / "project"
    victim.mkdir()
    (victim / "notes.txt").write_text("keep me\n")
    for resume in (False, True):
        with pytest.raises(ValueError, match="refusing"):
            train_sft(TINY_SFT, victim, device="cpu", progress=False, resume=resume)
        with pytest.raises(ValueError, match="refusing"):
            train_rl(TINY_RL, sft_run, victim, device="cpu", progress=False, resume=resume)
    assert [p.name for p in victim.iterdir()] == ["notes.txt"]
    assert (victim / "notes.txt").read_text() == "keep me\n"


def test_empty_folder_is_accepted(tmp_path):
    (tmp_path / "empty").mkdir()
    out = train_sft(TINY_SFT.replace(steps=2), tmp_path / "empty", device="cpu", progress=False)
    assert _meta(out)["complete"] is True


# --- maze end to end ------------------------------------------------------------------------------


def test_maze_sft_and_rl_end_to_end(tmp_path):
    sft_cfg = SFTConfig(
        task=MazeTask(size=5),
        model=ModelConfig(1, 2, 16),
        steps=4,
        batch_size=8,
        optim=SFT_OPTIM.replace(lr=1e-2, warmup_steps=0),
        eval_every=2,
        eval_prompts=4,
        checkpoint_every=2,
        log_every=1,
    )
    sft = train_sft(sft_cfg, tmp_path / "sft", device="cpu", progress=False)
    h = _history(sft)
    assert "pass_at_1" in h.columns and "mu_pos" not in h.columns
    assert h.loc[h["step"].isin([0, 2, 4]), "pass_at_1"].between(0, 1).all()

    rl_cfg = RLConfig(
        group_size=4, prompts_per_step=2, steps=2, eval_every=1, eval_prompts=4, eval_samples=4, checkpoint_every=1
    )
    rl = train_rl(rl_cfg, sft, tmp_path / "rl", device="cpu", progress=False)
    h = _history(rl)
    assert h["step"].tolist() == [0, 1, 2]
    assert {"pass_at_1", "pass_at_2", "pass_at_4", "reward_mean"} <= set(h.columns)
    assert "pass_at_8" not in h.columns and "mu_pos" not in h.columns
    assert h[["pass_at_1", "pass_at_2", "pass_at_4"]].notna().all().all()
    assert (h["pass_at_1"] <= h["pass_at_2"] + 1e-12).all() and (h["pass_at_2"] <= h["pass_at_4"] + 1e-12).all()
    assert _meta(rl)["complete"] is True


# --- learning (slow) ------------------------------------------------------------------------------


@pytest.mark.slow
def test_seeded_sft_then_rl_raises_reward(tmp_path):
    sft_cfg = SFTConfig(
        task=MultiSolutionTask(num_digits=2),
        model=ModelConfig(1, 2, 32),
        steps=150,
        batch_size=32,
        optim=SFT_OPTIM.replace(lr=1e-2, warmup_steps=5),
        eval_every=150,
        eval_prompts=16,
        checkpoint_every=150,
        log_every=50,
    )
    sft = train_sft(sft_cfg, tmp_path / "sft", device="cpu", progress=False)
    rl_cfg = RLConfig(
        group_size=8,
        prompts_per_step=16,
        steps=30,
        optim=OptimConfig(lr=1e-3),
        eval_every=30,
        eval_prompts=16,
        checkpoint_every=30,
    )
    h = _history(train_rl(rl_cfg, sft, tmp_path / "rl", device="cpu", progress=False))
    reward = h["reward_mean"].dropna().to_numpy()
    assert len(reward) == 30
    assert reward[-10:].mean() > reward[:10].mean() + 0.05
    mu = h.dropna(subset=["mu_pos"])
    assert mu["step"].tolist() == [0, 30]
    assert mu["mu_pos"].iloc[-1] > mu["mu_pos"].iloc[0]
    assert math.isfinite(mu["dnll_rare"].iloc[-1])


# --- cached runs (figures and the report) ---------------------------------------------------


def test_cached_runs_reuse_resume_and_replace(tmp_path, monkeypatch):
    from tailmiss.experiments import cached

    sft = cached.cached_sft(TINY_SFT, tmp_path, RunOptions(device="cpu", progress=False))
    assert sft == tmp_path / TINY_SFT.name
    rl = cached.cached_rl(TINY_RL, sft, tmp_path, RunOptions(device="cpu", progress=False))
    history = _history(rl)

    def _no_training(*args, **kwargs):
        raise AssertionError("a finished run of the same config was retrained")

    with monkeypatch.context() as m:
        m.setattr(cached, "train_sft", _no_training)
        m.setattr(cached, "train_rl", _no_training)
        assert cached.cached_sft(TINY_SFT, tmp_path, RunOptions(progress=False)) == sft
        assert cached.cached_rl(TINY_RL, sft, tmp_path, RunOptions(progress=False)) == rl

    # an interrupted run of the same config is resumed, and ends as the uninterrupted one
    (rl / "meta.json").unlink()
    assert cached.cached_rl(TINY_RL, sft, tmp_path, RunOptions(device="cpu", progress=False)) == rl
    pd.testing.assert_frame_equal(history, _history(rl), check_exact=True)

    # another config under the same name replaces the run
    changed = TINY_RL.replace(steps=2)
    cached.cached_rl(changed, sft, tmp_path, RunOptions(device="cpu", progress=False))
    assert _history(rl)["step"].max() == 2

    # a folder that is not a run is never replaced
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a run folder"):
        cached.cached_sft(TINY_SFT.replace(name="foreign"), tmp_path, RunOptions(progress=False))
    assert (foreign / "notes.txt").read_text() == "mine"


def test_on_policy_grpo_dapo_cispo_take_the_same_step(sft_run, tmp_path):
    """One mini-batch: r = 1 exactly, no clip acts, and -A grad r = -A grad log pi for all three losses."""
    cfg = TINY_RL.replace(steps=2, optim=OptimConfig(lr=1e-3), eval_every=2, checkpoint_every=2)
    weights = {}
    for method in ("grpo", "dapo", "cispo"):
        out = train_rl(cfg.replace(method=method), sft_run, tmp_path / method, device="cpu", progress=False)
        weights[method] = _state(out)["model"]
        history = _history(out)
        assert (history["clip_frac"].dropna() == 0).all()
    for method in ("dapo", "cispo"):
        for key, value in weights["grpo"].items():
            torch.testing.assert_close(weights[method][key], value, rtol=1e-5, atol=1e-6)
    # with several mini-batches the ratio moves and the methods part ways
    two = cfg.replace(minibatches=4)
    a = _state(train_rl(two, sft_run, tmp_path / "grpo4", device="cpu", progress=False))["model"]
    b = _state(train_rl(two.replace(method="cispo"), sft_run, tmp_path / "cispo4", device="cpu", progress=False))[
        "model"
    ]
    assert any(not torch.allclose(a[k], b[k], rtol=1e-5, atol=1e-6) for k in a)
