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
act identically on every rank. Logged statistics are sums over the ranks.
Rank 0 alone evaluates and writes the run folder; every rank resumes from its
checkpoint. On the CPU with one thread per process the history equals the
single-process one to float rounding (sums split over ranks).
"""

from __future__ import annotations

import copy
import functools
import time
from pathlib import Path

import numpy as np
import torch

from tailmiss import objectives
from tailmiss._device import resolve_device
from tailmiss._dist import all_gather_objects, barrier, is_main, rank, shard_bounds, world
from tailmiss.llm._loop import (
    all_sum,
    data_parallel,
    environment,
    make_optimizer,
    prepare_run,
    progress_bar,
    run_complete,
    set_lr,
    step_done,
    step_seed,
)
from tailmiss.llm.checkpoint import CHECKPOINT, LoadedRun, RunFolder
from tailmiss.llm.config import RLConfig
from tailmiss.llm.evaluate import PASS_KS, answer_distribution, exact_metrics, sample_correct_counts, sampled_pass_at_k
from tailmiss.llm.model import GPT, CounterStream, answer_logprobs, generate
from tailmiss.llm.tasks import EOS, PAD, Task
from tailmiss.store import file_sha256

__all__ = ["train_rl", "Rollouts", "collect_rollouts", "training_pool", "step_prompts"]

_PROMPTS, _SAMPLING, _SHUFFLE, _EVAL = 1, 2, 3, 4  # random streams of step_seed


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


@torch.no_grad()
def collect_rollouts(model: GPT, task: Task, cfg: RLConfig, step: int, round_: int, device) -> Rollouts:
    """``prompts_per_step`` training prompts × ``group_size`` samples with their rewards (the whole round, every rank).

    Every rank draws the same prompts. With ``rollout_sampling = "generator"``
    every rank samples the whole batch from one seeded ``torch.Generator``.
    With ``"counter"``, rank k samples and scores the rollouts of its
    contiguous share of the prompts (:func:`tailmiss._dist.shard_bounds`), and
    the shares are gathered in rank order: rollout row r = prompt × N + sample
    draws its tokens from a :class:`CounterStream` keyed by the round's seed and
    r, so the batch is the same for any number of processes.
    """
    model.eval()
    n = cfg.group_size
    prompts = step_prompts(task, cfg, step, round_)
    prompt_ids = task.encode_prompts(prompts).repeat_interleave(n, dim=0)  # (B*N, P)
    if cfg.rollout_sampling == "generator":  # one generator over the whole batch: every rank draws all of it
        gen = torch.Generator(device=device).manual_seed(step_seed(cfg.seed, step, 10 * round_ + _SAMPLING))
        prompt_ids = prompt_ids.to(device)
        top_k = cfg.top_k or None
        answers, _ = generate(model, prompt_ids, task.max_answer_len, EOS, PAD, cfg.temperature, top_k, cfg.top_p, gen)
        rewards = torch.tensor(
            [task.reward(prompts[i // n], row) for i, row in enumerate(answers.cpu().tolist())], dtype=torch.float64
        ).view(cfg.prompts_per_step, n)  # (B, N)
        return Rollouts(prompt_ids, answers, response_mask(answers), rewards)
    lo, hi = shard_bounds(cfg.prompts_per_step)
    rows = torch.arange(lo * n, hi * n)  # this rank's global rollout rows
    answers = torch.full((len(rows), task.max_answer_len), PAD, dtype=torch.long)
    if len(rows):
        stream = CounterStream(step_seed(cfg.seed, step, 10 * round_ + _SAMPLING), rows)
        ids = prompt_ids[rows].to(device)
        top_k = cfg.top_k or None
        answers, _ = generate(model, ids, task.max_answer_len, EOS, PAD, cfg.temperature, top_k, cfg.top_p, stream)
        answers = answers.cpu()
    rewards = torch.tensor(
        [task.reward(prompts[r // n], a) for r, a in zip(rows.tolist(), answers.tolist())], dtype=torch.float64
    ).view(hi - lo, n)  # (B_k, N)
    shares = all_gather_objects((answers, rewards))
    answers = torch.cat([a for a, _ in shares]).to(device)  # (B*N, L)
    rewards = torch.cat([r for _, r in shares])  # (B, N)
    return Rollouts(prompt_ids.to(device), answers, response_mask(answers), rewards)


_SFT_CACHE: dict = {}


def _sft_once(key: tuple, compute):
    """``compute()``, once per process for every run of a sweep: its runs start from one SFT checkpoint (``key``
    holds its SHA-256) and share their evaluation prompts and settings (the rest of ``key``)."""
    if key not in _SFT_CACHE:
        if len(_SFT_CACHE) >= 16:
            _SFT_CACHE.pop(next(iter(_SFT_CACHE)))
        _SFT_CACHE[key] = compute()
    return _SFT_CACHE[key]


def _reference_distribution(reference, start_sha: str, task: Task, prompts):
    """Exact answer distribution of the SFT model on ``prompts`` (scored once per process, :func:`_sft_once`)."""
    key = ("exact", start_sha, task.encode_prompts(prompts).numpy().tobytes())
    return _sft_once(key, lambda: answer_distribution(reference, task, prompts))


@functools.lru_cache(maxsize=32)
def training_pool(task: Task, size: int, seed: int) -> tuple:
    """The fixed pool of ``size`` distinct training prompts drawn from ``seed`` (``RLConfig.train_prompts``)."""
    return tuple(task.prompts("train", size, seed=seed, distinct=True))


def step_prompts(task: Task, cfg: RLConfig, step: int, round_: int = 0) -> list:
    """The prompts of a step's sampling round: fresh training prompts, or a draw without replacement from the pool."""
    seed = step_seed(cfg.seed, step, 10 * round_ + _PROMPTS)
    if not cfg.train_prompts:
        return task.prompts("train", cfg.prompts_per_step, seed=seed)
    pool = training_pool(task, cfg.train_prompts, cfg.pool_seed)
    picks = np.random.default_rng(seed).choice(len(pool), size=cfg.prompts_per_step, replace=False)
    return [pool[i] for i in picks]


