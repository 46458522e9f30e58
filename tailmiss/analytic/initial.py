"""The categorical simulation's initial policy (F-GRPO App. J; BroRL §4.1)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import special

from tailmiss._checks import check_choice, check_finite, check_integer, check_scalar


def _count(name: str, value, minimum: int) -> int:
    arr = check_integer(name, value, minimum)
    check_scalar(name, arr)
    return int(arr)


def _scalar_finite(name: str, value) -> float:
    arr = check_finite(name, value)
    check_scalar(name, arr)
    return float(arr)


class InitialDistribution(NamedTuple):
    """A categorical policy over ``V`` actions with its correct mask."""

    probs: np.ndarray
    correct: np.ndarray
    anchor: int | None
    """Index of the anchor action (seeded init) or ``None``."""
    logits: np.ndarray
    """The logits ``z`` with ``probs = softmax(z)`` (what the simulator starts from)."""

    @property
    def q_pos(self) -> float:
        """Correct mass :math:`Q_{pos}`."""
        return float(np.sum(self.probs[self.correct]))

    @property
    def p_anchor(self) -> float:
        return float(self.probs[self.anchor]) if self.anchor is not None else float("nan")

    @property
    def tau_leaf(self) -> float:
        """Probability of one non-anchor correct action (the rare-correct τ)."""
        leaf = np.flatnonzero(self.correct)
        leaf = leaf[leaf != self.anchor] if self.anchor is not None else leaf
        return float(self.probs[leaf[0]]) if leaf.size else float("nan")

    @property
    def p_incorrect(self) -> float:
        return float(self.probs[np.flatnonzero(~self.correct)[0]])

    @property
    def entropy(self) -> float:
        """Shannon entropy in nats."""
        p = self.probs[self.probs > 0]
        return float(-np.sum(p * np.log(p)))


def initial_distribution(
    num_actions: int = 128_000,
    num_correct: int = 10_000,
    init: str = "seeded",
    anchor_logit: float = 5.0,
    correct_logit: float = 3.0,
    incorrect_logit: float = 0.0,
) -> InitialDistribution:
    r"""The categorical simulation's starting policy :math:`p = \mathrm{softmax}(z)`.

    ``init="seeded"``: the first correct action is an anchor at ``anchor_logit``,
    the other correct actions sit at ``correct_logit`` and the incorrect ones at
    ``incorrect_logit``; ``init="zero"``: uniform. Correct actions are indices
    ``0 .. num_correct - 1`` (the anchor is index 0).

    ``num_actions`` and ``num_correct`` are single whole numbers with
    ``1 <= num_correct < num_actions < 2**53`` (memory is the practical limit:
    the result holds arrays of ``num_actions`` entries); the logits are single finite
    numbers; ``init`` is one of the two strings.

    At the paper's V = 128,000: :math:`Q_{pos} = 0.63008`, anchor 4.6527e-4,
    leaf :math:`\tau = 6.2967\mathrm{e}{-5}`.

    References
    ----------
    F-GRPO App. J; BroRL §4.1.
    """
    v, c = _count("num_actions", num_actions, 2), _count("num_correct", num_correct, 1)
    if c >= v:
        raise ValueError(f"num_correct must be smaller than num_actions, got {c} with num_actions={v}")
    init = check_choice("init", init, ("seeded", "zero"))
    anchor_z, correct_z, incorrect_z = (
        _scalar_finite(name, value)
        for name, value in (
            ("anchor_logit", anchor_logit),
            ("correct_logit", correct_logit),
            ("incorrect_logit", incorrect_logit),
        )
    )
    correct = np.zeros(v, dtype=bool)
    correct[:c] = True
    if init == "zero":
        z = np.zeros(v)
        anchor = None
    else:
        z = np.where(correct, correct_z, incorrect_z)
        z[0] = anchor_z
        anchor = 0
    probs = special.softmax(z)
    return InitialDistribution(probs, correct, anchor, z)
