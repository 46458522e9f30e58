r"""F-GRPO in verl: the ``fgrpo`` advantage estimator, loaded as a verl plugin.

With ``pip install "tailmiss[verl]"`` in verl's environment, nothing else is needed: verl imports
every ``verl.plugins`` entry point when it is imported itself, and tailmiss's entry point is this
module, which registers ``fgrpo`` with ``verl.trainer.ppo.core_algos.register_adv_est``. Choose
it on verl's Hydra command line:

.. code-block:: bash

    python -m verl.trainer.main_ppo \
        algorithm.adv_estimator=fgrpo \
        +algorithm.fgrpo_gamma=0.5 \
        actor_rollout_ref.rollout.n=8 \
        ...                                  # the rest of a GRPO run, unchanged

``+algorithm.fgrpo_gamma`` (default 0.5) is :math:`\gamma`; the ``+`` is Hydra's syntax for a
key that verl's config does not declare. For non-binary scores add
``+algorithm.fgrpo_success_threshold=0.5`` (a score ``>= 0.5`` counts as correct); binary scores,
{0, 1} or {-1, 1}, need none. ``algorithm.norm_adv_by_std_in_grpo`` is honoured as in ``grpo``.

**What it computes.** verl's own GRPO advantage (``compute_grpo_outcome_advantage``: Bessel std,
:math:`\epsilon` = 1e-6, a group of one gets mean 0 and std 1) times the focal weight of the
rollout's group, :math:`A^F_i = g\,A_i` with :math:`g = (1 - X/N)^\gamma` over the rollouts that
share a ``uid`` (F-GRPO Eqs. 11-13). The score of a rollout is the sum of its token-level
rewards, as in verl's GRPO.

**Checking the plugin.** verl only logs (at debug level) a plugin that fails to import, and the
run then stops with ``Unknown advantage estimator simply: fgrpo``. ``python -c "import
tailmiss.integrations.verl"`` shows the real error; ``VERL_USE_EXTERNAL_PLUGINS=none`` turns
plugin loading off (then import this module yourself, or list it in
``VERL_USE_EXTERNAL_MODULES``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

try:
    from verl.trainer.ppo import core_algos
except ImportError as exc:  # pragma: no cover - exercised without verl only
    raise ImportError("tailmiss.integrations.verl needs verl: pip install 'tailmiss[verl]'") from exc

from tailmiss.integrations._focal import group_focal_weights

__all__ = ["ESTIMATOR", "DEFAULT_GAMMA", "compute_fgrpo_outcome_advantage"]

ESTIMATOR = "fgrpo"
DEFAULT_GAMMA = 0.5
"""γ when the config has no ``fgrpo_gamma``: F-GRPO's choice for most model/method pairs (Table 7)."""
THRESHOLD_KEY = "+algorithm.fgrpo_success_threshold"


def _settings(config) -> tuple[float, float | None, bool]:
    get = config.get if config is not None else (lambda key, default=None: default)
    gamma = get("fgrpo_gamma", DEFAULT_GAMMA)
    threshold = get("fgrpo_success_threshold", None)
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not (math.isfinite(gamma) and gamma >= 0):
        raise ValueError(f"algorithm.fgrpo_gamma must be a finite number >= 0, got {gamma!r}")
    if threshold is not None and (isinstance(threshold, bool) or not math.isfinite(float(threshold))):
        raise ValueError(f"algorithm.fgrpo_success_threshold must be a finite number, got {threshold!r}")
    return float(gamma), None if threshold is None else float(threshold), bool(get("norm_adv_by_std_in_grpo", True))


@core_algos.register_adv_est(ESTIMATOR)
def compute_fgrpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    config=None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""F-GRPO advantage for outcome rewards: verl's GRPO advantage times the group's focal weight.

    .. math::

        A^F_i = (1 - X/N)^\gamma \, \frac{R_i - \bar R}{\sigma_R + \epsilon}

    per group of rollouts sharing an ``index`` (uid), with :math:`X` the group's correct
    rollouts (see the module docstring for success and the config keys).

    Parameters
    ----------
    token_level_rewards, response_mask : Tensor, shape (B, T)
    index : ndarray, shape (B,)
        Group id (uid) of each rollout.
    epsilon : float
        Added to the group std (verl's default).
    config : verl's algorithm config (DictConfig or AlgoConfig), optional
        Read: ``fgrpo_gamma``, ``fgrpo_success_threshold``, ``norm_adv_by_std_in_grpo``.
    **kwargs
        What verl's dispatch passes to every estimator and this one does not use.

    Returns
    -------
    (Tensor, Tensor)
        Advantages and returns (equal, as in verl's GRPO), shape (B, T), zero outside the mask.

    References
    ----------
    F-GRPO Eqs. 3 and 11-13.
    """
    gamma, threshold, norm_by_std = _settings(config)
    advantages, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards, response_mask, index, epsilon=epsilon, norm_adv_by_std_in_grpo=norm_by_std, config=config
    )
    _, group = np.unique(np.asarray(index).astype(str), return_inverse=True)
    scores = token_level_rewards.sum(dim=-1)
    focal = group_focal_weights(scores, torch.from_numpy(group.reshape(-1)), gamma, threshold, THRESHOLD_KEY)
    weight = focal.rollout_weight.to(advantages.device, advantages.dtype).unsqueeze(-1)
    advantages = advantages * weight
    return advantages, advantages