def _gather_groups(model, task, cfg, step, device) -> tuple[Rollouts, dict]:
    """Rollouts of the step; with dynamic sampling, only mixed-reward groups, refilled up to ``max_refills`` rounds."""
    first = collect_rollouts(model, task, cfg, step, 0, device)
    info = {
        "reward_mean": float(first.rewards.mean()),
        "mu_hat": first.rewards.mean(1),
        "frac_zero_std": float((first.rewards.std(1, correction=0) == 0).double().mean()),
        "rollouts": first.rewards.numel(),
        "tokens": int(first.mask.sum()),
        "refills": 0,
    }
    if not cfg.dynamic_sampling:
        return first, info
    kept, have, batch = [], 0, first
    for round_ in range(cfg.max_refills + 1):
        if round_ > 0:
            batch = collect_rollouts(model, task, cfg, step, round_, device)
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


def _advantages(rewards: torch.Tensor, cfg: RLConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Focal-weighted group advantages (G, N) and the focal weight per group (G,)."""
    n_correct = (rewards > 0.5).sum(1)  # X from the correctness flags (F-GRPO §4.1)
    group_size = torch.full_like(n_correct, rewards.shape[1])
    adv = objectives.group_advantages(rewards, cfg.advantage_mode, cfg.std_kind, cfg.adv_eps)
    g = objectives.focal_weight(n_correct, group_size, cfg.gamma)
    return adv * g[:, None], g


def _k3(logp_ref: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    # k3 estimator of KL(pi || pi_ref) per token: exp(d) - d - 1 with d = log pi_ref - log pi
    d = logp_ref - logp
    return torch.exp(d) - d - 1.0


def _kl_penalty(ref_logp: torch.Tensor, logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token mean of the k3 KL estimator over the response tokens; padded ones add neither value nor gradient
    (their log-probability is replaced by the reference's, so exp never overflows there)."""
    return objectives.masked_mean(_k3(ref_logp, torch.where(mask.bool(), logp, ref_logp)), mask)


def _ratio(num: float, den: float) -> float:
    return float(num / den) if den > 0 else float("nan")  # no prompt has a rare set: no ratio


def exact_row(model, reference_dist, task, prompts, rare_share: float, prefix: str = "", current=None) -> dict:
    """The exact metrics an RL run logs at an evaluation (means over ``prompts``; ``current``: the model's
    distribution when already scored), with every pass@k, keys prefixed by ``prefix``."""
    current = answer_distribution(model, task, prompts) if current is None else current
    m = exact_metrics(current, reference_dist, rare_share=rare_share)
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
    model, reference_dist, task, cfg, eval_prompts, step, device, pool=None, untrained=False, start_sha=None
) -> dict:
    """Exact metrics against the SFT model (enumerable tasks) and sampled pass@k (``eval_samples > 0``).

    ``pool``: ``(prompts, reference distribution)`` of the training pool, scored
    too (columns ``pool_*``) when the run trains on a fixed pool. ``untrained``:
    the model still equals the reference (step 0), whose exact distributions are
    reused instead of scored again (the same numbers: the same weights); with
    ``start_sha`` (its checkpoint's SHA-256) its sampled pass@k is drawn once per
    process for all the runs that share the seed and settings, too.
    """
    row: dict = {}
    model.eval()
    if task.enumerable:
        same = reference_dist if untrained else None
        row.update(exact_row(model, reference_dist, task, eval_prompts, cfg.rare_share, current=same))
        if pool is not None:
            same = pool[1] if untrained else None
            row.update(exact_row(model, pool[1], task, pool[0], cfg.rare_share, prefix="pool_", current=same))
    if cfg.eval_samples > 0:
        seed = step_seed(cfg.seed, step, _EVAL)

        def draw():
            gen = torch.Generator(device=device).manual_seed(seed)
            return sample_correct_counts(model, task, eval_prompts, cfg.eval_samples, gen, cfg.temperature)

        if untrained and start_sha is not None:
            prompt_key = task.encode_prompts(eval_prompts).numpy().tobytes()
            key = ("sampled", start_sha, prompt_key, cfg.eval_samples, seed, cfg.temperature, str(device))
            counts = _sft_once(key, draw)
        else:
            counts = draw()
        for k, v in sampled_pass_at_k(counts, cfg.eval_samples, PASS_KS).items():
            row[f"pass_at_{k}"] = v
    return row


