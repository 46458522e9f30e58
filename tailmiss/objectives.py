r"""Advantages, focal weight and losses: one registry shared by the simulator and trainers.

Every group-relative method follows the same path (F-GRPO §4.1):
rewards → group mean (and std) → advantage :math:`A_i` → times the focal weight
:math:`g = (1-\hat\mu_{pos})^\gamma` → loss. The methods differ only in the last
step, so the losses live in registries keyed by name with one signature each:

* :data:`SURROGATES`: gradients of the categorical-policy surrogates (the
  simulator works with per-action draw weights and closed-form gradients);
* :data:`POLICY_LOSSES`: token-level GRPO / DAPO / CISPO losses for sequence
  models (``logp, old_logp, adv, mask -> loss``).

All functions are pure: tensors in, tensors out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

import torch

__all__ = [
    "ADVANTAGE_MODES",
    "STD_KINDS",
    "group_advantages",
    "binary_group_advantages",
    "focal_weight",
    "Surrogate",
    "SURROGATES",
    "LossConfig",
    "PolicyLoss",
    "POLICY_LOSSES",
    "policy_loss",
]

ADVANTAGE_MODES = ("none", "mean", "std")
"""``none``: raw rewards; ``mean``: :math:`R - \\bar R` (Dr. GRPO, BroRL sim);
``std``: :math:`(R - \\bar R)/(\\sigma_R + \\epsilon)` (GRPO Eq. 3)."""
STD_KINDS = ("population", "bessel")


def _check_choice(name: str, value: str, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


# ---------------------------------------------------------------------------
# Advantages and focal weight
# ---------------------------------------------------------------------------


def group_advantages(rewards: torch.Tensor, mode: str = "std", std: str = "bessel", eps: float = 1e-6) -> torch.Tensor:
    r"""Group-relative advantages, one group per row.

    .. math::

        A_i = \frac{R_i - \bar R}{\sigma_R + \epsilon}

    (``mode="std"``), :math:`R_i - \bar R` (``"mean"``) or :math:`R_i` (``"none"``).
    A group of size 1 gets advantage 0 under ``"mean"`` and ``"std"``.

    Parameters
    ----------
    rewards : Tensor, shape (..., N)
        Rewards of the N rollouts of each group (last axis).
    mode : {"none", "mean", "std"}
    std : {"population", "bessel"}
        Standard deviation with ``1/N`` or ``1/(N-1)``; Bessel's for a group of
        one is taken as 1 (verl's convention).
    eps : float
        Added to the standard deviation.

    Returns
    -------
    Tensor, shape (..., N)

    References
    ----------
    F-GRPO Eq. 3; spec §4.1 (std type and ε are unspecified by the paper).
    """
    _check_choice("mode", mode, ADVANTAGE_MODES)
    _check_choice("std", std, STD_KINDS)
    if rewards.ndim == 0:
        raise ValueError(f"rewards must have a group axis, got shape {tuple(rewards.shape)}")
    if mode == "none":
        return rewards
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    if mode == "mean":
        return centred
    n = rewards.shape[-1]
    if std == "bessel" and n == 1:
        sigma = torch.ones_like(rewards[..., :1])
    else:
        sigma = rewards.std(dim=-1, keepdim=True, correction=1 if std == "bessel" else 0)
    return centred / (sigma + eps)


def binary_group_advantages(
    n_correct: torch.Tensor,
    group_size: torch.Tensor,
    reward_correct: float = 1.0,
    reward_incorrect: float = 0.0,
    mode: str = "std",
    std: str = "bessel",
    eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Advantage of a correct and of an incorrect rollout, from the group's counts.

    For binary rewards the group statistics follow from :math:`X` and :math:`N`:
    :math:`\bar R = R_w + (R_c - R_w)\hat\mu` and
    :math:`\sigma_R = (R_c - R_w)\sqrt{\hat\mu(1-\hat\mu)}` (population; times
    :math:`\sqrt{N/(N-1)}` for Bessel's). This gives the same numbers as
    :func:`group_advantages` on the explicit reward vector without materialising
    it, which the simulator needs at N = 131,072 draws per run.

    Parameters
    ----------
    n_correct, group_size : Tensor
        :math:`X` and :math:`N` per group (broadcast together).
    reward_correct, reward_incorrect : float
    mode, std, eps
        As in :func:`group_advantages`.

    Returns
    -------
    (Tensor, Tensor)
        ``(adv_correct, adv_incorrect)``, each with the broadcast shape.
    """
    _check_choice("mode", mode, ADVANTAGE_MODES)
    _check_choice("std", std, STD_KINDS)
    x = n_correct.to(torch.float64)
    n = group_size.to(torch.float64)
    r_c = torch.full_like(x, float(reward_correct))
    r_w = torch.full_like(x, float(reward_incorrect))
    if mode == "none":
        return torch.broadcast_tensors(r_c, r_w)
    mu_hat = x / n
    mean = r_w + (r_c - r_w) * mu_hat
    a_pos, a_neg = r_c - mean, r_w - mean
    if mode == "std":
        var = (r_c - r_w) ** 2 * mu_hat * (1.0 - mu_hat)
        if std == "bessel":
            var = torch.where(n > 1, var * n / (n - 1).clamp(min=1), torch.ones_like(var))
        sigma = var.clamp(min=0).sqrt()
        a_pos, a_neg = a_pos / (sigma + eps), a_neg / (sigma + eps)
    return a_pos, a_neg


def focal_weight(n_correct: torch.Tensor, group_size: torch.Tensor, gamma) -> torch.Tensor:
    r"""F-GRPO focal weight of each group.

    .. math::

        g = (1 - \hat\mu_{pos})^\gamma, \qquad \hat\mu_{pos} = X / N, \quad 0^0 = 1

    One scalar per group, computed from the group's own correctness count and
    applied to every rollout and token of that group.

    References
    ----------
    F-GRPO Eqs. 11-13.
    """
    gamma = torch.as_tensor(gamma, dtype=torch.float64, device=n_correct.device)
    if torch.any(gamma < 0):
        raise ValueError(f"gamma must be >= 0, got {gamma.min().item()!r}")
    mu_hat = n_correct.to(torch.float64) / group_size.to(torch.float64)
    return torch.pow(1.0 - mu_hat, gamma)


# ---------------------------------------------------------------------------
# Categorical surrogates (simulator)
# ---------------------------------------------------------------------------


def _logprob_ascent(probs: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    # d/dz_i sum_j w_j log p_{a_j} = w_i - p_i * sum_k w_k
    return torch.addcmul(weights, probs, weights.sum(dim=-1, keepdim=True), value=-1.0)


def _prob_ascent(probs: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    # d/dz_i sum_j w_j p_{a_j} = p_i * (w_i - sum_k w_k p_k)
    return probs * (weights - (weights * probs).sum(dim=-1, keepdim=True))


@dataclass(frozen=True)
class Surrogate:
    r"""A categorical-policy surrogate :math:`J(z)` and its closed-form gradient.

    ``ascent(probs, weights)`` returns :math:`N \cdot \partial J/\partial z`, where
    ``weights[i]`` is the summed advantage of the draws of action ``i`` (or, for
    ``distinct=True``, the reward of each distinct sampled action). The caller
    divides by N and multiplies by the focal weight.
    """

    name: str
    ascent: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    distinct: bool
    description: str


SURROGATES: dict[str, Surrogate] = {
    s.name: s
    for s in (
        Surrogate(
            "logprob",
            _logprob_ascent,
            distinct=False,
            description="policy gradient (1/N) sum_j A_j log p(a_j); unsampled actions move only "
            "through sum_j A_j, which is 0 for centred advantages",
        ),
        Surrogate(
            "prob",
            _prob_ascent,
            distinct=False,
            description="BroRL's (1/N) sum_j A_j p(a_j): gradient (p_i/N)[c_i A_i - sum_k c_k A_k p_k]",
        ),
        Surrogate(
            "theory",
            _prob_ascent,
            distinct=True,
            description="F-GRPO Eq. 5 / BroRL App. C.1: (1/N) sum over distinct sampled i of R_i p_i, "
            "so dz_i = (eta/N) p_i (R_i - S_R)",
        ),
    )
}


# ---------------------------------------------------------------------------
# Token-level policy losses (sequence models)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LossConfig:
    """Clip and aggregation settings of a token-level policy loss.

    ``clip_low``/``clip_high`` are PPO's ε_low/ε_high (GRPO 0.2/0.2, DAPO
    0.2/0.28) or CISPO's IS-weight bounds (1.0/5.0). ``dual_clip`` is verl's
    constant c for negative advantages (off when ``None``).
    """

    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip: float | None = None
    cispo_clip_mode: str = "relative"
    aggregation: str = "token-mean"

    def __post_init__(self) -> None:
        for name in ("clip_low", "clip_high"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.dual_clip is not None and self.dual_clip <= 1:
            raise ValueError(f"dual_clip must exceed 1, got {self.dual_clip}")
        _check_choice("cispo_clip_mode", self.cispo_clip_mode, ("relative", "absolute"))
        _check_choice("aggregation", self.aggregation, ("token-mean", "seq-mean-token-mean"))


def _aggregate(per_token: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    mask = mask.to(per_token.dtype)
    if how == "token-mean":
        return (per_token * mask).sum() / mask.sum().clamp(min=1)
    lengths = mask.sum(-1)
    per_seq = (per_token * mask).sum(-1) / lengths.clamp(min=1)
    nonempty = lengths > 0  # a sequence without response tokens carries no loss and no weight
    return per_seq[nonempty].sum() / nonempty.sum().clamp(min=1)


def _clipped_pg_loss(logp, old_logp, adv, mask, cfg: LossConfig) -> torch.Tensor:
    r"""PPO-clip loss, :math:`-\min(r A, \mathrm{clip}(r, 1-\epsilon_l, 1+\epsilon_h) A)` (F-GRPO Eq. 14)."""
    ratio = torch.exp(logp - old_logp)
    pg_obj = torch.minimum(ratio * adv, ratio.clamp(1 - cfg.clip_low, 1 + cfg.clip_high) * adv)
    if cfg.dual_clip is not None:
        pg_obj = torch.where(adv < 0, torch.maximum(pg_obj, cfg.dual_clip * adv), pg_obj)
    return _aggregate(-pg_obj, mask, cfg.aggregation)


def _cispo_loss(logp, old_logp, adv, mask, cfg: LossConfig) -> torch.Tensor:
    r"""CISPO: :math:`-\mathrm{sg}(\hat r)\, A \log\pi` with clipped IS weight (F-GRPO Eqs. 15-16)."""
    ratio = torch.exp(logp - old_logp).detach()
    if cfg.cispo_clip_mode == "relative":
        is_weight = ratio.clamp(max(0.0, 1 - cfg.clip_low), 1 + cfg.clip_high)
    else:
        is_weight = ratio.clamp(max=cfg.clip_high)
    return _aggregate(-is_weight * adv * logp, mask, cfg.aggregation)


@dataclass(frozen=True)
class PolicyLoss:
    """A registered token-level loss with its paper defaults."""

    name: str
    fn: Callable[..., torch.Tensor]
    defaults: LossConfig = field(default_factory=LossConfig)


POLICY_LOSSES: dict[str, PolicyLoss] = {
    "grpo": PolicyLoss("grpo", _clipped_pg_loss, LossConfig(0.2, 0.2)),
    "dapo": PolicyLoss("dapo", _clipped_pg_loss, LossConfig(0.2, 0.28)),
    "cispo": PolicyLoss("cispo", _cispo_loss, LossConfig(1.0, 5.0)),
}


def policy_loss(
    name: str,
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    config: LossConfig | None = None,
    **overrides,
) -> torch.Tensor:
    """Evaluate a registered token-level loss.

    Parameters
    ----------
    name : {"grpo", "dapo", "cispo"}
    logp, old_logp : Tensor, shape (B, T)
        Token log-probabilities under the current and the sampling policy.
    adv : Tensor, shape (B, 1) or (B, T)
        Advantages (already multiplied by the focal weight), broadcast over tokens.
    mask : Tensor, shape (B, T)
        1 on response tokens.
    config : LossConfig, optional
        Defaults to the method's paper settings; ``overrides`` replace fields.
    """
    _check_choice("name", name, tuple(POLICY_LOSSES))
    entry = POLICY_LOSSES[name]
    unknown = sorted(set(overrides) - {f.name for f in fields(LossConfig)})
    if unknown:
        raise ValueError(f"unknown LossConfig field(s) {', '.join(map(repr, unknown))}")
    cfg = replace(config or entry.defaults, **overrides)
    if logp.shape != old_logp.shape or logp.shape != mask.shape:
        raise ValueError(
            f"logp, old_logp and mask must share a shape, got {tuple(logp.shape)}, "
            f"{tuple(old_logp.shape)}, {tuple(mask.shape)}"
        )
    return entry.fn(logp, old_logp, adv, mask, cfg)
