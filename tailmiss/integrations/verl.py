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

**Reward transforms (DS-GRPO).** ``+algorithm.reward_transform=differential-smoothing`` with
``+algorithm.reward_transform_coef=0.05`` (:math:`\beta \ge 0`, default 0) changes each rollout's score
before *any* estimator (``grpo``, ``fgrpo``, ...) sees it: a correct rollout (the focal weight's success
rule) gets :math:`r - \beta \log\pi_{old}(y)`, with :math:`\log\pi_{old}(y)` the row sum of
``old_log_probs`` over ``response_mask``; an incorrect one keeps :math:`r` (DS-GRPO, Gai et al. 2025,
arXiv:2511.19942; F-GRPO Table 3). verl hands ``old_log_probs`` only to its optimal-token-baseline
estimators, so this module wraps ``ray_trainer.compute_advantage(data, adv_estimator, ..., config)``,
which both trainers call by its module-level name with ``config=self.config.algorithm`` (the legacy
``RayPPOTrainer.fit`` directly, the v1 trainer through ``compute_advantage_for_multi_trajectories``,
whose module imported the name: the wrap replaces it there too, and in any loaded ``verl`` module that
holds it). The wrap puts the transformed score on each row's last valid response token of a copy of
``token_level_rewards`` (the other tokens keep theirs), runs verl's function, then puts the task's
rewards back, so reward metrics stay the task's; ``fgrpo``'s :math:`X` counts the original correct
rollouts. On the multi-trajectory path the transform sees the sessions' final outputs, the rows verl's
GRPO scores. An unknown name, a negative coefficient, or a batch without ``old_log_probs`` raises
``ValueError``.

**Checking the plugin.** verl only logs (at debug level) a plugin that fails to import, and the
run then stops with ``Unknown advantage estimator simply: fgrpo``. ``python -c "import
tailmiss.integrations.verl"`` shows the real error; ``VERL_USE_EXTERNAL_PLUGINS=none`` turns
plugin loading off (then import this module yourself, or list it in
``VERL_USE_EXTERNAL_MODULES``).
"""

from __future__ import annotations

import contextvars
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
from tailmiss.diagnose.rollout_log import success_flags
from tailmiss.integrations._focal import NOT_BINARY_ADVICE, group_focal_weights
from tailmiss.integrations._transform import transform_settings
from tailmiss.objectives import REWARD_TRANSFORMS, transform_rewards

__all__ = [
    "ESTIMATOR",
    "DEFAULT_GAMMA",
    "compute_fgrpo_outcome_advantage",
    "focal_weights",
    "transformed_token_rewards",
]

ESTIMATOR = "fgrpo"
DEFAULT_GAMMA = 0.5
"""γ when the config has no ``fgrpo_gamma``: F-GRPO's choice for most model/method pairs (Table 7)."""
THRESHOLD_KEY = "+algorithm.fgrpo_success_threshold"


_TASK_KEY = "tailmiss_task_token_level_rewards"
_TASK_REWARDS = contextvars.ContextVar("tailmiss_task_rewards", default=None)
"""``(transformed, task)`` token-level rewards while the reward-transform wrap runs (fgrpo's X reads the task's)."""


def _getter(config):
    return config.get if config is not None else (lambda key, default=None: default)


def _threshold(config) -> float | None:
    threshold = _getter(config)("fgrpo_success_threshold", None)
    return None if threshold is None else float(check_number("algorithm.fgrpo_success_threshold", threshold))


def _settings(config) -> tuple[float, float | None, bool]:
    get = _getter(config)
    gamma = check_number("algorithm.fgrpo_gamma", get("fgrpo_gamma", DEFAULT_GAMMA), 0.0)
    return float(gamma), _threshold(config), bool(get("norm_adv_by_std_in_grpo", True))


