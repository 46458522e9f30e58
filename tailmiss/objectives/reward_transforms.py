r"""Reward transforms: a change of each rollout's reward before the group advantage.

A transform maps a batch of groups' rewards (and, when it needs them, the
rollouts' sequence log-probabilities under the rollout policy) to new rewards;
the group advantage and the focal weight are then computed as usual, the focal
weight's :math:`X` still counting the *original* correct rollouts. The
trainer (``RLConfig.reward_transform``) and the verl adapter
(``+algorithm.reward_transform``) look the name up in :data:`REWARD_TRANSFORMS`;
a new transform is one decorated definition:

.. code-block:: python

    from tailmiss.objectives import register_reward_transform

    @register_reward_transform("length-penalty", needs_logprobs=False)
    def length_penalty(rewards, correct, seq_logp, coef):
        return rewards - coef * (~correct).to(rewards.dtype)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from tailmiss._checks import check_number
from tailmiss.objectives.registry import Registry

__all__ = [
    "RewardTransform",
    "REWARD_TRANSFORMS",
    "register_reward_transform",
    "transform_rewards",
    "differential_smoothing",
]


class RewardTransform(NamedTuple):
    """A registered reward transform: ``fn(rewards, correct, seq_logp, coef) -> rewards``."""

    name: str
    fn: Callable
    needs_logprobs: bool


REWARD_TRANSFORMS: Registry[RewardTransform] = Registry("reward transform")
"""Every reward transform by name: ``"differential-smoothing"`` (DS-GRPO) and any registered one."""


def register_reward_transform(name: str, *, needs_logprobs: bool):
    """Decorator: register ``fn(rewards, correct, seq_logp, coef)`` as the reward transform ``name``.

    ``needs_logprobs`` says whether ``fn`` reads ``seq_logp`` (the trainer then
    computes the rollouts' sequence log-probabilities before the advantages).
    A taken name raises ``ValueError``.
    """
    if not isinstance(needs_logprobs, bool):
        raise ValueError(f"needs_logprobs must be a bool, got {needs_logprobs!r}")

    def decorate(fn):
        REWARD_TRANSFORMS.add(name, RewardTransform(name, fn, needs_logprobs))
        return fn

    return decorate


def transform_rewards(
    name: str,
    rewards: torch.Tensor,
    correct: torch.Tensor,
    seq_logp: torch.Tensor | None = None,
    coef: float = 0.0,
) -> torch.Tensor:
    """Apply the registered transform ``name`` to ``rewards`` (any shape; ``correct`` and ``seq_logp`` alike).

    Raises
    ------
    ValueError
        For an unknown ``name``, a negative or non-finite ``coef``, shapes that
        differ, or a transform that needs ``seq_logp`` called without it.
    """
    if name not in REWARD_TRANSFORMS:
        raise ValueError(f"unknown reward transform {name!r}; registered: {', '.join(REWARD_TRANSFORMS)}")
    entry = REWARD_TRANSFORMS[name]
    coef = check_number("reward transform coef", coef, 0.0)
    if correct.shape != rewards.shape:
        raise ValueError(f"correct must have the rewards' shape {tuple(rewards.shape)}, got {tuple(correct.shape)}")
    if entry.needs_logprobs:
        if seq_logp is None:
            raise ValueError(f"reward transform {name!r} needs the rollouts' sequence log-probabilities (seq_logp)")
        if seq_logp.shape != rewards.shape:
            raise ValueError(
                f"seq_logp must have the rewards' shape {tuple(rewards.shape)}, got {tuple(seq_logp.shape)}"
            )
    return entry.fn(rewards, correct.bool(), seq_logp, float(coef))


@register_reward_transform("differential-smoothing", needs_logprobs=True)
def differential_smoothing(
    rewards: torch.Tensor, correct: torch.Tensor, seq_logp: torch.Tensor, coef: float
) -> torch.Tensor:
    r"""Differential smoothing (DS-GRPO): a smoothing bonus on the correct rollouts only.

    .. math::

        \tilde r(y) = \begin{cases} r(y) - \beta \log \pi_{\theta_{old}}(y) & y \text{ correct} \\
                      r(y) & y \text{ incorrect} \end{cases}

    where :math:`\log \pi_{\theta_{old}}(y)` is the rollout's sequence
    log-probability under the policy that sampled it (the sum of its response
    tokens' log-probabilities), taken as a constant (no gradient flows through
    the reward). Over the correct rollouts, :math:`-\log\pi` in expectation is the
    entropy of the policy restricted to the correct set: the bonus favours the
    less likely correct solutions and so counters the sharpening of the correct
    set, and it is applied only where Gai et al. show a diversity fix is needed,
    on the correct trajectories; the incorrect ones keep their reward.

    With the std-normalised group advantage, a group whose rollouts are all
    correct is no longer silent: its advantages order its rollouts by
    :math:`-\log\pi`, at unit scale.

    Parameters
    ----------
    rewards, correct, seq_logp : Tensor, one shape
        Rewards, success flags and sequence log-probabilities (:math:`\le 0`).
    coef : float
        :math:`\beta \ge 0`; 0 returns the rewards unchanged.

    Returns
    -------
    Tensor
        The transformed rewards (float64 when the inputs are; the rewards' dtype otherwise).

    References
    ----------
    Gai, Zeng, Zhang and Raghunathan, "Differential Smoothing Mitigates Sharpening and Improves LLM
    Reasoning", arXiv:2511.19942 (2025): reward modification on the correct trajectories only. F-GRPO's
    Table 3 compares F-GRPO with it as "DS-GRPO".
    """
    bonus = -coef * seq_logp.detach().to(rewards.dtype)
    return torch.where(correct, rewards + bonus, rewards)
