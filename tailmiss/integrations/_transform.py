r"""Reward transforms (DS-GRPO) in the TRL and verl adapters: the check of their two settings.

The transform itself is :func:`tailmiss.objectives.transform_rewards` (a name of
:data:`tailmiss.objectives.REWARD_TRANSFORMS`, e.g. ``"differential-smoothing"``: Gai et al. 2025,
arXiv:2511.19942, compared with F-GRPO as "DS-GRPO" in F-GRPO Table 3); each adapter feeds it the
rollouts' rewards, success flags and sequence log-probabilities where its framework keeps them.
"""

from __future__ import annotations

import numpy as np
import torch

from tailmiss._checks import check_number
from tailmiss.objectives import REWARD_TRANSFORMS

__all__ = ["transform_settings", "trl_group_advantages"]


def transform_settings(name, coef, name_key: str, coef_key: str) -> tuple[str | None, float]:
    """``(name, coef)`` checked: ``name`` None or a registered transform, ``coef`` a number ``>= 0``.

    ``name_key`` and ``coef_key`` are how the user sets the two (named in the errors).

    Raises
    ------
    ValueError
        For an unknown name, a coefficient that is not a finite number ``>= 0``, or a non-zero coefficient
        without a transform to scale.
    """
    if name is not None and (not isinstance(name, str) or name not in REWARD_TRANSFORMS):
        known = ", ".join(map(repr, REWARD_TRANSFORMS))
        raise ValueError(f"{name_key} must be a registered reward transform ({known}) or None, got {name!r}")
    coef = float(check_number(coef_key, coef.item() if isinstance(coef, np.generic) else coef, 0.0))
    if name is None and coef != 0.0:
        raise ValueError(f"{coef_key} = {coef!r} needs a {name_key} to scale")
    return name, coef


def trl_group_advantages(rewards: torch.Tensor, group_size: int, scale_rewards: str) -> torch.Tensor:
    """TRL's (1.16) ``sum_then_normalize`` advantages of ``rewards``, NaN (unscored) rewards giving 0.

    ``rewards`` holds all processes' rollouts, groups of ``group_size`` in a row. As TRL's
    ``GRPOTrainer._generate_and_score_completions``: the group mean (NaN-aware) is subtracted; then,
    for ``scale_rewards`` ``"group"`` / ``"batch"``, a division by the group's / batch's NaN-aware
    Bessel std (0 for a single rollout) plus 1e-4; ``"none"`` leaves the difference.
    """
    from trl.trainer.utils import nanstd  # TRL's own, so that the numbers match TRL's bit for bit

    grouped = rewards.view(-1, group_size)
    advantages = rewards - torch.nanmean(grouped, dim=1).repeat_interleave(group_size, dim=0)
    if scale_rewards in ("group", "batch"):
        if scale_rewards == "group" and group_size > 1:
            std = nanstd(grouped, dim=1).repeat_interleave(group_size, dim=0)
        elif scale_rewards == "batch" and rewards.numel() > 1:
            std = nanstd(rewards).expand_as(rewards)
        else:
            std = torch.zeros_like(rewards)
        advantages = advantages / (std + 1e-4)
    elif scale_rewards != "none":
        raise ValueError(f"scale_rewards must be 'group', 'batch' or 'none', got {scale_rewards!r}")
    return torch.nan_to_num(advantages, nan=0.0)
