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

**Both of verl's GRPO paths.** verl picks GRPO by its name in two places. ``ray_trainer``'s
``compute_advantage`` sends every other estimator, ``fgrpo`` included, through the registry, where
the result is the same. The v1 trainer's ``compute_advantage_for_multi_trajectories`` (agent loops
whose trajectory holds several outputs, keyed ``<uid>_<session>_<output>``) scores GRPO on each
session's *final* output and broadcasts that advantage to the session's other outputs, but passes
any other estimator every output as a rollout. Loading this module therefore also wraps that
function: for ``fgrpo`` it runs verl's GRPO path and multiplies each row by the :math:`g` of its
group, with :math:`X` and :math:`N` counted over the sessions' final outputs, so ``fgrpo`` is
``grpo`` :math:`\times\,g` on both paths.

**Checking the plugin.** verl only logs (at debug level) a plugin that fails to import, and the
run then stops with ``Unknown advantage estimator simply: fgrpo``. ``python -c "import
tailmiss.integrations.verl"`` shows the real error; ``VERL_USE_EXTERNAL_PLUGINS=none`` turns
plugin loading off (then import this module yourself, or list it in
``VERL_USE_EXTERNAL_MODULES``).
"""

from __future__ import annotations

import functools
import inspect
import sys

import numpy as np
import torch

try:
    from verl.trainer.ppo import core_algos
except ImportError as exc:  # pragma: no cover - exercised without verl only
    raise ImportError("tailmiss.integrations.verl needs verl: pip install 'tailmiss[verl]'") from exc

from tailmiss._checks import check_number
from tailmiss.integrations._focal import group_focal_weights

__all__ = ["ESTIMATOR", "DEFAULT_GAMMA", "compute_fgrpo_outcome_advantage", "focal_weights"]

ESTIMATOR = "fgrpo"
DEFAULT_GAMMA = 0.5
"""γ when the config has no ``fgrpo_gamma``: F-GRPO's choice for most model/method pairs (Table 7)."""
THRESHOLD_KEY = "+algorithm.fgrpo_success_threshold"
_MULTI_TRAJECTORY_MODULES = ("verl.trainer.ppo.v1.utils", "verl.trainer.ppo.v1.trainer_base")
"""Where verl defines (and imports by name) ``compute_advantage_for_multi_trajectories``."""


def _settings(config) -> tuple[float, float | None, bool]:
    get = config.get if config is not None else (lambda key, default=None: default)
    gamma = check_number("algorithm.fgrpo_gamma", get("fgrpo_gamma", DEFAULT_GAMMA), 0.0)
    threshold = get("fgrpo_success_threshold", None)
    if threshold is not None:
        threshold = check_number("algorithm.fgrpo_success_threshold", threshold)
    return float(gamma), None if threshold is None else float(threshold), bool(get("norm_adv_by_std_in_grpo", True))


def focal_weights(token_level_rewards: torch.Tensor, index, config=None) -> torch.Tensor:
    r"""The focal weight :math:`g = (1 - X/N)^\gamma` of each rollout's group, shape ``(B,)`` (float64).

    A group is the rollouts sharing an ``index`` (uid); a rollout's score is the sum of its
    ``token_level_rewards``; ``config`` gives :math:`\gamma` and the success threshold (module
    docstring).

    References
    ----------
    F-GRPO Eqs. 11-12.
    """
    gamma, threshold, _ = _settings(config)
    _, group = np.unique(np.asarray(index).astype(str), return_inverse=True)
    scores = token_level_rewards.sum(dim=-1)
    focal = group_focal_weights(scores, torch.from_numpy(group.reshape(-1)), gamma, threshold, THRESHOLD_KEY)
    return focal.rollout_weight


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
    _, _, norm_by_std = _settings(config)
    advantages, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards, response_mask, index, epsilon=epsilon, norm_adv_by_std_in_grpo=norm_by_std, config=config
    )
    weight = focal_weights(token_level_rewards, index, config).to(advantages.device, advantages.dtype)
    advantages = advantages * weight.unsqueeze(-1)
    return advantages, advantages


# ---------------------------------------------------------------------------
# verl's multi-trajectory path
# ---------------------------------------------------------------------------


def _final_outputs(batch_keys) -> np.ndarray:
    """Row of each session's last output, as verl's multi-trajectory GRPO picks it (keys ``<uid>_<session>_<k>``)."""
    last: dict[str, tuple[int, int]] = {}
    for row, key in enumerate(batch_keys):
        session, _, output = str(key).rpartition("_")
        if session not in last or last[session][0] < int(output):
            last[session] = (int(output), row)
    return np.array([row for _, row in last.values()], dtype=np.int64)


def _session_focal_weights(data, batch_keys, config) -> torch.Tensor:
    """:func:`focal_weights` counted over the sessions' final outputs, for every row (a session shares its uid)."""
    uid = np.asarray(data.non_tensor_batch["uid"]).astype(str)
    final = _final_outputs(batch_keys)
    groups, group = np.unique(uid, return_inverse=True)
    scores = data.batch["token_level_rewards"][torch.from_numpy(final)]
    weight = focal_weights(scores, uid[final], config)  # g per final output, by uid
    by_group = torch.ones(groups.size, dtype=weight.dtype)
    by_group[torch.from_numpy(group.reshape(-1)[final])] = weight
    return by_group[torch.from_numpy(group.reshape(-1))]


def _with_fgrpo(original):
    """verl's ``compute_advantage_for_multi_trajectories`` with ``fgrpo`` = its GRPO path times g."""
    if getattr(original, "_tailmiss_fgrpo", False):
        return original
    signature = inspect.signature(original)

    @functools.wraps(original)
    def compute_advantage_for_multi_trajectories(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        if bound.arguments["adv_estimator"] != ESTIMATOR:
            return original(*args, **kwargs)
        data, keys, config = bound.arguments["data"], bound.arguments["batch_keys"], bound.arguments["config"]
        weight = _session_focal_weights(data, keys, config)  # before verl overwrites the batch
        bound.arguments["adv_estimator"] = core_algos.AdvantageEstimator.GRPO
        out = original(*bound.args, **bound.kwargs)
        adv = out.batch["advantages"]
        adv = adv * weight.to(adv.device, adv.dtype).unsqueeze(-1)
        out.batch["advantages"] = adv
        out.batch["returns"] = adv
        return out

    compute_advantage_for_multi_trajectories._tailmiss_fgrpo = True
    return compute_advantage_for_multi_trajectories


def _wrap_multi_trajectory_path() -> None:
    """Wrap the function where verl defines it and where its v1 trainer has already imported it by name."""
    try:
        from verl.trainer.ppo.v1 import utils
    except ImportError:  # a verl without the v1 trainer has no multi-trajectory path
        return
    wrapped = _with_fgrpo(utils.compute_advantage_for_multi_trajectories)
    for name in _MULTI_TRAJECTORY_MODULES:
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "compute_advantage_for_multi_trajectories"):
            module.compute_advantage_for_multi_trajectories = wrapped


_wrap_multi_trajectory_path()
