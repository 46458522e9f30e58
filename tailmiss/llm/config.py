"""Frozen configurations of the SFT and RL loops, loaded from TOML with unknown keys rejected.

TOML: ``[sft]`` with ``[sft.task]`` (``name`` and the task's parameters), ``[sft.model]``, ``[sft.optim]``; or
``[rl]`` with ``[rl.optim]``, ``[rl.loss]`` (an RL run takes its task and model from its SFT checkpoint). Both
loops share one optimiser sub-config (:class:`~tailmiss.llm.optim.OptimConfig`). Settings whose value is ``None``
(the method's default) are left out; a table with no settings is refused (it would silently run every default).
The trainer computes in float32, so every float setting must be finite there.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

from tailmiss._checks import check_bool, check_choice, check_epsilon, check_int, check_number
from tailmiss.io import ConfigError, check_run_name, dataclass_from_mapping, read_toml, write_toml
from tailmiss.llm.model import ModelConfig
from tailmiss.llm.optim import FLAT_KEYS, SFT_OPTIM, OptimConfig
from tailmiss.llm.tasks import MultiSolutionTask, Task, make_task
from tailmiss.llm.tasks.base import SPLITS
from tailmiss.objectives import ADVANTAGE_MODES, LOSS_FIELDS, POLICY_LOSSES, STD_KINDS, LossConfig, resolve_loss_config
from tailmiss.objectives.reward_transforms import REWARD_TRANSFORMS

__all__ = ["SFTConfig", "RLConfig", "load_config"]

ROLLOUT_SAMPLING = ("generator", "counter")
POOL_ORDERS = ("random", "epochs")
EVAL_ANSWERS = ("all", "correct")
# the trainer computes in float32: a float setting must be finite there, an epsilon a normal float32 number
_MIN_TEMPERATURE = 1e-30  # logits / temperature must stay finite in float32 for |logits| up to ~3e8


def _num(name, value, lo=0.0, lo_open=False, hi=math.inf, hi_open=True):
    """A trainer setting: a number in the interval, finite in float32 (the trainer's dtype)."""
    check_number(name, value, lo, hi, lo_open=lo_open, hi_open=hi_open, dtype="float32")


class _TomlConfig:
    """TOML round trip shared by the two configs (``_table`` names the top-level table)."""

    _table = ""
    _sub_tables = {}
    """Keys read as sub-tables, with the dataclass each one builds."""

    def to_dict(self) -> dict:
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, Task):
                value = value.to_dict()
            elif isinstance(value, (ModelConfig, OptimConfig)):
                value = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(value).items()}
            elif isinstance(value, LossConfig):
                value = value.to_dict()
                if not value:  # every loss setting is the method's default: no [rl.loss] table
                    continue
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict, where: str | None = None):
        where = where or cls.__name__
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected a table, got {data!r}")
        flat, table = ", ".join(key for key in FLAT_KEYS if key in data), f"[{cls._table}.optim]"
        if flat:  # the layout before [optim]
            raise ConfigError(f"{where}: {flat} moved under {table} (optimizer is its kind): write a {table} table")
        data = dict(data)
        if "task" in data:
            data["task"] = make_task(data["task"], where=f"{where}: task")
        for key, kind in cls._sub_tables.items():  # [sft.model], [rl.loss]: a table or the built object
            value = data.get(key)
            if key in data and not isinstance(value, (dict, kind)):
                raise ValueError(f"{where}: {key} must be a table ([{cls._table}.{key}]), got {value!r}")
            if isinstance(value, dict) and key == "optim":  # [optim] updates the loop's own default
                base = cls.__dataclass_fields__["optim"].default_factory().to_dict()
                data[key] = dataclass_from_mapping(kind, {**base, **value}, f"{where}: [{cls._table}.{key}]")
            elif isinstance(value, dict):
                data[key] = dataclass_from_mapping(kind, value, f"{where}: [{cls._table}.{key}]")
        try:
            return dataclass_from_mapping(cls, data, where)
        except ValueError as exc:
            msg = str(exc)
            raise ValueError(msg if msg.startswith(where) else f"{where}: {msg}") from None

    @classmethod
    def from_toml(cls, path: str | Path):
        data = read_toml(path)
        if set(data) != {cls._table}:
            raise ValueError(f"{path}: expected exactly one top-level table [{cls._table}], got {sorted(data)}")
        return _load(path, data)

    def to_toml(self, path: str | Path) -> None:
        write_toml(path, {self._table: self.to_dict()})

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class SFTConfig(_TomlConfig):
    """Supervised training from scratch on the task's SFT data distribution.

    Attributes
    ----------
    name : str
        The run's folder name (:func:`tailmiss.io.check_run_name`).
    task : Task
        The task and its parameters (TOML table ``[sft.task]``).
    model : ModelConfig
        Transformer shape (TOML table ``[sft.model]``).
    optim : OptimConfig
        TOML table ``[sft.optim]``: AdamW at lr 1e-3, 50 warm-up steps, then a cosine decay to 10 %
        (``tailmiss.llm.optim.SFT_OPTIM``); the table updates these.
    steps, batch_size : int
        Optimiser steps and sequences per step.
    seed : int
        Model initialisation and data.
    log_every, eval_every, checkpoint_every : int
        Training rows, evaluations on ``eval_prompts`` prompts of the held-out
        split, checkpoints.
    """

    _table = "sft"
    _sub_tables = {"model": ModelConfig, "optim": OptimConfig}

    name: str = "sft"
    task: Task = field(default_factory=MultiSolutionTask)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=lambda: SFT_OPTIM)
    steps: int = 2000
    batch_size: int = 64
    seed: int = 0
    log_every: int = 50
    eval_every: int = 500
    eval_prompts: int = 64
    eval_split: str = "test"
    checkpoint_every: int = 500

    def __post_init__(self) -> None:
        check_run_name(self.name)
        if not isinstance(self.task, Task):
            raise ValueError(f"task must be a task table, got {self.task!r}")
        if not isinstance(self.model, ModelConfig):
            raise ValueError(f"model must be a model table, got {self.model!r}")
        for key in ("steps", "batch_size", "log_every", "eval_every", "eval_prompts", "checkpoint_every"):
            check_int(key, getattr(self, key))
        check_int("seed", self.seed, 0)
        _check_optim(self.optim, self._table)
        check_choice("eval_split", self.eval_split, SPLITS)


