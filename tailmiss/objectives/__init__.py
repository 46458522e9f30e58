r"""Advantages, focal weight and losses: registries shared by the simulator and the trainers.

Every group-relative method follows the same path (F-GRPO §4.1):
rewards → group mean (and std) → advantage :math:`A_i` → times the focal weight
:math:`g = (1-\hat\mu_{pos})^\gamma` → loss. The methods differ only in the last
step, so the losses live in registries keyed by name:

* :mod:`~tailmiss.objectives.advantages`: group advantages (from rewards or from
  correctness counts) and the focal weight, used by the simulator and the trainer;
* :mod:`~tailmiss.objectives.surrogates`: :data:`SURROGATES`, gradients of the
  categorical-policy surrogates of the simulator;
* :mod:`~tailmiss.objectives.token_losses`: :data:`POLICY_LOSSES`, token-level
  GRPO / DAPO / CISPO / Dr. GRPO losses for sequence models
  (``logp, old_logp, adv, mask -> loss``), each with its paper settings and
  advantage mode, reduced by one of :data:`AGGREGATIONS`
  (:mod:`~tailmiss.objectives.aggregations`);
* :mod:`~tailmiss.objectives.reward_transforms`: :data:`REWARD_TRANSFORMS`, changes of
  the rewards before the advantage (differential smoothing, DS-GRPO).

A new loss is one decorated definition outside the package
(:func:`register_policy_loss`, :func:`register_aggregation`,
:func:`register_surrogate`, :func:`register_reward_transform`); a taken name raises ``ValueError``. All loss
functions are pure: tensors in, tensors out.
"""

# ruff: noqa: F401 (each name below is exported through its module's __all__)
from __future__ import annotations

from tailmiss.objectives import advantages, aggregations, registry, reward_transforms, surrogates, token_losses
from tailmiss.objectives.advantages import (
    ADVANTAGE_MODES,
    STD_KINDS,
    binary_group_advantages,
    focal_weight,
    group_advantages,
)
from tailmiss.objectives.aggregations import AGGREGATIONS, Aggregation, masked_mean, register_aggregation
from tailmiss.objectives.registry import Registry
from tailmiss.objectives.reward_transforms import (
    REWARD_TRANSFORMS,
    RewardTransform,
    differential_smoothing,
    register_reward_transform,
    transform_rewards,
)
from tailmiss.objectives.surrogates import SURROGATES, Surrogate, register_surrogate
from tailmiss.objectives.token_losses import (
    CISPO_CLIP_MODES,
    LOSS_FIELDS,
    POLICY_LOSSES,
    LossConfig,
    PolicyLoss,
    PolicyLossOutput,
    cispo_loss,
    policy_loss,
    ppo_clip_loss,
    register_policy_loss,
    resolve_loss_config,
)

__all__ = [
    *advantages.__all__,
    *registry.__all__,
    *surrogates.__all__,
    *aggregations.__all__,
    *token_losses.__all__,
    *reward_transforms.__all__,
]
