"""Pieces shared by the SFT and RL loops: seeds per step, learning-rate schedule, optimizer, progress."""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["step_seed", "lr_at", "set_lr", "make_optimizer", "progress_bar", "step_done", "environment"]


def step_seed(seed: int, step: int, stream: int) -> int:
    """A 63-bit seed for the random draws of ``stream`` at ``step``: no RNG state crosses steps, so resume is exact."""
    return int(np.random.SeedSequence([seed, step, stream]).generate_state(2, dtype=np.uint32).view(np.uint64)[0] >> 1)


def lr_at(step: int, cfg) -> float:
    """Linear warm-up over ``warmup_steps``, then constant or cosine decay to 10 % at ``steps``."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if cfg.lr_schedule == "constant":
        return cfg.lr
    frac = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(frac, 1.0))))


def set_lr(optimizer: torch.optim.Optimizer, step: int, cfg) -> float:
    """Set the scheduled rate of ``step`` on every parameter group; return it."""
    lr = lr_at(step, cfg)
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def make_optimizer(model: torch.nn.Module, cfg) -> torch.optim.AdamW:
    # decay matrices only (nanoGPT): no weight decay on biases, LayerNorm gains or position tables
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)


def progress_bar(enabled: bool, total: int, description: str, done: int = 0):
    """A progress bar over ``total`` steps, ``done`` of them already taken (a resumed run); ``None`` if disabled."""
    if not enabled:
        return None
    from tailmiss._progress import ProgressBar

    bar = ProgressBar(total=total, description=description)
    if done:
        bar.update(min(done, total))
    return bar


def step_done(step: int, cfg, checkpoint, bar, on_step) -> None:
    """After step ``step``: checkpoint when due, advance the bar, call the caller's hook."""
    if (step + 1) % cfg.checkpoint_every == 0:
        checkpoint(step + 1)
    if bar is not None:
        bar.update(1)
    if on_step is not None:
        on_step(step)


def environment(device: torch.device) -> dict:
    return {"device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads()}
