r"""Steps 1-2 of the RL loop: a step's prompts, rollouts and rewards, and DAPO's dynamic sampling.

Every rank draws the same prompts. With ``rollout_sampling = "generator"`` one
seeded ``torch.Generator`` per step draws the whole batch on every rank; with
``"counter"`` rank k samples the rollouts of its share of the prompts from a
stateless hash (:class:`~tailmiss.llm.model.CounterStream`) and the shares are
all-gathered, so every rank holds the single-process batch.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from tailmiss._dist import all_gather_objects, shard_bounds
from tailmiss.llm.config import RLConfig
from tailmiss.llm.loop import step_seed
from tailmiss.llm.model import CounterStream, generate
from tailmiss.llm.rl_run import RLRun
from tailmiss.llm.tasks import EOS, PAD, Task

__all__ = [
    "Rollouts",
    "response_mask",
    "rollout_stream",
    "score",
    "collect_rollouts",
    "training_pool",
    "check_train_types",
    "step_prompts",
    "first_round_info",
    "gather_groups",
]

PROMPTS, SAMPLING, SHUFFLE, EVAL = 1, 2, 3, 4
"""The random streams of :func:`~tailmiss.llm.loop.step_seed` (prompts, rollouts, mini-batch shuffle, pass@k)."""


class Rollouts:
    """One step's groups: prompt ids (R, P), answers (R, L), response mask, rewards (G, N)."""

    def __init__(self, prompt_ids, answers, mask, rewards):
        self.prompt_ids, self.answers, self.mask, self.rewards = prompt_ids, answers, mask, rewards

    def take_groups(self, keep: torch.Tensor, group_size: int) -> Rollouts:
        rows = (keep[:, None] * group_size + torch.arange(group_size)).reshape(-1)
        return Rollouts(self.prompt_ids[rows], self.answers[rows], self.mask[rows], self.rewards[keep])

    @staticmethod
    def concat(parts: list[Rollouts]) -> Rollouts:
        return Rollouts(
            *(torch.cat([getattr(p, k) for p in parts]) for k in ("prompt_ids", "answers", "mask", "rewards"))
        )


def response_mask(answers: torch.Tensor) -> torch.Tensor:
    """True on each answer's tokens up to and including its first ``<eos>`` (all tokens if there is none)."""
    is_eos = answers == EOS
    before = torch.cumsum(is_eos.long(), dim=1) - is_eos.long()
    return before == 0


def rollout_stream(cfg: RLConfig, step: int, round_: int, rows: torch.Tensor, device):
    """The random draws of round ``round_`` of ``step``'s rollouts.

    With ``rollout_sampling = "generator"``, one ``torch.Generator`` seeded with the round's seed draws the whole
    batch; with ``"counter"``, a :class:`~tailmiss.llm.model.CounterStream` keyed by the round's seed and the global
    rollout rows ``rows`` (row r = prompt × N + sample), so that each row's draws depend on (seed, step, round, r)
    alone.
    """
    seed = step_seed(cfg.seed, step, 10 * round_ + SAMPLING)
    if cfg.rollout_sampling == "generator":
        return torch.Generator(device=device).manual_seed(seed)
    return CounterStream(seed, rows)