def _transform(config) -> tuple[str | None, float]:
    get = _getter(config)
    return transform_settings(
        get("reward_transform", None),
        get("reward_transform_coef", 0.0),
        "algorithm.reward_transform",
        "algorithm.reward_transform_coef",
    )


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
    group = torch.from_numpy(group.reshape(-1))
    focal = group_focal_weights(scores, group, gamma, threshold, THRESHOLD_KEY, NOT_BINARY_ADVICE["verl"])
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
    task = _TASK_REWARDS.get()  # under a reward transform, X counts the task's correct rollouts
    scored = task[1] if task is not None and task[0] is token_level_rewards else token_level_rewards
    weight = focal_weights(scored, index, config).to(advantages.device, advantages.dtype)
    advantages = advantages * weight.unsqueeze(-1)
    return advantages, advantages


# ---------------------------------------------------------------------------
# reward transforms (DS-GRPO) around verl's compute_advantage
# ---------------------------------------------------------------------------


def transformed_token_rewards(data, config) -> torch.Tensor:
    r"""A copy of ``data.batch["token_level_rewards"]`` whose rows sum to the transformed scores.

    Row :math:`i`'s score :math:`r_i` (the sum of its token-level rewards) becomes
    ``transform_rewards(name, r, correct, seq_logp, coef)``, carried by its last valid response token
    (per ``response_mask``; the other tokens keep their rewards). ``correct`` is the focal weight's
    success rule (``fgrpo_success_threshold``, or binary scores) and ``seq_logp`` the row sum of
    ``old_log_probs * response_mask``. For ``"differential-smoothing"`` a correct row's score is
    :math:`r - \beta\log\pi_{old}(y)`, an incorrect one's stays :math:`r`.

    Parameters
    ----------
    data : DataProto
        With ``token_level_rewards``, ``response_mask`` and, for a transform that reads log-probabilities,
        ``old_log_probs`` (all shape (B, T)).
    config : verl's algorithm config
        Read: ``reward_transform`` (a name of ``REWARD_TRANSFORMS``), ``reward_transform_coef``,
        ``fgrpo_success_threshold``.

    Returns
    -------
    Tensor, shape (B, T)
        In the rewards' dtype and device.

    Raises
    ------
    ValueError
        For an unset or unknown transform, a negative coefficient, or missing ``old_log_probs``.

    References
    ----------
    Gai et al. 2025, arXiv:2511.19942 (differential smoothing, "DS-GRPO" in F-GRPO Table 3).
    """
    name, coef = _transform(config)
    if name is None:
        raise ValueError("algorithm.reward_transform is not set")
    rewards = data.batch["token_level_rewards"]
    mask = _response_mask(data)
    score = rewards.detach().double().sum(dim=-1)
    correct = success_flags(score.cpu().numpy(), _threshold(config), THRESHOLD_KEY, NOT_BINARY_ADVICE["verl"])
    correct = torch.from_numpy(correct)
    seq_logp = _sequence_logprobs(data, name, mask) if REWARD_TRANSFORMS[name].needs_logprobs else None
    new_score = transform_rewards(name, score, correct.to(score.device), seq_logp, coef)
    return _on_last_tokens(rewards, mask, score, new_score)


def _response_mask(data) -> torch.Tensor:
    """The batch's ``response_mask``, or what verl's ``compute_advantage`` would compute without one."""
    if "response_mask" in data.batch.keys():
        return data.batch["response_mask"]
    from verl.trainer.ppo.ray_trainer import compute_response_mask

    return compute_response_mask(data)


def _sequence_logprobs(data, name: str, mask: torch.Tensor) -> torch.Tensor:
    """Row sums of ``old_log_probs * mask`` in float64 (``ValueError`` naming transform ``name`` without them)."""
    if "old_log_probs" not in data.batch.keys():
        raise ValueError(
            f"algorithm.reward_transform={name!r} needs the rollouts' old_log_probs in the batch, which has none "
            "(verl computes them before the advantage unless the actor's log-prob pass is skipped)"
        )
    return (data.batch["old_log_probs"].detach().double() * mask.double()).sum(dim=-1)


