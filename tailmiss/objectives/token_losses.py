r"""Token-level policy losses of sequence models: GRPO, DAPO, CISPO, Dr. GRPO, and any registered one.

A loss is a kernel ``fn(logp, old_logp, adv, mask, config)`` giving per-token
losses (and the tokens its clip changed), its paper settings
(:class:`LossConfig` defaults, the aggregation among them) and its advantage
mode. :func:`policy_loss` runs a kernel and reduces its per-token losses with
the aggregation (:mod:`tailmiss.objectives.aggregations`). A new loss is one
decorated definition, e.g. REINFORCE with the group advantage:

.. code-block:: python

    from tailmiss.objectives import register_policy_loss

    @register_policy_loss("reinforce", advantage="std", aggregation="token-mean")
    def reinforce(logp, old_logp, adv, mask, config):
        return -adv * logp  # per-token loss; no clip

after which ``RLConfig(method="reinforce")`` trains with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import NamedTuple

import torch

from tailmiss._checks import check_choice, check_int, check_number
from tailmiss.objectives.advantages import ADVANTAGE_MODES
from tailmiss.objectives.aggregations import AGGREGATIONS
from tailmiss.objectives.registry import Registry

__all__ = [
    "CISPO_CLIP_MODES",
    "LOSS_FIELDS",
    "LossConfig",
    "PolicyLoss",
    "POLICY_LOSSES",
    "PolicyLossOutput",
    "register_policy_loss",
    "resolve_loss_config",
    "policy_loss",
    "ppo_clip_loss",
    "cispo_loss",
]

CISPO_CLIP_MODES = ("relative", "absolute")
"""How CISPO bounds its importance-sampling weight (:attr:`LossConfig.cispo_clip_mode`, :func:`cispo_loss`):
``relative`` clips it to :math:`[\\max(0, 1-\\epsilon_{low}), 1+\\epsilon_{high}]` (the paper's), ``absolute`` caps it
at :math:`\\epsilon_{high}` (TRL's, no floor)."""


@dataclass(frozen=True)
class LossConfig:
    r"""Clip and aggregation settings of a token-level policy loss (TOML table ``[rl.loss]``).

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
        or :math:`\min(r, \epsilon_{high})`; see :func:`cispo_loss`.
    aggregation : str, optional
        A name of :data:`~tailmiss.objectives.AGGREGATIONS` ("token-mean",
        "seq-mean-token-mean", "token-sum-norm" or a registered one).
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
            if getattr(self, name) is not None:
                check_number(name, getattr(self, name), 0.0)
        if self.dual_clip is not None:
            check_number("dual_clip", self.dual_clip, 1.0, lo_open=True)
        if self.cispo_clip_mode is not None:
            check_choice("cispo_clip_mode", self.cispo_clip_mode, CISPO_CLIP_MODES)
        if self.aggregation is not None:
            check_choice("aggregation", self.aggregation, AGGREGATIONS)  # looked up now: registered ones count
        if self.norm_length is not None:
            check_int("norm_length", self.norm_length, 1)

    def replace(self, **changes) -> LossConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """The fields that are set (``None``: the method's default, left out)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


LOSS_FIELDS = tuple(f.name for f in fields(LossConfig))
"""The settings of :class:`LossConfig`, in order."""


@dataclass(frozen=True)
class PolicyLoss:
    """A registered token-level loss with its paper settings.

    Attributes
    ----------
    name : str
    fn : callable
        ``fn(logp, old_logp, adv, mask, config) -> per_token_loss`` or
        ``(per_token_loss, clipped)``, shape (B, T); ``clipped`` (bool) marks
        the tokens whose objective (PPO-clip) or IS weight (CISPO) the clip
        changed (none when the kernel returns the loss alone). ``mask`` is the
        response mask; padded tokens are dropped afterwards by the aggregation,
        whatever the kernel gives there.
    defaults : LossConfig
        The method's settings; ``aggregation`` must be set. Fields the kernel
        does not read may stay ``None``.
    advantage : str
        The method's advantage mode, one of :data:`ADVANTAGE_MODES`.
    """

    name: str
    fn: Callable[..., torch.Tensor | tuple[torch.Tensor, torch.Tensor]]
    defaults: LossConfig
    advantage: str

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise ValueError(f"kernel of {self.name!r} must be callable, got {self.fn!r}")
        if not isinstance(self.defaults, LossConfig):
            raise ValueError(f"defaults of {self.name!r} must be a LossConfig, got {self.defaults!r}")
        if self.defaults.aggregation is None:
            raise ValueError(f"defaults of {self.name!r} must set aggregation")
        check_choice("advantage", self.advantage, ADVANTAGE_MODES)


POLICY_LOSSES: Registry[PolicyLoss] = Registry("policy loss")
"""Every registered token-level loss by name (:func:`register_policy_loss`)."""


def register_policy_loss(name: str, *, advantage: str = "std", aggregation: str = "token-mean", **defaults):
    """Decorator: register the kernel ``fn(logp, old_logp, adv, mask, config)`` as the loss ``name``.

    Parameters
    ----------
    name : str
        New name (``ValueError`` naming it if already registered).
    advantage : {"none", "mean", "std"}
        The method's advantage mode (``RLConfig.advantage`` overrides it).
    aggregation : str
        Its default aggregation, a name of :data:`~tailmiss.objectives.AGGREGATIONS`.
    **defaults
        Its other :class:`LossConfig` defaults (``clip_low=0.2``, ...).

    Returns
    -------
    callable
        The decorator; it returns the kernel unchanged, so one kernel can carry
        several registrations (GRPO, DAPO and Dr. GRPO share PPO-clip).
    """
    unknown = sorted(set(defaults) - set(LOSS_FIELDS))
    if unknown:
        raise ValueError(f"unknown LossConfig field(s) {', '.join(map(repr, unknown))} for policy loss {name!r}")
    entry_defaults = LossConfig(aggregation=aggregation, **defaults)

    def decorate(fn):
        POLICY_LOSSES.add(name, PolicyLoss(name, fn, entry_defaults, advantage))
        return fn

    return decorate


def ppo_clip_loss(logp, old_logp, adv, mask, cfg: LossConfig) -> tuple[torch.Tensor, torch.Tensor]:
    r"""PPO-clip loss per token (F-GRPO Eq. 14; DAPO's clip-higher when :math:`\epsilon_{high} > \epsilon_{low}`).

    .. math::

        \ell_t = -\min\big(r_t A,\ \mathrm{clip}(r_t, 1-\epsilon_{low}, 1+\epsilon_{high})\, A\big),
        \qquad r_t = \exp(\log\pi_\theta(o_t) - \log\pi_{old}(o_t))

    and with dual clip :math:`\ell_t \leftarrow \min(\ell_t, -cA)` where :math:`A < 0`.
    The clip changes the objective, and zeroes the token's gradient, where
    :math:`A > 0, r_t > 1+\epsilon_{high}` or :math:`A < 0, r_t < 1-\epsilon_{low}`,
    and with dual clip also where :math:`A < 0, r_t > c`. ``mask`` is not
    needed: every token's value stands on its own.
    """
    ratio = torch.exp(logp - old_logp)
    pg_obj = torch.minimum(ratio * adv, ratio.clamp(1 - cfg.clip_low, 1 + cfg.clip_high) * adv)
    clipped = ((adv > 0) & (ratio > 1 + cfg.clip_high)) | ((adv < 0) & (ratio < 1 - cfg.clip_low))
    if cfg.dual_clip is not None:
        pg_obj = torch.where(adv < 0, torch.maximum(pg_obj, cfg.dual_clip * adv), pg_obj)
        clipped = clipped | ((adv < 0) & (ratio > cfg.dual_clip))
    return -pg_obj, clipped


def cispo_loss(logp, old_logp, adv, mask, cfg: LossConfig) -> tuple[torch.Tensor, torch.Tensor]:
    r"""CISPO loss per token (CISPO (MiniMax-M1); F-GRPO Eqs. 15-16).

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


def _paper(clip_low: float, clip_high: float) -> dict:
    return dict(clip_low=clip_low, clip_high=clip_high, cispo_clip_mode="relative")


register_policy_loss("grpo", **_paper(0.2, 0.2))(ppo_clip_loss)  # F-GRPO Eq. 14
register_policy_loss("dapo", **_paper(0.2, 0.28))(ppo_clip_loss)  # DAPO clip-higher
register_policy_loss("cispo", **_paper(1.0, 5.0))(cispo_loss)  # CISPO (MiniMax-M1)
# Dr. GRPO (Liu et al. 2025): A = R - mean(R), no per-sequence 1/|o_i|
register_policy_loss("drgrpo", advantage="mean", aggregation="token-sum-norm", **_paper(0.2, 0.2))(ppo_clip_loss)


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
    check_choice("name", name, POLICY_LOSSES)
    unknown = sorted(set(overrides) - set(LOSS_FIELDS))
    if unknown:
        raise ValueError(f"unknown LossConfig field(s) {', '.join(map(repr, unknown))}")
    if config is not None and not isinstance(config, LossConfig):
        raise TypeError(f"config must be a LossConfig, got {type(config).__name__}")
    defaults = POLICY_LOSSES[name].defaults
    chosen = config.to_dict() if config is not None else {}
    for key, value in overrides.items():
        chosen[key] = getattr(defaults, key) if value is None else value
    return replace(defaults, **chosen)


def _aggregate(per_token: torch.Tensor, mask: torch.Tensor, how: str, config: LossConfig | None = None):
    """``per_token`` reduced over ``mask`` by the aggregation ``how`` (:data:`AGGREGATIONS`)."""
    return AGGREGATIONS[how].reduce(per_token, mask, config)


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

    .. math::

        \mathcal L = \mathrm{agg}_{m}\big(\ell_{i,t}\big), \qquad
        \ell_{i,t} = \texttt{fn}(\log\pi_\theta, \log\pi_{old}, A, m)_{i,t}

    The method's per-token losses :math:`\ell_{i,t}` (:data:`POLICY_LOSSES`:
    PPO-clip, F-GRPO Eq. 14, for GRPO / DAPO / Dr. GRPO; CISPO (MiniMax-M1),
    F-GRPO Eqs. 15-16) are reduced over the mask :math:`m_{i,t}` by
    ``aggregation`` (:mod:`tailmiss.objectives.aggregations`): ``"token-mean"``
    :math:`\sum m\ell / \sum m` (DAPO), ``"seq-mean-token-mean"`` (GRPO's
    :math:`1/|o_i|`), ``"token-sum-norm"`` :math:`\sum m\ell / (B L)` (Dr. GRPO).

    Parameters
    ----------
    name : str
        A registered loss: "grpo", "dapo", "cispo", "drgrpo" or one added with
        :func:`register_policy_loss`.
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
    out = POLICY_LOSSES[name].fn(logp, old_logp, adv, mask, cfg)
    per_token, clipped = out if isinstance(out, tuple) else (out, torch.zeros_like(mask, dtype=torch.bool))
    if per_token.shape != logp.shape or clipped.shape != logp.shape:
        raise ValueError(
            f"policy loss {name!r} must return per-token tensors of shape {tuple(logp.shape)}, "
            f"got {tuple(per_token.shape)} and {tuple(clipped.shape)}"
        )
    loss = _aggregate(per_token, mask, cfg.aggregation, cfg)
    if not return_stats:
        return loss
    with torch.no_grad():
        stat_dtype = torch.promote_types(per_token.dtype, torch.float32)  # bf16 counts are inexact past 256
        log_ratio = (logp - old_logp).to(stat_dtype)
        approx_kl = torch.expm1(log_ratio) - log_ratio  # expm1 keeps r - 1 accurate near r = 1, where the terms cancel
        clip_fraction = _aggregate(clipped.to(stat_dtype), mask, "token-mean")
        return PolicyLossOutput(loss, clip_fraction, _aggregate(approx_kl, mask, "token-mean"))
