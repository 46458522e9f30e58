"""Supervised training from scratch on a task's SFT data distribution.

One loop, top to bottom: draw prompts and teacher answers for the step, take
the cross-entropy on answer tokens (``<eos>`` included), one AdamW step, log,
evaluate, checkpoint.

Under ``torchrun`` every rank draws the step's whole batch (cheap) and takes
the loss of its contiguous share of the rows, divided by the batch's token
count, so that the sum over ranks is the single-process token mean; DDP
averages the gradients, hence each rank back-propagates K times its share.
Rank 0 alone evaluates and writes the run folder.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from tailmiss._device import resolve_device
from tailmiss._dist import barrier, is_main, shard_bounds, world
from tailmiss.llm.checkpoint import RunFolder
from tailmiss.llm.config import SFTConfig
from tailmiss.llm.evaluate import answer_distribution, exact_metrics, sample_correct_counts
from tailmiss.llm.loop import (
    all_sum,
    data_parallel,
    environment,
    first_step,
    prepare_run,
    progress_bar,
    step_done,
    step_seed,
)
from tailmiss.llm.model import GPT, param_device
from tailmiss.llm.optim import make_optimizer, set_lr

__all__ = ["train_sft", "evaluate_sft"]

_DATA, _EVAL_SAMPLES = 1, 2  # random streams of step_seed
EVAL_SAMPLES_NON_ENUMERABLE = 16


def evaluate_sft(model: GPT, cfg: SFTConfig, prompts, step: int) -> dict:
    """Metrics of the model on the eval prompts: exact ones if the task is enumerable, else sampled pass@1."""
    task = cfg.task
    if task.enumerable:
        m = exact_metrics(answer_distribution(model, task, prompts))
        row = {"mu_pos": m["mu_pos_mean"], "off_format": m["off_format_mean"]}
        row.update({f"pass_at_{k}": m["exact_pass_at_k"][k] for k in (1, 256)})
        if hasattr(task, "target_mu_pos"):
            row["target_mu_pos"] = float(np.mean([task.target_mu_pos(p) for p in prompts]))
        return row
    gen = torch.Generator(device=param_device(model)).manual_seed(step_seed(cfg.seed, step, _EVAL_SAMPLES))
    counts = sample_correct_counts(model, task, prompts, EVAL_SAMPLES_NON_ENUMERABLE, gen)
    return {"pass_at_1": float(np.mean(counts) / EVAL_SAMPLES_NON_ENUMERABLE)}


def _evaluation(model: GPT, cfg: SFTConfig, prompts, step: int) -> dict:
    model.eval()
    return evaluate_sft(model, cfg, prompts, step)


@dataclass
class _SFTRun:
    """One SFT run while it trains: config, model (wrapped in DDP as ``ddp`` when several processes run),
    optimizer, device, and this rank's rows of every batch."""

    cfg: SFTConfig
    model: GPT
    optimizer: object
    dev: torch.device
    ddp: torch.nn.Module | None = None
    rows: tuple[int, int] = (0, 0)


def _sft_step(run: _SFTRun, step: int):
    """One supervised step on this rank's rows of the step's batch: ``(loss, lr, grad_norm, tokens)``.

    The loss is this rank's share of the whole batch's token mean; DDP averages the ranks' gradients.
    """
    cfg, model, ddp, optimizer, dev = run.cfg, run.model, run.ddp, run.optimizer, run.dev
    task, (lo, hi) = cfg.task, run.rows
    k = world()
    ddp.train()
    prompts = task.prompts("train", cfg.batch_size, seed=step_seed(cfg.seed, step, _DATA))
    ids, mask = task.sft_batch(prompts, np.random.default_rng(step_seed(cfg.seed, step, _DATA)))
    target_mask = mask[:, 1:]
    tokens = int(target_mask.sum())  # the denominator of the whole batch's token mean
    if hi > lo:
        ids_k, target_k = ids[lo:hi].to(dev), target_mask[lo:hi].to(dev)
        logits = ddp(ids_k[:, :-1])  # (B_k, S-1, vocab)
        nll = F.cross_entropy(logits.transpose(1, 2), ids_k[:, 1:], reduction="none")  # (B_k, S-1)
        loss = (nll * target_k).sum() / tokens  # this rank's share of the batch's token mean
    else:  # no row here: a zero loss through the model keeps this rank in DDP's gradient all-reduce
        loss = ddp(ids[:1, :-1].to(dev)).sum() * 0.0
    lr = set_lr(optimizer, step, cfg.optim, cfg.steps)
    optimizer.zero_grad(set_to_none=True)
    (loss * k).backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
    optimizer.step()
    return loss, lr, grad_norm, tokens