@dataclass(frozen=True)
class RLConfig(_TomlConfig):
    r"""Group-relative RL from an SFT checkpoint.

    Per step: ``prompts_per_step`` prompts × ``group_size`` rollouts, binary
    rewards, group advantages (the method's mode unless ``advantage`` is set),
    times the focal weight :math:`g = (1-\hat\mu_{pos})^\gamma` (F-GRPO Eq. 13),
    then ``minibatches`` sequential AdamW updates of the method's token loss
    (:data:`tailmiss.objectives.POLICY_LOSSES`) against the rollout policy's
    log-probabilities, so PPO clipping acts from the second mini-batch on.

    Attributes
    ----------
    method : str
        A name of :data:`tailmiss.objectives.POLICY_LOSSES`: "grpo", "dapo",
        "cispo", "drgrpo", or a loss registered with
        :func:`tailmiss.objectives.register_policy_loss`.
    gamma : float
        Focal exponent; 0 is the base method.
    optim : OptimConfig
        TOML table ``[rl.optim]``: the optimiser (AdamW, the paper's, F-GRPO Table 5; or plain SGD), its rate
        schedule and gradient clipping; defaults lr 1e-4, constant, no warm-up.
    loss : LossConfig
        TOML table ``[rl.loss]``: overrides of the method's loss settings
        (``clip_low``, ``clip_high``, ``dual_clip``, ``cispo_clip_mode``,
        ``aggregation``, ``norm_length``; a field left ``None`` keeps the
        method's default, see :meth:`resolved_loss`).
    advantage : {"none", "mean", "std"} or None; std_kind, adv_eps
        ``adv_eps`` is at least the smallest normal float32 number, 1.18e-38.
    dynamic_sampling : bool; max_refills : int
        DAPO's filter: drop groups whose rewards are all equal and draw more
        prompts, at most ``max_refills`` extra rounds per step.
    kl_coef, entropy_coef : float
        Optional k3 KL penalty to the SFT model and entropy bonus (0: off; the
        KL to the SFT model is logged either way).
    reward_transform : str or None; transform_coef : float
        A name of :data:`tailmiss.objectives.REWARD_TRANSFORMS` applied to the
        rewards before the advantage, with its coefficient (``"differential-smoothing"``:
        DS-GRPO, :func:`tailmiss.objectives.differential_smoothing`); the focal
        weight still counts the correct rollouts.
    temperature, top_k, top_p
        Rollout sampling (``top_k = 0``: off); ``temperature >= 1e-30``, so
        that logits / temperature stays finite in float32.
    rollout_sampling : {"generator", "counter"}
        Where the rollouts' randomness comes from. ``"generator"``: one
        ``torch.Generator`` per step drives ``torch.multinomial`` over the whole
        batch; under ``torchrun`` every rank then generates the whole step's
        rollouts (same draws) and only the updates are shared among the ranks.
        ``"counter"``: each rollout's tokens come from a stateless hash of
        (seed, step, round, rollout, position)
        (:class:`~tailmiss.llm.model.CounterStream`), so each rank generates
        only its share of the prompts, with the same rollouts as one process.
        Both give the single-process batch on any number of processes.
    train_prompts, pool_seed : int
        ``train_prompts = 0`` (default): every step draws fresh i.i.d. prompts
        of the training split. ``train_prompts > 0``: a fixed pool of that many
        distinct training prompts (drawn from ``pool_seed``, the same for every
        run seed); each step draws ``prompts_per_step`` of them without
        replacement, and evaluations also score the pool (columns ``pool_*``),
        so "trained-on" is well defined.
    pool_order : {"random", "epochs"}
        How steps take their prompts from the pool. ``"random"``: an
        independent draw per step. ``"epochs"``: the pool is cycled in epochs
        of :attr:`steps_per_epoch` steps (``train_prompts / prompts_per_step``,
        which must be a whole number); each epoch visits every pool prompt once,
        in an order drawn from the run's seed and the epoch (F-GRPO Table 5
        trains 10 epochs over its training set). DAPO's refill rounds draw at
        random from the pool.
    train_types : tuple of str or None
        The prompt types training draws (``None``: all); the others are
        skipped in the draw and the pool, not in held-out evaluations (a
        counterfactual: what a run does to prompts it never trains on).
    eval_every, eval_prompts, eval_split, eval_samples, rare_share
        Exact answer-mass metrics on a fixed prompt set (enumerable tasks) and,
        when ``eval_samples > 0``, sampled pass@k from that many samples.
    eval_seed : int or None
        Draws the evaluation prompts (``None``: the run's ``seed``, so seeds
        differ in their evaluation prompts; set it to compare runs on one set).
    eval_answers : {"all", "correct"}
        Which answers exact scoring teacher-forces: every well-formed answer, or
        only the correct ones. Every logged metric but ``off_format`` (NaN with
        ``"correct"``) is a function of the correct answers' masses alone, so
        ``"correct"`` gives the same numbers at a fraction of the cost
        (:math:`|S|^K` instead of :math:`10^K` answers on task (a)).
    eval_per_prompt : bool
        Also keep each evaluation's per-prompt :math:`\mu_{pos}(x)` on the
        evaluation prompts, in the run folder's ``prompt_evals.npz`` (arrays
        ``step`` (E,) and ``mu_pos`` (E, P)): what pass@k estimated from
        finite samples per prompt, and significance tests between runs, need.
    """

    _table = "rl"
    _sub_tables = {"loss": LossConfig, "optim": OptimConfig}

    @classmethod
    def from_dict(cls, data: dict, where: str | None = None) -> RLConfig:
        flat = [key for key in LOSS_FIELDS if isinstance(data, dict) and key in data]
        if flat:
            raise ValueError(
                f"{where or cls.__name__}: {', '.join(flat)} moved under [rl.loss]: write them in an [rl.loss] "
                "table below [rl] (the loss settings are no longer keys of [rl])"
            )
        return super().from_dict(data, where)

    name: str = "rl"
    method: str = "grpo"
    gamma: float = 0.0
    group_size: int = 8
    prompts_per_step: int = 32
    steps: int = 200
    optim: OptimConfig = field(default_factory=OptimConfig)
    minibatches: int = 1
    advantage: str | None = None
    std_kind: str = "bessel"
    adv_eps: float = 1e-6
    loss: LossConfig = field(default_factory=LossConfig)
    dynamic_sampling: bool = False
    max_refills: int = 10
    kl_coef: float = 0.0
    entropy_coef: float = 0.0
    reward_transform: str | None = None
    transform_coef: float = 0.0
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    rollout_sampling: str = "generator"
    train_prompts: int = 0
    pool_seed: int = 0
    pool_order: str = "random"
    train_types: tuple[str, ...] | None = None
    seed: int = 0
    eval_seed: int | None = None
    eval_every: int = 25
    eval_prompts: int = 64
    eval_split: str = "test"
    eval_samples: int = 0
    rare_share: float = 0.1
    eval_answers: str = "all"
    eval_per_prompt: bool = False
    checkpoint_every: int = 50

    def __post_init__(self) -> None:
        check_run_name(self.name)
        check_choice("method", self.method, POLICY_LOSSES)  # looked up now: registered losses count
        check_choice("rollout_sampling", self.rollout_sampling, ROLLOUT_SAMPLING)
        _num("gamma", self.gamma)
        for key in ("group_size", "prompts_per_step", "steps", "minibatches", "eval_every", "eval_prompts"):
            check_int(key, getattr(self, key))
        for key in ("max_refills", "seed", "top_k", "eval_samples", "checkpoint_every"):
            check_int(key, getattr(self, key), 0)
        if self.eval_seed is not None:
            check_int("eval_seed", self.eval_seed, 0)
        self._check_pool()
        check_choice("eval_answers", self.eval_answers, EVAL_ANSWERS)
        check_bool("eval_per_prompt", self.eval_per_prompt)
        if self.checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be an integer >= 1, got {self.checkpoint_every!r}")
        if self.minibatches > self.prompts_per_step * self.group_size:
            raise ValueError(
                f"minibatches must not exceed the rollouts per step ({self.prompts_per_step * self.group_size}), "
                f"got {self.minibatches}"
            )
        _check_optim(self.optim, self._table)
        if self.advantage is not None:
            check_choice("advantage", self.advantage, ADVANTAGE_MODES)
        check_choice("std_kind", self.std_kind, STD_KINDS)
        check_epsilon("adv_eps", self.adv_eps, "float32")
        check_bool("dynamic_sampling", self.dynamic_sampling)
        if self.group_size < 2 and self.advantage_mode != "none":
            raise ValueError(
                f"group_size=1 with advantage {self.advantage_mode!r} gives every rollout advantage 0 (a group of one "
                "has no group-relative signal), so the loss is 0: use group_size >= 2, or advantage = 'none'"
            )
        if self.dynamic_sampling and self.group_size < 2:
            raise ValueError(
                "dynamic_sampling needs group_size >= 2 (it keeps only groups with mixed rewards, which a group "
                f"of one never has), got group_size={self.group_size}"
            )
        _num("kl_coef", self.kl_coef)
        _num("entropy_coef", self.entropy_coef)
        if self.reward_transform is not None:
            check_choice("reward_transform", self.reward_transform, REWARD_TRANSFORMS)
        _num("transform_coef", self.transform_coef)
        if self.transform_coef and self.reward_transform is None:
            raise ValueError(f"transform_coef = {self.transform_coef!r} needs a reward_transform to scale")
        _num("temperature", self.temperature, lo=_MIN_TEMPERATURE)
        _num("top_p", self.top_p, lo_open=True, hi=1.0, hi_open=False)
        check_choice("eval_split", self.eval_split, SPLITS)
        _num("rare_share", self.rare_share, lo_open=True, hi=1.0)
        if not isinstance(self.loss, LossConfig):
            raise ValueError(f"loss must be a LossConfig ([rl.loss] table), got {self.loss!r}")
        for key, value in self.loss.to_dict().items():  # LossConfig checks the ranges, the trainer float32
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                _num(key, value, lo=-math.inf)
        self.resolved_loss()  # the method and its overrides fit together now, not at the first step

    def _check_pool(self) -> None:
        check_int("train_prompts", self.train_prompts, 0)
        check_int("pool_seed", self.pool_seed, 0)
        if self.train_prompts and self.prompts_per_step > self.train_prompts:
            raise ValueError(
                f"prompts_per_step ({self.prompts_per_step}) must not exceed the training pool "
                f"(train_prompts = {self.train_prompts}): a step draws its prompts from the pool without replacement"
            )
        check_choice("pool_order", self.pool_order, POOL_ORDERS)
        types = self.train_types
        if types is not None:
            ok = isinstance(types, (list, tuple)) and types and len(set(types)) == len(types)
            if not ok or not all(isinstance(t, str) and t for t in types):
                raise ValueError(f"train_types must be a non-empty list of distinct prompt types, got {types!r}")
            object.__setattr__(self, "train_types", tuple(types))
        if self.pool_order == "epochs" and (not self.train_prompts or self.train_prompts % self.prompts_per_step):
            raise ValueError(
                "pool_order = 'epochs' needs a training pool (train_prompts > 0) that is a whole number of steps: "
                f"train_prompts ({self.train_prompts}) must be a multiple of prompts_per_step ({self.prompts_per_step})"
            )

    def resolved_loss(self) -> LossConfig:
        """The loss settings the run trains with: the method's defaults updated by ``loss``."""
        return resolve_loss_config(self.method, self.loss)

    @property
    def eval_prompt_seed(self) -> int:
        """The seed that draws the evaluation prompts: ``eval_seed``, else the run's ``seed``."""
        return self.seed if self.eval_seed is None else self.eval_seed

    @property
    def steps_per_epoch(self) -> int | None:
        """Steps per pass over the training pool with ``pool_order = "epochs"`` (None otherwise)."""
        return self.train_prompts // self.prompts_per_step if self.pool_order == "epochs" else None

    @property
    def advantage_mode(self) -> str:
        """``advantage`` or, when unset, the method's own mode (Dr. GRPO: ``"mean"``)."""
        return self.advantage or POLICY_LOSSES[self.method].advantage


def load_config(path: str | Path) -> SFTConfig | RLConfig:
    """Load an SFT (``[sft]``) or RL (``[rl]``) config from TOML."""
    return _load(path, read_toml(path))


def _load(path, data: dict) -> SFTConfig | RLConfig:
    kinds = {c._table: c for c in (SFTConfig, RLConfig)}
    if not data:
        raise ValueError(f"{path}: no settings (the file is empty); expected one top-level table, [sft] or [rl]")
    if len(data) != 1 or next(iter(data)) not in kinds:
        raise ValueError(f"{path}: expected exactly one top-level table, [sft] or [rl], got {sorted(data)}")
    ((table, body),) = data.items()
    _require_settings(path, table, body)
    return kinds[table].from_dict(body, where=str(path))


def _check_optim(optim, table: str) -> None:
    if not isinstance(optim, OptimConfig):  # a table is built by from_dict
        raise ValueError(f"optim must be an OptimConfig ([{table}.optim] table), got {optim!r}")


def _require_settings(path, table: str, body) -> None:
    # an empty table would silently run every default (a full-size run): almost surely not what was meant
    if isinstance(body, dict) and not body:
        raise ValueError(f"{path}: no settings (the [{table}] table is empty)")