_UPDATE_STATS = ("focal_mean", "entropy", "response_len", "kl_ref", "loss", "clip_frac", "approx_kl", "grad_norm")


def _loss_denominator(mask: torch.Tensor, aggregation: str) -> int:
    """What ``aggregation`` divides a mini-batch's summed token losses by, up to a constant factor."""
    if aggregation == "token-mean":
        return int(mask.sum())
    if aggregation == "seq-mean-token-mean":
        return int((mask.sum(1) > 0).sum())
    return mask.shape[0]  # token-sum-norm: rows × the constant L


def _rank_logprobs(model, reference, batch: Rollouts, rows: torch.Tensor, cfg: RLConfig, dev):
    """Old and reference log-probs of this rank's ``rows`` and the logged entropy, length and KL of the batch."""
    with torch.no_grad():
        model.eval()
        old_logp, entropy = answer_logprobs(model, batch.prompt_ids[rows], batch.answers[rows], cfg.temperature, True)
        ref_logp = answer_logprobs(reference, batch.prompt_ids[rows], batch.answers[rows], cfg.temperature)
    mask = batch.mask[rows]
    length = float(batch.mask.sum(1).double().mean())
    if world() == 1:  # one process: float32 token means in batch order, as single-process runs always logged them
        back = torch.argsort(rows)
        entropy_mean = float(objectives.masked_mean(entropy[back], mask[back]))
        kl_mean = float(_kl_penalty(ref_logp[back], old_logp[back], mask[back]))
    else:
        valid = mask.bool()
        kl = _k3(ref_logp, torch.where(valid, old_logp, ref_logp))
        ent_sum, kl_sum = all_sum([torch.where(valid, entropy, 0.0).sum(), torch.where(valid, kl, 0.0).sum()], dev)
        tokens = max(int(batch.mask.sum()), 1)  # every rank's rows together are the batch
        entropy_mean, kl_mean = ent_sum / tokens, kl_sum / tokens
    return old_logp, ref_logp, {"entropy": entropy_mean, "response_len": length, "kl_ref": kl_mean}


def _share(local: int, whole: int) -> float:
    # K × (local / whole denominator): DDP's mean over the K ranks of the gradients of the rescaled
    # local losses is then the gradient of the whole mini-batch's loss
    return world() * local / max(whole, 1)


