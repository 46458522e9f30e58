r"""Steps 3-5 of the RL loop: focal-weighted advantages, old log-probs and the mini-batch updates.

Each mini-batch's rows are split over the K ranks; rank k back-propagates its
part's loss times :math:`K d_k / d`, where :math:`d_k, d` are the part's and the
mini-batch's denominators of the aggregation
(:attr:`tailmiss.objectives.aggregations.Aggregation.denominator`; tokens for the KL and
entropy terms), and DistributedDataParallel averages the K gradients, which
gives the gradient of the whole mini-batch's loss.

**Statistics.** One path at any world size: each rank sums its rows'
statistics (in float32, the model's dtype), ``tailmiss.llm.loop.all_sum``
adds the sums over the ranks in float64 (over one rank in a single process),
and the sums are divided by the global counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tailmiss import objectives
from tailmiss._dist import rank, world
from tailmiss.llm.config import RLConfig
from tailmiss.llm.loop import all_sum, step_seed
from tailmiss.llm.model import answer_logprobs
from tailmiss.llm.rl_run import RLRun
from tailmiss.llm.rollouts import SHUFFLE, Rollouts

__all__ = [
    "UPDATE_STATS",
    "advantages",
    "kl_penalty",
    "Minibatch",
    "rank_logprobs",
    "rank_loss",
    "plan_update",
    "UpdateStats",
    "update",
]


def advantages(
    rewards: torch.Tensor, cfg: RLConfig, seq_logp: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Focal-weighted group advantages (G, N) and the focal weight per group (G,).

    With ``cfg.reward_transform`` the advantages come from the transformed rewards
    (``seq_logp`` (G, N): the rollouts' sequence log-probabilities, for a transform
    that reads them); the focal weight's X counts the original correct rollouts.
    """
    correct = rewards > 0.5
    n_correct = correct.sum(1)  # X from the correctness flags (F-GRPO §4.1)
    group_size = torch.full_like(n_correct, rewards.shape[1])
    if cfg.reward_transform is not None:
        rewards = objectives.transform_rewards(cfg.reward_transform, rewards, correct, seq_logp, cfg.transform_coef)
    adv = objectives.group_advantages(rewards, cfg.advantage_mode, cfg.std_kind, cfg.adv_eps)
    g = objectives.focal_weight(n_correct, group_size, cfg.gamma)
    return adv * g[:, None], g


def _sequence_logprobs(model, batch: Rollouts, cfg: RLConfig) -> torch.Tensor | None:
    """Each rollout's sequence log-probability under the rollout policy, (G, N) in float64, when the run's reward
    transform reads it (None otherwise). Every rank holds the whole batch, so every rank computes all of it."""
    if cfg.reward_transform is None or not objectives.REWARD_TRANSFORMS[cfg.reward_transform].needs_logprobs:
        return None
    with torch.no_grad():
        model.eval()
        logp = answer_logprobs(model, batch.prompt_ids, batch.answers, cfg.temperature)
    seq = torch.where(batch.mask.bool(), logp, 0.0).double().sum(1)
    return seq.reshape(batch.rewards.shape).to(batch.rewards.device)


