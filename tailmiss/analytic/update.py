"""One categorical update: BroRL's mass balance and F-GRPO Prop. 3.2."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tailmiss._checks import check_integer, check_interval
from tailmiss.analytic._inputs import check_mask, check_probs, check_rewards


class _Moments(NamedTuple):
    q_pos: np.ndarray
    p_pos: np.ndarray
    p_neg: np.ndarray
    a2: np.ndarray
    b2: np.ndarray
    u_pos2: np.ndarray
    u_neg2: np.ndarray
    q_u_pos: np.ndarray
    s_r: np.ndarray


def _one_step_moments(probs, correct, sampled, r_c, r_w) -> _Moments:
    p = check_probs(probs)
    pos = check_mask("correct", correct, p.shape)
    s = np.asarray(sampled)
    if s.dtype != bool:
        counts = check_integer("sampled", s, 0)
        s = counts > 0
    s = check_mask("sampled", s, p.shape)
    r_c, r_w = check_rewards(r_c, r_w)
    neg = ~pos
    p2 = p * p
    q_pos = np.sum(p * pos, axis=-1)
    p_pos = np.sum(p * (pos & s), axis=-1)
    p_neg = np.sum(p * (neg & s), axis=-1)
    return _Moments(
        q_pos=q_pos,
        p_pos=p_pos,
        p_neg=p_neg,
        a2=np.sum(p2 * (pos & s), axis=-1),
        b2=np.sum(p2 * (neg & s), axis=-1),
        u_pos2=np.sum(p2 * (pos & ~s), axis=-1),
        u_neg2=np.sum(p2 * (neg & ~s), axis=-1),
        q_u_pos=np.sum(p * (pos & ~s), axis=-1),
        s_r=r_c * p_pos + r_w * p_neg,
    )


def _check_eta(eta) -> np.ndarray:
    return check_interval("eta", eta, 0.0, np.inf, lo_open=True, hi_open=True)


class MassBalance(NamedTuple):
    """BroRL's three-term decomposition of the first-order change of ``Q_pos``."""

    sampled_correct: np.ndarray
    """Term 1, :math:`\\eta (R_c - S_R) Q_{neg} A_2 \\ge 0`."""
    sampled_incorrect: np.ndarray
    """Term 2, :math:`\\eta (S_R - R_w) Q_{pos} B_2 \\ge 0`."""
    unsampled: np.ndarray
    """Term 3, :math:`\\eta S_R (Q_{pos} U_{neg,2} - Q_{neg} U_{pos,2})`, either sign."""
    delta_q_pos: np.ndarray
    """Sum of the three terms."""
    s_r: np.ndarray
    """Batch mood :math:`S_R = R_c P_{pos} + R_w P_{neg}`."""


def mass_balance(probs, correct, sampled, r_c=1.0, r_w=-1.0, eta=1.0) -> MassBalance:
    r"""First-order change of the correct mass under one categorical update.

    For the update :math:`\Delta z_i = \eta\, p_i (R_i - S_R)` (``R_i = 0`` on
    unsampled actions, sampled actions counted once):

    .. math::

        \Delta Q_{pos} = \eta \big[ (R_c - S_R) Q_{neg} A_2
            + (S_R - R_w) Q_{pos} B_2
            + S_R (Q_{pos} U_{neg,2} - Q_{neg} U_{pos,2}) \big]

    Parameters
    ----------
    probs : array_like, shape (..., V)
        Current policy; the last axis sums to 1.
    correct : array_like of bool
        Correct-action mask, broadcast against ``probs``.
    sampled : array_like of bool or int
        Mask of sampled actions or their draw counts (only ``> 0`` matters:
        the update acts on distinct actions).
    r_c, r_w : float, defaults 1 and -1
        Rewards of correct and incorrect actions, ``r_c > r_w``.
    eta : float, default 1
        The whole step prefactor, i.e. :math:`\eta/N` of F-GRPO Eq. 5.

    Returns
    -------
    MassBalance
        The three terms, their sum ``delta_q_pos`` and ``s_r``.

    References
    ----------
    BroRL Theorem 1 (App. C, Eq. 17); F-GRPO Eq. 5 and App. E, Eq. 19.
    """
    m = _one_step_moments(probs, correct, sampled, r_c, r_w)
    eta = _check_eta(eta)
    r_c, r_w = np.asarray(r_c, float), np.asarray(r_w, float)
    q_neg = 1.0 - m.q_pos
    t1 = eta * (r_c - m.s_r) * q_neg * m.a2
    t2 = eta * (m.s_r - r_w) * m.q_pos * m.b2
    t3 = eta * m.s_r * (m.q_pos * m.u_neg2 - q_neg * m.u_pos2)
    return MassBalance(t1, t2, t3, t1 + t2 + t3, m.s_r)


class UnsampledCorrectChange(NamedTuple):
    """Prop. 3.2's split of the change of the unsampled correct mass."""

    direct_drift: np.ndarray
    """:math:`-\\eta S_R U_{pos,2}`."""
    normalization_coupling: np.ndarray
    """:math:`-\\eta Q_{u,pos} [(R_c-S_R)A_2 + (R_w-S_R)B_2 - S_R U_2]`."""
    delta_q_u_pos: np.ndarray
    """Sum of the two."""
    q_u_pos: np.ndarray
    """Unsampled correct mass before the step."""


def unsampled_correct_change(probs, correct, sampled, r_c=1.0, r_w=-1.0, eta=1.0) -> UnsampledCorrectChange:
    r"""First-order change of the unsampled correct mass :math:`Q_{u,pos}`.

    .. math::

        \Delta Q_{u,pos} = \eta \big[ -S_R U_{pos,2}
            - Q_{u,pos} \big( (R_c - S_R) A_2 + (R_w - S_R) B_2 - S_R U_2 \big) \big]

    Arguments as in :func:`mass_balance`.

    References
    ----------
    F-GRPO Proposition 3.2 (Eq. 10; proof App. F, terms App. G).
    """
    m = _one_step_moments(probs, correct, sampled, r_c, r_w)
    eta = _check_eta(eta)
    r_c, r_w = np.asarray(r_c, float), np.asarray(r_w, float)
    drift = -eta * m.s_r * m.u_pos2
    mean_shift = (r_c - m.s_r) * m.a2 + (r_w - m.s_r) * m.b2 - m.s_r * (m.u_pos2 + m.u_neg2)
    coupling = -eta * m.q_u_pos * mean_shift
    return UnsampledCorrectChange(drift, coupling, drift + coupling, m.q_u_pos)