def _rank_loss(ddp, batch: Rollouts, adv, old_logp, ref_logp, idx_all, idx, cfg: RLConfig, aggregation: str):
    """This rank's share of mini-batch ``idx_all``'s loss (its rows ``idx``), its clip fraction and approximate KL
    (token means over its rows) and its token count."""
    if not len(idx):  # no row here: a zero loss through the model keeps this rank in DDP's gradient all-reduce
        first = idx_all[:1]
        zero = answer_logprobs(ddp, batch.prompt_ids[first], batch.answers[first], cfg.temperature).sum() * 0.0
        return zero, 0.0, 0.0, 0
    mask = batch.mask[idx]
    need_entropy = cfg.entropy_coef > 0
    out = answer_logprobs(ddp, batch.prompt_ids[idx], batch.answers[idx], cfg.temperature, need_entropy)
    logp, ent = out if need_entropy else (out, None)
    res = objectives.policy_loss(cfg.method, logp, old_logp, adv[idx], mask, cfg.loss_config(), return_stats=True)
    loss = res.loss * _share(_loss_denominator(mask, aggregation), _loss_denominator(batch.mask[idx_all], aggregation))
    tokens = int(mask.sum())
    token_share = _share(tokens, int(batch.mask[idx_all].sum()))  # the KL and entropy terms are token means
    if cfg.kl_coef > 0:
        loss = loss + cfg.kl_coef * _kl_penalty(ref_logp, logp, mask) * token_share
    if need_entropy:
        loss = loss - cfg.entropy_coef * objectives.masked_mean(ent, mask) * token_share
    return loss, float(res.clip_fraction), float(res.approx_kl), tokens