def _on_last_tokens(rewards: torch.Tensor, mask: torch.Tensor, score: torch.Tensor, new_score: torch.Tensor):
    """A copy of ``rewards`` whose changed rows sum to ``new_score`` through their last valid token's reward."""
    last = mask.shape[-1] - 1 - (mask > 0).flip(-1).float().argmax(dim=-1)  # last valid token (T-1 for none)
    rows = torch.nonzero((new_score != score) & ~torch.isnan(score)).flatten()  # the others stay bit for bit
    last = last.to(rows.device)[rows]
    others = score[rows] - rewards[rows, last].detach().double()  # the row's other tokens keep their rewards
    out = rewards.detach().clone()
    out[rows, last] = (new_score[rows] - others).to(out.dtype)
    return out


def _wrap_once(original, marker: str, call):
    """``original`` wrapped as ``call(original, bound, *args, **kwargs)``, ``bound`` its arguments bound to its
    signature; the wrapper carries ``original``'s name and the attribute ``marker``, and ``original`` carrying
    ``marker`` (wrapped already) comes back as is."""
    if getattr(original, marker, False):
        return original
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        return call(original, signature.bind(*args, **kwargs), *args, **kwargs)

    setattr(wrapper, marker, True)
    return wrapper


def _reward_transform_call(original, bound, *args, **kwargs):
    """One call of verl's ``compute_advantage`` on the transformed rewards when the config names a transform."""
    config = bound.arguments.get("config")
    if _transform(config)[0] is None:
        return original(*args, **kwargs)
    data = bound.arguments["data"]
    task = data.batch["token_level_rewards"]
    transformed = transformed_token_rewards(data, config)
    data.batch[_TASK_KEY] = task  # travels with the rows should verl resample them (PF-PPO)
    data.batch["token_level_rewards"] = transformed
    token = _TASK_REWARDS.set((transformed, task))
    out = data
    try:
        out = original(*args, **kwargs)
    finally:
        _TASK_REWARDS.reset(token)
        for proto in {id(d): d for d in (data, out)}.values():  # reward metrics stay the task's
            if _TASK_KEY in proto.batch.keys():
                proto.batch["token_level_rewards"] = proto.batch.pop(_TASK_KEY)
    return out


def _with_reward_transform(original):
    """verl's ``compute_advantage`` on the transformed rewards when the config names a reward transform."""
    return _wrap_once(original, "_tailmiss_reward_transform", _reward_transform_call)


def _wrap_compute_advantage() -> None:
    """Wrap ``ray_trainer.compute_advantage`` there and in every loaded verl module that imported it by name."""
    try:
        from verl.trainer.ppo import ray_trainer
    except ImportError:  # pragma: no cover - a verl without its PPO trainer has nothing to wrap
        return
    original = ray_trainer.compute_advantage
    _rebind("compute_advantage", original, _with_reward_transform(original))


def _rebind(attr: str, original, wrapped) -> None:
    """Point every loaded verl module holding ``original`` as ``attr`` (defining it or importing it by name) at
    ``wrapped``."""
    for name, module in list(sys.modules.items()):
        if name.startswith("verl") and getattr(module, attr, None) is original:
            setattr(module, attr, wrapped)


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


def _fgrpo_call(original, bound, *args, **kwargs):
    """One call of verl's ``compute_advantage_for_multi_trajectories``, ``fgrpo`` = its GRPO path times g."""
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


def _with_fgrpo(original):
    """verl's ``compute_advantage_for_multi_trajectories`` with ``fgrpo`` = its GRPO path times g."""
    return _wrap_once(original, "_tailmiss_fgrpo", _fgrpo_call)


def _wrap_multi_trajectory_path() -> None:
    """Wrap the function where verl defines it and where its v1 trainer has already imported it by name."""
    try:
        from verl.trainer.ppo.v1 import utils
    except ImportError:  # a verl without the v1 trainer has no multi-trajectory path
        return
    original = utils.compute_advantage_for_multi_trajectories
    _rebind("compute_advantage_for_multi_trajectories", original, _with_fgrpo(original))


_wrap_multi_trajectory_path()  # imports verl's v1 utils, which take compute_advantage by name
_wrap_compute_advantage()