def _check_config(cfg) -> None:
    if not isinstance(cfg, SFTConfig):
        raise ValueError(f"cfg must be an SFTConfig, got {type(cfg).__name__}")
    if cfg.model.kind != "transformer":
        raise ValueError(
            f"a {cfg.model.kind!r} policy is not trained by SFT: it is built from a trained transformer's answer "
            "distribution (tailmiss.experiments.ladder.derive_policy)"
        )


def _start(cfg: SFTConfig, state: dict | None, dev):
    """The seeded new model and its optimizer, or both restored from ``state``: ``(model, optimizer, history,
    start step)``."""
    task = cfg.task
    torch.manual_seed(cfg.seed)
    model = GPT(cfg.model, len(task.vocab), task.prompt_len + task.max_answer_len).to(dev)
    optimizer = make_optimizer(model, cfg.optim)
    if state is None:
        return model, optimizer, [], 0
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return model, optimizer, state["history"], state["step"]


def _meta(run: _SFTRun, start: int, tokens_seen: int, elapsed: float) -> dict:
    """The finished run's ``meta.json``."""
    cfg = run.cfg
    return {
        "kind": "sft",
        "complete": True,
        "params": run.model.num_params(),
        "steps": cfg.steps,
        "resumed_from": min(start, cfg.steps),
        "elapsed_s": round(elapsed, 3),
        "train_tokens_per_s": tokens_seen / max(elapsed, 1e-9),
        **environment(run.dev),
    }


def _run_state(cfg: SFTConfig, model: GPT, optimizer, step: int) -> dict:
    """What a checkpoint holds besides the history."""
    return {
        "kind": "sft",
        "step": step,
        "config": cfg.to_dict(),
        "task": cfg.task.to_dict(),
        "model_config": cfg.model.__dict__.copy(),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
    }


def train_sft(
    cfg: SFTConfig,
    out: str | Path,
    device=None,
    resume: bool = False,
    progress: bool = True,
    on_step=None,
) -> Path:
    """Train ``cfg`` into the run folder ``out`` (``config.toml``, ``history.csv``, ``meta.json``, checkpoint).

    ``resume`` continues from the folder's last checkpoint; ``on_step(step)``
    is called after each completed step (tests use it to interrupt a run).
    Under ``torchrun`` every rank calls this with its own ``device``; rank 0
    evaluates and writes the folder, and every rank returns its path once the
    run is complete.
    """
    _check_config(cfg)
    dev, folder = resolve_device(device), RunFolder(out)
    state = prepare_run(folder, cfg, resume)
    task = cfg.task
    model, optimizer, history, start = _start(cfg, state, dev)  # ---- model, optimizer, state
    start = first_step(folder, history, start, cfg.steps)
    if start is None:
        return folder.path
    main, k = is_main(), world()  # rank 0 evaluates and writes; the others only train
    run = _SFTRun(cfg, model, optimizer, dev, data_parallel(model, dev), shard_bounds(cfg.batch_size))
    eval_prompts = task.prompts(cfg.eval_split, cfg.eval_prompts, seed=cfg.seed, distinct=True)

    def checkpoint(step: int) -> None:
        if main:
            folder.save_checkpoint({**_run_state(cfg, model, optimizer, step), "history": history})
            folder.write_history(history)

    bar = progress_bar(progress and main, cfg.steps, f"sft {cfg.name} on {dev}" + (f" ×{k}" if k > 1 else ""), start)
    started, tokens_seen = time.perf_counter(), 0
    try:
        for step in range(start, cfg.steps):
            # ---- evaluation (before the update of this step) -----------------------------
            evaluated = step % cfg.eval_every == 0
            row = {"step": step, **(_evaluation(model, cfg, eval_prompts, step) if main and evaluated else {})}
            # ---- one supervised step (this rank's rows; DDP averages the gradients) ----------
            loss, lr, grad_norm, tokens = _sft_step(run, step)
            tokens_seen += tokens
            if step % cfg.log_every == 0 or evaluated:
                (loss_sum,) = all_sum([loss.detach()], dev)
                row.update({"loss": loss_sum, "lr": lr, "grad_norm": float(grad_norm)})
                history.append(row)
            step_done(step, cfg, checkpoint, bar, on_step)
    finally:
        if bar is not None:
            bar.close()
    if start <= cfg.steps:  # the last evaluation, after the last update
        history.append({"step": cfg.steps, **(_evaluation(model, cfg, eval_prompts, cfg.steps) if main else {})})
    checkpoint(cfg.steps)
    if main:
        folder.write_meta(_meta(run, start, tokens_seen, time.perf_counter() - started))
    barrier()  # every rank returns once the folder is complete
    return folder.path
