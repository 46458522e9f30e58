r"""Categorical-policy surrogates of the simulator, with closed-form gradients.

The simulator works with per-action draw weights, not sampled token sequences:
a surrogate :math:`J(z)` of the logits :math:`z` comes with its gradient
:math:`N\,\partial J/\partial z` as a function of the policy ``probs`` and the
per-action ``weights``. A new surrogate is one decorated definition:

.. code-block:: python

    from tailmiss.objectives import register_surrogate

    @register_surrogate("my-surrogate", description="what J is")
    def my_ascent(probs, weights, out=None):
        ...  # N * dJ/dz, written into out when given

after which ``SimConfig(surrogate="my-surrogate")`` accepts it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from tailmiss._checks import check_bool
from tailmiss.objectives.registry import Registry

__all__ = ["Surrogate", "SURROGATES", "register_surrogate"]


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


SURROGATES: Registry[Surrogate] = Registry("surrogate")
"""Every registered surrogate by name (:func:`register_surrogate`)."""


def register_surrogate(name: str, *, description: str, distinct: bool = False):
    """Decorator: register ``ascent(probs, weights, out=None)`` as the surrogate ``name``.

    Parameters
    ----------
    name : str
        New name (``ValueError`` naming it if already registered).
    description : str
        What :math:`J` is, with its reference.
    distinct : bool
        Whether ``weights`` holds the reward of each distinct sampled action
        (the theory surrogate) instead of the summed advantages of the draws.

    Returns
    -------
    callable
        The decorator; it returns the function unchanged, so one function can
        carry several registrations.
    """
    check_bool("distinct", distinct)
    if not isinstance(description, str) or not description:
        raise ValueError(f"description of surrogate {name!r} must be a non-empty string")

    def decorate(ascent: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        SURROGATES.add(name, Surrogate(name, ascent, distinct=distinct, description=description))
        return ascent

    return decorate


@register_surrogate(
    "logprob",
    description="policy gradient (1/N) sum_j A_j log p(a_j); unsampled actions move only "
    "through sum_j A_j, which is 0 for centred advantages",
)
def _logprob_ascent(probs: torch.Tensor, weights: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    # d/dz_i sum_j w_j log p_{a_j} = w_i - p_i * sum_k w_k
    return torch.addcmul(weights, probs, weights.sum(dim=-1, keepdim=True), value=-1.0, out=out)


def _prob_ascent(probs: torch.Tensor, weights: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    # d/dz_i sum_j w_j p_{a_j} = p_i * (w_i - sum_k w_k p_k)
    return torch.mul(probs, weights - (weights * probs).sum(dim=-1, keepdim=True), out=out)


register_surrogate("prob", description="BroRL's (1/N) sum_j A_j p(a_j): gradient (p_i/N)[c_i A_i - sum_k c_k A_k p_k]")(
    _prob_ascent
)
register_surrogate(
    "theory",
    distinct=True,
    description="F-GRPO Eq. 5 / BroRL App. C.1: (1/N) sum over distinct sampled i of R_i p_i, "
    "so dz_i = (eta/N) p_i (R_i - S_R)",
)(_prob_ascent)
