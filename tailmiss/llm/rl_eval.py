"""Step 6 of the RL loop: exact answer-mass metrics against the SFT model and sampled pass@k.

The SFT model's distributions (and its sampled pass@k at step 0) are scored
once per process for every run of a sweep that starts from the same checkpoint
(:func:`sft_once`).
"""

from __future__ import annotations

import numpy as np
import torch

from tailmiss.llm._loop import step_seed
from tailmiss.llm.evaluate import PASS_KS, answer_distribution, exact_metrics, sample_correct_counts, sampled_pass_at_k
from tailmiss.llm.rollouts import EVAL
from tailmiss.llm.tasks import Task

__all__ = ["exact_row", "evaluate_rl", "reference_distribution", "sft_once"]

_SFT_CACHE: dict = {}


def sft_once(key: tuple, compute):
    """``compute()``, once per process for every run of a sweep: its runs start from one SFT checkpoint (``key``
    holds its SHA-256) and share their evaluation prompts and settings (the rest of ``key``)."""
    if key not in _SFT_CACHE:
        if len(_SFT_CACHE) >= 16:
            _SFT_CACHE.pop(next(iter(_SFT_CACHE)))
        _SFT_CACHE[key] = compute()
    return _SFT_CACHE[key]


def reference_distribution(reference, start_sha: str, task: Task, prompts, correct_only: bool = False):
    """Exact answer distribution of the SFT model on ``prompts`` (scored once per process, :func:`sft_once`;
    ``correct_only``: the correct answers only)."""
    key = ("exact", start_sha, task.encode_prompts(prompts).numpy().tobytes(), correct_only)
    return sft_once(key, lambda: answer_distribution(reference, task, prompts, correct_only=correct_only))


def _ratio(num: float, den: float) -> float:
    return float(num / den) if den > 0 else float("nan")  # no prompt has a rare set: no ratio


def exact_row(
    model, reference_dist, task, prompts, rare_share: float, prefix: str = "", current=None, per_prompt=None
) -> dict:
    """The exact metrics an RL run logs at an evaluation (means over ``prompts``; ``current``: the model's
    distribution when already scored), with every pass@k, keys prefixed by ``prefix``. The answers scored are the
    reference's (all, or the correct ones only); ``per_prompt``, a list, receives the per-prompt ``mu_pos``."""
    if current is None:
        current = answer_distribution(model, task, prompts, correct_only=not reference_dist.complete)
    m = exact_metrics(current, reference_dist, rare_share=rare_share)
    if per_prompt is not None:
        per_prompt.append(m["mu_pos"])
    row = dict(
        mu_pos=m["mu_pos_mean"],
        retained_mass=m["retained_mass_mean"],
        dnll_rare=m["dnll_rare"],
        tau_rare=float(np.mean(m["tau_rare"])),
        tau_ratio=_ratio(np.sum(m["tau_rare"]), np.sum(m["tau_rare_ref"])),
        off_format=m["off_format_mean"],
        rare_hit_at_256=m["rare_pass_at_k"][256],
    )
    # every k, so that a sweep's final table can read the last evaluation instead of scoring the model again
    row.update({f"exact_pass_at_{k}": v for k, v in m["exact_pass_at_k"].items()})
    row.update({f"rare_pass_at_{k}": v for k, v in m["rare_pass_at_k"].items()})
    return {prefix + k: v for k, v in row.items()}


def evaluate_rl(
    model,
    reference_dist,
    task,
    cfg,
    eval_prompts,
    step,
    device,
    pool=None,
    untrained=False,
    start_sha=None,
    per_prompt=None,
) -> dict:
    r"""Exact metrics against the SFT model (enumerable tasks) and sampled pass@k (``eval_samples > 0``).

    ``pool``: ``(prompts, reference distribution)`` of the training pool, scored
    too (columns ``pool_*``) when the run trains on a fixed pool. ``untrained``:
    the model still equals the reference (step 0), whose exact distributions are
    reused instead of scored again (the same numbers: the same weights); with
    ``start_sha`` (its checkpoint's SHA-256) its sampled pass@k is drawn once per
    process for all the runs that share the seed and settings, too. ``per_prompt``, a list, receives the
    evaluation prompts' per-prompt :math:`\mu_{pos}(x)` (enumerable tasks).
    """
    row: dict = {}
    model.eval()
    if task.enumerable:
        same = reference_dist if untrained else None
        kept = dict(current=same, per_prompt=per_prompt)
        row.update(exact_row(model, reference_dist, task, eval_prompts, cfg.rare_share, **kept))
        if pool is not None:
            same = pool[1] if untrained else None
            row.update(exact_row(model, pool[1], task, pool[0], cfg.rare_share, prefix="pool_", current=same))
    if cfg.eval_samples > 0:
        seed = step_seed(cfg.seed, step, EVAL)

        def draw():
            gen = torch.Generator(device=device).manual_seed(seed)
            return sample_correct_counts(model, task, eval_prompts, cfg.eval_samples, gen, cfg.temperature)

        if untrained and start_sha is not None:
            prompt_key = task.encode_prompts(eval_prompts).numpy().tobytes()
            key = ("sampled", start_sha, prompt_key, cfg.eval_samples, seed, cfg.temperature, str(device))
            counts = sft_once(key, draw)
        else:
            counts = draw()
        for k, v in sampled_pass_at_k(counts, cfg.eval_samples, PASS_KS).items():
            row[f"pass_at_{k}"] = v
    return row
