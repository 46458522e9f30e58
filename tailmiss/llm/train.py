r"""Group-relative RL from an SFT checkpoint: GRPO, DAPO, CISPO and Dr. GRPO, each with the focal weight.

One loop, top to bottom (CleanRL style): :func:`train_rl` is the loop, and each stage takes the run
(:class:`~tailmiss.llm.rl_run.RLRun`) and the step. The stages are public (:func:`open_run`,
:func:`~tailmiss.llm.rollouts.gather_groups` and its pieces, :func:`sampled_row`,
:func:`~tailmiss.llm.rl_update.plan_update`, :func:`~tailmiss.llm.rl_update.rank_logprobs`,
:func:`~tailmiss.llm.rl_update.rank_loss`, :class:`~tailmiss.llm.rl_update.UpdateStats`, :func:`save_run`,
:func:`finish_run`): the run stack (:func:`tailmiss.experiments.run_stack.train_rl_stack`) trains several runs
through these same functions, batching only the model's forward and backward passes, so there is one code path for
the algorithm. Per step:

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
from pathlib import Path

import torch

from tailmiss._device import resolve_device
from tailmiss._dist import barrier, is_main, world
from tailmiss.llm.checkpoint import LoadedRun, RunFolder
from tailmiss.llm.config import RLConfig
from tailmiss.llm.loop import data_parallel, environment, first_step, prepare_run, progress_bar, step_done
from tailmiss.llm.optim import make_optimizer, set_lr
from tailmiss.llm.rl_eval import eval_sets, evaluation
from tailmiss.llm.rl_run import RLRun, Spent
from tailmiss.llm.rl_update import update
from tailmiss.llm.rollouts import check_train_types, gather_groups

__all__ = ["train_rl", "open_run", "sampled_row", "save_run", "finish_run"]


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
    folder = RunFolder(out)
    run = open_run(cfg, init, folder, resolve_device(device), resume)  # ---- model, reference, optimizer, state
    start = first_step(folder, run.history, run.start, cfg.steps)
    if start is None:
        return folder.path
    run.ddp, run.evals = data_parallel(run.model, run.dev), eval_sets(run)
    bar = progress_bar(progress and run.main, cfg.steps, _title(run), done=start)
    started = time.perf_counter()
    try:
        for step in range(start, cfg.steps):
            row = {"step": step, **evaluation(run, step)}  # ---- 6. evaluate (before this step's update)
            batch, info = gather_groups(run, step)  # ---- 1-2. rollouts and rewards (every rank: the batch)
            row.update(sampled_row(run, batch, info))
            lr = set_lr(run.optimizer, step, cfg.optim, cfg.steps)
            row.update(update(run, batch, step), lr=lr)  # ---- 3-5. advantages, old log-probs, updates
            run.history.append(row)
            step_done(step, cfg, lambda s: save_run(run, folder, s), bar, on_step)  # ---- checkpoint
    finally:
        if bar is not None:
            bar.close()
    finish_run(run, folder, start, time.perf_counter() - started)
    barrier()  # every rank returns once the folder is complete
    return folder.path


def finish_run(run: RLRun, folder: RunFolder, start: int, elapsed: float) -> None:
    """After the last step: the last evaluation (after the last update; none for a run that only writes its last
    files again), the last checkpoint and, on rank 0, ``meta.json`` (``elapsed`` seconds since step ``start``)."""
    steps = run.cfg.steps
    if start <= steps:
        final = evaluation(run, steps)
        run.history.append({"step": steps, **final, "rollouts": run.spent.rollouts, "tokens": run.spent.tokens})
    save_run(run, folder, steps)
    if run.main:
        folder.write_meta(_meta(run, start, elapsed))


def open_run(cfg: RLConfig, init, folder: RunFolder, dev, resume: bool) -> RLRun:
    """Stage 0 of a run, before its first step: the SFT model (to train in place) and its frozen copy, the
    optimizer, and, when resuming, the model, optimizer, history and compute restored from ``folder``'s
    checkpoint."""
    sft = LoadedRun(init, dev)
    if sft.kind != "sft":
        raise ValueError(f"--init {str(init)!r} is an {sft.kind} run; RL starts from an SFT run")
    check_train_types(sft.task, cfg)
    state = prepare_run(folder, cfg, resume)
    reference = copy.deepcopy(sft.model).requires_grad_(False)  # the SFT model, frozen
    run = RLRun(cfg, sft, init, reference, make_optimizer(sft.model, cfg.optim), dev, main=is_main())
    if state is not None:
        _check_same_start(state, sft, init)
        sft.model.load_state_dict(state["model"])
        run.optimizer.load_state_dict(state["optimizer"])
        run.history, run.start = state["history"], state["step"]
        run.spent = Spent(state["rollouts"], state["tokens"])
        run.per_prompt = dict(state.get("prompt_evals", {}))
    return run


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


def sampled_row(run: RLRun, batch, info: dict) -> dict:
    """What the step sampled, logged (``info`` from :func:`~tailmiss.llm.rollouts.gather_groups`): the reward
    statistics of its first round and the compute spent so far."""
    run.spent.rollouts += info["rollouts"]
    run.spent.tokens += info["tokens"]
    mu_hat = info.pop("mu_hat")
    return {
        **info,
        "mu_hat_mean": float(mu_hat.mean()),
        "mu_hat_q10": float(mu_hat.quantile(0.1)),
        "mu_hat_q90": float(mu_hat.quantile(0.9)),
        "groups": batch.rewards.shape[0],
        "rollouts": run.spent.rollouts,
        "tokens": run.spent.tokens,
    }


def _title(run: RLRun) -> str:
    cfg = run.cfg
    return f"{cfg.method} γ={cfg.gamma:g} N={cfg.group_size} on {run.dev}" + (f" ×{world()}" if world() > 1 else "")


def save_run(run: RLRun, folder: RunFolder, step: int) -> None:
    """Rank 0 writes the checkpoint of ``step``, the history and the per-prompt evaluations."""
    if not run.main:
        return
    folder.save_checkpoint(
        {
            "kind": "rl",
            "step": step,
            "config": run.cfg.to_dict(),
            "task": run.task.to_dict(),
            "model_config": run.sft.model_config.__dict__.copy(),
            "model": run.model.state_dict(),
            "reference": run.reference.state_dict(),
            "optimizer": run.optimizer.state_dict(),
            "history": run.history,
            "rollouts": run.spent.rollouts,
            "tokens": run.spent.tokens,
            "init": str(run.init),
            "prompt_evals": run.per_prompt,
        }
    )
    folder.write_history(run.history)
    if run.per_prompt:
        folder.write_prompt_evals(run.per_prompt)


def _meta(run: RLRun, start: int, elapsed: float) -> dict:
    """The finished run's ``meta.json``."""
    cfg = run.cfg
    return {
        "kind": "rl",
        "complete": True,
        "init": str(run.init),
        # the SFT model it started from, by content: a moved or copied cache root still matches
        "init_checkpoint": run.evals.start_sha,
        "method": cfg.method,
        "gamma": cfg.gamma,
        "group_size": cfg.group_size,
        "params": run.model.num_params(),
        "steps": cfg.steps,
        "resumed_from": min(start, cfg.steps),
        "rollouts": run.spent.rollouts,
        "tokens": run.spent.tokens,
        "elapsed_s": round(elapsed, 3),
        **environment(run.dev),
    }
