r"""A shared-parameter law given by its arrays: the form every shared-parameter simulation runs.

:class:`SharedLaw` holds what the batched loop needs about the prompts and their policy, whatever made it:

.. math::

    z(x, a) = c(x, a) + \phi(x)^\top W \psi(a), \qquad p(\cdot \mid x) = \mathrm{softmax}(z(x, \cdot)),

a frozen offset :math:`c`, prompt features :math:`\phi` (``[prompts, F]``), answer features :math:`\psi`
(``[actions, G]``; by default one-hot per action, so that :math:`W` holds a column per answer), the trained
:math:`W` at its start and each prompt's correct set. The synthetic conflict of :class:`SharedSimConfig` is one
such law (:func:`conflict_law`: no offset, one-hot answers, :math:`W` fitted to the intended start); the small
transformer's shared rung is another (:func:`tailmiss.experiments.shared_bridge.law_of_policy`: the SFT model's
log-probabilities as :math:`c`, digits as features, :math:`W = 0`), which is how the simulator meets the
transformer on the narrowing task.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from tailmiss.sim.engine import initial_logits
from tailmiss.sim.shared.config import SharedSimConfig, prompt_features

__all__ = ["SharedLaw", "conflict_law", "starting_point"]


def _matrix(name: str, value, rows: int | None = None, cols: int | None = None) -> np.ndarray:
    m = np.asarray(value, dtype=np.float64)
    if m.ndim != 2 or (rows is not None and m.shape[0] != rows) or (cols is not None and m.shape[1] != cols):
        want = f"({rows if rows is not None else '·'}, {cols if cols is not None else '·'})"
        raise ValueError(f"{name} must be a matrix of shape {want}, got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError(f"{name} must be finite")
    return m


@dataclass(frozen=True, eq=False)
class SharedLaw:
    r"""Prompts that share one log-linear categorical policy, as arrays (float64 and bool).

    .. math:: z(x, a) = c(x, a) + \phi(x)^\top W \psi(a)

    Attributes
    ----------
    prompt_features : ndarray (P, F)
        :math:`\phi`, one row per prompt.
    correct : ndarray of bool (P, A)
        Each prompt's correct actions (reward 1; the others 0, or the simulator's rewards).
    weight : ndarray (F, G)
        :math:`W` at the start (the trained parameters).
    offset : ndarray (P, A), optional
        :math:`c`, frozen; default 0.
    answer_features : ndarray (A, G), optional
        :math:`\psi`; default the identity (one column of :math:`W` per action, G = A).
    prompt_types : tuple of str, optional
        A label per prompt, by which results are averaged (default ``"all"`` for every prompt).
    prompts_per_step : int, optional
        How many prompts each step trains on: a uniform draw without replacement per run and step, the same for
        the runs of one seed (so the focal exponents of one seed share it, as draws do); default every prompt.

    Raises
    ------
    ValueError
        On a shape that does not fit the others, a value that is not finite, or ``prompts_per_step`` outside
        ``1 … P``.
    """

    prompt_features: np.ndarray
    correct: np.ndarray
    weight: np.ndarray
    offset: np.ndarray | None = None
    answer_features: np.ndarray | None = None
    prompt_types: tuple[str, ...] | None = None
    prompts_per_step: int | None = None

    def __post_init__(self) -> None:
        phi = _matrix("prompt_features", self.prompt_features)
        correct = np.asarray(self.correct)
        if correct.dtype != bool or correct.ndim != 2 or correct.shape[0] != phi.shape[0]:
            raise ValueError(
                f"correct must be a bool matrix with one row per prompt ({phi.shape[0]}), got {correct.dtype} "
                f"of shape {correct.shape}"
            )
        p, a = correct.shape
        if a < 2:
            raise ValueError(f"a law needs at least two actions, got {a}")
        psi = None if self.answer_features is None else _matrix("answer_features", self.answer_features, a)
        g = a if psi is None else psi.shape[1]
        weight = _matrix("weight", self.weight, phi.shape[1], g)
        offset = None if self.offset is None else _matrix("offset", self.offset, p, a)
        types = ("all",) * p if self.prompt_types is None else tuple(str(t) for t in self.prompt_types)
        if len(types) != p:
            raise ValueError(f"prompt_types must hold one label per prompt ({p}), got {len(types)}")
        if self.prompts_per_step is not None and not (
            isinstance(self.prompts_per_step, int) and 1 <= self.prompts_per_step <= p
        ):
            raise ValueError(f"prompts_per_step must be an integer in 1..{p} (or None), got {self.prompts_per_step!r}")
        for name, value in (
            ("prompt_features", phi),
            ("correct", correct.copy()),
            ("weight", weight),
            ("offset", offset),
            ("answer_features", psi),
            ("prompt_types", types),
        ):
            object.__setattr__(self, name, value)

    @property
    def num_prompts(self) -> int:
        return self.correct.shape[0]

    @property
    def num_actions(self) -> int:
        return self.correct.shape[1]

    def logits(self, weight: np.ndarray | None = None) -> np.ndarray:
        r""":math:`z = c + \Phi W \Psi^\top` (float64, ``[prompts, actions]``) at ``weight`` (default the start)."""
        w = self.weight if weight is None else _matrix("weight", weight, *self.weight.shape)
        z = self.prompt_features @ w
        if self.answer_features is not None:
            z = z @ self.answer_features.T
        return z if self.offset is None else z + self.offset

    def correct_mass(self, weight: np.ndarray | None = None) -> np.ndarray:
        """Each prompt's correct mass :math:`Q_{pos}(x) = \\sum_{a \\in C_x} p(a \\mid x)` at ``weight``."""
        p = special.softmax(self.logits(weight), axis=1)
        return np.where(self.correct, p, 0.0).sum(1)


