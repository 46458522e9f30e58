"""One categorical update: BroRL's mass balance and F-GRPO Prop. 3.2."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tailmiss._checks import check_integer, check_interval
from tailmiss.analytic._inputs import BATCH, batch_shape, check_mask, check_probs, check_rewards


class _Moments(NamedTuple):
    q_pos: np.ndarray
    p_pos: np.ndarray
    p_neg: np.ndarray
    a2: np.ndarray
    b2: np.ndarray
    u_pos2: np.ndarray
    u_neg2: np.ndarray
    q_u_pos: np.ndarray
    r_c: np.ndarray
    """``r_c``, divided by a power of two (exact) if the rewards exceed ``2**500``."""
    r_w: np.ndarray
    s_r: np.ndarray
    """Scaled like the rewards."""
    eta: np.ndarray
    """Mantissa of ``eta`` in ``[0.5, 1)``."""
    exponent: np.ndarray
    """Power of two that restores the scale of every output (rewards' and ``eta``'s exponents)."""

    def unscale(self, *scaled: np.ndarray) -> tuple[np.ndarray, ...]:
        """Multiply by ``eta`` and the reward scale; raise if the true result overflows float64."""
        with np.errstate(over="ignore"):
            out = tuple(np.ldexp(self.eta * x, self.exponent) for x in scaled)
        if not all(np.isfinite(x).all() for x in out):
            raise ValueError("eta, r_c and r_w are too large: the first-order change overflows float64")
        return out


def _check_sampled(sampled, shape) -> np.ndarray:
    """The sampled mask, from a boolean mask or from draw counts (only ``> 0`` matters)."""
    try:
        is_mask = np.asarray(sampled).dtype == bool
    except (TypeError, ValueError):  # ragged lists: check_integer words the error
        is_mask = False
    mask = sampled if is_mask else check_integer("sampled", sampled, 0) > 0
    return check_mask("sampled", mask, shape)


def _one_step_moments(probs, correct, sampled, r_c, r_w, eta) -> tuple[_Moments, np.ndarray]:
    """Validate every argument of the one-step functions; return the moments and the rewards' exponent."""
    p = check_probs(probs)
    pos = check_mask("correct", correct, p.shape)
    s = _check_sampled(sampled, p.shape)
    batch = batch_shape(p, ("correct", pos), ("sampled", s))
    eta = check_interval("eta", eta, 0.0, np.inf, lo_open=True, hi_open=True)
    r_c, r_w = check_rewards(r_c, r_w, (BATCH, batch), ("eta", eta.shape))
    # every output is linear in the rewards and in eta: huge rewards (beyond 2**500) and eta are split off as
    # powers of two (exact), so that an intermediate product overflows only where the result itself does
    r_exp = np.frexp(np.maximum(np.abs(r_c), np.abs(r_w)))[1]
    r_exp = np.where(r_exp > 500, r_exp, 0)
    r_c, r_w = np.ldexp(r_c, -r_exp), np.ldexp(r_w, -r_exp)
    eta_mantissa, eta_exp = np.frexp(eta)
    neg = ~pos
    p2 = p * p
    q_pos = np.sum(p * pos, axis=-1)
    p_pos = np.sum(p * (pos & s), axis=-1)
    p_neg = np.sum(p * (neg & s), axis=-1)
    moments = _Moments(
        q_pos=q_pos,
        p_pos=p_pos,
        p_neg=p_neg,
        a2=np.sum(p2 * (pos & s), axis=-1),
        b2=np.sum(p2 * (neg & s), axis=-1),
        u_pos2=np.sum(p2 * (pos & ~s), axis=-1),
        u_neg2=np.sum(p2 * (neg & ~s), axis=-1),
        q_u_pos=np.sum(p * (pos & ~s), axis=-1),
        r_c=r_c,
        r_w=r_w,
        s_r=r_c * p_pos + r_w * p_neg,
        eta=eta_mantissa,
        exponent=r_exp + eta_exp,
    )
    return moments, r_exp


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
        the update acts on distinct actions); counts are whole numbers in
        ``[0, 2**53)``.
    r_c, r_w : array_like of float, defaults 1 and -1
        Finite rewards of correct and incorrect actions, ``r_c > r_w``;
        broadcast against the batch axes of ``probs`` (all but the last).
    eta : array_like of float, default 1
        The whole step prefactor, i.e. :math:`\eta/N` of F-GRPO Eq. 5;
        finite and ``> 0``, broadcast like ``r_c``.

    Returns
    -------
    MassBalance
        The three terms, their sum ``delta_q_pos`` and ``s_r``.

    References
    ----------
    BroRL Theorem 1 (App. C, Eq. 17); F-GRPO Eq. 5 and App. E, Eq. 19.
    """
    m, r_exp = _one_step_moments(probs, correct, sampled, r_c, r_w, eta)
    q_neg = 1.0 - m.q_pos
    t1 = (m.r_c - m.s_r) * q_neg * m.a2
    t2 = (m.s_r - m.r_w) * m.q_pos * m.b2
    t3 = m.s_r * (m.q_pos * m.u_neg2 - q_neg * m.u_pos2)
    t1, t2, t3, total = m.unscale(t1, t2, t3, t1 + t2 + t3)
    return MassBalance(t1, t2, t3, total, np.ldexp(m.s_r, r_exp))


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
    m, _ = _one_step_moments(probs, correct, sampled, r_c, r_w, eta)
    drift = -m.s_r * m.u_pos2
    mean_shift = (m.r_c - m.s_r) * m.a2 + (m.r_w - m.s_r) * m.b2 - m.s_r * (m.u_pos2 + m.u_neg2)
    coupling = -m.q_u_pos * mean_shift
    drift, coupling, total = m.unscale(drift, coupling, drift + coupling)
    return UnsampledCorrectChange(drift, coupling, total, m.q_u_pos)