def _k3(logp_ref: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    # k3 estimator of KL(pi || pi_ref) per token: exp(d) - d - 1 with d = log pi_ref - log pi
    d = logp_ref - logp
    return torch.exp(d) - d - 1.0


def kl_penalty(ref_logp: torch.Tensor, logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token mean of the k3 KL estimator over the response tokens; padded ones add neither value nor gradient
    (their log-probability is replaced by the reference's, so exp never overflows there)."""
    return objectives.masked_mean(_k3(ref_logp, torch.where(mask.bool(), logp, ref_logp)), mask)


UPDATE_STATS = ("focal_mean", "entropy", "response_len", "kl_ref", "loss", "clip_frac", "approx_kl", "grad_norm")
"""The statistics :func:`update` logs for each step: the mean focal weight of the active groups, the rollouts'
entropy, response length and k3 KL to the reference, and the mini-batch means of the loss, clip fraction,
approximate KL to the rollout policy and gradient norm (all NaN when the batch holds no group)."""


def _denominator(mask: torch.Tensor, loss_cfg: objectives.LossConfig) -> int:
    """What the run's aggregation divides the summed token losses of rows ``mask`` by (additive over rows)."""
    return objectives.AGGREGATIONS[loss_cfg.aggregation].denominator(mask, loss_cfg)


def _global_means(sums: list, count: int, dev) -> list[float]:
    """Each of this rank's ``sums`` added over the ranks (float64), divided by the global ``count`` (at least 1)."""
    return [total / max(count, 1) for total in all_sum(sums, dev)]


def rank_logprobs(run: RLRun, batch: Rollouts, rows: torch.Tensor):
    """Old and reference log-probs of this rank's ``rows`` and the logged entropy, length and KL of the batch."""
    cfg, model = run.cfg, run.model
    with torch.no_grad():
        model.eval()
        old_logp, entropy = answer_logprobs(model, batch.prompt_ids[rows], batch.answers[rows], cfg.temperature, True)
        ref_logp = answer_logprobs(run.reference, batch.prompt_ids[rows], batch.answers[rows], cfg.temperature)
    mask = batch.mask[rows]
    length = float(batch.mask.sum(1).double().mean())
    valid = mask.bool()
    kl = _k3(ref_logp, torch.where(valid, old_logp, ref_logp))
    sums = [torch.where(valid, entropy, 0.0).sum(), torch.where(valid, kl, 0.0).sum()]
    entropy_mean, kl_mean = _global_means(sums, int(batch.mask.sum()), run.dev)  # all ranks' rows are the batch
    return old_logp, ref_logp, {"entropy": entropy_mean, "response_len": length, "kl_ref": kl_mean}


def _share(local: int, whole: int) -> float:
    # K × (local / whole denominator): DDP's mean over the K ranks of the gradients of the rescaled
    # local losses is then the gradient of the whole mini-batch's loss
    return world() * local / max(whole, 1)


@dataclass
class Minibatch:
    """One mini-batch: its rows of the global batch, this rank's share of them and their old and reference
    log-probs (taken before the first update)."""

    rows: torch.Tensor
    mine: torch.Tensor
    old_logp: torch.Tensor
    ref_logp: torch.Tensor


def rank_loss(run: RLRun, batch: Rollouts, adv: torch.Tensor, mb: Minibatch, loss_cfg):
    """This rank's share of mini-batch ``mb``'s loss (its rows ``mb.mine``), its clip fraction and approximate KL
    (token means over its rows) and its token count."""
    cfg, ddp, idx_all, idx = run.cfg, run.ddp, mb.rows, mb.mine
    old_logp, ref_logp = mb.old_logp, mb.ref_logp
    if not len(idx):  # no row here: a zero loss through the model keeps this rank in DDP's gradient all-reduce
        first = idx_all[:1]
        zero = answer_logprobs(ddp, batch.prompt_ids[first], batch.answers[first], cfg.temperature).sum() * 0.0
        return zero, 0.0, 0.0, 0
    mask = batch.mask[idx]
    need_entropy = cfg.entropy_coef > 0
    out = answer_logprobs(ddp, batch.prompt_ids[idx], batch.answers[idx], cfg.temperature, need_entropy)
    logp, ent = out if need_entropy else (out, None)
    res = objectives.policy_loss(cfg.method, logp, old_logp, adv[idx], mask, loss_cfg, return_stats=True)
    loss = res.loss * _share(_denominator(mask, loss_cfg), _denominator(batch.mask[idx_all], loss_cfg))
    tokens = int(mask.sum())
    token_share = _share(tokens, int(batch.mask[idx_all].sum()))  # the KL and entropy terms are token means
    if cfg.kl_coef > 0:
        loss = loss + cfg.kl_coef * kl_penalty(ref_logp, logp, mask) * token_share
    if need_entropy:
        loss = loss - cfg.entropy_coef * objectives.masked_mean(ent, mask) * token_share
    return loss, float(res.clip_fraction), float(res.approx_kl), tokens


def plan_update(run: RLRun, batch: Rollouts, step: int) -> tuple[torch.Tensor, dict, list[torch.Tensor]]:
    """Steps 3 and the mini-batch split of :func:`update`: the focal-weighted advantages as (R, 1), one value per
    rollout; the logged mean focal weight of the active groups; and the mini-batches, each a permutation share of
    the batch's rows (the step's ``SHUFFLE`` stream)."""
    cfg = run.cfg
    adv, g = advantages(batch.rewards, cfg, _sequence_logprobs(run.model, batch, cfg))
    active = batch.rewards.std(1, correction=0) > 0
    logged = {"focal_mean": float(g[active].mean()) if bool(active.any()) else float("nan")}
    adv = adv.reshape(-1, 1).to(run.dev, torch.float32)  # (R, 1): one value per rollout, all its tokens
    gen = torch.Generator().manual_seed(step_seed(cfg.seed, step, SHUFFLE))
    order = torch.randperm(len(batch.mask), generator=gen)
    minibatches = [idx.to(run.dev) for idx in order.tensor_split(cfg.minibatches) if len(idx)]
    return adv, logged, minibatches


class UpdateStats:
    """The mini-batch statistics of one step's updates (:data:`UPDATE_STATS`' last four), on one path at any world
    size: each rank's sums added over the ranks in float64, divided by the mini-batch's global token count."""

    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {"loss": [], "clip_frac": [], "approx_kl": [], "grad_norm": []}

    def add(self, run, batch: Rollouts, mb: Minibatch, result: tuple, grad_norm) -> None:
        """Record mini-batch ``mb``'s update: ``result`` is :func:`rank_loss`'s, ``grad_norm`` the clipped norm."""
        loss, clip_frac, kl_old, tokens = result
        self.values["grad_norm"].append(float(grad_norm))
        # the ranks' rescaled losses add up to the mini-batch's loss K times over
        loss_sum, clipped, kl_sum = all_sum([loss.detach(), clip_frac * tokens, kl_old * tokens], run.dev)
        whole = max(int(batch.mask[mb.rows].sum()), 1)
        self.values["loss"].append(loss_sum / world())
        self.values["clip_frac"].append(clipped / whole)
        self.values["approx_kl"].append(kl_sum / whole)

    def means(self) -> dict:
        """Each statistic's mean over the mini-batches (NaN without any)."""
        return {key: float(np.mean(v)) if v else float("nan") for key, v in self.values.items()}


def update(run: RLRun, batch: Rollouts, step: int) -> dict:
    """Steps 3-5 of the loop on one batch of groups; returns the logged statistics (NaN without groups).

    ``batch`` is the global batch (the same on every rank); each mini-batch's
    rows are split over the ranks, and ``run.ddp`` (the model wrapped in DDP, or
    the model itself in one process) averages their gradients.
    """
    cfg, model = run.cfg, run.model
    if batch.rewards.shape[0] == 0:  # dynamic sampling kept no group: nothing to learn from
        return dict.fromkeys(UPDATE_STATS, float("nan"))
    adv, row, minibatches = plan_update(run, batch, step)  # ---- 3. advantages with the focal weight
    local = [idx.tensor_split(world())[rank()] for idx in minibatches]  # this rank's rows of each

    # ---- 4. old and reference log-probs of this rank's rows, before any update ---------------
    old_logp, ref_logp, logged = rank_logprobs(run, batch, torch.cat(local))
    row.update(logged)
    sizes = [len(idx) for idx in local]
    parts = zip(minibatches, local, old_logp.split(sizes), ref_logp.split(sizes))

    # ---- 5. mini-batch updates of the method's loss -------------------------------------------
    stats = UpdateStats()
    run.ddp.train()
    loss_cfg = cfg.resolved_loss()
    for mb in (Minibatch(*part) for part in parts):
        result = rank_loss(run, batch, adv, mb, loss_cfg)
        run.optimizer.zero_grad(set_to_none=True)
        result[0].backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
        run.optimizer.step()
        stats.add(run, batch, mb, result, grad_norm)
    return {**row, **stats.means()}
