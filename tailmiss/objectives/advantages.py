r"""Group-relative advantages and the focal weight, shared by the simulator and the trainer.

F-GRPO §4.1: rewards → group mean (and std) → advantage :math:`A_i` → times the
focal weight :math:`g = (1-\hat\mu_{pos})^\gamma`. The simulator computes the
advantages from correctness counts (:func:`binary_group_advantages`), the
trainer from explicit reward vectors (:func:`group_advantages`).
"""

from __future__ import annotations

import torch

from tailmiss._checks import check_choice

__all__ = ["ADVANTAGE_MODES", "STD_KINDS", "group_advantages", "binary_group_advantages", "focal_weight"]

ADVANTAGE_MODES = ("none", "mean", "std")
"""``none``: raw rewards; ``mean``: :math:`R - \\bar R` (Dr. GRPO, BroRL sim);
``std``: :math:`(R - \\bar R)/(\\sigma_R + \\epsilon)` (GRPO Eq. 3)."""
STD_KINDS = ("population", "bessel")
"""The group standard deviation :math:`\\sigma_R` of the ``"std"`` advantage: ``population`` divides by :math:`N`,
``bessel`` by :math:`N-1` (verl's default; F-GRPO Eq. 3 fixes neither)."""


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
    check_choice("mode", mode, ADVANTAGE_MODES)
    check_choice("std", std, STD_KINDS)
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
    check_choice("mode", mode, ADVANTAGE_MODES)
    check_choice("std", std, STD_KINDS)
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
