"""What the ``tailmiss llm`` commands compute, kept out of the CLI so notebooks can call it too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from tailmiss._device import resolve_device
from tailmiss.llm._loop import progress_bar
from tailmiss.llm.checkpoint import LoadedRun
from tailmiss.llm.evaluate import PASS_KS, answer_distribution, exact_metrics, sample_correct_counts, sampled_pass_at_k

__all__ = ["evaluate_run"]


def evaluate_run(run_dir: str | Path, samples: int, device=None, seed: int = 0, progress: bool = False) -> dict:
    """Sampled pass@k (and exact metrics for enumerable tasks) of a run folder on its eval prompts.

    The prompts are the run's own evaluation set (``eval_prompts`` distinct
    prompts of ``eval_split``); exact metrics of an RL run are measured against
    its SFT starting point.
    """
    if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
        raise ValueError(f"samples must be a positive integer, got {samples!r}")
    dev = resolve_device(device)
    run = LoadedRun(run_dir, dev)
    cfg, task = run.config, run.task
    prompts = task.prompts(cfg.eval_split, cfg.eval_prompts, seed=cfg.seed, distinct=True)
    gen = torch.Generator(device=dev).manual_seed(seed)
    bar = progress_bar(progress, len(prompts), f"sampling {samples} per prompt")
    try:
        counts = sample_correct_counts(
            run.model, task, prompts, samples, gen, getattr(cfg, "temperature", 1.0), progress=bar and bar.update
        )
    finally:
        if bar is not None:
            bar.close()
    out: dict = {
        "run": str(run_dir),
        "kind": run.kind,
        "step": run.step,
        "task": task.name,
        "prompts": len(prompts),
        "split": cfg.eval_split,
        "samples": samples,
        "pass_at_k": {str(k): v for k, v in sampled_pass_at_k(counts, samples, PASS_KS).items()},
    }
    if task.enumerable:
        reference = answer_distribution(run.reference, task, prompts) if run.reference is not None else None
        rare_share = getattr(cfg, "rare_share", 0.1)
        m = exact_metrics(answer_distribution(run.model, task, prompts), reference, PASS_KS, rare_share)
        out.update(
            exact_pass_at_k={str(k): v for k, v in m["exact_pass_at_k"].items()},
            mu_pos=m["mu_pos_mean"],
            retained_mass=m["retained_mass_mean"],
            dnll_rare=m["dnll_rare"],
            off_format=m["off_format_mean"],
            tau_rare=float(np.mean(m["tau_rare"])),
        )
    return out
