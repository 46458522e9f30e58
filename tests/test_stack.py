"""The run stack (tailmiss.experiments.run_stack): stacked runs equal the same runs trained one by one, bit for bit."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from tailmiss.experiments.stack_model import RunDraws, StackedGPT, stackable_models
from tailmiss.llm.model import GPT, ModelConfig, answer_logprobs, generate


def _models(runs=3, cfg=None, vocab=17, block=12):
    cfg = cfg or ModelConfig(2, 4, 32)
    out = []
    for r in range(runs):
        torch.manual_seed(r)
        out.append(GPT(cfg, vocab, block))
    return out


def test_a_stacked_forward_and_backward_equal_each_model_alone(one_torch_thread):
    models = _models()
    alone = [copy.deepcopy(m) for m in models]
    idx = torch.randint(0, 17, (3, 20, 9))
    logits = StackedGPT(models)(idx.reshape(60, 9))
    upstream = torch.randn_like(logits)
    logits.backward(upstream)
    for r, model in enumerate(alone):
        own = model(idx[r])
        own.backward(upstream[20 * r : 20 * (r + 1)])
        assert torch.equal(own, logits[20 * r : 20 * (r + 1)])
        for (name, p), q in zip(model.named_parameters(), models[r].parameters()):
            assert torch.equal(p.grad, q.grad), name


@pytest.mark.parametrize("counter", [False, True])
def test_stacked_sampling_draws_each_run_from_its_own_stream(one_torch_thread, counter):
    from tailmiss.llm.model import CounterStream

    models = _models()
    prompts = torch.randint(0, 17, (3, 16, 4))

    def stream(r):
        return CounterStream(100 + r, torch.arange(16)) if counter else torch.Generator().manual_seed(100 + r)

    with torch.no_grad():
        tokens, logp = generate(
            StackedGPT(models),
            prompts.reshape(48, 4),
            6,
            3,
            0,
            1.0,
            None,
            1.0,
            RunDraws([stream(r) for r in range(3)], 16),
        )
        for r, model in enumerate(models):
            own_tokens, own_logp = generate(model, prompts[r], 6, 3, 0, 1.0, None, 1.0, stream(r))
            assert torch.equal(own_tokens, tokens[16 * r : 16 * (r + 1)])
            assert torch.equal(own_logp, logp[16 * r : 16 * (r + 1)])
        answers = tokens[:, :5]
        stacked = answer_logprobs(StackedGPT(models), prompts.reshape(48, 4), answers)
        for r, model in enumerate(models):
            assert torch.equal(
                answer_logprobs(model, prompts[r], answers[16 * r : 16 * (r + 1)]), stacked[16 * r : 16 * (r + 1)]
            )


def test_a_stack_refuses_models_of_different_shapes_and_uneven_rows():
    a, b = _models(1)[0], _models(1, cfg=ModelConfig(1, 4, 32))[0]
    assert not stackable_models([a, b]) and stackable_models([a, a])
    with pytest.raises(ValueError, match="one shape"):
        StackedGPT([a, b])
    with pytest.raises(ValueError, match="do not split evenly"):
        StackedGPT([a, a])(torch.zeros(3, 4, dtype=torch.long))


# ---- whole runs ------------------------------------------------------------------------------------------


def _cfg(**changes):
    from tailmiss.llm import RLConfig

    base = RLConfig(
        name="r",
        group_size=4,
        prompts_per_step=6,
        steps=5,
        minibatches=2,
        eval_every=2,
        eval_prompts=8,
        checkpoint_every=2,
        eval_per_prompt=True,
    )
    return dataclasses.replace(base, **changes)


def _mixed():
    """Runs that differ in seed, focal γ, learning rate, method, loss coefficients and sampling stream."""
    return [
        _cfg(name="grpo", seed=0),
        _cfg(name="focal", seed=1, gamma=1.0, optim=_cfg().optim.replace(lr=3e-3, lr_schedule="cosine")),
        _cfg(name="cispo", seed=2, method="cispo", gamma=0.5),
        _cfg(name="kl", seed=3, kl_coef=0.05, entropy_coef=0.01, rollout_sampling="counter", eval_samples=16),
    ]


def _same_folder(a, b):
    from tailmiss.store import file_sha256

    for name in ("history.csv", "prompt_evals.npz", "config.toml"):
        assert file_sha256(a / name) == file_sha256(b / name), name
    old = torch.load(a / "checkpoint.pt", map_location="cpu", weights_only=True)
    new = torch.load(b / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert old.keys() == new.keys()
    for key in old:
        if key == "init":
            continue
        _same(old[key], new[key], key)


def _same(a, b, where):
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and a != a:
        assert b != b, where
    else:
        assert a == b, where


def test_a_stack_of_mixed_runs_writes_what_each_run_writes_alone(sft_run, tmp_path, one_torch_thread):
    from tailmiss.experiments.run_stack import stack_key, train_rl_stack
    from tailmiss.llm import train_rl

    cfgs = _mixed()
    assert len({stack_key(c, sft_run) for c in cfgs}) == 1
    outs = train_rl_stack(
        cfgs, [sft_run] * 4, [tmp_path / "stack" / c.name for c in cfgs], device="cpu", progress=False
    )
    for cfg, out in zip(cfgs, outs):
        alone = train_rl(cfg, sft_run, tmp_path / "alone" / cfg.name, device="cpu", progress=False)
        _same_folder(alone, out)


def test_a_stopped_stack_resumes_one_run_alone_as_if_never_stopped(sft_run, tmp_path, one_torch_thread):
    """A stack killed after its step-2 checkpoint: one run resumes alone, the others in a smaller stack."""
    from tailmiss.experiments import run_stack as stack_module
    from tailmiss.experiments.run_stack import train_rl_stack
    from tailmiss.llm import train_rl

    cfgs = _mixed()[:3]
    outs = [tmp_path / "stack" / c.name for c in cfgs]
    real = stack_module.save_run

    def die_after_two(run, folder, step):
        real(run, folder, step)
        if step == 2 and folder.path == outs[-1]:
            raise KeyboardInterrupt

    stack_module.save_run = die_after_two
    try:
        with pytest.raises(KeyboardInterrupt):
            train_rl_stack(cfgs, [sft_run] * 3, outs, device="cpu", progress=False)
    finally:
        stack_module.save_run = real
    train_rl(cfgs[0], sft_run, outs[0], device="cpu", resume=True, progress=False)
    train_rl_stack(cfgs[1:], [sft_run] * 2, outs[1:], device="cpu", resume=True, progress=False)
    for cfg, out in zip(cfgs, outs):
        _same_folder(train_rl(cfg, sft_run, tmp_path / "alone" / cfg.name, device="cpu", progress=False), out)


def test_runs_that_cannot_stack_are_named(sft_run, tmp_path):
    from tailmiss.experiments.run_stack import stack_key, train_rl_stack

    assert stack_key(_cfg(dynamic_sampling=True, method="dapo"), sft_run) is None
    assert stack_key(_cfg(group_size=8), sft_run) != stack_key(_cfg(), sft_run)
    with pytest.raises(ValueError, match="cannot train as one stack"):
        train_rl_stack([_cfg(), _cfg(name="b", group_size=8)], [sft_run] * 2, [tmp_path / "a", tmp_path / "b"])
    with pytest.raises(ValueError, match="same folder"):
        train_rl_stack([_cfg(), _cfg(seed=1)], [sft_run] * 2, [tmp_path / "a", tmp_path / "a"])
    with pytest.raises(ValueError, match="as many"):
        train_rl_stack([_cfg()], [sft_run] * 2, [tmp_path / "a"])


# ---- the pools ---------------------------------------------------------------------------------------------


def _sweep():
    from conftest import tiny_sft_config

    from tailmiss.experiments.sweep_config import LLMSweep, Variant

    variants = (Variant("grpo", 0.0, 4), Variant("grpo", 1.0, 4), Variant("dapo", 0.0, 4, dynamic_sampling=True))
    return LLMSweep(
        "stack-sweep", tiny_sft_config("stack-sft", steps=30), _cfg(name="stk", steps=3), variants, seeds=(0, 1)
    )


def test_stacked_jobs_merge_compatible_runs_and_keep_the_others(tmp_path):
    from tailmiss.experiments.pool import Job
    from tailmiss.experiments.stacking import stack_size, stacked_jobs

    jobs = _sweep().jobs(tmp_path) + [Job("after", print, (), needs=("stk-grpo-n4-g1-s0",))]
    merged, members = stacked_jobs(jobs, workers=2, most=None)
    assert list(members.values()) == [
        ("stk-grpo-n4-g0-s0", "stk-grpo-n4-g0-s1"),
        ("stk-grpo-n4-g1-s0", "stk-grpo-n4-g1-s1"),
    ]
    keys = [j.key for j in merged]
    assert keys[0] == "stack-sft" and sum(k.startswith("stack:") for k in keys) == 2
    assert [k for k in keys if "dapo" in k] == ["stk-dapo-n4-g0-ds-s0", "stk-dapo-n4-g0-ds-s1"]  # DS trains alone
    assert merged[-1].needs == ("stack:stk-grpo-n4-g1-s0+1",)
    assert stacked_jobs(jobs, workers=2, most=1)[1] == {}
    assert stack_size(70, 2, None) == 32 and stack_size(10, 2, None) == 5 and stack_size(10, 2, 3) == 3


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_a_pool_of_stacks_trains_the_runs_the_one_run_pool_trains(tmp_path, executor, one_torch_thread):
    if executor == "ray":
        pytest.importorskip("ray")
    from tailmiss.experiments.pool import run_jobs
    from tailmiss.options import RunOptions

    sweep, lines = _sweep(), []
    alone = run_jobs(sweep.jobs(tmp_path / "alone"), 2, RunOptions(jobs=2, progress=False, stack=1))
    options = RunOptions(jobs=2, progress=False, stack=4, executor=executor, log=lines.append)
    stacked = run_jobs(sweep.jobs(tmp_path / "stacked"), 2, options)
    assert set(stacked) == set(alone)
    assert sum("as one stack" in line for line in lines) == 1  # one stack of four; the DAPO runs alone
    for _, _, cfg in sweep.runs():
        _same_folder(tmp_path / "alone" / cfg.name, tmp_path / "stacked" / cfg.name)
    again = run_jobs(sweep.jobs(tmp_path / "stacked"), 2, options.replace(log=None))
    assert set(again) == set(alone)  # every run reused
