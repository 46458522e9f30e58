"""F-GRPO in TRL: FGRPOTrainer against GRPOTrainer, the focal scaling of each group's gradient, two gloo
processes against one, TailMissCallback and `tailmiss diagnose` on its log.

Every model is a 2-layer Llama built from a config and every tokenizer is built in memory
(``examples/trl_fgrpo.py``): nothing comes from a hub. ``python tests/test_integrations_trl.py OUT`` is the
worker of the two-process test (one ``torchrun`` launch).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("trl")

from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from tailmiss.integrations.trl import EarlierLogError, FGRPOConfig, FGRPOTrainer, TailMissCallback  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "trl_fgrpo.py"
_spec = importlib.util.spec_from_file_location("trl_fgrpo_example", EXAMPLE)
ex = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ex)

N = 8  # rollouts per group in every test


def _trainer(cls, out: Path, gamma: float, steps: int, reward=ex.digit_reward, callbacks=None, **overrides):
    return cls(
        ex.build_model(),
        reward_funcs=reward,
        args=ex.config(out, gamma, steps, log_level="error", **overrides),
        train_dataset=ex.build_dataset(),
        processing_class=ex.build_tokenizer(),
        callbacks=callbacks,
    )


def _params(trainer) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in trainer.model.parameters()])


def _logged(trainer, key: str) -> np.ndarray:
    return np.array([h[key] for h in trainer.state.log_history if key in h and "train_runtime" not in h])


# --- gamma = 0 is GRPOTrainer, step for step -----------------------------------------------------------


def test_gamma_zero_equals_grpo_trainer_step_for_step(tmp_path, one_torch_thread):
    steps = 5
    runs = []
    for cls, gamma, name in ((GRPOTrainer, 0.0, "grpo"), (FGRPOTrainer, 0.0, "fgrpo0"), (FGRPOTrainer, 1.0, "fgrpo1")):
        runs.append(_trainer(cls, tmp_path / name, gamma, steps))  # built and trained in turn: the seed is
        runs[-1].train()  # set when a trainer is built, so each run starts from the same random state
    grpo, fgrpo, focal = runs
    loss_diff = np.abs(_logged(grpo, "loss") - _logged(fgrpo, "loss"))
    reward_diff = np.abs(_logged(grpo, "reward") - _logged(fgrpo, "reward"))
    param_diff = (_params(grpo) - _params(fgrpo)).abs().max().item()
    print(f"gamma=0 vs GRPOTrainer: max |loss diff| per step {loss_diff.tolist()}, max |param diff| {param_diff:.3g}")
    assert len(loss_diff) == steps
    assert loss_diff.max() <= 1e-7 and reward_diff.max() == 0.0 and param_diff <= 1e-7
    assert np.all(_logged(fgrpo, "focal/weight_mean_all_groups") == 1.0)
    # the comparison is sensitive: gamma = 1 trains differently from the same start
    assert (_params(grpo) - _params(focal)).abs().max().item() > 1e-4
    assert _logged(grpo, "frac_reward_zero_std").min() < 1.0  # some groups were active


# --- gamma > 0 scales each group's gradient by its g -----------------------------------------------------


def _grad(trainer, batch) -> torch.Tensor:
    trainer.model.zero_grad(set_to_none=True)
    trainer.compute_loss(trainer.model, batch).backward()
    return torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])


X_PATTERN = (1, 3, 6, 0)  # correct rollouts of the 4 groups of the batch below: four different g, one inactive


def _pattern_reward(prompts, completions, **kwargs) -> list[float]:
    """Group k's first X_PATTERN[k] rollouts are correct, whatever was sampled."""
    return [float(i % N < X_PATTERN[i // N]) for i in range(len(prompts))]


def test_focal_weight_scales_each_groups_gradient(tmp_path, one_torch_thread):
    gamma = 1.0
    trainer = _trainer(FGRPOTrainer, tmp_path / "f", gamma, 1, reward=_pattern_reward)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train(), which this test does not run
    prompts = next(iter(trainer.get_train_dataloader()))  # one generation batch: 4 prompts x 8 rollouts
    torch.manual_seed(123)
    focal = trainer._generate_and_score_completions(prompts)
    trainer.args.focal_gamma = 0.0
    torch.manual_seed(123)
    plain = trainer._generate_and_score_completions(prompts)
    assert torch.equal(focal["completion_ids"], plain["completion_ids"])  # same rollouts, two gammas

    g = (1.0 - np.array(X_PATTERN) / N) ** gamma  # 0.875, 0.625, 0.25, 1
    g_rollout = torch.tensor(np.repeat(g, N), dtype=torch.float32)
    adv_diff = (focal["advantages"] - plain["advantages"] * g_rollout).abs().max().item()
    assert adv_diff <= 1e-7

    # the gradient with F-GRPO's advantages is the sum of each group's GRPO gradient times its g
    grad_focal = _grad(trainer, focal)
    grad_sum = torch.zeros_like(grad_focal)
    for k in range(len(g)):
        only_k = dict(plain, advantages=plain["advantages"] * (torch.arange(N * len(g)) // N == k))
        grad_sum += g[k] * _grad(trainer, only_k)
    grad_plain = _grad(trainer, plain)
    scale = grad_plain.abs().max().item()
    diff = (grad_focal - grad_sum).abs().max().item()
    print(
        f"g per group {g.tolist()}: max |adv - g A| {adv_diff:.3g}, max |grad - sum g_k grad_k| {diff:.3g} "
        f"(gradient scale {scale:.3g})"
    )
    assert scale > 0 and diff <= 1e-5 * scale
    assert (grad_focal - grad_plain).abs().max().item() > 1e-2 * scale  # g < 1 changed the gradient
    assert (grad_focal - g.mean() * grad_plain).abs().max().item() > 1e-2 * scale  # ... group by group


# --- two gloo processes give the advantages of one -------------------------------------------------------


def _position_reward(prompts, completions, **kwargs) -> list[float]:
    """A reward fixed by the prompt and the rollout's position in its group, not by sampling: the same
    rewards reach one process and two processes, whose sampled completions differ."""
    rank = int(os.environ.get("RANK", "0"))
    out = []
    for i, prompt in enumerate(prompts):
        position = (rank * len(prompts) + i) % N
        a, b = int(prompt[0]), int(prompt[2])
        out.append(float((3 * a + b + 5 * position) % 8 < 1 + (a + b) % 6))
    return out


class _Recording(FGRPOTrainer):
    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        self.recorded.append({"prompts": [x["prompt"] for x in inputs], "advantages": output["advantages"].tolist()})
        return output


def _advantages_run(out: Path, world: int) -> None:
    """3 groups of 8 per step; with two processes (12 rollouts each) the middle group spans both."""
    torch.set_num_threads(1)
    trainer = _trainer(_Recording, out, 1.0, 3, reward=_position_reward, per_device_train_batch_size=24 // world)
    trainer.recorded = []
    trainer.train()
    rank = trainer.accelerator.process_index
    (out / f"advantages-{world}-{rank}.json").write_text(json.dumps(trainer.recorded))


def test_two_gloo_processes_give_the_advantages_of_one(tmp_path, one_torch_thread):
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("torch.distributed with gloo is not available")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", __file__]
    started = time.perf_counter()
    proc = subprocess.run([*cmd, str(tmp_path)], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    seconds = time.perf_counter() - started
    _advantages_run(tmp_path, 1)
    one = json.loads((tmp_path / "advantages-1-0.json").read_text())
    two = [json.loads((tmp_path / f"advantages-2-{r}.json").read_text()) for r in (0, 1)]
    assert len(one) == len(two[0]) == len(two[1]) == 3
    diffs = []
    for step, single in enumerate(one):
        assert two[0][step]["prompts"] + two[1][step]["prompts"] == single["prompts"]
        joined = np.array(two[0][step]["advantages"] + two[1][step]["advantages"])
        diffs.append(float(np.abs(joined - np.array(single["advantages"])).max()))
    print(f"torchrun x2: {seconds:.1f} s; max |advantage diff| per step, 2 processes vs 1: {diffs}")
    assert max(diffs) <= 1e-6
    middle = np.array(single["advantages"][8:16])
    assert np.abs(middle).max() > 0, "the group that spans both processes should be active"


# --- the callback, its log and `tailmiss diagnose` --------------------------------------------------------


def _by_step(trainer, key: str) -> dict[int, float]:
    return {h["step"]: h[key] for h in trainer.state.log_history if key in h and "train_runtime" not in h}


def test_callback_log_is_what_diagnose_reads(tmp_path, one_torch_thread):
    from typer.testing import CliRunner

    from tailmiss.cli import app

    trainer = ex.main(["--out", str(tmp_path / "run"), "--steps", "6", "--gamma", "0.5"])
    log = tmp_path / "run" / "rollouts.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(rows) == 6 * 32 and {r["step"] for r in rows} == set(range(1, 7))
    assert sorted(r["rollout"] for r in rows if r["step"] == 1) == sorted(list(range(N)) * 4)
    result = CliRunner().invoke(app, ["diagnose", str(log), "--out", str(tmp_path / "diag"), "--rho", "0.05"])
    assert result.exit_code == 0, result.output + result.stderr
    steps = {s["step"]: s for s in json.loads((tmp_path / "diag" / "diagnose.json").read_text())["per_step"]}
    for key in ("share_inactive", "mu_hat_mean", "tail_miss_rho0.05", "n_star_rho0.05"):
        logged = _by_step(trainer, f"tailmiss/{key}")  # no value (diagnose: null) is logged as no key
        assert logged.keys() == {s for s, row in steps.items() if row[key] is not None}, key
        np.testing.assert_allclose([logged[s] for s in logged], [steps[s][key] for s in logged], rtol=1e-12)
    weights = {(r["step"], r["prompt_id"]): r["focal_weight"] for r in rows}
    for (_, _), w in weights.items():
        assert 0.0 <= w <= 1.0
    all_groups = _by_step(trainer, "focal/weight_mean_all_groups")
    expected = [np.mean([w for (s, _), w in weights.items() if s == step]) for step in range(1, 7)]
    np.testing.assert_allclose([all_groups[s] for s in range(1, 7)], expected, rtol=1e-12)
    active = _by_step(trainer, "focal/weight_mean_active_groups")  # diagnose's mean, per gamma
    assert active.keys() == {s for s, row in steps.items() if row["focal_weight_gamma0.5"] is not None}
    np.testing.assert_allclose([active[s] for s in active], [steps[s]["focal_weight_gamma0.5"] for s in active])


def test_a_resumed_run_logs_every_step_once(tmp_path, one_torch_thread):
    """Train 6 steps saving at 4, then resume from checkpoint-4: steps 5 and 6 are logged once, as in one run."""
    out, log = tmp_path / "run", tmp_path / "run" / "rollouts.jsonl"

    def run(steps):
        callback = TailMissCallback(log, rho=0.05)
        return _trainer(FGRPOTrainer, out, 0.5, steps, callbacks=[callback], save_strategy="steps", save_steps=4)

    run(6).train()
    straight = log.read_text()
    run(6).train(resume_from_checkpoint=str(out / "checkpoint-4"))
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    per_step = {s: sum(r["step"] == s for r in rows) for s in range(1, 7)}
    print(f"rows per step after resuming at step 4: {per_step}")
    assert per_step == {s: 32 for s in range(1, 7)}
    assert len({(r["step"], r["prompt_id"], r["rollout"]) for r in rows}) == len(rows)
    assert log.read_text() == straight  # the checkpoint restores the random state: the very rows of one run
    from tailmiss.diagnose import diagnose, read_rollouts

    assert diagnose(read_rollouts(log)).summary.group_sizes == (N,)


def test_the_log_is_cut_back_to_the_checkpoint_atomically(tmp_path):
    from tailmiss.integrations._rollout_file import keep_steps_up_to

    log = tmp_path / "log.jsonl"
    rows = [json.dumps({"step": s, "prompt_id": "p", "rollout": k, "reward": 1.0}) for s in (1, 2, 3) for k in (0, 1)]
    log.write_text("\n".join(rows) + '\n{"step": 4, "prompt_id": "p", "rol')  # a killed run's cut line
    keep_steps_up_to(log, 2)
    assert log.read_text() == "\n".join(rows[:4]) + "\n"
    assert [p.name for p in tmp_path.iterdir()] == ["log.jsonl"]  # no temporary file left
    keep_steps_up_to(tmp_path / "new" / "log.jsonl", 0)
    assert (tmp_path / "new" / "log.jsonl").read_text() == ""


def test_callback_logs_to_the_output_dir_unless_told_not_to(tmp_path, one_torch_thread, capsys):
    """No log_path: <output_dir>/rollouts.jsonl, said in one line; log_path=False: no log, the metrics still."""
    trainer = _trainer(FGRPOTrainer, tmp_path / "a", 0.5, 1, callbacks=[TailMissCallback()])
    trainer.train()
    log = tmp_path / "a" / "rollouts.jsonl"
    assert len(log.read_text().splitlines()) == 32
    assert f"TailMissCallback: per-rollout log {log} (tailmiss diagnose reads it)" in capsys.readouterr().out
    trainer = _trainer(FGRPOTrainer, tmp_path / "b", 0.5, 1, callbacks=[TailMissCallback(log_path=False)])
    trainer.train()
    assert not (tmp_path / "b" / "rollouts.jsonl").exists() and len(_logged(trainer, "tailmiss/mu_hat_mean")) == 1
    assert "per-rollout log" not in capsys.readouterr().out
    for bad in (True, 3):
        with pytest.raises(ValueError, match=rf"log_path must be a path, None .* or False .*, got {bad}"):
            TailMissCallback(log_path=bad)
    with pytest.raises(ValueError, match="overwrite must be true or false, got 1"):
        TailMissCallback(overwrite=1)


def test_a_fresh_run_refuses_an_earlier_runs_log(tmp_path, one_torch_thread):
    """A fresh run into a folder whose log holds rows says so (it used to empty the log); overwrite=True empties it."""
    log = tmp_path / "rollouts.jsonl"
    _trainer(FGRPOTrainer, tmp_path, 0.5, 2, callbacks=[TailMissCallback(log)]).train()
    before = log.read_text()
    trainer = _trainer(FGRPOTrainer, tmp_path, 0.5, 1, callbacks=[TailMissCallback(log)])
    with pytest.raises(EarlierLogError) as info:
        trainer.train()
    message = str(info.value)
    assert isinstance(info.value, ValueError) and repr(str(log)) in message and "holds 64 rows" in message, message
    assert "resume_from_checkpoint" in message and "overwrite=True" in message
    assert log.read_text() == before  # untouched
    _trainer(FGRPOTrainer, tmp_path, 0.5, 1, callbacks=[TailMissCallback(log, overwrite=True)]).train()
    assert {json.loads(line)["step"] for line in log.read_text().splitlines()} == {1}


def test_the_example_saves_resumes_and_refuses_a_rerun(tmp_path, one_torch_thread, capsys):
    """examples/trl_fgrpo.py: --save-steps, a rerun into the same --out refused, --resume CHECKPOINT / latest,
    --overwrite; the log holds every step once."""
    out, log = tmp_path / "run", tmp_path / "run" / "rollouts.jsonl"

    def rows_per_step():
        steps = [json.loads(line)["step"] for line in log.read_text().splitlines()]
        return {s: steps.count(s) for s in sorted(set(steps))}

    ex.main(["--out", str(out), "--steps", "4", "--save-steps", "2"])
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        ex.main(["--out", str(out), "--steps", "4"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "holds 128 rows" in err and "--resume [CHECKPOINT]" in err and "--overwrite" in err
    ex.main(["--out", str(out), "--steps", "6", "--save-steps", "2", "--resume", str(out / "checkpoint-2")])
    assert rows_per_step() == {s: 32 for s in range(1, 7)}  # a run killed after step 4, resumed from step 2
    ex.main(["--out", str(out), "--steps", "7", "--resume"])  # the latest checkpoint: 6
    assert rows_per_step() == {s: 32 for s in range(1, 8)}
    ex.main(["--out", str(out), "--steps", "1", "--overwrite"])
    assert rows_per_step() == {1: 32}
    for argv, said in (
        (["--resume"], "holds no checkpoint-<step> folder"),
        (["--resume", str(tmp_path / "nowhere")], "no checkpoint folder"),
        (["--save-steps", "0"], "--save-steps must be a whole number >= 1, got 0"),
    ):
        with pytest.raises(SystemExit):
            ex.main(["--out", str(tmp_path / "empty"), "--steps", "1", *argv])
        assert said in capsys.readouterr().err


def test_callback_checks_rho_like_the_package():
    assert TailMissCallback(rho=np.array([0.1, 0.05])).rhos == (0.05, 0.1)
    assert TailMissCallback(rho=np.float64(0.2)).rhos == (0.2,)
    for bad in (1.5, 0.0, "0.1", True, [[0.1, 0.2]], [], np.float64("nan"), [0.1, None]):
        with pytest.raises(ValueError, match="rho") as info:
            TailMissCallback(rho=bad)
        assert "np." not in str(info.value), info.value


def test_logged_numbers_are_never_nan(tmp_path, one_torch_thread):
    """Every rollout wrong: no solved group (no risk, no N*) and no active group: those keys are left out."""

    def never(prompts, completions, **kwargs):
        return [0.0] * len(completions)

    trainer = _trainer(FGRPOTrainer, tmp_path, 0.5, 2, reward=never, callbacks=[TailMissCallback(rho=(0.05, 0.1))])
    trainer.train()
    logs = [h for h in trainer.state.log_history if "train_runtime" not in h]
    assert len(logs) == 2
    for entry in logs:
        assert all(v is not None and not (isinstance(v, float) and np.isnan(v)) for v in entry.values()), entry
        assert not any(k.startswith(("tailmiss/tail_miss", "tailmiss/n_star")) for k in entry), entry
        assert "focal/weight_mean_active_groups" not in entry and entry["focal/weight_mean_all_groups"] == 1.0
        assert entry["tailmiss/share_all_incorrect"] == 1.0


def test_callback_refuses_a_plain_grpo_trainer(tmp_path):
    trainer = _trainer(GRPOTrainer, tmp_path, 0.0, 1, callbacks=[TailMissCallback()])
    with pytest.raises(RuntimeError, match="FGRPOTrainer"):
        trainer.train()


# --- configuration and errors -----------------------------------------------------------------------


def test_config_fixes_bf16_on_a_cpu_and_checks_gamma(tmp_path):
    assert FGRPOConfig(output_dir=str(tmp_path), use_cpu=True).bf16 is False
    assert FGRPOConfig(output_dir=str(tmp_path)).bf16 is (torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="bf16"):
            GRPOConfig(output_dir=str(tmp_path))  # what the fix-up is for
    for bad in (-0.5, float("nan"), float("inf"), "0.5", True, np.float64(-1.0)):
        with pytest.raises(ValueError, match="focal_gamma") as info:
            FGRPOConfig(output_dir=str(tmp_path), use_cpu=True, focal_gamma=bad)
        assert "np." not in str(info.value), info.value
    assert FGRPOConfig(output_dir=str(tmp_path), use_cpu=True, focal_gamma=np.float32(0.5)).focal_gamma == 0.5
    with pytest.raises(ValueError, match="success_threshold"):
        FGRPOConfig(output_dir=str(tmp_path), use_cpu=True, success_threshold="0.5")


def test_trainer_refuses_a_plain_grpo_config_and_unknown_success_func(tmp_path):
    with pytest.raises(TypeError, match="FGRPOConfig"):
        FGRPOTrainer(ex.build_model(), ex.digit_reward, args=GRPOConfig(output_dir=str(tmp_path), use_cpu=True))
    with pytest.raises(ValueError, match="success_reward_func 'accuracy'"):
        _trainer(FGRPOTrainer, tmp_path, 0.5, 1, success_reward_func="accuracy")


def _graded_reward(prompts, completions, **kwargs) -> list[float]:
    return [0.5 * r + 0.25 for r in ex.digit_reward(prompts, completions)]  # 0.25 / 0.75: not binary


def test_non_binary_rewards_need_a_threshold(tmp_path, one_torch_thread):
    trainer = _trainer(FGRPOTrainer, tmp_path / "a", 0.5, 1, reward=_graded_reward)
    with pytest.raises(ValueError, match=r"found 0\.25, 0\.75: set FGRPOConfig\(success_threshold=T\)") as info:
        trainer.train()
    assert "success_reward_func" in str(info.value) and "correct' column" not in str(info.value)  # TRL's words
    trainer = _trainer(FGRPOTrainer, tmp_path / "b", 0.5, 2, reward=_graded_reward, success_threshold=0.5)
    trainer.train()
    assert _logged(trainer, "focal/weight_mean_all_groups").min() < 1.0


def test_success_from_one_reward_function(tmp_path, one_torch_thread):
    def format_bonus(prompts, completions, **kwargs):
        return [0.3] * len(completions)

    callback = TailMissCallback(tmp_path / "log.jsonl")
    trainer = _trainer(
        FGRPOTrainer,
        tmp_path,
        0.5,
        2,
        reward=[ex.digit_reward, format_bonus],
        callbacks=[callback],
        success_reward_func="digit_reward",
    )
    trainer.train()
    rows = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert {round(r["reward"], 6) for r in rows} <= {0.0, 1.0}  # the accuracy column, not the sum with 0.3


# --- reward transforms (DS-GRPO) ----------------------------------------------------------------------------

DS = {"reward_transform": "differential-smoothing", "reward_transform_coef": 0.1}


def _pattern_batch(trainer):
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train(), which these tests do not run
    return next(iter(trainer.get_train_dataloader()))  # one generation batch: 4 prompts x 8 rollouts


def _scored(trainer, prompts, seed: int = 123) -> dict:
    torch.manual_seed(seed)  # the same rollouts on every call
    return trainer._generate_and_score_completions(prompts)


def test_ds_with_coef_zero_changes_nothing(tmp_path, one_torch_thread):
    """coef 0: the advantages recomputed from the (unchanged) rewards are TRL's, bit for bit, for every scaling."""
    overrides = {**DS, "reward_transform_coef": 0.0}
    trainer = _trainer(FGRPOTrainer, tmp_path, 1.0, 1, reward=_pattern_reward, **overrides)
    prompts = _pattern_batch(trainer)
    for scale in ("group", "batch", "none"):
        trainer.scale_rewards = scale  # what TRL's own advantage code reads
        trainer.args.reward_transform = "differential-smoothing"
        ds = _scored(trainer, prompts)
        trainer.args.reward_transform = None
        plain = _scored(trainer, prompts)
        assert torch.equal(ds["completion_ids"], plain["completion_ids"])
        assert torch.equal(ds["advantages"], plain["advantages"]), scale
        assert plain["advantages"].abs().max() > 0


def _ds_by_hand(trainer, out: dict, beta: float, gamma: float, scale: str) -> torch.Tensor:
    """The DS-GRPO advantages from the DS rules, with the model's own forward pass for log pi_old(y)."""
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    with torch.no_grad():
        logits = trainer.model(input_ids=ids, attention_mask=torch.cat([out["prompt_mask"], out["completion_mask"]], 1))
    width = out["completion_ids"].shape[1]
    logp = torch.log_softmax(logits.logits[:, -width - 1 : -1].double() / trainer.args.temperature, dim=-1)
    token = logp.gather(-1, out["completion_ids"][..., None]).squeeze(-1)
    seq_logp = (token * out["completion_mask"]).sum(1).numpy()
    correct = np.array([i % N < X_PATTERN[i // N] for i in range(len(seq_logp))])
    reward = correct.astype(float) - beta * seq_logp * correct  # r - beta log pi for the correct ones only
    grouped = reward.reshape(-1, N)
    std = np.repeat(grouped.std(1, ddof=1), N) if scale == "group" else reward.std(ddof=1)
    adv = reward - np.repeat(grouped.mean(1), N)
    if scale != "none":
        adv = adv / (std + 1e-4)
    g = np.repeat((1.0 - np.array(X_PATTERN) / N) ** gamma, N)
    return torch.tensor(adv * g, dtype=torch.float32)


@pytest.mark.parametrize("num_iterations", [1, 2])  # 2: TRL computes old_per_token_logps, which are then used
def test_ds_advantages_follow_the_ds_rules(tmp_path, one_torch_thread, num_iterations):
    gamma, beta = 0.5, DS["reward_transform_coef"]
    trainer = _trainer(FGRPOTrainer, tmp_path, gamma, 1, reward=_pattern_reward, num_iterations=num_iterations, **DS)
    prompts = _pattern_batch(trainer)
    passes, own = [], trainer._get_per_token_logps_and_entropies
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: passes.append(1) or own(*a, **k)
    for scale in ("group", "batch", "none"):
        trainer.scale_rewards = scale
        passes.clear()
        out = _scored(trainer, prompts)
        assert ("old_per_token_logps" in out) is (num_iterations == 2)
        assert len(passes) == 1  # TRL's pass for old_per_token_logps, or else the transform's: never both
        expected = _ds_by_hand(trainer, out, beta, gamma, scale)
        diff = (out["advantages"] - expected).abs().max().item()
        trainer.args.reward_transform = None
        plain = _scored(trainer, prompts)["advantages"]
        trainer.args.reward_transform = DS["reward_transform"]
        change = (out["advantages"] - plain).abs().max().item()
        print(f"{scale}: max |DS advantage - by hand| {diff:.3g}, max |DS - no transform| {change:.3g}")
        assert diff <= 1e-5 * max(1.0, expected.abs().max().item())
        assert change > 1e-3  # the bonus changed the advantages
        assert torch.all(out["advantages"][24:] == 0)  # X = 0: no correct rollout, no bonus, no signal


def test_ds_training_logs_the_transformed_reward(tmp_path, one_torch_thread):
    trainer = _trainer(FGRPOTrainer, tmp_path, 0.5, 2, **DS)
    trainer.train()
    transformed, task = _logged(trainer, "reward_transform/reward"), _logged(trainer, "reward")
    assert len(transformed) == 2 and np.all(transformed >= task)  # -beta log pi >= 0 on the correct rollouts
    assert np.any(transformed > task + 1e-3)


def test_ds_config_is_checked(tmp_path):
    def config(**kwargs):
        return FGRPOConfig(output_dir=str(tmp_path), use_cpu=True, **kwargs)

    assert config(**DS).reward_transform_coef == 0.1
    assert (
        config(reward_transform="differential-smoothing", reward_transform_coef=np.float64(0.5)).reward_transform_coef
        == 0.5
    )
    assert config().reward_transform is None and config().reward_transform_coef == 0.0
    bad = [
        ({"reward_transform": "smoothing"}, r"reward_transform must be a registered .*'smoothing'"),
        ({"reward_transform": 3}, r"reward_transform must be"),
        ({**DS, "reward_transform_coef": -0.1}, r"reward_transform_coef must be a number in \[0, inf\), got -0.1"),
        ({**DS, "reward_transform_coef": float("nan")}, r"reward_transform_coef"),
        ({**DS, "reward_transform_coef": "0.1"}, r"reward_transform_coef must be a number"),
        ({"reward_transform_coef": 0.1}, r"reward_transform_coef = 0.1 needs a reward_transform"),
        ({**DS, "multi_objective_aggregation": "normalize_then_sum"}, r"sum_then_normalize.*normalize_then_sum"),
    ]
    for kwargs, match in bad:
        with pytest.raises(ValueError, match=match):
            config(**kwargs)


if __name__ == "__main__":  # the worker of one torchrun process
    _advantages_run(Path(sys.argv[1]), int(os.environ["WORLD_SIZE"]))
    # its result is written and closed: skip torch.distributed's C++ teardown at interpreter exit, which sometimes
    # aborts ("terminate called without an active exception", SIGABRT) and fails the launch, as tailmiss.cli.main does
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
