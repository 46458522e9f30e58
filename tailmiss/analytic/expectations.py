"""Expectations over the N draws (BroRL Lemma 2 / Cor. 3, F-GRPO Lemma H.1 / Cor. H.2)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tailmiss._checks import broadcast_shapes_named, check_integer, check_not_above
from tailmiss.analytic._inputs import BATCH, batch_shape, check_mask, check_probs, check_rewards


def _hit_probability(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``1 - (1 - q)^k`` in log space (k up to 1e6, q tiny); exact 0 for k = 0 and 1 for q = 1, k > 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = -np.expm1(k * np.log1p(-np.minimum(q, 1.0)))
    return np.where(k == 0, 0.0, out)


def _miss_probability(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    return 1.0 - _hit_probability(p, n[..., None])


def _expectation_inputs(probs, n, mask):
    p = check_probs(probs)
    n_arr = check_integer("n", n, 0).astype(np.float64)
    if mask is not None:
        mask = check_mask("mask", mask, p.shape)
    batch = batch_shape(p, *(() if mask is None else (("mask", mask),)))
    broadcast_shapes_named((BATCH, batch), ("n", n_arr.shape))
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
        Number of i.i.d. draws, whole numbers in ``[0, 2**53)``; broadcast
        against ``probs.shape[:-1]``.
    mask : array_like of bool, optional
        Restricts the sum; broadcast against ``probs``.

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
    BroRL Lemma 2 (escape probability).
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
    p = check_probs(probs)
    pos = check_mask("correct", correct, p.shape)
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
        Group size and number of correct draws, ``0 <= k <= n`` and
        ``1 <= n < 2**53``; broadcast against each other and
        ``probs.shape[:-1]``.

    Returns
    -------
    SampledMass
        A class without mass (:math:`Q_{pos} = 0` or :math:`Q_{neg} = 0`) has
        nothing to sample and contributes 0.

    References
    ----------
    F-GRPO Lemma H.1 (Eqs. 24-25), categorical analogue.
    """
    p = check_probs(probs)
    pos = check_mask("correct", correct, p.shape)
    n_arr = check_integer("n", n, 1)
    k_arr = check_integer("k", k, 0)
    broadcast_shapes_named((BATCH, batch_shape(p, ("correct", pos))), ("n", n_arr.shape), ("k", k_arr.shape))
    n_arr, k_arr = np.broadcast_arrays(n_arr, k_arr)
    check_not_above("k", k_arr, "n", n_arr)
    # each class mass summed on its own: 1 - q_pos could be ~1e-6 off (probs sum to 1 within 1e-6) or negative
    q_pos = np.sum(p * pos, axis=-1, keepdims=True)
    q_neg = np.sum(p * ~pos, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        # a class without mass is never sampled: its conditional draw distribution is taken as 0, not 0/0
        qp = np.where(pos & (q_pos > 0.0), p / q_pos, 0.0)
        qn = np.where(~pos & (q_neg > 0.0), p / q_neg, 0.0)
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
    m = expected_sampled_mass(probs, correct, n, k)
    r_c, r_w = check_rewards(r_c, r_w, ("the batch of probs, n and k", m.p_pos.shape))
    return r_c * m.p_pos + r_w * m.p_neg
