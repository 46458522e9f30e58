"""Configuration of a categorical-policy simulation sweep."""

from __future__ import annotations

import dataclasses
import itertools
import math
import numbers
from dataclasses import dataclass
from pathlib import Path

from tailmiss.io import dataclass_from_mapping, dataclass_to_mapping, read_toml, write_toml
from tailmiss.objectives import ADVANTAGE_MODES, STD_KINDS, SURROGATES

__all__ = ["SimConfig", "OPTIMIZERS", "DTYPES"]

OPTIMIZERS = ("sgd", "adam", "adamw")
DTYPES = ("float32", "float64")


def _plain(value):
    """numpy scalars -> Python int/float (so np.arange(4) works as seeds and TOML can store them)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return value


def _choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


def _positive(name, value, integer=False):
    ok = isinstance(value, int) and not isinstance(value, bool) if integer else isinstance(value, (int, float))
    if not ok or not math.isfinite(value) or value <= 0:
        kind = "a positive integer" if integer else "a positive number"
        raise ValueError(f"{name} must be {kind}, got {value!r}")


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
        Label recorded with the result.
    num_actions, num_correct : int
        :math:`V` and :math:`|\mathcal{P}|` (paper: 128,000 and 10,000).
    init : {"seeded", "zero", "logits"}
        Seeded: anchor (correct index 0) at ``anchor_logit``, other correct at
        ``correct_logit``, incorrect at ``incorrect_logit``. Zero: uniform.
        Logits: start from ``logits`` (e.g. a trained model's answer
        distribution, correct answers first; see :mod:`tailmiss.bridge`).
    logits : tuple of float
        The starting logits for ``init="logits"`` (length ``num_actions``,
        finite); empty otherwise.
    reward_correct, reward_incorrect : float
        :math:`R_c > R_w` (simulations: +1/−1).
    advantage : {"none", "mean", "std"}
        Raw rewards, mean-centred (paper) or std-normalised.
    std_kind : {"population", "bessel"}; adv_eps : float
        Only for ``advantage="std"``.
    surrogate : {"logprob", "prob", "theory"}
        See :data:`tailmiss.objectives.SURROGATES`. ``"theory"`` is F-GRPO Eq. 5
        and needs ``optimizer="sgd"`` and ``advantage="none"``.
    optimizer : {"sgd", "adam", "adamw"}; lr, betas, eps, weight_decay
        torch's optimizers, applied elementwise to the logits (so one batched
        optimizer equals one optimizer per run).
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
        for axis in ("group_sizes", "gammas", "seeds", "betas", "logits"):
            value = getattr(self, axis)
            if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                raise ValueError(f"{axis} must be a list, got {value!r}")
            object.__setattr__(self, axis, tuple(_plain(v) for v in value))
        for name in ("num_actions", "num_correct", "steps", "log_every", "max_draws_per_chunk"):
            object.__setattr__(self, name, _plain(getattr(self, name)))
        _positive("num_actions", self.num_actions, integer=True)
        _positive("num_correct", self.num_correct, integer=True)
        if self.num_actions < 2 or self.num_correct >= self.num_actions:
            raise ValueError(
                f"num_correct must be smaller than num_actions, got {self.num_correct} with "
                f"num_actions={self.num_actions}"
            )
        _choice("init", self.init, ("seeded", "zero", "logits"))
        if self.init == "logits":
            if len(self.logits) != self.num_actions:
                raise ValueError(
                    f"logits must hold num_actions={self.num_actions} values for init='logits', got {len(self.logits)}"
                )
            finite = (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in self.logits)
            if not all(finite):
                raise ValueError("logits must be finite numbers")
        elif self.logits:
            raise ValueError(f"logits are only read with init='logits', got init={self.init!r}")
        if self.init == "seeded" and self.num_correct < 2:
            raise ValueError(f"seeded init needs num_correct >= 2 (anchor plus leaves), got {self.num_correct}")
        if not self.reward_correct > self.reward_incorrect:
            raise ValueError(
                f"reward_correct must exceed reward_incorrect, got {self.reward_correct} <= {self.reward_incorrect}"
            )
        _choice("advantage", self.advantage, ADVANTAGE_MODES)
        _choice("std_kind", self.std_kind, STD_KINDS)
        _choice("surrogate", self.surrogate, tuple(SURROGATES))
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _choice("dtype", self.dtype, DTYPES)
        _positive("lr", self.lr)
        _positive("eps", self.eps)
        _positive("adv_eps", self.adv_eps)
        if not (isinstance(self.weight_decay, (int, float)) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        if self.surrogate == "theory" and (self.optimizer != "sgd" or self.advantage != "none"):
            raise ValueError(
                "surrogate 'theory' applies F-GRPO Eq. 5 and needs optimizer='sgd' and advantage='none', "
                f"got optimizer={self.optimizer!r}, advantage={self.advantage!r}"
            )
        for axis in ("group_sizes", "gammas", "seeds"):
            if not getattr(self, axis):
                raise ValueError(f"{axis} must not be empty")
        for n in self.group_sizes:
            _positive("group_sizes entry", n, integer=True)
        for g in self.gammas:
            if not isinstance(g, (int, float)) or isinstance(g, bool) or not math.isfinite(g) or g < 0:
                raise ValueError(f"gammas entry must be a number >= 0, got {g!r}")
        for s in self.seeds:
            if not isinstance(s, int) or isinstance(s, bool) or not 0 <= s < 2**32:
                raise ValueError(f"seeds entry must be an integer in [0, 2**32), got {s!r}")
        _positive("steps", self.steps, integer=True)
        _positive("log_every", self.log_every, integer=True)
        _positive("max_draws_per_chunk", self.max_draws_per_chunk, integer=True)

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
        return cls.from_dict(data, where=str(path))

    def to_toml(self, path: str | Path) -> None:
        write_toml(path, {"sim": self.to_dict()})
