"""Supervised training from scratch on a task's SFT data distribution.

One loop, top to bottom: draw prompts and teacher answers for the step, take
the cross-entropy on answer tokens (``<eos>`` included), one AdamW step, log,
evaluate, checkpoint.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from tailmiss._device import resolve_device
from tailmiss.llm._loop import environment, make_optimizer, progress_bar, set_lr, step_done, step_seed
from tailmiss.llm.checkpoint import RunFolder
from tailmiss.llm.config import SFTConfig
from tailmiss.llm.evaluate import answer_distribution, exact_metrics, sample_correct_counts
from tailmiss.llm.model import GPT

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
    gen = torch.Generator(device=model.wte.weight.device).manual_seed(step_seed(cfg.seed, step, _EVAL_SAMPLES))
    counts = sample_correct_counts(model, task, prompts, EVAL_SAMPLES_NON_ENUMERABLE, gen)
    return {"pass_at_1": float(np.mean(counts) / EVAL_SAMPLES_NON_ENUMERABLE)}


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
    """
    if not isinstance(cfg, SFTConfig):
        raise ValueError(f"cfg must be an SFTConfig, got {type(cfg).__name__}")
    dev = resolve_device(device)
    folder = RunFolder(out)
    state = folder.prepare(cfg, resume)
    task = cfg.task

    # ---- model, optimizer, state -------------------------------------------------------
    torch.manual_seed(cfg.seed)
    model = GPT(cfg.model, len(task.vocab), task.prompt_len + task.max_answer_len).to(dev)
    optimizer = make_optimizer(model, cfg)
    history: list[dict] = []
    start = 0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        history, start = state["history"], state["step"]
    if history and history[-1]["step"] == cfg.steps:  # every step done; killed before meta.json at most
        if (folder.path / "meta.json").is_file():
            return folder.path
        start = cfg.steps + 1
    eval_prompts = task.prompts(cfg.eval_split, cfg.eval_prompts, seed=cfg.seed, distinct=True)

    def checkpoint(step: int) -> None:
        folder.save_checkpoint(
            {
                "kind": "sft",
                "step": step,
                "config": cfg.to_dict(),
                "task": task.to_dict(),
                "model_config": cfg.model.__dict__.copy(),
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "history": history,
            }
        )
        folder.write_history(history)

    bar = progress_bar(progress, cfg.steps, f"sft {cfg.name} on {dev}", done=start)
    started, tokens_seen = time.perf_counter(), 0
    try:
        for step in range(start, cfg.steps + 1):
            row: dict = {"step": step}
            # ---- evaluation (before the update of this step) -----------------------------
            if step % cfg.eval_every == 0 or step == cfg.steps:
                model.eval()
                row.update(evaluate_sft(model, cfg, eval_prompts, step))
            if step == cfg.steps:
                history.append(row)
                break
            # ---- one supervised step ------------------------------------------------------
            model.train()
            prompts = task.prompts("train", cfg.batch_size, seed=step_seed(cfg.seed, step, _DATA))
            ids, mask = task.sft_batch(prompts, np.random.default_rng(step_seed(cfg.seed, step, _DATA)))
            ids, mask = ids.to(dev), mask.to(dev)
            logits = model(ids[:, :-1])  # (B, S-1, vocab)
            target_mask = mask[:, 1:]
            nll = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # (B, S-1)
            loss = (nll * target_mask).sum() / target_mask.sum()
            lr = set_lr(optimizer, step, cfg)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            tokens_seen += int(target_mask.sum())
            if step % cfg.log_every == 0 or len(row) > 1:
                row.update({"loss": float(loss.detach()), "lr": lr, "grad_norm": float(grad_norm)})
                history.append(row)
            step_done(step, cfg, checkpoint, bar, on_step)
    finally:
        if bar is not None:
            bar.close()
    checkpoint(cfg.steps)
    elapsed = time.perf_counter() - started
    folder.write_meta(
        {
            "kind": "sft",
            "complete": True,
            "params": model.num_params(),
            "steps": cfg.steps,
            "resumed_from": min(start, cfg.steps),
            "elapsed_s": round(elapsed, 3),
            "train_tokens_per_s": tokens_seen / max(elapsed, 1e-9),
            **environment(dev),
        }
    )
    return folder.path
