r"""Focal weights of the groups of a batch of scored rollouts, shared by the TRL and verl adapters."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from tailmiss.diagnose.rollout_log import success_flags
from tailmiss.objectives import focal_weight

__all__ = ["GroupFocal", "group_focal_weights", "NOT_BINARY_ADVICE"]

NOT_BINARY_ADVICE = {
    "trl": (
        "set FGRPOConfig(success_threshold=T) (a reward >= T counts as correct), or success_reward_func to the "
        "name of a reward function with binary rewards"
    ),
    "verl": (
        "add +algorithm.fgrpo_success_threshold=T to verl's command line (a score >= T counts as correct; the "
        "score is the sum of the rollout's token-level rewards), or have the reward function return binary scores"
    ),
}
"""What the error for non-binary rewards tells the user of each integration to do (``success_flags``'s advice)."""


class GroupFocal(NamedTuple):
    """Focal weights of a batch, per rollout and per group (all float64 / int64 on the CPU)."""

    rollout_weight: torch.Tensor
    """:math:`g` of each rollout's group, shape ``(B,)``."""
    group_weight: torch.Tensor
    """:math:`g` per group, shape ``(K,)``."""
    n_correct: torch.Tensor
    """:math:`X` per group (scored rollouts that count as correct)."""
    group_size: torch.Tensor
    """:math:`N` per group (scored rollouts only)."""
    correct: np.ndarray
    """Success flag of each rollout (False where the reward is NaN)."""


def group_focal_weights(
    rewards: torch.Tensor,
    group_index: torch.Tensor,
    gamma: float,
    threshold: float | None = None,
    threshold_name: str = "threshold",
    advice: str | None = None,
) -> GroupFocal:
    r"""F-GRPO's focal weight of every rollout's group.

    .. math::

        g_k = (1 - X_k / N_k)^\gamma

    where group :math:`k` has :math:`N_k` scored rollouts (NaN rewards, i.e. unscored ones, do
    not count) of which :math:`X_k` are correct: ``reward >= threshold``, or a binary reward of 1
    (:func:`tailmiss.diagnose.success_flags`). A group with no scored rollout gets
    :math:`g = 1` (its advantages are zero anyway).

    Parameters
    ----------
    rewards : Tensor, shape (B,)
        One scalar reward per rollout, over the *whole* batch (all processes).
    group_index : Tensor of int, shape (B,)
        Group of each rollout, ``0 .. K-1``.
    gamma : float
        Focal exponent :math:`\gamma \ge 0`; 0 gives :math:`g = 1` everywhere.
    threshold : float, optional
        Success threshold for non-binary rewards.
    threshold_name : str
        How the user sets the threshold (named in the error for a bad threshold).
    advice : str, optional
        What the error for non-binary rewards without a threshold tells the user to do (an entry of
        :data:`NOT_BINARY_ADVICE`); default: :func:`~tailmiss.diagnose.success_flags`'s.

    Returns
    -------
    GroupFocal

    References
    ----------
    F-GRPO Eqs. 11-13.
    """
    if rewards.ndim != 1 or group_index.shape != rewards.shape:
        raise ValueError(
            f"rewards and group_index must be 1-d of one length, got {tuple(rewards.shape)} and "
            f"{tuple(group_index.shape)}"
        )
    reward = rewards.detach().to("cpu", torch.float64)
    index = group_index.detach().to("cpu", torch.int64)
    scored = ~torch.isnan(reward)
    correct = success_flags(reward.numpy(), threshold, threshold_name, advice)
    groups = int(index.max()) + 1 if index.numel() else 0
    x = torch.zeros(groups, dtype=torch.int64).index_add_(0, index, torch.from_numpy(correct).to(torch.int64))
    n = torch.zeros(groups, dtype=torch.int64).index_add_(0, index, scored.to(torch.int64))
    g = torch.where(n > 0, focal_weight(x, n.clamp(min=1), gamma), torch.ones(groups, dtype=torch.float64))
    return GroupFocal(g[index], g, x, n, correct)
