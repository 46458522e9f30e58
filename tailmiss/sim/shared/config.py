r"""Configuration of a shared-parameter simulation: prompts, their correct sets, the features they share.

A :class:`SharedSimConfig` is a :class:`~tailmiss.sim.SimConfig` (the update rule, the sweep, one prompt's action
space and starting policy) plus the prompts that share one log-linear policy. TOML: the simulator's ``[sim]`` table
and a ``[shared]`` table beside it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tailmiss._checks import check_bool, check_choice, check_int
from tailmiss.io import dataclass_from_mapping, dataclass_to_mapping, read_toml, write_toml
from tailmiss.sim.config import SimConfig

__all__ = ["SharedSimConfig", "PROMPT_FEATURES", "PROMPT_TYPES", "prompt_features"]

PROMPT_FEATURES = ("one-hot", "random")
"""How prompts are described to the shared policy (:attr:`SharedSimConfig.prompt_features`): one feature per prompt,
or ``prompt_dim`` random binary features, so that prompts overlap in what they share."""
PROMPT_TYPES = ("rest", "minority")
"""The two kinds of prompt of the synthetic conflict: the rest, whose correct set is the first ``num_correct``
actions, and the minority, whose correct set is the next ``num_correct`` (part of the rest's incorrect set, and the
rest's correct set part of theirs)."""


@dataclass(frozen=True)
class SharedSimConfig:
    r"""A sweep of shared-parameter categorical policies over several prompts.

    Each run holds one parameter matrix :math:`\Theta` (``[features, actions]``) for all its prompts; prompt
    :math:`x`'s logits are

    .. math::

        z(x, a) = \tilde\phi(x)^\top \Theta_{:, a}
                = b_a + \phi(x)^\top W \psi(a),
        \qquad \tilde\phi(x) = (\phi(x), 1),

    with :math:`\psi(a)` the one-hot answer feature (so :math:`W` holds a column per answer) and :math:`b` the answer
    bias, the constant feature's row, shared by every prompt (``train_bias``). An update on one prompt moves every
    prompt that shares a feature with it: with one-hot prompt features that is the bias alone; with random features
    the overlapping rows of :math:`W` too. Without the bias and with one-hot features each prompt has its own row,
    and the simulation is :func:`tailmiss.sim.simulate` run once per prompt, bit for bit.

    Attributes
    ----------
    sim : SimConfig
        The update rule (rewards, advantage, surrogate, optimizer), the sweep (``group_sizes × gammas × seeds``),
        steps, dtype, and one prompt's action space and starting policy: every prompt draws ``N`` actions per step
        from its own policy, and each starts from ``sim``'s starting policy over its own correct set.
    num_prompts : int
        :math:`P`, prompts per run.
    minority_prompts : int
        How many of them (the last ones) are of the *minority* type, whose correct set is actions
        ``num_correct .. 2 num_correct - 1`` and whose starting policy is ``sim``'s with the two blocks swapped;
        the others' correct set is the first ``num_correct`` actions. The rest's gains are the minority's
        losses through whatever they share (:data:`PROMPT_TYPES`).
    prompt_features : {"one-hot", "random"}
        :math:`\phi`: one feature per prompt, or ``prompt_dim`` binary features drawn with probability 1/2 from
        ``feature_seed`` (every prompt at least one).
    prompt_dim : int
        The number of random features (``prompt_features="random"`` only; 0 otherwise).
    feature_seed : int
        Seed of the random features.
    train_bias : bool
        Whether the answer bias :math:`b` (a feature equal to 1 for every prompt) is a parameter.

    Notes
    -----
    The step ascends the prompts' surrogates summed, :math:`\sum_x J_x` (each :math:`J_x` the simulator's group
    objective of prompt :math:`x`'s ``N`` draws, focal weight and all); under Adam a constant factor would only meet
    ``eps``. The starting :math:`\Theta` is the least-squares fit of the prompts' starting logits (centred per prompt)
    in the features, exact for one-hot features; the fit's KL divergence from each prompt's intended start is
    recorded in the result's meta.
    """

    sim: SimConfig = dataclasses.field(default_factory=lambda: SimConfig(name="shared"))
    num_prompts: int = 8
    minority_prompts: int = 2
    prompt_features: str = "one-hot"
    prompt_dim: int = 0
    feature_seed: int = 0
    train_bias: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.sim, SimConfig):
            raise ValueError(f"sim must be a SimConfig, got {type(self.sim).__name__}")
        check_int("num_prompts", self.num_prompts)
        check_int("minority_prompts", self.minority_prompts, 0, self.num_prompts + 1)
        check_choice("prompt_features", self.prompt_features, PROMPT_FEATURES)
        if self.prompt_features == "random":
            check_int("prompt_dim", self.prompt_dim)
        elif self.prompt_dim != 0:
            raise ValueError(f"prompt_dim is only read with prompt_features='random', got {self.prompt_dim!r}")
        check_int("feature_seed", self.feature_seed, 0, 2**32)
        check_bool("train_bias", self.train_bias)
        if self.minority_prompts and 2 * self.sim.num_correct > self.sim.num_actions:
            raise ValueError(
                f"minority prompts need 2 * num_correct <= num_actions (their correct set is the next num_correct "
                f"actions), got num_correct={self.sim.num_correct} with num_actions={self.sim.num_actions}"
            )
        if self.sim.surrogate == "theory":
            raise ValueError("surrogate 'theory' is F-GRPO Eq. 5 on one prompt's logits; the shared policy has none")

    # -- the sweep -----------------------------------------------------------
    @property
    def name(self) -> str:
        return self.sim.name

    @property
    def num_runs(self) -> int:
        return self.sim.num_runs

    @property
    def num_features(self) -> int:
        """Rows of :math:`\\Theta`: the prompt features, plus the bias when it is trained."""
        base = self.num_prompts if self.prompt_features == "one-hot" else self.prompt_dim
        return base + int(self.train_bias)

    def prompt_types(self) -> list[str]:
        """The type (:data:`PROMPT_TYPES`) of each prompt, in prompt order."""
        rest = self.num_prompts - self.minority_prompts
        return ["rest"] * rest + ["minority"] * self.minority_prompts

    def correct_range(self, kind: str) -> tuple[int, int]:
        """``(first, end)`` of the correct actions of a prompt of type ``kind``."""
        c = self.sim.num_correct
        return (0, c) if check_choice("prompt type", kind, PROMPT_TYPES) == "rest" else (c, 2 * c)

    def replace(self, **changes) -> SharedSimConfig:
        """A copy with ``changes``; the keys of :class:`~tailmiss.sim.SimConfig` go to :attr:`sim`."""
        own = {f.name for f in dataclasses.fields(self)}
        sim = {k: changes.pop(k) for k in list(changes) if k not in own}
        if sim:
            changes["sim"] = changes.get("sim", self.sim).replace(**sim)
        return dataclasses.replace(self, **changes)

    # -- TOML ------------------------------------------------------------------
    def to_dict(self) -> dict:
        own = {k: v for k, v in dataclass_to_mapping(self).items() if k != "sim"}
        return {"sim": self.sim.to_dict(), "shared": own}

    @classmethod
    def from_dict(cls, data: dict, where: str = "SharedSimConfig") -> SharedSimConfig:
        """Build from ``{"sim": {...}, "shared": {...}}``; a bad key or value raises one ``ValueError`` line that
        starts with ``where``."""
        extra = sorted(set(data) - {"sim", "shared"})
        if extra or not isinstance(data.get("sim"), dict):
            raise ValueError(f"{where}: expected a [sim] table and a [shared] table, got the key(s) {sorted(data)}")
        sim = SimConfig.from_dict(data["sim"], where=f"{where} [sim]")
        return dataclass_from_mapping(cls, {**data.get("shared", {}), "sim": sim}, where=f"{where} [shared]")

    @classmethod
    def from_toml(cls, path: str | Path) -> SharedSimConfig:
        return cls.from_dict(read_toml(path), where=str(path))

    def to_toml(self, path: str | Path) -> None:
        write_toml(path, self.to_dict())


def prompt_features(config: SharedSimConfig) -> np.ndarray:
    r"""The feature matrix :math:`\tilde\Phi` (float64, ``[num_prompts, num_features]``): row :math:`x` is
    :math:`\tilde\phi(x) = (\phi(x), 1)`, the last column only when the bias is trained.

    Random features are i.i.d. Bernoulli(1/2) from ``feature_seed``; a prompt that drew none gets one at random, so
    that every prompt has a feature of its own to move.
    """
    p = config.num_prompts
    if config.prompt_features == "one-hot":
        phi = np.eye(p)
    else:
        rng = np.random.default_rng(config.feature_seed)
        phi = (rng.random((p, config.prompt_dim)) < 0.5).astype(np.float64)
        for x in np.flatnonzero(phi.sum(1) == 0):
            phi[x, rng.integers(config.prompt_dim)] = 1.0
    if config.train_bias:
        phi = np.concatenate([phi, np.ones((p, 1))], axis=1)
    return phi
