"""Focal weight, advantage magnitudes and the LR-matched scale (F-GRPO §4, App. N)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import special

from tailmiss._checks import check_integer, check_interval, check_nonnegative


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
    F-GRPO Eq. 3 and §4.2.
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
