r"""Reductions of per-token losses to one scalar, each with the denominator it divides by.

An aggregation reduces the per-token losses :math:`\ell_{i,t}` of a batch of B
sequences over the response mask :math:`m_{i,t}`:

* ``"token-mean"``: :math:`\sum_{i,t} m\ell \,/\, \sum_{i,t} m` (DAPO's token-level loss);
* ``"seq-mean-token-mean"``: the mean over sequences with response tokens of
  :math:`\sum_t m\ell / \sum_t m` (GRPO's per-sequence :math:`1/|o_i|`);
* ``"token-sum-norm"``: :math:`\sum_{i,t} m\ell \,/\, (B L)` with the constant
  :math:`L` = ``norm_length`` or T. Dr. GRPO (Liu et al. 2025) drops the
  per-sequence :math:`1/|o_i|`; dividing by :math:`B L_{max}` is TRL's
  ``dr_grpo``, while verl's ``seq-mean-token-sum-norm`` divides by
  :math:`L_{max}` only (a factor B larger).

Every aggregation is a sum of per-row terms divided by a denominator
:math:`D(\text{mask})` that is additive over rows (tokens, non-empty sequences,
rows × L). The trainer relies on it to split a mini-batch over processes: the
loss of the whole is :math:`\sum_k \text{loss}_k\, D_k / D`. A new aggregation
registers both, with :func:`register_aggregation`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from tailmiss.objectives.registry import Registry

__all__ = ["Aggregation", "AGGREGATIONS", "register_aggregation", "masked_mean"]


@dataclass(frozen=True)
class Aggregation:
    """A registered reduction of per-token losses.

    Attributes
    ----------
    name : str
    reduce : callable
        ``reduce(per_token, mask, config) -> scalar``; ``config`` is the
        :class:`~tailmiss.objectives.LossConfig` the loss runs with (or ``None``
        for a statistic). Padded tokens must be left out by selection
        (``torch.where``), never multiplied by 0: an inf there would give NaN.
    denominator : callable
        ``denominator(mask, config) -> int``: what ``reduce`` divides the
        (weighted) sum of a batch's rows by, additive over rows, up to a
        constant factor.
    description : str
    """

    name: str
    reduce: Callable[..., torch.Tensor]
    denominator: Callable[..., int]
    description: str


AGGREGATIONS: Registry[Aggregation] = Registry("aggregation")
"""Every registered aggregation by name (:func:`register_aggregation`)."""


def register_aggregation(name: str, *, denominator: Callable[..., int], description: str = ""):
    """Decorator: register ``reduce(per_token, mask, config)`` as the aggregation ``name``.

    ``denominator(mask, config)`` is the row-additive quantity ``reduce``
    divides by (see the module docstring). Returns the function unchanged;
    ``ValueError`` naming ``name`` if it is taken.
    """
    if not callable(denominator):
        raise ValueError(f"denominator of aggregation {name!r} must be callable, got {denominator!r}")

    def decorate(reduce: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        AGGREGATIONS.add(name, Aggregation(name, reduce, denominator, description))
        return reduce

    return decorate


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over the tokens where ``mask`` is set (0 without any).

    Padded entries are left out by selection, not multiplied by 0: an inf or
    NaN there reaches neither the value nor the gradient.
    """
    valid = mask.bool()
    return torch.where(valid, values, 0.0).sum() / valid.sum().clamp(min=1)


def _norm_length(mask: torch.Tensor, config) -> int:
    length = getattr(config, "norm_length", None)
    return mask.shape[-1] if length is None else length


@register_aggregation(
    "token-mean", denominator=lambda mask, config: int(mask.sum()), description="DAPO's token-level mean"
)
def _token_mean(per_token: torch.Tensor, mask: torch.Tensor, config=None) -> torch.Tensor:
    masked = torch.where(mask.bool(), per_token, 0.0)  # selection: inf * 0 would be NaN
    return masked.sum() / mask.to(per_token.dtype).sum().clamp(min=1)


@register_aggregation(
    "seq-mean-token-mean",
    denominator=lambda mask, config: int((mask.sum(1) > 0).sum()),
    description="GRPO's per-sequence 1/|o_i|, then the mean over sequences with response tokens",
)
def _seq_mean_token_mean(per_token: torch.Tensor, mask: torch.Tensor, config=None) -> torch.Tensor:
    masked = torch.where(mask.bool(), per_token, 0.0)
    lengths = mask.to(per_token.dtype).sum(-1)
    per_seq = masked.sum(-1) / lengths.clamp(min=1)
    nonempty = lengths > 0  # a sequence without response tokens carries no loss and no weight
    return torch.where(nonempty, per_seq, 0.0).sum() / nonempty.sum().clamp(min=1)


@register_aggregation(
    "token-sum-norm",
    denominator=lambda mask, config: mask.shape[0] * _norm_length(mask, config),
    description="Dr. GRPO's sum over tokens divided by the constant B L",
)
def _token_sum_norm(per_token: torch.Tensor, mask: torch.Tensor, config=None) -> torch.Tensor:
    masked = torch.where(mask.bool(), per_token, 0.0)
    return masked.sum() / max(mask.shape[0] * _norm_length(mask, config), 1)
