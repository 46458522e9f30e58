r"""F-GRPO in TRL: ``FGRPOTrainer``, its config, and a callback that logs what tailmiss reads.

.. code-block:: python

    from tailmiss.integrations.trl import FGRPOConfig, FGRPOTrainer, TailMissCallback

    args = FGRPOConfig(output_dir="out", focal_gamma=0.5, num_generations=8)
    trainer = FGRPOTrainer(
        model, reward_funcs=accuracy, args=args, train_dataset=dataset,
        callbacks=[TailMissCallback(rho=0.05)],   # logs out/rollouts.jsonl (args.output_dir)
    )
    trainer.train()          # then: tailmiss diagnose out/rollouts.jsonl

**What changes against** ``GRPOTrainer``: after TRL has computed its advantages, each process's
slice is multiplied by the focal weight of its group, :math:`A^F_i = g\,A_i` with
:math:`g = (1-\hat\mu)^\gamma` and :math:`\hat\mu = X/N` (F-GRPO Eqs. 11-13). :math:`X` and
:math:`N` come from the group's rewards gathered over *all* processes (TRL spreads a group over
processes), so every process computes the same weights; :math:`g` comes from
:func:`tailmiss.objectives.focal_weight`. Rewards, clipping, IS weights and the loss are TRL's;
``focal_gamma=0`` reproduces ``GRPOTrainer`` exactly.

**Success.** :math:`X` counts the rollouts whose reward (TRL's weighted sum over reward
functions, or the reward function named by ``success_reward_func``) is 1 for binary rewards
({0, 1} or {-1, 1}) or ``>= success_threshold`` for any other reward; non-binary rewards without
a threshold raise ``ValueError`` at the first step. Unscored rollouts (every reward function
returned None) do not count.

**Reward transforms (DS-GRPO).** ``reward_transform="differential-smoothing"`` with
``reward_transform_coef`` :math:`\beta \ge 0` changes each rollout's reward before the group
advantage: a correct rollout (the rule above) gets :math:`r - \beta\log\pi_{old}(y)`, an incorrect
one keeps :math:`r` (Gai et al. 2025, arXiv:2511.19942; "DS-GRPO" in F-GRPO Table 3). :math:`r`
is TRL's weighted sum over the reward functions; :math:`\log\pi_{old}(y)` is the sum of the
completion's token log-probabilities (tool results left out) under the sampling policy: TRL's
``old_per_token_logps`` where it computes them, else a no-grad pass of the current model, which is
then that policy. TRL's advantages are recomputed from the transformed rewards as TRL computes them
(group mean; the std per group, over the batch or none, per ``scale_rewards``; +1e-4), then the
focal weight applies, its :math:`X` counting the original correct rollouts. TRL's logged rewards
stay the task's (``reward_transform/reward`` logs the mean transformed one).
``multi_objective_aggregation="normalize_then_sum"`` normalises each reward function before the sum,
leaving no reward to transform: refused at config time.

**bf16.** ``GRPOConfig`` defaults to bf16, which transformers refuses on a machine without bf16
support ("Your setup doesn't support bf16/gpu"). ``FGRPOConfig`` fixes this up: an unset
``bf16`` becomes True only where bf16 works (a CUDA device with bf16, and ``use_cpu`` off), else
False. An explicit ``bf16=True`` is passed on unchanged.

This module imports TRL and transformers; ``import tailmiss`` never does.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch

try:
    from accelerate.utils import gather_object
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer
    from trl.models.utils import disable_gradient_checkpointing
except ImportError as exc:  # pragma: no cover - exercised without TRL only
    raise ImportError("tailmiss.integrations.trl needs TRL: pip install 'tailmiss[trl]'") from exc

from tailmiss._checks import check_bool, check_number
from tailmiss.diagnose import n_star_key, rho_grid, rho_key, step_metrics
from tailmiss.integrations._focal import NOT_BINARY_ADVICE, GroupFocal, group_focal_weights
from tailmiss.integrations._rollout_file import EarlierLogError, keep_steps_up_to, refuse_earlier_log
from tailmiss.integrations._transform import transform_settings, trl_group_advantages
from tailmiss.objectives import REWARD_TRANSFORMS, transform_rewards

__all__ = ["FGRPOConfig", "FGRPOTrainer", "TailMissCallback", "EarlierLogError"]


def _plain(value):
    """A numpy scalar as its Python number (checked, and named in messages, like any other)."""
    return value.item() if isinstance(value, np.generic) else value


def _bf16_works(use_cpu: bool) -> bool:
    return not use_cpu and torch.cuda.is_available() and torch.cuda.is_bf16_supported()


_MODEL_INPUTS = (
    "pixel_values",
    "image_grid_thw",
    "num_images",
    "pixel_attention_mask",
    "spatial_shapes",
    "num_tiles",
    "image_sizes",
    "token_type_ids",
    "mm_token_type_ids",
    "image_position_ids",
)
"""Keys of TRL's generation output that its loss passes to ``_get_per_token_logps_and_entropies``."""