def _update(model, ddp, reference, optimizer, batch: Rollouts, cfg: RLConfig, step: int, dev) -> dict:
    """Steps 3-5 of the loop on one batch of groups; returns the logged statistics (NaN without groups).

    ``batch`` is the global batch (the same on every rank); each mini-batch's
    rows are split over the ranks, and ``ddp`` (``model`` wrapped in DDP, or
    ``model`` itself in one process) averages their gradients.
    """
    if batch.rewards.shape[0] == 0:  # dynamic sampling kept no group: nothing to learn from
        return dict.fromkeys(_UPDATE_STATS, float("nan"))
    row: dict = {}

    # ---- 3. advantages with the focal weight ------------------------------------------------
    adv, g = _advantages(batch.rewards, cfg)
    active = batch.rewards.std(1, correction=0) > 0
    row["focal_mean"] = float(g[active].mean()) if bool(active.any()) else float("nan")
    adv = adv.reshape(-1, 1).to(dev, torch.float32)  # (R, 1): one value per rollout, all its tokens

    # ---- mini-batches of the global batch, and this rank's rows of each ------------------------
    gen = torch.Generator().manual_seed(step_seed(cfg.seed, step, _SHUFFLE))
    order = torch.randperm(len(batch.mask), generator=gen)
    minibatches = [idx.to(dev) for idx in order.tensor_split(cfg.minibatches) if len(idx)]
    local = [idx.tensor_split(world())[rank()] for idx in minibatches]

    # ---- 4. old and reference log-probs of this rank's rows, before any update ---------------
    old_logp, ref_logp, logged = _rank_logprobs(model, reference, batch, torch.cat(local), cfg, dev)
    row.update(logged)
    sizes = [len(idx) for idx in local]
    old_logp, ref_logp = old_logp.split(sizes), ref_logp.split(sizes)

    # ---- 5. mini-batch updates of the method's loss -------------------------------------------
    stats: dict[str, list[float]] = {"loss": [], "clip_frac": [], "approx_kl": [], "grad_norm": []}
    ddp.train()
    aggregation = objectives.resolve_loss_config(cfg.method, cfg.loss_config()).aggregation
    for j, (idx_all, idx) in enumerate(zip(minibatches, local)):
        loss, clip_frac, kl_old, tokens = _rank_loss(
            ddp, batch, adv, old_logp[j], ref_logp[j], idx_all, idx, cfg, aggregation
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        stats["grad_norm"].append(float(grad_norm))
        if world() == 1:  # one process: the loss's own statistics
            stats["loss"].append(float(loss.detach()))
            stats["clip_frac"].append(clip_frac)
            stats["approx_kl"].append(kl_old)
            continue
        loss_sum, clipped, kl_sum = all_sum([loss.detach(), clip_frac * tokens, kl_old * tokens], dev)
        whole = max(int(batch.mask[idx_all].sum()), 1)
        stats["loss"].append(loss_sum / world())
        stats["clip_frac"].append(clipped / whole)
        stats["approx_kl"].append(kl_sum / whole)
    row.update({key: float(np.mean(v)) if v else float("nan") for key, v in stats.items()})
    return row


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
    folder = RunFolder(out)
    sft = LoadedRun(init, dev)
    if sft.kind != "sft":
        raise ValueError(f"--init {str(init)!r} is an {sft.kind} run; RL starts from an SFT run")
    state = prepare_run(folder, cfg, resume)
    task, model = sft.task, sft.model
    reference = copy.deepcopy(model).requires_grad_(False)  # the SFT model, frozen

    # ---- optimizer and state ----------------------------------------------------------------
    optimizer = make_optimizer(model, cfg)
    history: list[dict] = []
    start, rollouts_spent, tokens_spent = 0, 0, 0
    if state is not None:
        _check_same_start(state, sft, init)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        history, start = state["history"], state["step"]
        rollouts_spent, tokens_spent = state["rollouts"], state["tokens"]
    if history and history[-1]["step"] == cfg.steps:  # every step done; killed before meta.json at most
        if run_complete(folder, history, cfg.steps):
            return folder.path
        start = cfg.steps + 1
    ddp = data_parallel(model, dev)
    main = is_main()  # rank 0 evaluates and writes; the others only train
    eval_prompts = task.prompts(cfg.eval_split, cfg.eval_prompts, seed=cfg.eval_prompt_seed, distinct=True)
    start_sha = file_sha256(Path(init) / CHECKPOINT)
    reference_dist = (
        _reference_distribution(reference, start_sha, task, eval_prompts) if task.enumerable and main else None
    )
    pool = None
    if cfg.train_prompts and task.enumerable and main:
        pool_prompts = list(training_pool(task, cfg.train_prompts, cfg.pool_seed))
        pool = (pool_prompts, _reference_distribution(reference, start_sha, task, pool_prompts))

    def checkpoint(step: int) -> None:
        if not main:
            return
        folder.save_checkpoint(
            {
                "kind": "rl",
                "step": step,
                "config": cfg.to_dict(),
                "task": task.to_dict(),
                "model_config": sft.model_config.__dict__.copy(),
                "model": model.state_dict(),
                "reference": reference.state_dict(),
                "optimizer": optimizer.state_dict(),
                "history": history,
                "rollouts": rollouts_spent,
                "tokens": tokens_spent,
                "init": str(init),
            }
        )
        folder.write_history(history)

    description = f"{cfg.method} γ={cfg.gamma:g} N={cfg.group_size} on {dev}" + (f" ×{world()}" if world() > 1 else "")
    bar = progress_bar(progress and main, cfg.steps, description, done=start)
    started = time.perf_counter()
    try:
        for step in range(start, cfg.steps + 1):
            row: dict = {"step": step}
            if main and (step % cfg.eval_every == 0 or step == cfg.steps):
                untrained = step == 0  # resumed runs never re-evaluate step 0
                row.update(
                    evaluate_rl(model, reference_dist, task, cfg, eval_prompts, step, dev, pool, untrained, start_sha)
                )
            if step == cfg.steps:
                row.update(rollouts=rollouts_spent, tokens=tokens_spent)
                history.append(row)
                break

            # ---- 1-2. rollouts and rewards (each rank samples its prompts; all hold the batch) ------
            batch, info = _gather_groups(model, task, cfg, step, dev)
            rollouts_spent += info["rollouts"]
            tokens_spent += info["tokens"]
            mu_hat = info.pop("mu_hat")
            row.update(info)
            row.update(
                mu_hat_mean=float(mu_hat.mean()),
                mu_hat_q10=float(mu_hat.quantile(0.1)),
                mu_hat_q90=float(mu_hat.quantile(0.9)),
                groups=batch.rewards.shape[0],
                rollouts=rollouts_spent,
                tokens=tokens_spent,
            )

            # ---- 3-5. advantages, old log-probs, K mini-batch updates (rows split over ranks) ----
            lr = set_lr(optimizer, step, cfg)
            row.update(_update(model, ddp, reference, optimizer, batch, cfg, step, dev))
            row["lr"] = lr
            history.append(row)

            # ---- 6. checkpoint --------------------------------------------------------------
            step_done(step, cfg, checkpoint, bar, on_step)
    finally:
        if bar is not None:
            bar.close()
    checkpoint(cfg.steps)
    elapsed = time.perf_counter() - started
    if main:
        folder.write_meta(
            {
                "kind": "rl",
                "complete": True,
                "init": str(init),
                # the SFT model it started from, by content: a moved or copied cache root still matches
                "init_checkpoint": file_sha256(Path(init) / CHECKPOINT),
                "method": cfg.method,
                "gamma": cfg.gamma,
                "group_size": cfg.group_size,
                "params": model.num_params(),
                "steps": cfg.steps,
                "resumed_from": min(start, cfg.steps),
                "rollouts": rollouts_spent,
                "tokens": tokens_spent,
                "elapsed_s": round(elapsed, 3),
                **environment(dev),
            }
        )
    barrier()  # every rank returns once the folder is complete
    return folder.path
