"""The trainer's light start-up: its optimizer matches torch's bit for bit, its history file matches pandas', and a
training process imports neither ``torch._dynamo`` nor pandas nor ``scipy.stats``."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tailmiss.llm.checkpoint import history_csv
from tailmiss.llm.optim import OptimConfig, PlainOptimizer, make_optimizer

ROOT = Path(__file__).parents[1]


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.LayerNorm(5), torch.nn.Linear(5, 3))


def _torch_optimizer(model, kind: str, cfg):
    params = list(model.parameters())
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=cfg.lr)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)


def _step(model, optimizer, x: torch.Tensor, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    model(x).pow(2).sum().backward()
    optimizer.step()


@pytest.mark.parametrize("kind", ["adamw", "sgd"])
def test_plain_optimizer_is_torch_bit_for_bit(kind):
    """Same parameters after every step as torch.optim (weight decay on matrices only, a changing rate), and
    after handing torch's state to it part-way (a checkpoint written by torch.optim resumes the same)."""
    cfg = OptimConfig(weight_decay=0.1, lr=1e-2, betas=(0.9, 0.95), kind=kind)
    ours, theirs = _model(), _model()
    mine, reference = make_optimizer(ours, cfg), _torch_optimizer(theirs, kind, cfg)
    assert isinstance(mine, PlainOptimizer)
    gen = torch.Generator().manual_seed(1)
    for step in range(25):
        x = torch.randn(4, 7, generator=gen)
        lr = 1e-2 * (1 + step % 3)
        _step(ours, mine, x, lr)
        _step(theirs, reference, x, lr)
        for a, b in zip(ours.parameters(), theirs.parameters()):
            assert torch.equal(a, b), (kind, step)
        if step == 10:
            mine.load_state_dict(copy.deepcopy(reference.state_dict()))


def test_plain_optimizer_state_dict_round_trip():
    cfg = OptimConfig(weight_decay=0.01, lr=3e-3, betas=(0.9, 0.999), kind="adamw")
    a, b = _model(), _model()
    first, second = make_optimizer(a, cfg), make_optimizer(b, cfg)
    x = torch.randn(4, 7, generator=torch.Generator().manual_seed(2))
    for _ in range(3):
        _step(a, first, x, 3e-3)
        _step(b, second, x, 3e-3)
    saved = first.state_dict()
    assert sorted(saved) == ["param_groups", "state"] and sorted(saved["state"]) == list(range(6))
    assert [g["params"] for g in saved["param_groups"]] == [[0, 1], [2, 3, 4, 5]]
    restored = make_optimizer(b, cfg)
    restored.load_state_dict(saved)
    _step(a, first, x, 3e-3)
    _step(b, restored, x, 3e-3)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    with pytest.raises(ValueError, match="other parameter groups"):
        make_optimizer(torch.nn.Linear(3, 3, bias=False), cfg).load_state_dict(saved)
    with pytest.raises(ValueError, match="kind"):
        PlainOptimizer([{"params": [], "weight_decay": 0.0}], "adam", lr=1.0)


def test_history_csv_is_what_pandas_writes():
    rows = [
        {"step": 0, "mu_pos": 0.6853904351123, "rollouts": 128, "big": 12_345_678_901},
        {"step": 1, "loss": np.float64(-0.0017236), "rollouts": 256, "big": None, "groups": np.int64(16)},
        {"step": 2, "mu_pos": float("nan"), "loss": float("inf"), "rollouts": 384, "big": 7, "neg": -0.0},
        {"step": 3, "mu_pos": 1, "rollouts": 512, "big": 3},
    ]
    assert history_csv(rows) == pd.DataFrame(rows).to_csv(index=False, float_format="%.10g")
    assert history_csv([{"step": 0, "device": "cpu"}]) is None  # not numbers: pandas writes it
    assert history_csv([{"step": 0, "ok": True}]) is None


def test_difficulty_levels_are_scipy_stats_beta_quantiles():
    from scipy import stats

    from tailmiss.llm.tasks import MultiSolutionTask

    for task in (MultiSolutionTask(), MultiSolutionTask(mu_mean=0.3), MultiSolutionTask(difficulty_concentration=4)):
        k = task.difficulty_concentration
        q = (np.arange(10) + 0.5) / 10
        levels = np.clip(stats.beta.ppf(q, task.mu_mean * k, (1 - task.mu_mean) * k), task.mu_min, task.mu_max)
        expected = np.random.default_rng(task.difficulty_seed).permutation(levels)
        assert np.array_equal(task._levels, expected)


_PROBE = """
import json, sys
import tailmiss.cli
from tailmiss.experiments.presets import llm_preset
import tailmiss.llm.sft as sft
cfg = llm_preset("multisolution-sft-quick").replace(steps=3, eval_every=3, checkpoint_every=3, eval_prompts=4)
sft.train_sft(cfg, sys.argv[1] + "/sft", progress=False)
from tailmiss.llm.train import train_rl
rl = llm_preset("multisolution-grpo-quick").replace(steps=2, eval_every=2, checkpoint_every=2, eval_prompts=4)
train_rl(rl.replace(prompts_per_step=2), sys.argv[1] + "/sft", sys.argv[1] + "/rl", progress=False)
import tailmiss.experiments.cached, tailmiss.experiments.sweep_config, tailmiss.llm.train  # what a pool worker loads
print(json.dumps({m: m in sys.modules for m in ("torch._dynamo", "pandas", "scipy.stats", "matplotlib")}))
"""


def test_training_loads_no_dynamo_pandas_or_scipy_stats(tmp_path):
    """What a training process (``tailmiss llm sft/train``, a pool worker) imports: none of the heavy extras
    (about 75 + 70 + 45 MB and seconds of start-up in every process)."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path / "run")], capture_output=True, text=True, cwd=ROOT, check=True
    )
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == {"torch._dynamo": False, "pandas": False, "scipy.stats": False, "matplotlib": False}
    for run in ("sft", "rl"):
        assert math.isfinite(float((tmp_path / "run" / run / "history.csv").read_text().splitlines()[-1].split(",")[1]))
