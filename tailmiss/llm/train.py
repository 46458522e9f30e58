r"""Group-relative RL from an SFT checkpoint: GRPO, DAPO, CISPO and Dr. GRPO, each with the focal weight.

One loop, top to bottom (CleanRL style). Per step:

1. **Rollouts.** ``prompts_per_step`` training prompts, ``group_size`` samples
   each (KV cache, T = 1, top-p 1, top-k off by default). By default
   (``rollout_sampling = "generator"``) one seeded ``torch.Generator`` per step
   draws the whole batch. With ``"counter"`` the draws are counter-based
   (:class:`~tailmiss.llm.model.CounterStream`): rollout row
   :math:`r = \text{prompt} \cdot N + \text{sample}` takes its token at position
   t by inverse-CDF sampling of the uniform :math:`h(\text{seed}_{step,round}, r, t)`
   of a stateless hash, so every rollout is a function of (seed, step, round,
   r) alone, whatever the split of the batch over processes or the device.
2. **Rewards.** The task's strict verifier: 1 / 0.
3. **Advantages.** Per group, :math:`A_i = (R_i - \bar R)/(\sigma_R + \epsilon)`
   (the method's mode; Dr. GRPO drops the std), times the focal weight
   :math:`g = (1 - \hat\mu_{pos})^\gamma` with :math:`\hat\mu_{pos} = X/N`
   (F-GRPO Eqs. 3, 11-13). With DAPO's dynamic sampling, groups whose rewards
   are all equal are dropped and more prompts are drawn.
4. **Old log-probs.** The rollout policy's token log-probabilities (and the SFT
   model's, for the logged KL and the optional KL penalty).
5. **Updates.** ``minibatches`` sequential AdamW steps, each on a share of the
   rollouts, of the method's token loss from :mod:`tailmiss.objectives` (plus
   the optional KL penalty and entropy bonus), gradient norm clipped. With one
   mini-batch the ratio is exactly 1 and the update is on-policy; then no clip
   acts and GRPO, DAPO and CISPO take the same gradient step
   (:math:`-A\nabla r = -A\nabla\log\pi` at :math:`r = 1`): the methods differ
   only from the second mini-batch on.
6. **Log, evaluate, checkpoint.** Exact answer-mass metrics on a fixed prompt
   set every ``eval_every`` steps (enumerable tasks).

**Several processes** (``torchrun --nproc_per_node=K``, see
:mod:`tailmiss._dist`). Every rank draws the same prompts. With counter-based
sampling rank k samples and scores the rollouts of its contiguous share of
them, and the shares (answers, rewards) are all-gathered in rank order; with
the default generator every rank samples the whole batch from the same seeded
generator. Either way every rank holds the global batch of the single-process
run. Everything that depends on the global batch only
(reward statistics, dynamic sampling and its refill rounds, advantages, the
mini-batch shuffle) is computed identically on every rank. Each mini-batch's
rows are split into K parts; rank k takes the old and reference log-probs of
its parts before the first update, and back-propagates its part's loss times
:math:`K \cdot d_k / d`, where :math:`d_k, d` are the part's and the
mini-batch's denominators of the aggregation (tokens for token-mean and for
the KL and entropy terms, non-empty sequences for seq-mean-token-mean, rows for
token-sum-norm). DistributedDataParallel averages the K gradients, which gives
the gradient of the whole mini-batch's loss; gradient clipping and AdamW then
act identically on every rank. Logged statistics take one path at any number
of processes: each rank's sums, added over the ranks in float64 (over the one
rank of a single process), divided by the global counts.
Rank 0 alone evaluates and writes the run folder; every rank resumes from its
checkpoint. On the CPU with one thread per process the history equals the
single-process one to float rounding (sums split over ranks).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from tailmiss._device import resolve_device
from tailmiss._dist import barrier, is_main, world
from tailmiss.llm._loop import (
    data_parallel,
    environment,
    first_step,
    make_optimizer,
    prepare_run,
    progress_bar,
    set_lr,
    step_done,
)
from tailmiss.llm.checkpoint import CHECKPOINT, LoadedRun, RunFolder
from tailmiss.llm.config import RLConfig
from tailmiss.llm.rl_eval import evaluate_rl, exact_row, reference_distribution
from tailmiss.llm.rl_update import update
from tailmiss.llm.rollouts import Rollouts, collect_rollouts, gather_groups, response_mask, step_prompts, training_pool
from tailmiss.store import file_sha256

# the loop's parts live in rollouts (steps 1-2), rl_update (3-5) and rl_eval (6); importable from here too
__all__ = [
    "train_rl",
    "Rollouts",
    "collect_rollouts",
    "response_mask",
    "training_pool",
    "step_prompts",
    "exact_row",
    "evaluate_rl",
]


def _check_same_start(state: dict, sft, init) -> None:
    """A resumed run must continue from the SFT model it started from."""
    stored = state.get("reference", {})
    current = sft.model.state_dict()
    same = stored.keys() == current.keys() and all(
        stored[k].shape == current[k].shape and torch.equal(stored[k].cpu(), current[k].cpu()) for k in current
    )
    if not same:
        raise ValueError(
            f"cannot resume: the run in progress started from {state.get('init')!r}, "
            f"not from the SFT model in --init {str(init)!r}"
        )


@dataclass
class _Spent:
    """Rollouts and tokens sampled so far (the run's compute)."""

    rollouts: int = 0
    tokens: int = 0


@dataclass
class _EvalSets:
    """What rank 0 scores at each evaluation: held-out prompts, the SFT model's distributions on them and on the
    training pool (enumerable tasks), and the SFT checkpoint's hash that keys those distributions."""

    prompts: list
    reference: object
    pool: tuple | None
    start_sha: str


def _eval_sets(cfg: RLConfig, task, reference, init, main: bool) -> _EvalSets:
    prompts = task.prompts(cfg.eval_split, cfg.eval_prompts, seed=cfg.eval_prompt_seed, distinct=True)
    start_sha = file_sha256(Path(init) / CHECKPOINT)
    only = cfg.eval_answers == "correct"
    exact = task.enumerable and main
    reference_dist = reference_distribution(reference, start_sha, task, prompts, only) if exact else None
    pool = None
    if cfg.train_prompts and exact:
        pool_prompts = list(training_pool(task, cfg.train_prompts, cfg.pool_seed))
        pool = (pool_prompts, reference_distribution(reference, start_sha, task, pool_prompts, only))
    return _EvalSets(prompts, reference_dist, pool, start_sha)


def _evaluation(model, task, cfg: RLConfig, sets: _EvalSets, step: int, dev, main: bool, per_prompt: dict) -> dict:
    """Step 6's metrics at ``step`` when due (rank 0 alone; every ``eval_every`` steps and at the last); with
    ``eval_per_prompt``, the per-prompt correct masses go to ``per_prompt[step]``."""
    if not (main and (step % cfg.eval_every == 0 or step == cfg.steps)):
        return {}
    untrained = step == 0  # resumed runs never re-evaluate step 0
    kept = [] if cfg.eval_per_prompt and task.enumerable else None
    row = evaluate_rl(
        model, sets.reference, task, cfg, sets.prompts, step, dev, sets.pool, untrained, sets.start_sha, kept
    )
    if kept:
        per_prompt[step] = torch.from_numpy(kept[0])
    return row


def _rl_step(model, ddp, reference, optimizer, task, cfg: RLConfig, step: int, dev, spent: _Spent) -> dict:
    """Steps 1-5 of the loop at ``step``: rollouts, rewards, advantages and the mini-batch updates; the logged row."""
    # ---- 1-2. rollouts and rewards (each rank samples its prompts; all hold the batch) ------
    batch, info = gather_groups(model, task, cfg, step, dev)
    spent.rollouts += info["rollouts"]
    spent.tokens += info["tokens"]
    mu_hat = info.pop("mu_hat")
    row = dict(info)
    row.update(
        mu_hat_mean=float(mu_hat.mean()),
        mu_hat_q10=float(mu_hat.quantile(0.1)),
        mu_hat_q90=float(mu_hat.quantile(0.9)),
        groups=batch.rewards.shape[0],
        rollouts=spent.rollouts,
        tokens=spent.tokens,
    )
    # ---- 3-5. advantages, old log-probs, K mini-batch updates (rows split over ranks) ----
    lr = set_lr(optimizer, step, cfg)
    row.update(update(model, ddp, reference, optimizer, batch, cfg, step, dev))
    row["lr"] = lr
    return row


def _start(cfg: RLConfig, sft, state: dict | None, init):
    """The optimizer of the SFT model (``sft.model``, restored from ``state`` when resuming): ``(optimizer,
    history, start step, compute spent, per-prompt evaluations)``."""
    optimizer = make_optimizer(sft.model, cfg)
    if state is None:
        return optimizer, [], 0, _Spent(), {}
    _check_same_start(state, sft, init)
    sft.model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    spent = _Spent(state["rollouts"], state["tokens"])
    return optimizer, state["history"], state["step"], spent, dict(state.get("prompt_evals", {}))


def _run_state(cfg: RLConfig, sft, model, reference, optimizer, step: int) -> dict:
    """What a checkpoint holds besides the history, the compute spent and the start."""
    return {
        "kind": "rl",
        "step": step,
        "config": cfg.to_dict(),
        "task": sft.task.to_dict(),
        "model_config": sft.model_config.__dict__.copy(),
        "model": model.state_dict(),
        "reference": reference.state_dict(),
        "optimizer": optimizer.state_dict(),
    }


def _meta(cfg: RLConfig, init, start_sha: str, model, start: int, spent: _Spent, elapsed: float, dev) -> dict:
    """The finished run's ``meta.json``."""
    return {
        "kind": "rl",
        "complete": True,
        "init": str(init),
        # the SFT model it started from, by content: a moved or copied cache root still matches
        "init_checkpoint": start_sha,
        "method": cfg.method,
        "gamma": cfg.gamma,
        "group_size": cfg.group_size,
        "params": model.num_params(),
        "steps": cfg.steps,
        "resumed_from": min(start, cfg.steps),
        "rollouts": spent.rollouts,
        "tokens": spent.tokens,
        "elapsed_s": round(elapsed, 3),
        **environment(dev),
    }


def train_rl(
    cfg: RLConfig,
    init: str | Path,
    out: str | Path,
    device=None,
    resume: bool = False,
    progress: bool = True,
    on_step=None,
) -> Path:
    """Run ``cfg`` from the SFT run folder ``init`` into the run folder ``out``.

    ``resume`` continues from ``out``'s last checkpoint (same result as an
    uninterrupted run on the CPU); ``on_step(step)`` is called after each
    completed step. Under ``torchrun`` every rank calls this with its own
    ``device``; rank 0 evaluates and writes the folder, and every rank returns
    its path once the run is complete.
    """
    if not isinstance(cfg, RLConfig):
        raise ValueError(f"cfg must be an RLConfig, got {type(cfg).__name__}")
    dev = resolve_device(device)
    folder, sft = RunFolder(out), LoadedRun(init, dev)
    if sft.kind != "sft":
        raise ValueError(f"--init {str(init)!r} is an {sft.kind} run; RL starts from an SFT run")
    state = prepare_run(folder, cfg, resume)
    task, model = sft.task, sft.model
    reference = copy.deepcopy(model).requires_grad_(False)  # the SFT model, frozen
    optimizer, history, start, spent, per_prompt = _start(cfg, sft, state, init)  # ---- optimizer and state
    start = first_step(folder, history, start, cfg.steps)
    if start is None:
        return folder.path
    ddp = data_parallel(model, dev)
    main = is_main()  # rank 0 evaluates and writes; the others only train
    sets = _eval_sets(cfg, task, reference, init, main)

    def checkpoint(step: int) -> None:
        if main:
            folder.save_checkpoint(
                {
                    **_run_state(cfg, sft, model, reference, optimizer, step),
                    **{"history": history, "rollouts": spent.rollouts, "tokens": spent.tokens, "init": str(init)},
                    "prompt_evals": per_prompt,
                }
            )
            folder.write_history(history)
            if per_prompt:
                folder.write_prompt_evals(per_prompt)

    description = f"{cfg.method} γ={cfg.gamma:g} N={cfg.group_size} on {dev}" + (f" ×{world()}" if world() > 1 else "")
    bar = progress_bar(progress and main, cfg.steps, description, done=start)
    started = time.perf_counter()
    try:
        for step in range(start, cfg.steps):
            row = {"step": step, **_evaluation(model, task, cfg, sets, step, dev, main, per_prompt)}
            row.update(_rl_step(model, ddp, reference, optimizer, task, cfg, step, dev, spent))
            history.append(row)
            step_done(step, cfg, checkpoint, bar, on_step)  # ---- 6. checkpoint
    finally:
        if bar is not None:
            bar.close()
    if start <= cfg.steps:  # the last evaluation, after the last update
        final = _evaluation(model, task, cfg, sets, cfg.steps, dev, main, per_prompt)
        history.append({"step": cfg.steps, **final, "rollouts": spent.rollouts, "tokens": spent.tokens})
    checkpoint(cfg.steps)
    if main:
        folder.write_meta(_meta(cfg, init, sets.start_sha, model, start, spent, time.perf_counter() - started, dev))
    barrier()  # every rank returns once the folder is complete
    return folder.path
