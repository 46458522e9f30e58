r"""Closed forms of the F-GRPO and BroRL theory (numpy/scipy only).

Every function broadcasts over its scalar arguments, validates its inputs
(``ValueError`` naming the argument and the bad value) and works in log space
where powers such as :math:`(1-\tau)^N` would otherwise lose all their digits.

Distribution arguments ``probs`` are arrays whose *last* axis runs over the
action set; ``correct`` and ``sampled`` broadcast against them.

References
----------
F-GRPO: arXiv 2602.06717 v2 (Lemma 3.1, Prop. 3.2, Lemma H.1, App. N).
BroRL: arXiv 2510.01180 (Theorem 1 / Eq. 17, Lemma 2, Corollary 3).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import special

from tailmiss._checks import as_float, check_integer, check_interval, check_nonnegative, check_not_above

__all__ = [
    "active_probability",
    "tail_miss_probability",
    "tail_miss_peak",
    "TailMissPeak",
    "mass_balance",
    "MassBalance",
    "unsampled_correct_change",
    "UnsampledCorrectChange",
    "expected_unsampled_second_moment",
    "expected_unsampled_mass",
    "expected_unsampled_coupling",
    "expected_sampled_mass",
    "SampledMass",
    "expected_batch_mood",
    "focal_weight",
    "advantage_magnitudes",
    "AdvantageMagnitudes",
    "lr_matched_scale",
    "pass_at_k",
    "pass_at_k_from_mass",
    "initial_distribution",
    "InitialDistribution",
]


# ---------------------------------------------------------------------------
# Active groups and tail miss (F-GRPO §3.1)
# ---------------------------------------------------------------------------


def _one_minus_two_powers(v: np.ndarray, u: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``1 - u**n - v**n`` for ``u + v = 1`` without cancellation.

    The larger base goes through ``-expm1(n log b)`` (no ``1 - (1 - x)``), and its
    log is taken as ``log1p(-other)`` so that a base close to 1 keeps its digits.
    The smaller power is at most half of the result's leading term, so the final
    subtraction loses at most about one bit.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        v_small = v <= u
        log_big = np.where(v_small, np.log1p(-v), np.log1p(-u))
        log_small = np.where(v_small, np.log(v), np.log(u))
        out = -np.expm1(n * log_big) - np.exp(n * log_small)
    out = np.where(n == 1, 0.0, out)  # exactly zero: one draw is never a mixed group
    return np.clip(out, 0.0, 1.0)  # rounding only; the exact value lies in [0, 1]


def active_probability(mu_pos, n):
    r"""Probability that a group of ``n`` rollouts has mixed rewards.

    .. math::

        \Pr(A_N) = 1 - \mu_{pos}^N - (1-\mu_{pos})^N

    Parameters
    ----------
    mu_pos : array_like
        Probability that one rollout is correct, in ``[0, 1]``.
    n : array_like of int
        Group size ``N >= 1``.

    Returns
    -------
    ndarray or float
        ``Pr(0 < X < N)``, broadcast over the arguments.

    References
    ----------
    F-GRPO §3.1, Eq. 7.
    """
    mu = check_interval("mu_pos", mu_pos, 0.0, 1.0, lo_open=False, hi_open=False)
    n_arr = check_integer("n", n, 1).astype(np.float64)
    mu, n_arr = np.broadcast_arrays(mu, n_arr)
    out = _one_minus_two_powers(mu, 1.0 - mu, n_arr)
    return out if out.ndim else float(out)


def _check_mu_tau(mu_pos, tau):
    mu = check_interval("mu_pos", mu_pos, 0.0, 1.0, lo_open=True, hi_open=False)
    tau_arr = check_interval("tau", tau, 0.0, 1.0, lo_open=True, hi_open=True)
    mu, tau_arr = np.broadcast_arrays(mu, tau_arr)
    bad = tau_arr >= mu
    if bad.any():
        tau_bad, mu_bad = tau_arr[bad].flat[0].item(), mu[bad].flat[0].item()
        raise ValueError(f"tau must be smaller than mu_pos, got tau={tau_bad!r} with mu_pos={mu_bad!r}")
    return mu, tau_arr


def tail_miss_probability(mu_pos, tau, n):
    r"""Probability that a group is active yet never samples the rare-correct set E.

    .. math::

        \Pr(B_{E,N}) = (1-\tau)^N - (\mu_{pos}-\tau)^N - (1-\mu_{pos})^N

    Each draw lands in E (probability :math:`\tau`), in C\\E (:math:`\mu_{pos}-\tau`)
    or among the incorrect rollouts (:math:`1-\mu_{pos}`). It is evaluated as
    :math:`(1-\tau)^N \cdot \Pr(\text{mixed} \mid \text{no draw in } E)`, i.e.
    :math:`(1-\tau)^N [1 - u^N - v^N]` with :math:`v = (\mu_{pos}-\tau)/(1-\tau)`,
    :math:`u = 1 - v`; both factors are computed without cancellation, so the
    value keeps full relative accuracy for ``n`` up to 1e7 and ``tau`` down to
    1e-15 and never leaves ``[0, 1]``.

    Parameters
    ----------
    mu_pos : array_like
        Correct probability, ``0 < mu_pos <= 1``.
    tau : array_like
        Mass of the rare-correct subset, ``0 < tau < mu_pos``.
    n : array_like of int
        Group size ``N >= 1``.

    Returns
    -------
    ndarray or float
        Broadcast over the three arguments. Exactly 0 at ``N = 1``.

    References
    ----------
    F-GRPO Lemma 3.1 (Eq. 8; proof in App. D).
    """
    mu, tau_arr = _check_mu_tau(mu_pos, tau)
    n_arr = check_integer("n", n, 1).astype(np.float64)
    mu, tau_arr, n_arr = np.broadcast_arrays(mu, tau_arr, n_arr)
    one_minus_tau = 1.0 - tau_arr
    v = (mu - tau_arr) / one_minus_tau  # P(correct, not in E | not in E)
    u = (1.0 - mu) / one_minus_tau  # P(incorrect | not in E)
    coverage_miss = np.exp(n_arr * np.log1p(-tau_arr))  # (1 - tau)^N without rounding 1 - tau
    out = coverage_miss * _one_minus_two_powers(v, u, n_arr)
    return out if out.ndim else float(out)


class TailMissPeak(NamedTuple):
    """Location and height of the tail-miss peak."""

    n_star: np.ndarray | int
    """Smallest group size attaining the maximum."""
    peak: np.ndarray | float
    """Lemma 3.1 at ``n_star``."""


def tail_miss_peak(mu_pos, tau, n_max: int = 10**7, grid=None) -> TailMissPeak:
    r"""Exact integer argmax :math:`N^*` of Lemma 3.1 and the peak value.

    The search is exhaustive over ``N = 1, 2, ...`` in growing chunks and stops
    as soon as no larger N can win: since
    :math:`\Pr(B_{E,N}) \le (1-\tau)^N`, no N beyond
    :math:`\log(\text{best}) / \log(1-\tau)` can beat the best value found so
    far. The result is therefore the global argmax over ``1..n_max`` with no
    unimodality assumption. Ties go to the smallest N.

    Parameters
    ----------
    mu_pos, tau : array_like
        As in :func:`tail_miss_probability`; broadcast together.
    n_max : int, default 10**7
        Largest group size considered.
    grid : array_like of int, optional
        If given, the argmax is taken over these group sizes only (for example
        powers of two) instead of every integer.

    Returns
    -------
    TailMissPeak
        ``(n_star, peak)`` with the broadcast shape of ``mu_pos`` and ``tau``.

    References
    ----------
    F-GRPO Lemma 3.1; the paper gives no closed-form argmax (spec §2.2).
    """
    mu, tau_arr = _check_mu_tau(mu_pos, tau)
    n_max = int(check_integer("n_max", n_max, 1))
    shape = mu.shape
    mu, tau_arr = mu.ravel(), tau_arr.ravel()
    if grid is not None:
        g = np.unique(check_integer("grid", grid, 1).ravel())
        vals = tail_miss_probability(mu[:, None], tau_arr[:, None], g[None, :])
        idx = np.argmax(vals, axis=1)
        n_star, peak = g[idx], vals[np.arange(mu.size), idx]
    else:
        n_star = np.ones(mu.size, dtype=np.int64)
        peak = np.zeros(mu.size)
        todo = mu < 1.0  # mu_pos = 1: every group is all-correct, Pr = 0 for all N
        searched, chunk = 1, 256
        while todo.any() and searched < n_max:
            hi = min(n_max, searched + chunk)
            ns = np.arange(searched + 1, hi + 1)
            idx = np.flatnonzero(todo)
            vals = tail_miss_probability(mu[idx, None], tau_arr[idx, None], ns[None, :])
            j = np.argmax(vals, axis=1)
            best = vals[np.arange(idx.size), j]
            better = best > peak[idx]
            peak[idx[better]] = best[better]
            n_star[idx[better]] = ns[j[better]]
            searched = hi
            with np.errstate(divide="ignore"):
                bound = np.log(peak) / np.log1p(-tau_arr)  # beyond it, (1-tau)^N < best
            todo = todo & (bound > searched)
            chunk = min(chunk * 2, max(256, 2**22 // max(1, int(todo.sum()))))
    n_star, peak = n_star.reshape(shape), peak.reshape(shape)
    if not shape:
        return TailMissPeak(int(n_star), float(peak))
    return TailMissPeak(n_star, peak)


# ---------------------------------------------------------------------------
# One-step categorical update: BroRL mass balance and Prop. 3.2
# ---------------------------------------------------------------------------


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


def _check_probs(probs) -> np.ndarray:
    p = check_nonnegative("probs", probs)
    if p.ndim == 0 or p.shape[-1] == 0:
        raise ValueError(f"probs must have a non-empty last (action) axis, got shape {p.shape}")
    total = p.sum(axis=-1)
    bad = np.abs(total - 1.0) > 1e-6
    if bad.any():
        raise ValueError(f"probs must sum to 1 along the last axis, got a sum of {total[bad].flat[0].item()!r}")
    return p


def _check_mask(name: str, mask, shape) -> np.ndarray:
    arr = np.asarray(mask)
    if arr.dtype != bool:
        raise ValueError(f"{name} must be a boolean mask, got dtype {arr.dtype}")
    try:
        np.broadcast_shapes(arr.shape, shape)
    except ValueError:
        raise ValueError(f"{name} has shape {arr.shape}, which does not broadcast against probs {shape}") from None
    return arr


def _check_rewards(r_c, r_w) -> tuple[np.ndarray, np.ndarray]:
    r_c, r_w = np.broadcast_arrays(as_float("r_c", r_c), as_float("r_w", r_w))
    bad = r_c <= r_w
    if bad.any():
        raise ValueError(f"r_c must exceed r_w, got r_c={r_c[bad].flat[0].item()!r}, r_w={r_w[bad].flat[0].item()!r}")
    return r_c, r_w


def _one_step_moments(probs, correct, sampled, r_c, r_w) -> _Moments:
    p = _check_probs(probs)
    pos = _check_mask("correct", correct, p.shape)
    s = np.asarray(sampled)
    if s.dtype != bool:
        counts = check_integer("sampled", s, 0)
        s = counts > 0
    s = _check_mask("sampled", s, p.shape)
    r_c, r_w = _check_rewards(r_c, r_w)
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


# ---------------------------------------------------------------------------
# Expectations over the N draws (BroRL Lemma 2 / Cor. 3, F-GRPO Lemma H.1)
# ---------------------------------------------------------------------------


def _hit_probability(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``1 - (1 - q)^k`` in log space (k up to 1e6, q tiny); exact 0 for k = 0 and 1 for q = 1, k > 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = -np.expm1(k * np.log1p(-np.minimum(q, 1.0)))
    return np.where(k == 0, 0.0, out)


def _miss_probability(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    return 1.0 - _hit_probability(p, n[..., None])


def _expectation_inputs(probs, n, mask):
    p = _check_probs(probs)
    n_arr = check_integer("n", n, 0).astype(np.float64)
    if mask is not None:
        mask = _check_mask("mask", mask, p.shape)
    return p, n_arr, mask


def expected_unsampled_second_moment(probs, n, mask=None):
    r"""Expected second moment of the actions that none of ``n`` draws hit.

    .. math::

        \mathbb{E}[U_2] = \sum_i p_i^2 (1 - p_i)^N

    Restricting the sum with ``mask`` gives :math:`\mathbb{E}[U_{pos,2}]`
    (``mask = correct``) or :math:`\mathbb{E}[U_{neg,2}]`.

    Parameters
    ----------
    probs : array_like, shape (..., V)
    n : array_like of int
        Number of i.i.d. draws; broadcast against ``probs.shape[:-1]``.
    mask : array_like of bool, optional

    References
    ----------
    BroRL Lemma 2 / Corollary 3 (App. C.2).
    """
    p, n_arr, mask = _expectation_inputs(probs, n, mask)
    terms = p * p * _miss_probability(p, n_arr)
    if mask is not None:
        terms = terms * mask
    return np.sum(terms, axis=-1)


def expected_unsampled_mass(probs, n, mask=None):
    r"""Expected probability mass left unsampled by ``n`` draws.

    .. math::

        \mathbb{E}[Q_{u}] = \sum_i p_i (1 - p_i)^N

    With ``mask = correct`` this is :math:`\mathbb{E}[Q_{u,pos}]`.

    References
    ----------
    BroRL Lemma 2 (escape probability); spec §2.7.
    """
    p, n_arr, mask = _expectation_inputs(probs, n, mask)
    terms = p * _miss_probability(p, n_arr)
    if mask is not None:
        terms = terms * mask
    return np.sum(terms, axis=-1)


def expected_unsampled_coupling(probs, correct, n):
    r"""Expected unsampled coupling of the mass balance (term 3 without :math:`S_R`).

    .. math::

        Q_{pos}\,\mathbb{E}[U_{neg,2}] - Q_{neg}\,\mathbb{E}[U_{pos,2}]

    Negative values mean that a positive batch mood (:math:`S_R > 0`) drains
    correct mass through the unsampled actions.

    References
    ----------
    BroRL Theorem 1 term 3 with Corollary 3.
    """
    p = _check_probs(probs)
    pos = _check_mask("correct", correct, p.shape)
    q_pos = np.sum(p * pos, axis=-1)
    e_pos = expected_unsampled_second_moment(p, n, pos)
    e_neg = expected_unsampled_second_moment(p, n, ~pos)
    return q_pos * e_neg - (1.0 - q_pos) * e_pos


class SampledMass(NamedTuple):
    """Expected distinct sampled mass given the number of correct draws."""

    p_pos: np.ndarray
    """:math:`\\mathbb{E}[P_{pos} \\mid X = k]`."""
    p_neg: np.ndarray
    """:math:`\\mathbb{E}[P_{neg} \\mid X = k]`."""


def expected_sampled_mass(probs, correct, n, k) -> SampledMass:
    r"""Expected distinct correct and incorrect mass sampled, given ``X = k``.

    Given :math:`X = k` correct draws out of :math:`N`, the correct draws are
    i.i.d. from :math:`q_{pos} = p / Q_{pos}` on :math:`\mathcal{P}` and the
    incorrect ones from :math:`q_{neg} = p / Q_{neg}` on :math:`\mathcal{N}`:

    .. math::

        \mathbb{E}[P_{pos} \mid X=k] = \sum_{i \in \mathcal{P}} p_i [1 - (1 - q_{pos,i})^k], \quad
        \mathbb{E}[P_{neg} \mid X=k] = \sum_{i \in \mathcal{N}} p_i [1 - (1 - q_{neg,i})^{N-k}]

    Parameters
    ----------
    probs : array_like, shape (..., V)
    correct : array_like of bool
    n, k : array_like of int
        Group size and number of correct draws, ``0 <= k <= n``; broadcast
        against each other and ``probs.shape[:-1]``.

    References
    ----------
    F-GRPO Lemma H.1 (Eqs. 24-25), categorical analogue.
    """
    p = _check_probs(probs)
    pos = _check_mask("correct", correct, p.shape)
    n_arr = check_integer("n", n, 1)
    k_arr = check_integer("k", k, 0)
    n_arr, k_arr = np.broadcast_arrays(n_arr, k_arr)
    check_not_above("k", k_arr, "n", n_arr)
    q_pos = np.sum(p * pos, axis=-1, keepdims=True)
    q_neg = 1.0 - q_pos
    with np.errstate(divide="ignore", invalid="ignore"):
        qp = np.where(pos, p / q_pos, 0.0)
        qn = np.where(~pos, p / q_neg, 0.0)
    kf, rest = k_arr.astype(float)[..., None], (n_arr - k_arr).astype(float)[..., None]
    hit_pos, hit_neg = _hit_probability(qp, kf), _hit_probability(qn, rest)
    return SampledMass(np.sum(p * pos * hit_pos, axis=-1), np.sum(p * ~pos * hit_neg, axis=-1))


def expected_batch_mood(probs, correct, n, k, r_c=1.0, r_w=-1.0):
    r"""Expected batch mood given ``X = k`` correct draws.

    .. math::

        \mathbb{E}[S_R \mid X=k] = R_c\,\mathbb{E}[P_{pos} \mid X=k] + R_w\,\mathbb{E}[P_{neg} \mid X=k]

    Non-decreasing in ``k`` when ``r_c > r_w`` and ``r_w <= 0`` (Corollary H.2).

    References
    ----------
    F-GRPO Corollary H.2 (Eq. 23).
    """
    r_c, r_w = _check_rewards(r_c, r_w)
    m = expected_sampled_mass(probs, correct, n, k)
    return r_c * m.p_pos + r_w * m.p_neg


# ---------------------------------------------------------------------------
# Focal weight and advantages (F-GRPO §4, App. N)
# ---------------------------------------------------------------------------


def focal_weight(mu_hat, gamma):
    r"""Focal weight of a group from its empirical success rate.

    .. math::

        g = (1 - \hat\mu_{pos})^{\gamma}, \qquad 0^0 = 1

    Parameters
    ----------
    mu_hat : array_like
        Empirical success rate ``X / N`` in ``[0, 1]``.
    gamma : array_like
        Focusing exponent, ``gamma >= 0``; 0 recovers the base method.

    References
    ----------
    F-GRPO Eq. 12.
    """
    mu = check_interval("mu_hat", mu_hat, 0.0, 1.0, lo_open=False, hi_open=False)
    g = check_nonnegative("gamma", gamma)
    out = np.power(1.0 - mu, g)
    return out if out.ndim else float(out)


class AdvantageMagnitudes(NamedTuple):
    """Magnitudes of the group-normalised advantages for binary rewards."""

    positive: np.ndarray
    """:math:`|A_+|` of a correct rollout."""
    negative: np.ndarray
    """:math:`|A_-|` of an incorrect rollout."""


def advantage_magnitudes(mu_pos, std: str = "population", n=None) -> AdvantageMagnitudes:
    r"""Group-normalised advantage magnitudes for binary rewards (ε = 0).

    .. math::

        |A_+| = \sqrt{(1-\hat\mu)/\hat\mu}, \qquad |A_-| = \sqrt{\hat\mu/(1-\hat\mu)}

    Bessel's standard deviation multiplies both by :math:`\sqrt{(N-1)/N}`.
    Multiply by :func:`focal_weight` for F-GRPO's :math:`g|A|`.

    Parameters
    ----------
    mu_pos : array_like
        Group success rate in the open interval ``(0, 1)`` (at 0 or 1 every
        advantage is 0 anyway).
    std : {"population", "bessel"}
    n : array_like of int, optional
        Group size, required for ``std="bessel"``.

    References
    ----------
    F-GRPO Eq. 3 and §4.2; spec §2.10.
    """
    mu = check_interval("mu_pos", mu_pos, 0.0, 1.0, lo_open=True, hi_open=True)
    if std == "population":
        scale = 1.0
    elif std == "bessel":
        if n is None:
            raise ValueError("n is required when std='bessel', got n=None")
        nn = check_integer("n", n, 2).astype(float)
        scale = np.sqrt((nn - 1.0) / nn)
    else:
        raise ValueError(f"std must be 'population' or 'bessel', got {std!r}")
    pos = scale * np.sqrt((1.0 - mu) / mu)
    neg = scale * np.sqrt(mu / (1.0 - mu))
    return AdvantageMagnitudes(pos if np.ndim(pos) else float(pos), neg if np.ndim(neg) else float(neg))


def lr_matched_scale(gamma):
    r"""Mean focal-weighted advantage magnitude relative to γ = 0, averaged over μ.

    .. math::

        m_\gamma = \frac{\int_0^1 (1-\mu)^\gamma \sqrt{\mu(1-\mu)}\,d\mu}{\int_0^1 \sqrt{\mu(1-\mu)}\,d\mu}
                 = \frac{B(3/2, \gamma + 3/2)}{B(3/2, 3/2)}
                 = \frac{4}{\sqrt\pi} \frac{\Gamma(\gamma + 3/2)}{\Gamma(\gamma + 3)}

    ``m_0.5 = 0.67906``; the paper's "GRPO low-LR" control uses
    ``6.8e-7 ≈ m_0.5 × 1e-6``.

    References
    ----------
    F-GRPO App. N.
    """
    g = check_nonnegative("gamma", gamma)
    # betaln keeps the ratio accurate for large gamma, where the Gammas overflow
    out = np.exp(special.betaln(1.5, g + 1.5) - special.betaln(1.5, 1.5))
    return out if out.ndim else float(out)


# ---------------------------------------------------------------------------
# pass@k
# ---------------------------------------------------------------------------


_PASS_AT_K_MAX_TERMS = 50_000_000


def _log_binomial_ratio(n, c, k, terms):
    """Sum of ``log1p(-x)`` over the factors of ``C(n-c, k) / C(n, k)``, ``terms`` factors per element."""
    owner = np.repeat(np.arange(n.size), terms)
    j = np.arange(terms.sum()) - np.repeat(np.cumsum(terms) - terms, terms)
    use_c = c <= k  # factors 1 - k/i for i = n-c+1..n; else 1 - c/(n-j) for j = 0..k-1
    i = n[owner] - j
    x = np.where(use_c[owner], k[owner] / i, c[owner] / i)
    sums = np.zeros(n.size)
    np.add.at(sums, owner, np.log1p(-x))
    return sums


def pass_at_k(n, c, k):
    r"""Unbiased pass@k estimate from ``n`` samples of which ``c`` are correct.

    .. math::

        \widehat{\text{pass@}k} = 1 - \binom{n-c}{k} \Big/ \binom{n}{k}
            = 1 - \prod_{i=n-c+1}^{n} \Big(1 - \frac{k}{i}\Big)

    equal to 1 when ``n - c < k``. The product (over ``min(c, k)`` factors) is
    summed as ``log1p`` terms and closed with ``-expm1``, so neither the
    factorials nor ``1 - ratio`` lose digits; only beyond 5e7 factors in one
    call does it fall back to ``betaln`` (about 1e-11 absolute error). Average
    the result over problems for a benchmark score.

    Parameters
    ----------
    n, c, k : array_like of int
        ``0 <= c <= n`` and ``1 <= k <= n``; broadcast together.

    References
    ----------
    Chen et al. 2021 (pass@k); F-GRPO App. L.4, Eq. 27.
    """
    n_arr = check_integer("n", n, 1)
    c_arr = check_integer("c", c, 0)
    k_arr = check_integer("k", k, 1)
    n_arr, c_arr, k_arr = np.broadcast_arrays(n_arr, c_arr, k_arr)
    check_not_above("c", c_arr, "n", n_arr)
    check_not_above("k", k_arr, "n", n_arr)
    shape = n_arr.shape
    nf, cf, kf = (a.astype(np.float64).ravel() for a in (n_arr, c_arr, k_arr))
    certain = nf - cf < kf
    log_ratio = np.zeros(nf.size)
    todo = np.flatnonzero(~certain & (cf > 0))
    # C(n-c, k) / C(n, k) = prod_{j<k} (1 - c/(n-j)) = prod_{i=n-c+1}^{n} (1 - k/i): take the shorter product
    terms = np.minimum(cf[todo], kf[todo]).astype(np.int64)
    if terms.sum() <= _PASS_AT_K_MAX_TERMS:
        log_ratio[todo] = _log_binomial_ratio(nf[todo], cf[todo], kf[todo], terms)
    else:  # astronomically long products: betaln, accurate to ~1e-11 absolute
        t = todo
        log_ratio[t] = (
            special.betaln(kf[t] + 1.0, nf[t] - kf[t] + 1.0)
            - special.betaln(kf[t] + 1.0, nf[t] - cf[t] - kf[t] + 1.0)
            - np.log1p(-cf[t] / (nf[t] + 1.0))
        )
    out = np.where(certain, 1.0, -np.expm1(log_ratio)).reshape(shape)
    out = np.clip(out, 0.0, 1.0) + 0.0  # + 0.0 turns -0.0 into 0.0
    return out if out.ndim else float(out)


def pass_at_k_from_mass(q_pos, k):
    r"""pass@k of a policy whose correct mass on the prompt is ``q_pos``.

    .. math::

        \text{pass@}k = 1 - (1 - Q_{pos})^k

    References
    ----------
    BroRL §3 (pass@k link); spec §2.9.
    """
    q = check_interval("q_pos", q_pos, 0.0, 1.0, lo_open=False, hi_open=False)
    k_arr = check_integer("k", k, 1).astype(np.float64)
    with np.errstate(divide="ignore"):
        out = -np.expm1(k_arr * np.log1p(-q))  # 1 - (1-q)^k for tiny q and huge k
    return out if np.ndim(out) else float(out)


# ---------------------------------------------------------------------------
# The simulation's initial categorical distribution (F-GRPO App. J)
# ---------------------------------------------------------------------------


class InitialDistribution(NamedTuple):
    """A categorical policy over ``V`` actions with its correct mask."""

    probs: np.ndarray
    correct: np.ndarray
    anchor: int | None
    """Index of the anchor action (seeded init) or ``None``."""

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
    return InitialDistribution(probs, correct, anchor)