def score(task: Task, prompts: list, rows, answers: list, group_size: int) -> torch.Tensor:
    """The verifier's rewards of the rollouts ``answers`` (token lists) at global rows ``rows``, as (groups, N) in
    float64: row r answers prompt ``prompts[r // N]``."""
    rewards = [task.reward(prompts[r // group_size], a) for r, a in zip(rows, answers)]
    return torch.tensor(rewards, dtype=torch.float64).view(-1, group_size)


@torch.no_grad()
def collect_rollouts(run: RLRun, step: int, round_: int) -> Rollouts:
    """``prompts_per_step`` training prompts × ``group_size`` samples with their rewards (the whole round, every rank).

    Every rank draws the same prompts. With ``rollout_sampling = "generator"``
    every rank samples the whole batch from one seeded ``torch.Generator``.
    With ``"counter"``, rank k samples and scores the rollouts of its
    contiguous share of the prompts (:func:`tailmiss._dist.shard_bounds`), and
    the shares are gathered in rank order (:func:`rollout_stream`), so the batch
    is the same for any number of processes.
    """
    model, task, cfg, device = run.model, run.task, run.cfg, run.dev
    model.eval()
    n, top_k = cfg.group_size, cfg.top_k or None
    prompts = step_prompts(task, cfg, step, round_)
    prompt_ids = task.encode_prompts(prompts).repeat_interleave(n, dim=0)  # (B*N, P)
    if cfg.rollout_sampling == "generator":  # one generator over the whole batch: every rank draws all of it
        gen = rollout_stream(cfg, step, round_, None, device)
        prompt_ids = prompt_ids.to(device)
        answers, _ = generate(model, prompt_ids, task.max_answer_len, EOS, PAD, cfg.temperature, top_k, cfg.top_p, gen)
        rewards = score(task, prompts, range(len(answers)), answers.cpu().tolist(), n)  # (B, N)
        return Rollouts(prompt_ids, answers, response_mask(answers), rewards)
    lo, hi = shard_bounds(cfg.prompts_per_step)
    rows = torch.arange(lo * n, hi * n)  # this rank's global rollout rows
    answers = torch.full((len(rows), task.max_answer_len), PAD, dtype=torch.long)
    if len(rows):
        stream = rollout_stream(cfg, step, round_, rows, device)
        ids = prompt_ids[rows].to(device)
        answers, _ = generate(model, ids, task.max_answer_len, EOS, PAD, cfg.temperature, top_k, cfg.top_p, stream)
        answers = answers.cpu()
    rewards = score(task, prompts, rows.tolist(), answers.tolist(), n)  # (B_k, N)
    shares = all_gather_objects((answers, rewards))
    answers = torch.cat([a for a, _ in shares]).to(device)  # (B*N, L)
    rewards = torch.cat([r for _, r in shares])  # (B, N)
    return Rollouts(prompt_ids.to(device), answers, response_mask(answers), rewards)


@functools.lru_cache(maxsize=32)
def training_pool(task: Task, size: int, seed: int, types: tuple[str, ...] | None = None) -> tuple:
    """The fixed pool of ``size`` distinct training prompts drawn from ``seed`` (``RLConfig.train_prompts``), of the
    prompt types ``types`` alone when given (``RLConfig.train_types``)."""
    if types is None:
        return tuple(task.prompts("train", size, seed=seed, distinct=True))
    return tuple(task.prompts_where("train", size, seed, lambda p: task.prompt_type(p) in types, distinct=True))


def check_train_types(task: Task, cfg: RLConfig) -> None:
    """``ValueError`` unless the task tells prompt types and ``cfg.train_types`` names only types it has."""
    if cfg.train_types is None:
        return
    known = getattr(task, "prompt_types", None)
    if known is None:
        raise ValueError(f"train_types needs a task with prompt types; task {task.name!r} has none")
    unknown = [t for t in cfg.train_types if t not in known]
    if unknown:
        raise ValueError(f"train_types names {', '.join(map(repr, unknown))}: task {task.name!r} has {known}")


def step_prompts(task: Task, cfg: RLConfig, step: int, round_: int = 0) -> list:
    """The prompts of a step's sampling round: fresh training prompts (of ``cfg.train_types`` alone when given), or a
    draw without replacement from the pool (``pool_order = "epochs"``: the step's block of its epoch's order of the
    pool, for the first round)."""
    seed = step_seed(cfg.seed, step, 10 * round_ + PROMPTS)
    if not cfg.train_prompts and cfg.train_types is None:
        return task.prompts("train", cfg.prompts_per_step, seed=seed)
    if not cfg.train_prompts:
        return task.prompts_where("train", cfg.prompts_per_step, seed, lambda p: task.prompt_type(p) in cfg.train_types)
    pool = training_pool(task, cfg.train_prompts, cfg.pool_seed, cfg.train_types)
    if cfg.pool_order == "epochs" and round_ == 0:
        epoch, block = divmod(step, cfg.steps_per_epoch)
        order = np.random.default_rng([int(cfg.seed), epoch, PROMPTS, 0xE90C]).permutation(len(pool))
        picks = order[block * cfg.prompts_per_step : (block + 1) * cfg.prompts_per_step]
        return [pool[i] for i in picks]
    picks = np.random.default_rng(seed).choice(len(pool), size=cfg.prompts_per_step, replace=False)
    return [pool[i] for i in picks]


def first_round_info(first: Rollouts) -> dict:
    """What a step logs of its first round of rollouts: the mean reward, each group's success rate ``mu_hat``, the
    share of groups whose rewards are all equal, and the rollouts and tokens sampled (refill rounds add theirs)."""
    return {
        "reward_mean": float(first.rewards.mean()),
        "mu_hat": first.rewards.mean(1),
        "frac_zero_std": float((first.rewards.std(1, correction=0) == 0).double().mean()),
        "rollouts": first.rewards.numel(),
        "tokens": int(first.mask.sum()),
        "refills": 0,
    }


def gather_groups(run: RLRun, step: int) -> tuple[Rollouts, dict]:
    """Rollouts of the step; with dynamic sampling, only mixed-reward groups, refilled up to ``max_refills`` rounds."""
    cfg = run.cfg
    first = collect_rollouts(run, step, 0)
    info = first_round_info(first)
    if not cfg.dynamic_sampling:
        return first, info
    kept, have, batch = [], 0, first
    for round_ in range(cfg.max_refills + 1):
        if round_ > 0:
            batch = collect_rollouts(run, step, round_)
            info["rollouts"] += batch.rewards.numel()
            info["tokens"] += int(batch.mask.sum())
            info["refills"] = round_
        active = torch.nonzero(batch.rewards.std(1, correction=0) > 0).squeeze(1)
        active = active[: cfg.prompts_per_step - have]
        if len(active):
            kept.append(batch.take_groups(active, cfg.group_size))
            have += len(active)
        if have >= cfg.prompts_per_step:
            break
    if not kept:
        return first.take_groups(torch.zeros(0, dtype=torch.long), cfg.group_size), info
    return Rollouts.concat(kept), info