@dataclass
class FGRPOConfig(GRPOConfig):
    r"""``GRPOConfig`` plus F-GRPO's focal weight; ``bf16`` defaults to what the hardware supports.

    Parameters
    ----------
    focal_gamma : float, default 0.5
        :math:`\gamma \ge 0` in :math:`g = (1-\hat\mu)^\gamma`; 0 is plain GRPO. F-GRPO chose
        0.5 for most model/method pairs (Table 7).
    success_threshold : float, optional
        A rollout is correct when its reward is ``>= success_threshold``; needed for non-binary
        rewards (shaping, partial credit).
    success_reward_func : str, optional
        Take success from this reward function (by name, as TRL logs it) instead of the weighted
        sum, e.g. the accuracy reward beside a format reward.
    reward_transform : str, optional
        A name of :data:`tailmiss.objectives.REWARD_TRANSFORMS` applied to the rewards before the
        advantage, e.g. ``"differential-smoothing"`` (DS-GRPO: Gai et al. 2025, arXiv:2511.19942;
        F-GRPO Table 3); see the module docstring. Needs ``multi_objective_aggregation="sum_then_normalize"``.
    reward_transform_coef : float, default 0.0
        Its coefficient, ``>= 0`` (DS-GRPO's :math:`\beta`); non-zero only with a transform.
    """

    focal_gamma: float = field(default=0.5, metadata={"help": "F-GRPO focal exponent gamma >= 0; 0 is plain GRPO."})
    success_threshold: float | None = field(
        default=None, metadata={"help": "Reward >= this counts as correct (needed for non-binary rewards)."}
    )
    success_reward_func: str | None = field(
        default=None, metadata={"help": "Name of the reward function that decides success (default: the sum)."}
    )
    reward_transform: str | None = field(
        default=None, metadata={"help": "Reward transform before the advantage, e.g. differential-smoothing."}
    )
    reward_transform_coef: float = field(default=0.0, metadata={"help": "The reward transform's coefficient >= 0."})

    def __post_init__(self):
        self.focal_gamma = check_number("focal_gamma", _plain(self.focal_gamma), 0.0)
        if self.success_threshold is not None:
            self.success_threshold = check_number("success_threshold", _plain(self.success_threshold))
        self.reward_transform, self.reward_transform_coef = transform_settings(
            self.reward_transform, self.reward_transform_coef, "reward_transform", "reward_transform_coef"
        )
        if self.bf16 is None:
            self.bf16 = not self.fp16 and _bf16_works(self.use_cpu)
        super().__post_init__()
        if self.reward_transform is not None and self.multi_objective_aggregation != "sum_then_normalize":
            raise ValueError(
                f"reward_transform={self.reward_transform!r} needs multi_objective_aggregation='sum_then_normalize' "
                f"(got {self.multi_objective_aggregation!r}, which has no per-rollout reward to transform)"
            )
        if self.reward_transform is not None and self.scale_rewards not in ("group", "batch", "none"):
            raise ValueError(f"scale_rewards must be 'group', 'batch' or 'none', got {self.scale_rewards!r}")


