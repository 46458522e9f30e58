"""The categorical simulation's initial policy (F-GRPO App. J; BroRL §4.1)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import special

from tailmiss._checks import check_integer


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

    At the paper's V = 128,000: :math:`Q_{pos} = 0.63008`, anchor 4.6527e-4,
    leaf :math:`\tau = 6.2967\mathrm{e}{-5}`.

    References
    ----------
    F-GRPO App. J; BroRL §4.1.
    """
    v = int(check_integer("num_actions", num_actions, 2))
    c = int(check_integer("num_correct", num_correct, 1))
    if c >= v:
        raise ValueError(f"num_correct must be smaller than num_actions, got {c} with num_actions={v}")
    correct = np.zeros(v, dtype=bool)
    correct[:c] = True
    if init == "zero":
        z = np.zeros(v)
        anchor = None
    elif init == "seeded":
        z = np.where(correct, float(correct_logit), float(incorrect_logit))
        z[0] = float(anchor_logit)
        anchor = 0
    else:
        raise ValueError(f"init must be 'seeded' or 'zero', got {init!r}")
    probs = special.softmax(z)
    return InitialDistribution(probs, correct, anchor, z)
