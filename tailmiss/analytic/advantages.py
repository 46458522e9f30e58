"""Focal weight, advantage magnitudes and the LR-matched scale (F-GRPO §4, App. N)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import special

from tailmiss._checks import broadcast_named, check_choice, check_integer, check_interval, check_nonnegative


def focal_weight(mu_hat, gamma):
    r"""Focal weight of a group from its empirical success rate.

    .. math::

        g = (1 - \hat\mu_{pos})^{\gamma}, \qquad 0^0 = 1

    Parameters
    ----------
    mu_hat : array_like
        Empirical success rate ``X / N`` in ``[0, 1]``.
    gamma : array_like
        Focusing exponent, finite and ``>= 0``; 0 recovers the base method.
        Broadcast against ``mu_hat``.

    References
    ----------
    F-GRPO Eq. 12.
    """
    mu = check_interval("mu_hat", mu_hat, 0.0, 1.0, lo_open=False, hi_open=False)
    g = check_nonnegative("gamma", gamma)
    mu, g = broadcast_named(("mu_hat", mu), ("gamma", g))
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
        Group size, a whole number in ``[2, 2**53)``; required for
        ``std="bessel"``. It is validated and broadcast against ``mu_pos``
        in both modes, so the result has their broadcast shape.

    References
    ----------
    F-GRPO Eq. 3 and §4.2.
    """
    mu = check_interval("mu_pos", mu_pos, 0.0, 1.0, lo_open=True, hi_open=True)
    std = check_choice("std", std, ("population", "bessel"))
    if n is None:
        if std == "bessel":
            raise ValueError("n is required when std='bessel', got n=None")
        scale = 1.0
    else:
        nn = check_integer("n", n, 2).astype(np.float64)
        mu, nn = broadcast_named(("mu_pos", mu), ("n", nn))
        scale = np.sqrt((nn - 1.0) / nn) if std == "bessel" else np.ones(nn.shape)
    root_mu, root_rest = np.sqrt(mu), np.sqrt(1.0 - mu)  # ratios of roots: (1 - mu) / mu overflows for tiny mu
    pos = scale * (root_rest / root_mu)
    neg = scale * (root_mu / root_rest)
    return AdvantageMagnitudes(pos if np.ndim(pos) else float(pos), neg if np.ndim(neg) else float(neg))


def lr_matched_scale(gamma):
    r"""Mean focal-weighted advantage magnitude relative to γ = 0, averaged over μ.

    .. math::

        m_\gamma = \frac{\int_0^1 (1-\mu)^\gamma \sqrt{\mu(1-\mu)}\,d\mu}{\int_0^1 \sqrt{\mu(1-\mu)}\,d\mu}
                 = \frac{B(3/2, \gamma + 3/2)}{B(3/2, 3/2)}
                 = \frac{4}{\sqrt\pi} \frac{\Gamma(\gamma + 3/2)}{\Gamma(\gamma + 3)}

    ``m_0.5 = 0.67906``; the paper's "GRPO low-LR" control uses
    ``6.8e-7 ≈ m_0.5 × 1e-6``.

    Parameters
    ----------
    gamma : array_like
        Focusing exponent, finite and ``>= 0`` (the limit 0 at ``inf`` is not
        a value). Large ``gamma`` underflows gracefully to 0.

    References
    ----------
    F-GRPO App. N.
    """
    g = check_nonnegative("gamma", gamma)
    # betaln keeps the ratio accurate for large gamma, where the Gammas overflow
    out = np.exp(special.betaln(1.5, g + 1.5) - special.betaln(1.5, 1.5))
    return out if out.ndim else float(out)