class FGRPOTrainer(GRPOTrainer):
    r"""TRL's ``GRPOTrainer`` with F-GRPO's focal weight on each group's advantages.

    Takes the arguments of ``GRPOTrainer``; ``args`` must be an :class:`FGRPOConfig` (or None for
    its defaults). Logs beside TRL's metrics ``focal/weight_mean_all_groups``, the mean :math:`g`
    over the batch's groups (what scales the batch's advantages on average), and
    ``focal/weight_mean_active_groups``, the mean over the groups with :math:`0 < X < N` (the only
    ones with non-zero advantages; ``tailmiss diagnose`` reports this one, per γ, as
    ``focal_weight_gamma<γ>``; left out of a step with no active group). Feeds every
    :class:`TailMissCallback` among its callbacks.

    References
    ----------
    F-GRPO Eqs. 11-13.
    """

    _tag_names = ["trl", "grpo", "f-grpo", "tailmiss"]

    def __init__(self, model, reward_funcs=None, args: FGRPOConfig | None = None, **kwargs):
        if args is None:
            args = FGRPOConfig()
        elif not isinstance(args, FGRPOConfig):
            raise TypeError(
                f"FGRPOTrainer needs an FGRPOConfig (a GRPOConfig with focal_gamma), got {type(args).__name__}"
            )
        self._gathered_rewards: torch.Tensor | None = None
        super().__init__(model, reward_funcs, args, **kwargs)
        name = args.success_reward_func
        if name is not None and name not in self.reward_func_names:
            raise ValueError(
                f"success_reward_func {name!r} is not a reward function ({', '.join(self.reward_func_names)})"
            )

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._gathered_rewards = rewards_per_func  # gathered over all processes by TRL
        return rewards_per_func

    def _success_rewards(self, rewards_per_func: torch.Tensor) -> torch.Tensor:
        if self.args.success_reward_func is not None:
            return rewards_per_func[:, self.reward_func_names.index(self.args.success_reward_func)]
        return self._summed_rewards(rewards_per_func)

    def _summed_rewards(self, rewards_per_func: torch.Tensor) -> torch.Tensor:
        weights = self.reward_weights.to(rewards_per_func.device)
        rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
        rewards[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan  # unscored, as in TRL
        return rewards

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        rewards_per_func, self._gathered_rewards = self._gathered_rewards, None
        if rewards_per_func is None:
            raise RuntimeError(
                "FGRPOTrainer saw no rewards: this TRL version computes them elsewhere (tested: trl 1.16)"
            )
        mode = "train" if self.model.training else "eval"
        group_size = self.num_generations if mode == "train" else self.num_generations_eval
        rewards = self._success_rewards(rewards_per_func)
        group_index = torch.arange(rewards.numel()) // group_size
        threshold = self.args.success_threshold
        focal = group_focal_weights(
            rewards, group_index, self.args.focal_gamma, threshold, "success_threshold", NOT_BINARY_ADVICE["trl"]
        )
        start = self.accelerator.process_index * len(inputs)
        adv = output["advantages"]
        if self.args.reward_transform is not None:  # TRL's advantages, from the transformed rewards
            new = self._transformed_advantages(output, rewards_per_func, focal.correct, group_size, mode)
            adv = new[start : start + len(inputs)].to(adv.device, adv.dtype)
        local = focal.rollout_weight[start : start + len(inputs)].to(adv.device, adv.dtype)
        output["advantages"] = adv * local.view(-1, *([1] * (adv.dim() - 1)))
        self._log_focal_means(mode, focal)
        if mode == "train":
            self._feed_callbacks(inputs, rewards, focal, group_size)
        return output

    def _transformed_advantages(
        self, output: dict, rewards_per_func: torch.Tensor, correct: np.ndarray, group_size: int, mode: str
    ) -> torch.Tensor:
        """TRL's advantages of the whole batch (all processes) recomputed from the transformed rewards."""
        rewards = self._summed_rewards(rewards_per_func)
        seq_logp = None
        if REWARD_TRANSFORMS[self.args.reward_transform].needs_logprobs:
            seq_logp = self.accelerator.gather(self._sequence_logps(output, mode)).to(rewards.device)
        correct = torch.from_numpy(correct).to(rewards.device)
        coef = self.args.reward_transform_coef
        rewards = transform_rewards(self.args.reward_transform, rewards, correct, seq_logp, coef)
        self._metrics[mode]["reward_transform/reward"].append(torch.nanmean(rewards).item())
        return trl_group_advantages(rewards, group_size, self.scale_rewards)

    def _sequence_logps(self, output: dict, mode: str) -> torch.Tensor:
        """Each local completion's log-probability under the policy that sampled it, shape (B_local,), float64."""
        mask = output["completion_mask"]
        if "tool_mask" in output:  # tool results are not sampled
            mask = mask * output["tool_mask"]
        logps = output.get("old_per_token_logps")
        if logps is None:  # TRL skips them when this step's weights sampled the batch: the current model is pi_old
            ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
            attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
            batch_size = (
                self.args.per_device_train_batch_size if mode == "train" else self.args.per_device_eval_batch_size
            )
            extra = {key: output[key] for key in _MODEL_INPUTS if key in output}
            with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
                logps, _, _ = self._get_per_token_logps_and_entropies(
                    self.model, ids, attention, output["completion_ids"].size(1), batch_size=batch_size, **extra
                )
        return torch.where(mask.bool(), logps.double(), 0.0).sum(dim=1)

    def _log_focal_means(self, mode: str, focal: GroupFocal) -> None:
        self._metrics[mode]["focal/weight_mean_all_groups"].append(focal.group_weight.mean().item())
        active = (focal.n_correct > 0) & (focal.n_correct < focal.group_size)
        if active.any():  # a mean over no group is left out, not logged as NaN
            self._metrics[mode]["focal/weight_mean_active_groups"].append(focal.group_weight[active].mean().item())

    def _feed_callbacks(self, inputs, rewards: torch.Tensor, focal: GroupFocal, group_size: int) -> None:
        for cb in [cb for cb in self.callback_handler.callbacks if isinstance(cb, TailMissCallback)]:
            prompt_ids = gather_object([cb.prompt_id(x) for x in inputs])  # every process calls: a collective
            metrics = cb.record(self.state, prompt_ids, rewards, focal, self.args.focal_gamma, group_size)
            for key, value in metrics.items():
                self._metrics["train"][key].append(value)


class TailMissCallback(TrainerCallback):
    r"""Per-step tail-miss statistics of :class:`FGRPOTrainer`'s rollouts, and a per-rollout log.

    Each generation step it adds to the trainer's logged metrics (prefix ``tailmiss/``): the
    :math:`\hat\mu` distribution (mean, quartiles), the shares of all-incorrect, all-correct and
    inactive (zero-variance) groups, and Lemma 3.1's tail-miss probability averaged over the
    groups with :math:`X > 0` for each rare share :math:`\rho` (:math:`\tau = \rho\hat\mu`, as in
    :mod:`tailmiss.diagnose`), with the group size :math:`N^*` at which that risk would peak.
    A value that is not a number (every mean over no group: no solved group, hence no risk and no
    :math:`N^*`) is left out of that step's log rather than logged as NaN.

    The main process also appends one JSON line per rollout to the per-rollout log, in the tailmiss
    schema (``step``, ``prompt_id``, ``rollout``: its place in the group, ``reward``: the reward
    that decides success, ``correct``, plus ``focal_weight``), which ``tailmiss diagnose`` reads:
    ``log_path``, by default ``<output_dir>/rollouts.jsonl`` (the trainer's ``args.output_dir``,
    printed when training begins); ``log_path=False`` writes none. ``step`` is the optimizer step
    the rollouts feed (TRL's logged step); ``prompt_id`` is the dataset column
    ``prompt_id_column`` when present, else a hash of the prompt.

    When training begins the log is made to hold the steps the run has already made. A fresh run
    (step 0) refuses a log that holds rows (another run's: :class:`EarlierLogError`, a
    ``ValueError`` naming the file and its rows) unless ``overwrite=True``, which empties it.
    ``trainer.train(resume_from_checkpoint=...)`` strips it of the rows past the checkpoint's step
    (and of a line a killed run left cut off), atomically, so that a resumed run logs every step
    once.

    Works with :class:`FGRPOTrainer` only (``focal_gamma=0`` for a plain GRPO run); with another
    trainer it raises at the end of the first step, having received no rollouts.

    Parameters
    ----------
    log_path : path-like or False, optional
        The per-rollout log (JSON lines); None (the default): ``<args.output_dir>/rollouts.jsonl``;
        False: no per-rollout log (the metrics are still logged).
    rho : float or sequence of float, default 0.05
        Rare share(s) :math:`\rho \in (0, 1)`.
    prompt_id_column : str, default "prompt_id"
    overwrite : bool, default False
        Let a fresh (not resumed) run empty a log that holds rows.

    Raises
    ------
    EarlierLogError
        (a ``ValueError``) When training begins at step 0 and the log holds rows, without ``overwrite``.

    References
    ----------
    F-GRPO Lemma 3.1 (Eq. 8), Eqs. 7 and 11.
    """

    def __init__(
        self,
        log_path: str | os.PathLike | Literal[False] | None = None,
        rho: float | Sequence[float] = 0.05,
        prompt_id_column: str = "prompt_id",
        overwrite: bool = False,
    ):
        if not (log_path is None or log_path is False or isinstance(log_path, (str, os.PathLike))):
            raise ValueError(
                f"log_path must be a path, None (<output_dir>/rollouts.jsonl) or False (no log), got {log_path!r}"
            )
        self._log_path = log_path  # None: the log path is set when training begins, from args.output_dir
        self.log_path = Path(log_path) if isinstance(log_path, (str, os.PathLike)) else None
        self.rhos = rho_grid(rho)  # checked now, not at the first step
        self.prompt_id_column = prompt_id_column
        self.overwrite = check_bool("overwrite", overwrite)
        self.steps_recorded = 0

    def prompt_id(self, example: dict) -> str:
        """The group key of one rollout's dataset row."""
        if self.prompt_id_column in example:
            return str(example[self.prompt_id_column])
        return hashlib.sha1(repr(example["prompt"]).encode()).hexdigest()[:12]

    def on_train_begin(self, args, state, control, **kwargs):
        if self._log_path is None:
            self.log_path = Path(args.output_dir) / "rollouts.jsonl"
            if state.is_world_process_zero:
                print(f"TailMissCallback: per-rollout log {self.log_path} (tailmiss diagnose reads it)", flush=True)
        if self.log_path is None:
            return
        if state.global_step == 0 and not self.overwrite:  # state is the checkpoint's on resume
            refuse_earlier_log(self.log_path)  # every process checks (all raise alike) before any writes
        if state.is_world_process_zero:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            keep_steps_up_to(self.log_path, state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        if self.steps_recorded == 0:
            raise RuntimeError("TailMissCallback received no rollouts: use it with tailmiss's FGRPOTrainer")

    def record(
        self, state, prompt_ids: list[str], rewards: torch.Tensor, focal: GroupFocal, gamma: float, group_size: int
    ) -> dict:
        """Log one generation batch (gathered over processes, ``group_size`` rollouts per prompt in a row); return
        the metrics to add to the trainer's log."""
        self.steps_recorded += 1
        metrics = step_metrics(focal.n_correct.numpy(), focal.group_size.numpy(), self.rhos, (gamma,))
        keep = [
            "mu_hat_mean",
            "mu_hat_q25",
            "mu_hat_median",
            "mu_hat_q75",
            "share_all_incorrect",
            "share_all_correct",
            "share_inactive",
            *map(rho_key, self.rhos),
            *map(n_star_key, self.rhos),
        ]
        if self.log_path is not None and state.is_world_process_zero:
            self._append(state.global_step + 1, prompt_ids, rewards, focal, group_size)
        return {f"tailmiss/{k}": metrics[k] for k in keep if math.isfinite(metrics[k])}

    def _append(
        self, step: int, prompt_ids: list[str], rewards: torch.Tensor, focal: GroupFocal, group_size: int
    ) -> None:
        reward = rewards.detach().cpu().tolist()
        lines = []
        for i, pid in enumerate(prompt_ids):
            scored = not math.isnan(reward[i])
            row = {
                "step": step,
                "prompt_id": pid,
                "rollout": i % group_size,
                "reward": reward[i] if scored else None,
                "correct": bool(focal.correct[i]) if scored else None,
                "focal_weight": focal.rollout_weight[i].item(),
            }
            lines.append(json.dumps(row))
        with open(self.log_path, "a") as fh:  # a growing log, one write per step
            fh.write("\n".join(lines) + "\n")
