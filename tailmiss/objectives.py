r"""Advantages, focal weight and losses: one registry shared by the simulator and trainers.

Every group-relative method follows the same path (F-GRPO §4.1):
rewards → group mean (and std) → advantage :math:`A_i` → times the focal weight
:math:`g = (1-\hat\mu_{pos})^\gamma` → loss. The methods differ only in the last
step, so the losses live in registries keyed by name with one signature each:

* :data:`SURROGATES`: gradients of the categorical-policy surrogates (the
  simulator works with per-action draw weights and closed-form gradients);
* :data:`POLICY_LOSSES`: token-level GRPO / DAPO / CISPO / Dr. GRPO losses for
  sequence models (``logp, old_logp, adv, mask -> loss``), each with its paper
  settings and advantage mode.

All functions are pure: tensors in, tensors out.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import NamedTuple

import torch

__all__ = [
    "ADVANTAGE_MODES",
    "STD_KINDS",
    "group_advantages",
    "binary_group_advantages",
    "focal_weight",
    "masked_mean",
    "Surrogate",
    "SURROGATES",
    "AGGREGATIONS",
    "CISPO_CLIP_MODES",
    "LossConfig",
    "PolicyLoss",
    "POLICY_LOSSES",
    "PolicyLossOutput",
    "resolve_loss_config",
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

    A group of one has no group-relative signal: :math:`R_1 - \bar R = 0`, so
    it gets advantage 0 under ``"mean"`` and ``"std"`` (its σ is taken as 1,
    so that 0/0 never occurs). This is a choice: verl instead gives a lone
    sample mean 0 and std 1, i.e. its raw reward :math:`R_1/(1+\epsilon)`
    as advantage. The trainer refuses ``group_size = 1`` with these modes,
    which could only give a zero loss.

    Parameters
    ----------
    rewards : Tensor, shape (..., N)
        Rewards of the N rollouts of each group (last axis).
    mode : {"none", "mean", "std"}
    std : {"population", "bessel"}
        Standard deviation with ``1/N`` or ``1/(N-1)``.
    eps : float
        Added to the standard deviation.

    Returns
    -------
    Tensor, shape (..., N)

    References
    ----------
    F-GRPO Eq. 3. The paper fixes neither the std type nor ε; the defaults
    (Bessel's, ε = 1e-6) are verl's.
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
    # a uniform group carries no signal: its advantage is exactly 0, not the rounding error of r_w + (r_c - r_w)
    # vs r_c (e.g. 2e-16 for 0.9/0.2), which a tiny eps below would blow up to ~1e22
    a_pos = torch.where(x == n, torch.zeros_like(a_pos), a_pos)
    a_neg = torch.where(x == 0, torch.zeros_like(a_neg), a_neg)
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


def _logprob_ascent(probs: torch.Tensor, weights: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    # d/dz_i sum_j w_j log p_{a_j} = w_i - p_i * sum_k w_k
    return torch.addcmul(weights, probs, weights.sum(dim=-1, keepdim=True), value=-1.0, out=out)


def _prob_ascent(probs: torch.Tensor, weights: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    # d/dz_i sum_j w_j p_{a_j} = p_i * (w_i - sum_k w_k p_k)
    return torch.mul(probs, weights - (weights * probs).sum(dim=-1, keepdim=True), out=out)


@dataclass(frozen=True)
class Surrogate:
    r"""A categorical-policy surrogate :math:`J(z)` and its closed-form gradient.

    ``ascent(probs, weights, out=None)`` returns :math:`N \cdot \partial J/\partial z`
    (written into ``out`` when given), where ``weights[i]`` is the summed
    advantage of the draws of action ``i`` (or, for ``distinct=True``, the
    reward of each distinct sampled action). The caller divides by N and
    multiplies by the focal weight.
    """

    name: str
    ascent: Callable[..., torch.Tensor]
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

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "token-sum-norm")
"""Reductions of per-token losses to one scalar; see :func:`policy_loss`."""
CISPO_CLIP_MODES = ("relative", "absolute")


@dataclass(frozen=True)
class LossConfig:
    r"""Clip and aggregation settings of a token-level policy loss.

    Every field defaults to ``None``: "the method's own default", filled in from
    :attr:`PolicyLoss.defaults` by :func:`resolve_loss_config`.

    Attributes
    ----------
    clip_low, clip_high : float, optional
        PPO's :math:`\epsilon_{low}, \epsilon_{high}` (GRPO 0.2/0.2, DAPO's
        clip-higher 0.2/0.28) or CISPO's IS-weight bounds (1.0/5.0).
    dual_clip : float, optional
        verl's dual-clip constant :math:`c > 1` for negative advantages. No method
        uses it by default, so ``None`` resolves to "off".
    cispo_clip_mode : {"relative", "absolute"}, optional
        CISPO's IS weight :math:`\mathrm{clip}(r, 1-\epsilon_{low}, 1+\epsilon_{high})`
        or :math:`\min(r, \epsilon_{high})`; see :func:`policy_loss`.
    aggregation : {"token-mean", "seq-mean-token-mean", "token-sum-norm"}, optional
        See :func:`policy_loss`.
    norm_length : int, optional
        The constant :math:`L` of ``"token-sum-norm"`` (the maximum generation
        length); ``None`` takes the mask's last dimension. The other aggregations
        ignore it.
    """

    clip_low: float | None = None
    clip_high: float | None = None
    dual_clip: float | None = None
    cispo_clip_mode: str | None = None
    aggregation: str | None = None
    norm_length: int | None = None

    def __post_init__(self) -> None:
        for name in ("clip_low", "clip_high"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        if self.dual_clip is not None and not self.dual_clip > 1:
            raise ValueError(f"dual_clip must exceed 1, got {self.dual_clip!r}")
        if self.cispo_clip_mode is not None:
            _check_choice("cispo_clip_mode", self.cispo_clip_mode, CISPO_CLIP_MODES)
        if self.aggregation is not None:
            _check_choice("aggregation", self.aggregation, AGGREGATIONS)
        n = self.norm_length
        if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1):
            raise ValueError(f"norm_length must be a positive integer, got {n!r}")


_CONFIG_FIELDS = tuple(f.name for f in fields(LossConfig))


def _ppo_clip_loss(logp, old_logp, adv, cfg: LossConfig) -> tuple[torch.Tensor, torch.Tensor]:
    r"""PPO-clip loss per token (F-GRPO Eq. 14; DAPO's clip-higher when :math:`\epsilon_{high} > \epsilon_{low}`).

    .. math::

        \ell_t = -\min\big(r_t A,\ \mathrm{clip}(r_t, 1-\epsilon_{low}, 1+\epsilon_{high})\, A\big),
        \qquad r_t = \exp(\log\pi_\theta(o_t) - \log\pi_{old}(o_t))

    and with dual clip :math:`\ell_t \leftarrow \min(\ell_t, -cA)` where :math:`A < 0`.
    The clip changes the objective, and zeroes the token's gradient, where
    :math:`A > 0, r_t > 1+\epsilon_{high}` or :math:`A < 0, r_t < 1-\epsilon_{low}`,
    and with dual clip also where :math:`A < 0, r_t > c`.
    """
    ratio = torch.exp(logp - old_logp)
    pg_obj = torch.minimum(ratio * adv, ratio.clamp(1 - cfg.clip_low, 1 + cfg.clip_high) * adv)
    clipped = ((adv > 0) & (ratio > 1 + cfg.clip_high)) | ((adv < 0) & (ratio < 1 - cfg.clip_low))
    if cfg.dual_clip is not None:
        pg_obj = torch.where(adv < 0, torch.maximum(pg_obj, cfg.dual_clip * adv), pg_obj)
        clipped = clipped | ((adv < 0) & (ratio > cfg.dual_clip))
    return -pg_obj, clipped


def _cispo_loss(logp, old_logp, adv, cfg: LossConfig) -> tuple[torch.Tensor, torch.Tensor]:
    r"""CISPO loss per token (MiniMax-M1 (CISPO); F-GRPO Eqs. 15-16).

    .. math::

        \ell_t = -\mathrm{sg}(\hat r_t)\, A \log\pi_\theta(o_t), \qquad
        \hat r_t = \mathrm{clip}\big(r_t, \max(0, 1-\epsilon_{low}), 1+\epsilon_{high}\big)

    in ``"relative"`` mode (the defaults 1.0/5.0 give :math:`[0, 6]`), or
    :math:`\hat r_t = \min(r_t, \epsilon_{high})` in ``"absolute"`` mode (TRL; no
    floor). The weight is detached, so a clipped token keeps its gradient
    :math:`-\hat r_t A \nabla\log\pi_\theta`; it counts as clipped where
    :math:`\hat r_t \ne r_t`. ``dual_clip`` does not apply.
    """
    ratio = torch.exp(logp - old_logp).detach()
    if cfg.cispo_clip_mode == "relative":
        is_weight = ratio.clamp(max(0.0, 1 - cfg.clip_low), 1 + cfg.clip_high)
    else:
        is_weight = ratio.clamp(max=cfg.clip_high)
    return -is_weight * adv * logp, is_weight != ratio


@dataclass(frozen=True)
class PolicyLoss:
    """A registered token-level loss with its paper settings.

    Attributes
    ----------
    name : str
    fn : callable
        ``fn(logp, old_logp, adv, config) -> (per_token_loss, clipped)``, both of
        shape (B, T); ``clipped`` (bool) marks the tokens whose objective (PPO-clip)
        or IS weight (CISPO) the clip changed.
    defaults : LossConfig
        Fully resolved: only ``dual_clip`` (off) and ``norm_length`` (the mask
        width) may be ``None``.
    advantage : str
        The method's advantage mode, one of :data:`ADVANTAGE_MODES`.
    """

    name: str
    fn: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    defaults: LossConfig
    advantage: str

    def __post_init__(self) -> None:
        required = ("clip_low", "clip_high", "cispo_clip_mode", "aggregation")
        unset = [k for k in required if getattr(self.defaults, k) is None]
        if unset:
            raise ValueError(f"defaults of {self.name!r} must set {', '.join(unset)}")
        _check_choice("advantage", self.advantage, ADVANTAGE_MODES)


def _paper(clip_low: float, clip_high: float, aggregation: str = "token-mean") -> LossConfig:
    return LossConfig(clip_low, clip_high, dual_clip=None, cispo_clip_mode="relative", aggregation=aggregation)


POLICY_LOSSES: dict[str, PolicyLoss] = {
    p.name: p
    for p in (
        PolicyLoss("grpo", _ppo_clip_loss, _paper(0.2, 0.2), advantage="std"),  # F-GRPO Eq. 14
        PolicyLoss("dapo", _ppo_clip_loss, _paper(0.2, 0.28), advantage="std"),  # DAPO clip-higher
        PolicyLoss("cispo", _cispo_loss, _paper(1.0, 5.0), advantage="std"),  # MiniMax-M1 (CISPO)
        # Dr. GRPO (Liu et al. 2025): A = R - mean(R), no per-sequence 1/|o_i|
        PolicyLoss("drgrpo", _ppo_clip_loss, _paper(0.2, 0.2, "token-sum-norm"), advantage="mean"),
    )
}


def resolve_loss_config(name: str, config: LossConfig | None = None, **overrides) -> LossConfig:
    """The settings that ``policy_loss(name, ..., config, **overrides)`` runs with.

    The method's :attr:`PolicyLoss.defaults`, updated by the fields of ``config``
    that are not ``None``, then by ``overrides``. An override of ``None`` restores
    the method's default (for ``dual_clip``: off).

    Raises
    ------
    ValueError
        For an unknown method, unknown override names (named in the message) or
        a bad value (naming the field).
    """
    _check_choice("name", name, tuple(POLICY_LOSSES))
    unknown = sorted(set(overrides) - set(_CONFIG_FIELDS))
    if unknown:
        raise ValueError(f"unknown LossConfig field(s) {', '.join(map(repr, unknown))}")
    if config is not None and not isinstance(config, LossConfig):
        raise TypeError(f"config must be a LossConfig, got {type(config).__name__}")
    defaults = POLICY_LOSSES[name].defaults
    chosen = {}
    for key in _CONFIG_FIELDS:
        if config is not None and getattr(config, key) is not None:
            chosen[key] = getattr(config, key)
    for key, value in overrides.items():
        chosen[key] = getattr(defaults, key) if value is None else value
    return replace(defaults, **chosen)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over the tokens where ``mask`` is set (0 without any).

    Padded entries are left out by selection, not multiplied by 0: an inf or
    NaN there reaches neither the value nor the gradient.
    """
    valid = mask.bool()
    return torch.where(valid, values, 0.0).sum() / valid.sum().clamp(min=1)


def _aggregate(per_token: torch.Tensor, mask: torch.Tensor, how: str, norm_length: int | None = None) -> torch.Tensor:
    masked = torch.where(mask.bool(), per_token, 0.0)  # selection: inf * 0 would be NaN
    mask = mask.to(per_token.dtype)
    if how == "token-mean":
        return masked.sum() / mask.sum().clamp(min=1)
    if how == "token-sum-norm":
        length = mask.shape[-1] if norm_length is None else norm_length
        return masked.sum() / max(mask.shape[0] * length, 1)
    lengths = mask.sum(-1)
    per_seq = masked.sum(-1) / lengths.clamp(min=1)
    nonempty = lengths > 0  # a sequence without response tokens carries no loss and no weight
    return torch.where(nonempty, per_seq, 0.0).sum() / nonempty.sum().clamp(min=1)


def _check_shapes(logp, old_logp, adv, mask) -> None:
    if logp.ndim != 2 or logp.shape != old_logp.shape or logp.shape != mask.shape:
        raise ValueError(
            f"logp, old_logp and mask must share a 2-D shape (B, T), got {tuple(logp.shape)}, "
            f"{tuple(old_logp.shape)}, {tuple(mask.shape)}"
        )
    b, t = logp.shape
    if adv.ndim != 2 or adv.shape[0] != b or adv.shape[1] not in (1, t):
        raise ValueError(f"adv must have shape (B, 1) = ({b}, 1) or (B, T) = ({b}, {t}), got {tuple(adv.shape)}")


class PolicyLossOutput(NamedTuple):
    """A loss with its diagnostics, from ``policy_loss(..., return_stats=True)``.

    ``clip_fraction`` and ``approx_kl`` are detached scalars; see :func:`policy_loss`.
    """

    loss: torch.Tensor
    clip_fraction: torch.Tensor
    approx_kl: torch.Tensor


def policy_loss(
    name: str,
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    config: LossConfig | None = None,
    *,
    return_stats: bool = False,
    **overrides,
) -> torch.Tensor | PolicyLossOutput:
    r"""Evaluate a registered token-level loss.

    The method's per-token losses :math:`\ell_{i,t}` (:data:`POLICY_LOSSES`) are
    reduced over the mask :math:`m_{i,t}` by ``aggregation``:

    * ``"token-mean"``: :math:`\sum_{i,t} m\ell \,/\, \sum_{i,t} m` (DAPO's token-level loss);
    * ``"seq-mean-token-mean"``: the mean over sequences with response tokens of
      :math:`\sum_t m\ell / \sum_t m` (GRPO's per-sequence :math:`1/|o_i|`);
    * ``"token-sum-norm"``: :math:`\sum_{i,t} m\ell \,/\, (B L)` with the constant
      :math:`L` = ``norm_length`` or T. Dr. GRPO (Liu et al. 2025) drops the
      per-sequence :math:`1/|o_i|`; dividing by :math:`B L_{max}` is TRL's
      ``dr_grpo``, while verl's ``seq-mean-token-sum-norm`` divides by
      :math:`L_{max}` only (a factor B larger).

    Parameters
    ----------
    name : {"grpo", "dapo", "cispo", "drgrpo"}
    logp, old_logp : Tensor, shape (B, T)
        Token log-probabilities under the current and the sampling policy.
    adv : Tensor, shape (B, 1) or (B, T)
        Advantages (already multiplied by the focal weight), broadcast over tokens.
    mask : Tensor, shape (B, T)
        1 on response tokens, 0 on padding. Padded tokens take part in
        nothing: neither the loss, its gradient, nor the statistics, whatever
        their log-probabilities (even an overflowing ratio).
    config : LossConfig, optional
        Fields left ``None`` take the method's defaults; ``overrides`` replace
        fields (see :func:`resolve_loss_config`).
    return_stats : bool
        Also return the clip fraction and the approximate KL.

    Returns
    -------
    Tensor or PolicyLossOutput
        The scalar loss; with ``return_stats``, ``(loss, clip_fraction, approx_kl)``:

        * ``clip_fraction``: the share of response tokens whose objective the
          clip changed (PPO-clip, dual clip included) or whose IS weight was
          clipped (CISPO);
        * ``approx_kl``: the token mean of the k3 estimator of
          :math:`\mathrm{KL}(\pi_{old}\|\pi_\theta)`, :math:`(r - 1) - \log r`.

        Both are detached, and 0 without response tokens.
    """
    cfg = resolve_loss_config(name, config, **overrides)
    _check_shapes(logp, old_logp, adv, mask)
    # padded tokens get ratio 1: a log-ratio that overflows there (exp(100) is inf in float32) would otherwise
    # turn the zero gradient of the masked-out loss into 0 * inf = NaN in the exponential's backward
    old_logp = torch.where(mask.bool(), old_logp, logp.detach())
    per_token, clipped = POLICY_LOSSES[name].fn(logp, old_logp, adv, cfg)
    loss = _aggregate(per_token, mask, cfg.aggregation, cfg.norm_length)
    if not return_stats:
        return loss
    with torch.no_grad():
        stat_dtype = torch.promote_types(per_token.dtype, torch.float32)  # bf16 counts are inexact past 256
        log_ratio = (logp - old_logp).to(stat_dtype)
        approx_kl = torch.expm1(log_ratio) - log_ratio  # expm1 keeps r - 1 accurate near r = 1, where the terms cancel
        clip_fraction = _aggregate(clipped.to(stat_dtype), mask, "token-mean")
        return PolicyLossOutput(loss, clip_fraction, _aggregate(approx_kl, mask, "token-mean"))
