"""Configuration of a categorical-policy simulation sweep."""

from __future__ import annotations

import dataclasses
import itertools
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tailmiss._checks import check_choice, check_epsilon, check_int, check_number, check_numbers, is_number
from tailmiss.io import (
    check_run_name,
    dataclass_from_mapping,
    dataclass_to_mapping,
    read_toml,
    write_toml,
)
from tailmiss.objectives import ADVANTAGE_MODES, STD_KINDS, SURROGATES

__all__ = ["SimConfig", "OPTIMIZERS", "DTYPES", "check_run_name"]

OPTIMIZERS = ("sgd", "adam", "adamw")
"""The optimisers a simulation applies to its logits (:attr:`SimConfig.optimizer`): torch's SGD, Adam and
AdamW, elementwise, so one batched optimiser equals one per run."""
DTYPES = ("float32", "float64")
"""The float types of a simulation's logits and optimiser state (:attr:`SimConfig.dtype`); probabilities,
sampling and metric sums are always float64."""
_LIST_FIELDS = ("group_sizes", "gammas", "seeds", "betas", "logits")


def _plain(value):
    """numpy scalars -> Python int/float (so np.arange(4) works as seeds and TOML can store them)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return value


@dataclass(frozen=True)
class SimConfig:
    r"""One simulation sweep: the product ``group_sizes × gammas × seeds`` of runs.

    Every run starts from the same categorical policy over ``num_actions``
    actions (the first ``num_correct`` are correct) and takes ``steps`` updates,
    each from ``N`` i.i.d. draws. All runs advance together as one
    ``[runs, actions]`` tensor.

    Attributes
    ----------
    name : str
        Label recorded with the result, and its folder name (:func:`check_run_name`).
    num_actions, num_correct : int
        :math:`V` and :math:`|\mathcal{P}|` (paper: 128,000 and 10,000).
    init : {"seeded", "zero", "logits"}
        Seeded: anchor (correct index 0) at ``anchor_logit``, other correct at
        ``correct_logit``, incorrect at ``incorrect_logit``. Zero: uniform.
        Logits: start from ``logits`` (e.g. a trained model's answer
        distribution, correct answers first; see :mod:`tailmiss.experiments.bridge`).
    anchor_logit, correct_logit, incorrect_logit : float
        Finite in ``dtype``, like every float setting (NaN and ±inf never are).
    logits : tuple of float
        The starting logits for ``init="logits"`` (length ``num_actions``,
        finite); empty otherwise.
    reward_correct, reward_incorrect : float
        :math:`R_c > R_w` (simulations: +1/−1), within
        :math:`\pm\sqrt{\max_{dtype}}/8` (float32: ±2.3e18) so that the
        optimizer's squared gradient stays finite.
    advantage : {"none", "mean", "std"}
        Raw rewards, mean-centred (paper) or std-normalised.
    std_kind : {"population", "bessel"}; adv_eps : float
        Only for ``advantage="std"``. Bessel's std of a group of one is taken
        as 1 (:func:`tailmiss.objectives.binary_group_advantages`).
    surrogate : {"logprob", "prob", "theory"}
        See :data:`tailmiss.objectives.SURROGATES`. ``"theory"`` is F-GRPO Eq. 5
        and needs ``optimizer="sgd"`` and ``advantage="none"``.
    optimizer : {"sgd", "adam", "adamw"}; lr, betas, eps, weight_decay
        torch's optimizers, applied elementwise to the logits (so one batched
        optimizer equals one optimizer per run). ``eps`` and ``adv_eps`` must be
        at least the smallest normal number of ``dtype`` (float32: 1.18e-38):
        below it they round to 0 or a subnormal, and Adam divides by ``eps``.
    group_sizes, gammas, seeds : tuple
        The sweep axes: :math:`N`, focal :math:`\gamma`, random seeds.
    steps, log_every : int
        Updates per run; metrics are logged at step 0, every ``log_every``
        steps and at the last step.
    dtype : {"float32", "float64"}
        Logits and optimizer state; probabilities, sampling and metric sums are
        always float64.
    max_draws_per_chunk : int
        Draws processed at once by the sampler (bounds memory at large N).
    """

    name: str = "custom"
    num_actions: int = 128_000
    num_correct: int = 10_000
    init: str = "seeded"
    anchor_logit: float = 5.0
    correct_logit: float = 3.0
    incorrect_logit: float = 0.0
    logits: tuple[float, ...] = ()
    reward_correct: float = 1.0
    reward_incorrect: float = -1.0
    advantage: str = "mean"
    std_kind: str = "population"
    adv_eps: float = 1e-6
    surrogate: str = "logprob"
    optimizer: str = "adam"
    lr: float = 1e-2
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    group_sizes: tuple[int, ...] = (2, 256, 8192, 131072)
    gammas: tuple[float, ...] = (0.0, 1.0)
    seeds: tuple[int, ...] = (0,)
    steps: int = 1000
    log_every: int = 10
    dtype: str = "float32"
    max_draws_per_chunk: int = 2**22

    def __post_init__(self) -> None:
        self._normalise()
        check_run_name(self.name)
        check_choice("dtype", self.dtype, DTYPES)
        self._check_actions()
        self._check_update()
        self._check_sweep()

    def _normalise(self) -> None:
        """Lists (and other iterables) -> tuples, numpy scalars -> Python numbers."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in _LIST_FIELDS:
                if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
                    raise ValueError(f"{f.name} must be a list, got {value!r}")
                value = tuple(_plain(v) for v in value)
            object.__setattr__(self, f.name, _plain(value))

    def _check_actions(self) -> None:
        """The action space and the starting policy."""
        check_int("num_actions", self.num_actions)
        check_int("num_correct", self.num_correct)
        if self.num_actions < 2 or self.num_correct >= self.num_actions:
            raise ValueError(
                f"num_correct must be smaller than num_actions, got {self.num_correct} with "
                f"num_actions={self.num_actions}"
            )
        check_choice("init", self.init, ("seeded", "zero", "logits"))
        for key in ("anchor_logit", "correct_logit", "incorrect_logit"):
            check_number(key, getattr(self, key), dtype=self.dtype)
        if self.init == "logits":
            if len(self.logits) != self.num_actions:
                raise ValueError(
                    f"logits must hold num_actions={self.num_actions} values for init='logits', got {len(self.logits)}"
                )
            limit = float(np.finfo(self.dtype).max)
            for i, x in enumerate(self.logits):
                if not (is_number(x) and abs(x) <= limit):
                    raise ValueError(f"logits must be finite numbers in {self.dtype}, got logits[{i}] = {x!r}")
        elif self.logits:
            raise ValueError(f"logits are only read with init='logits', got init={self.init!r}")
        if self.init == "seeded" and self.num_correct < 2:
            raise ValueError(f"seeded init needs num_correct >= 2 (anchor plus leaves), got {self.num_correct}")

    def _check_update(self) -> None:
        """Rewards, advantages, surrogate and optimizer."""
        # |gradient| <= 4 max|reward| (mean-centred advantages); Adam squares it, which must stay finite
        bound = math.sqrt(float(np.finfo(self.dtype).max)) / 8
        for key in ("reward_correct", "reward_incorrect"):
            value = getattr(self, key)
            check_number(key, value, dtype=self.dtype)
            if abs(value) > bound:
                raise ValueError(
                    f"{key} must lie within ±{bound:.3g} for dtype={self.dtype!r} (the optimizer squares "
                    f"gradients of that size), got {value!r}"
                )
        if not self.reward_correct > self.reward_incorrect:
            raise ValueError(
                f"reward_correct must exceed reward_incorrect, got {self.reward_correct} <= {self.reward_incorrect}"
            )
        check_choice("advantage", self.advantage, ADVANTAGE_MODES)
        check_choice("std_kind", self.std_kind, STD_KINDS)
        check_choice("surrogate", self.surrogate, tuple(SURROGATES))
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_number("lr", self.lr, 0.0, lo_open=True, dtype=self.dtype)
        check_epsilon("eps", self.eps, self.dtype)
        check_epsilon("adv_eps", self.adv_eps, self.dtype)
        # a group whose draws are all correct (all incorrect) has sigma = 0, and the advantage the other kind
        # of draw would get, (R_c - R_w) / adv_eps, still goes through the dtype (times a zero count)
        floor = (self.reward_correct - self.reward_incorrect) / float(np.finfo(self.dtype).max)
        if self.advantage == "std" and self.adv_eps < floor:
            raise ValueError(
                f"adv_eps must be at least (reward_correct - reward_incorrect) / {np.finfo(self.dtype).max:.4g} = "
                f"{floor:.4g} with advantage='std' and dtype={self.dtype!r} (a group of all-correct or all-incorrect "
                f"draws divides the reward gap by adv_eps), got {self.adv_eps!r}"
            )
        check_number("weight_decay", self.weight_decay, 0.0, dtype=self.dtype)
        check_numbers("betas", self.betas, 2, 0.0, 1.0)
        if self.surrogate == "theory" and (self.optimizer != "sgd" or self.advantage != "none"):
            raise ValueError(
                "surrogate 'theory' applies F-GRPO Eq. 5 and needs optimizer='sgd' and advantage='none', "
                f"got optimizer={self.optimizer!r}, advantage={self.advantage!r}"
            )

    def _check_sweep(self) -> None:
        """The sweep axes and the loop's sizes."""
        for axis in ("group_sizes", "gammas", "seeds"):
            if not getattr(self, axis):
                raise ValueError(f"{axis} must not be empty")
        for n in self.group_sizes:
            check_int("group_sizes entry", n)
        for g in self.gammas:
            check_number("gammas entry", g, 0.0)
        for s in self.seeds:
            check_int("seeds entry", s, 0, 2**32)
        check_int("steps", self.steps)
        check_int("log_every", self.log_every)
        check_int("max_draws_per_chunk", self.max_draws_per_chunk)

    # -- the sweep -----------------------------------------------------------
    def runs(self) -> list[tuple[int, float, int]]:
        """``(group_size, gamma, seed)`` of each run, in run-index order."""
        return list(itertools.product(self.group_sizes, self.gammas, self.seeds))

    @property
    def num_runs(self) -> int:
        return len(self.group_sizes) * len(self.gammas) * len(self.seeds)

    def replace(self, **changes) -> SimConfig:
        return dataclasses.replace(self, **changes)

    # -- TOML ------------------------------------------------------------------
    def to_dict(self) -> dict:
        return dataclass_to_mapping(self)

    @classmethod
    def from_dict(cls, data: dict, where: str = "SimConfig") -> SimConfig:
        """Build from a mapping; a bad key or value raises one ``ValueError`` line that starts with ``where``."""
        return dataclass_from_mapping(cls, data, where)

    @classmethod
    def from_toml(cls, path: str | Path) -> SimConfig:
        """Load from a TOML file; keys live at top level or under ``[sim]``."""
        data = read_toml(path)
        if "sim" in data and isinstance(data["sim"], dict):
            extra = sorted(set(data) - {"sim"})
            if extra:
                raise ValueError(f"{path}: unknown top-level key(s) {', '.join(map(repr, extra))} beside [sim]")
            data = data["sim"]
        if not data:  # every default would run the full paper-scale sweep: almost surely not what was meant
            raise ValueError(f"{path}: no settings (the file or its [sim] table is empty)")
        return cls.from_dict(data, where=str(path))

    def to_toml(self, path: str | Path) -> None:
        write_toml(path, {"sim": self.to_dict()})


def _select_runs(config: SimConfig, runs) -> tuple[list[int], list[tuple[int, float, int]]]:
    """Run indices and ``(N, γ, seed)`` of the selected runs (all by default)."""
    every = config.runs()
    if runs is None:
        return list(range(len(every))), every
    try:
        index = [int(i) for i in runs]
    except (TypeError, ValueError):
        raise ValueError(f"runs must be run indices, got {runs!r}") from None
    if not index or any(i < 0 or i >= len(every) for i in index) or len(set(index)) != len(index):
        raise ValueError(f"runs must be distinct indices in [0, {len(every)}), got {runs!r}")
    return index, [every[i] for i in index]
