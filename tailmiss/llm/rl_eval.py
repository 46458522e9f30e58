"""Step 6 of the RL loop: exact answer-mass metrics against the SFT model and sampled pass@k (rank 0 alone).

The SFT model's distributions (and its sampled pass@k at step 0) are scored
once per process for every run of a sweep that starts from the same checkpoint
(:func:`sft_once`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from tailmiss.llm.checkpoint import CHECKPOINT
from tailmiss.llm.evaluate import PASS_KS, answer_distribution, exact_metrics, sample_correct_counts, sampled_pass_at_k
from tailmiss.llm.loop import step_seed
from tailmiss.llm.rl_run import EvalSets, RLRun
from tailmiss.llm.rollouts import EVAL, training_pool
from tailmiss.llm.tasks import Task
from tailmiss.store import file_sha256

__all__ = ["exact_row", "score", "evaluation", "eval_sets", "reference_distribution", "sft_once"]

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


def score(model, task, prompts, reference_dist):
    """The model's exact distribution over the answers ``reference_dist`` scores (all, or the correct ones)."""
    return answer_distribution(model, task, prompts, correct_only=not reference_dist.complete)


def exact_row(current, reference_dist, rare_share: float, prefix: str = "", per_prompt=None) -> dict:
    """The exact metrics an RL run logs at an evaluation: means over the prompts of the model's distribution
    ``current`` (:func:`score`) against the SFT model's, with every pass@k, keys prefixed by ``prefix``;
    ``per_prompt``, a list, receives the per-prompt ``mu_pos``."""
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


def eval_sets(run: RLRun) -> EvalSets:
    """The held-out prompts every evaluation scores and the SFT model's distributions on them (and on the training
    pool), scored once on rank 0 (:func:`reference_distribution`)."""
    cfg, task = run.cfg, run.task
    prompts = task.prompts(cfg.eval_split, cfg.eval_prompts, seed=cfg.eval_prompt_seed, distinct=True)
    start_sha = file_sha256(Path(run.init) / CHECKPOINT)
    only = cfg.eval_answers == "correct"
    exact = task.enumerable and run.main
    reference_dist = reference_distribution(run.reference, start_sha, task, prompts, only) if exact else None
    pool = None
    if cfg.train_prompts and exact:
        pool_prompts = list(training_pool(task, cfg.train_prompts, cfg.pool_seed, cfg.train_types))
        pool = (pool_prompts, reference_distribution(run.reference, start_sha, task, pool_prompts, only))
    return EvalSets(prompts, reference_dist, pool, start_sha)


def evaluation(run: RLRun, step: int) -> dict:
    r"""Step 6's metrics at ``step`` when due (rank 0; every ``eval_every`` steps and at the last): exact metrics
    against the SFT model (enumerable tasks; the training pool too, columns ``pool_*``) and sampled pass@k
    (``eval_samples > 0``). At step 0 the model still equals the SFT model, whose distributions are reused (the
    same numbers: the same weights) and whose sampled pass@k is drawn once per process for every run that shares
    the seed and settings (:func:`sft_once`). With ``eval_per_prompt`` the per-prompt :math:`\mu_{pos}(x)` go to
    ``run.per_prompt[step]``."""
    cfg, task, sets = run.cfg, run.task, run.evals
    if not (run.main and (step % cfg.eval_every == 0 or step == cfg.steps)):
        return {}
    untrained = step == 0  # resumed runs never re-evaluate step 0
    kept = [] if cfg.eval_per_prompt and task.enumerable else None
    row: dict = {}
    run.model.eval()
    if task.enumerable:
        current = sets.reference if untrained else score(run.model, task, sets.prompts, sets.reference)
        row.update(exact_row(current, sets.reference, cfg.rare_share, per_prompt=kept))
        if sets.pool is not None:
            prompts, reference = sets.pool
            current = reference if untrained else score(run.model, task, prompts, reference)
            row.update(exact_row(current, reference, cfg.rare_share, prefix="pool_"))
    if cfg.eval_samples > 0:
        row.update(_sampled(run, step, untrained))
    if kept:
        run.per_prompt[step] = torch.from_numpy(kept[0])
    return row


def _sampled(run: RLRun, step: int, untrained: bool) -> dict:
    """Sampled pass@k from ``eval_samples`` samples per held-out prompt."""
    cfg, task, prompts = run.cfg, run.task, run.evals.prompts
    seed = step_seed(cfg.seed, step, EVAL)

    def draw():
        gen = torch.Generator(device=run.dev).manual_seed(seed)
        return sample_correct_counts(run.model, task, prompts, cfg.eval_samples, gen, cfg.temperature)

    if untrained:
        prompt_key = task.encode_prompts(prompts).numpy().tobytes()
        key = ("sampled", run.evals.start_sha, prompt_key, cfg.eval_samples, seed, cfg.temperature, str(run.dev))
        counts = sft_once(key, draw)
    else:
        counts = draw()
    return {f"pass_at_{k}": v for k, v in sampled_pass_at_k(counts, cfg.eval_samples, PASS_KS).items()}