def starting_point(config: SharedSimConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""``(theta0, target, fit_kl)`` of the synthetic conflict: the starting parameters ``[features, actions]``, the
    prompts' intended starting logits ``[prompts, actions]`` and the KL divergence
    :math:`\mathrm{KL}(\pi_x \,\|\, \hat\pi_x)` of each prompt's fitted start from its intended one (float64).

    A rest prompt's intended start is the simulator's starting policy (:func:`tailmiss.sim.initial_logits`); a
    minority prompt's is the same with the blocks of the two correct sets swapped. With one-hot prompt features
    :math:`\Theta_0` holds each prompt's logits in its row (and 0 in the bias row): exact, KL 0. Otherwise it is the
    least-squares solution of :math:`\tilde\Phi \Theta_0 = Z_0 - \bar Z_0` (logits centred per prompt, softmax being
    blind to a shift).
    """
    base = initial_logits(config.sim)
    c = config.sim.num_correct
    minority = base.copy()
    minority[: 2 * c] = np.concatenate([base[c : 2 * c], base[:c]]) if config.minority_prompts else base[: 2 * c]
    target = np.stack([base if t == "rest" else minority for t in config.prompt_types()])
    phi = prompt_features(config)
    if config.prompt_features == "one-hot":
        theta0 = target.copy()
        if config.train_bias:
            theta0 = np.concatenate([theta0, np.zeros((1, target.shape[1]))])
    else:
        centred = target - target.mean(1, keepdims=True)
        theta0 = np.linalg.lstsq(phi, centred, rcond=None)[0]
    fitted = phi @ theta0
    logp, logq = special.log_softmax(target, axis=1), special.log_softmax(fitted, axis=1)
    fit_kl = np.maximum((np.exp(logp) * (logp - logq)).sum(1), 0.0)
    return theta0, target, fit_kl


def conflict_law(config: SharedSimConfig) -> tuple[SharedLaw, np.ndarray]:
    """The synthetic conflict of ``config`` as a :class:`SharedLaw` (no offset, one-hot answers, every prompt each
    step), and the fit's KL per prompt (:func:`starting_point`)."""
    theta0, _, fit_kl = starting_point(config)
    correct = np.zeros((config.num_prompts, config.sim.num_actions), dtype=bool)
    for x, kind in enumerate(config.prompt_types()):
        correct[x, slice(*config.correct_range(kind))] = True
    law = SharedLaw(prompt_features(config), correct, theta0, prompt_types=tuple(config.prompt_types()))
    return law, fit_kl
