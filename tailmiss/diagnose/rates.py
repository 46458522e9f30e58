r"""The prompts' success rates behind a run's groups, and what a group of any size would do under them.

A group of :math:`N` rollouts of a prompt whose success rate is :math:`\mu` has
:math:`X \sim \mathrm{Binomial}(N, \mu)` correct rollouts. Across prompts :math:`\mu` varies; its
distribution is taken as :math:`\mathrm{Beta}(a, b)` and fitted to a run's groups :math:`(N_g, X_g)` by
maximum likelihood of the beta-binomial model (:func:`fit_rates`). The plug-in :math:`\hat\mu = X/N` is
not used for predictions at another :math:`N`: it puts every all-correct group at :math:`\mu = 1`, which
would then never be active at any group size, while the fit separates the prompts' spread from the
binomial noise of :math:`N` draws.

Under the fit, :math:`X` at group size :math:`N` is beta-binomial,

.. math::

    \Pr(X = x) = \binom{N}{x} \frac{B(a + x,\, b + N - x)}{B(a, b)},

and with the rare-correct set :math:`E` holding a share :math:`\rho` of each prompt's correct mass
(:math:`\tau = \rho\mu`) every correct draw misses :math:`E` with probability :math:`1-\rho`, so that
F-GRPO Lemma 3.1 averaged over prompts is the finite sum

.. math::

    \mathbb{E}_\mu\big[(1-\tau)^N - (\mu-\tau)^N - (1-\mu)^N\big]
    = \sum_{x=1}^{N-1} \Pr(X = x)\,(1-\rho)^x .

:func:`spend_outcomes` evaluates this and its weighted forms (focal weight, F-GRPO Eq. 12; drift size,
Prop. 3.2 with Cor. H.2) exactly, for any :math:`N`, in log space.

Predictions at a group size other than the run's extrapolate the fitted distribution: groups of
:math:`N` draws identify only its first :math:`N` moments, so the Beta form decides the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = [
    "RateFit",
    "fit_rates",
    "outcome_pmf",
    "SpendOutcome",
    "spend_outcomes",
    "plug_in_risk",
    "wilson_interval",
    "infer_gamma",
    "RISK_LEVEL",
    "SHARE_LEVEL",
]

RISK_LEVEL = 0.25
"""A solved group is *at risk* when its Lemma 3.1 probability (at its own :math:`\\hat\\mu` and :math:`N`) is at
least this: one in four updates of that prompt would be active yet miss its rare-correct set."""
SHARE_LEVEL = 0.5
"""A run (or phase, or predicted spend) is *in the tail-miss regime* when at least this share of its solved groups
(:math:`X > 0`) is at risk."""

_LOG_BOUNDS = (np.log(1e-3), np.log(1e6))
"""Search range of :math:`\\log a` and :math:`\\log b` (a fit tending to a limit: :attr:`RateFit.at_bound`)."""


def _special():
    # scipy on first use: the CLI refuses a bad log before paying for its import
    from scipy import optimize, special

    return special, optimize


@dataclass(frozen=True)
class RateFit:
    r"""Beta(:math:`a`, :math:`b`) distribution of the prompts' success rates, fitted to a run's groups.

    ``groups`` is how many groups it was fitted to; ``at_bound`` is True when the likelihood is maximised only in a
    limit: :math:`a` or :math:`b` below :math:`10^{-2}` (a point mass at 0 or 1, as when every group is
    all-correct) or :math:`a + b` above :math:`10^4` (no spread across prompts beyond the binomial noise). The
    numbers are then that limit's, approached as far as the search range (:math:`10^{-3}` to :math:`10^6`) goes.
    """

    a: float
    b: float
    groups: int
    log_likelihood: float
    at_bound: bool

    @property
    def mean(self) -> float:
        """The prompts' mean success rate :math:`a / (a + b)`."""
        return self.a / (self.a + self.b)

    def quantiles(self, count: int) -> np.ndarray:
        """``count`` success rates at the midpoints of equal-probability slices of the fitted distribution."""
        special, _ = _special()
        probs = (np.arange(count) + 0.5) / count
        return np.clip(special.betaincinv(self.a, self.b, probs), 1e-6, 1 - 1e-6)


def fit_rates(n, x) -> RateFit:
    r"""Maximum-likelihood Beta(:math:`a`, :math:`b`) of the prompts' success rates from groups :math:`(N_g, X_g)`.

    Maximises the beta-binomial log-likelihood

    .. math::

        \ell(a, b) = \sum_g \log B(a + X_g,\, b + N_g - X_g) - \log B(a, b) \quad (+\ \text{const})

    over :math:`\log a, \log b \in [\log 10^{-3}, \log 10^{6}]` (L-BFGS-B with the exact gradient), the groups
    pooled by their distinct :math:`(N, X)` so that a run of millions of groups costs what a few hundred do.

    Parameters
    ----------
    n, x : array_like of int
        Group sizes :math:`N_g \ge 1` and correct counts :math:`0 \le X_g \le N_g`.

    Returns
    -------
    RateFit

    Raises
    ------
    ValueError
        No group, a size below 1, a count outside :math:`[0, N]`, or only groups of one rollout (their
        outcomes say nothing of the spread of :math:`\mu` across prompts).
    """
    n = np.asarray(n, np.int64).ravel()
    x = np.asarray(x, np.int64).ravel()
    if n.size == 0 or n.shape != x.shape:
        raise ValueError(f"need one correct count per group, got {x.size} counts for {n.size} groups")
    if (n < 1).any() or (x < 0).any() or (x > n).any():
        raise ValueError("group sizes must be >= 1 and correct counts within [0, N]")
    if (n == 1).all():
        raise ValueError("every group holds one rollout: the spread of success rates across prompts is not identified")
    pairs, counts = np.unique(np.stack([n, x], axis=1), axis=0, return_counts=True)
    gn, gx, w = pairs[:, 0].astype(np.float64), pairs[:, 1].astype(np.float64), counts.astype(np.float64)
    special, optimize = _special()

    def loss(theta):
        a, b = np.exp(theta)
        ll = w @ (special.betaln(gx + a, gn - gx + b) - special.betaln(a, b))
        common = special.digamma(gn + a + b) - special.digamma(a + b)
        da = w @ (special.digamma(gx + a) - special.digamma(a) - common)
        db = w @ (special.digamma(gn - gx + b) - special.digamma(b) - common)
        return -ll / w.sum(), -np.array([da * a, db * b]) / w.sum()

    mean = float(np.clip((w @ gx) / (w @ gn), 0.02, 0.98))
    best = None
    for spread in (2.0, 20.0):  # two starts: a U-shaped and a concentrated distribution
        start = np.log([mean * spread, (1 - mean) * spread])
        res = optimize.minimize(loss, start, jac=True, method="L-BFGS-B", bounds=[_LOG_BOUNDS] * 2)
        if best is None or res.fun < best.fun:
            best = res
    a, b = np.exp(best.x)
    at_bound = bool(min(a, b) < 1e-2 or a + b > 1e4)
    return RateFit(float(a), float(b), int(n.size), float(-best.fun * w.sum()), at_bound)


def outcome_pmf(fit: RateFit, n: int) -> np.ndarray:
    r"""Beta-binomial :math:`\Pr(X = x)`, :math:`x = 0 \dots N`, of a group of ``n`` rollouts under ``fit``."""
    special, _ = _special()
    xs = np.arange(n + 1, dtype=np.float64)
    log_choose = special.gammaln(n + 1.0) - special.gammaln(xs + 1.0) - special.gammaln(n - xs + 1.0)
    log_p = log_choose + special.betaln(fit.a + xs, fit.b + n - xs) - special.betaln(fit.a, fit.b)
    p = np.exp(log_p - log_p.max())
    return p / p.sum()  # sums to 1 up to rounding; renormalised so shares are exact fractions


@dataclass(frozen=True)
class SpendOutcome:
    r"""What one group of :math:`N` rollouts does on average under a :class:`RateFit`, for one :math:`\rho, \gamma`.

    Every value is an expectation over prompts and draws, per group:

    * ``active``: :math:`\Pr(0 < X < N)` (F-GRPO Eq. 7);
    * ``risk``: Lemma 3.1, :math:`\Pr(0 < X < N,\ E \text{ missed}) = \sum_{0<x<N} \Pr(x)(1-\rho)^x`;
    * ``share_at_risk``: among groups with :math:`X > 0`, the share whose plug-in Lemma 3.1 probability at
      :math:`(\hat\mu, \rho\hat\mu, N)` is at least :data:`RISK_LEVEL` (the rule that judges a logged run);
    * ``signal``: the focal-weighted active groups :math:`\mathbb{E}[g\,1\{0<X<N\}]`, :math:`g = (1-X/N)^\gamma`
      (Eq. 12): how much of an update one group carries, in units of one active GRPO group;
    * ``drift``: :math:`\mathbb{E}[g\,(X/N)\,1\{0<X<N,\ E \text{ missed}\}]`: the direct drift away from a missed
      rare set, :math:`-S_R U_{pos,2}` of Prop. 3.2, with :math:`S_R` proxied by :math:`X/N` (Cor. H.2) and the
      group's update scaled by :math:`g` (Eq. 13).
    """

    group_size: int
    rho: float
    gamma: float
    active: float
    risk: float
    share_at_risk: float
    signal: float
    drift: float

    @property
    def miss_share(self) -> float:
        """The share of active groups that miss the rare set, ``risk / active`` (0 when no group is active)."""
        return self.risk / self.active if self.active > 0 else 0.0

    @property
    def in_regime(self) -> bool:
        """At least :data:`SHARE_LEVEL` of the solved groups at risk."""
        return self.share_at_risk >= SHARE_LEVEL


def plug_in_risk(x, n, rho: float) -> np.ndarray:
    r"""Lemma 3.1 at a group's own :math:`(\hat\mu, \rho\hat\mu, N)`, :math:`\hat\mu = X/N`; 0 where :math:`X = 0`.

    Equals :math:`\sum_{0<k<N} \binom{N}{k}\hat\mu^k(1-\hat\mu)^{N-k}(1-\rho)^k`.
    """
    from tailmiss import analytic

    x = np.asarray(x, np.float64)
    n = np.broadcast_to(np.asarray(n, np.float64), x.shape)
    out = np.zeros(x.shape)
    solved = x > 0
    mu = x[solved] / n[solved]
    out[solved] = analytic.tail_miss_probability(mu, rho * mu, n[solved].astype(np.int64))
    return out


def spend_outcomes(fit: RateFit, n: int, rho: float, gammas) -> list[SpendOutcome]:
    r"""One :class:`SpendOutcome` per :math:`\gamma` for groups of ``n`` rollouts under ``fit`` (exact sums).

    References
    ----------
    F-GRPO Lemma 3.1 (Eq. 8), Eqs. 7, 12-13, Prop. 3.2 and Cor. H.2.
    """
    pmf = outcome_pmf(fit, n)
    xs = np.arange(n + 1)
    mixed = (xs > 0) & (xs < n)
    miss = np.where(mixed, (1.0 - rho) ** xs, 0.0)
    solved = pmf[1:].sum()
    at_risk = plug_in_risk(xs, n, rho) >= RISK_LEVEL
    share = float(pmf[at_risk].sum() / solved) if solved > 0 else 0.0
    out = []
    for gamma in gammas:
        g = np.where(mixed, (1.0 - xs / n) ** gamma, 0.0)
        out.append(
            SpendOutcome(
                group_size=int(n),
                rho=float(rho),
                gamma=float(gamma),
                active=float(pmf[mixed].sum()),
                risk=float(pmf @ miss),
                share_at_risk=share,
                signal=float(pmf @ g),
                drift=float(pmf @ (g * miss * xs / n)),
            )
        )
    return out


def wilson_interval(hits: int, total: int, z: float = 1.959963984540054) -> tuple[float, float]:
    r"""95 % Wilson score interval of a binomial share ``hits / total`` (``z``: the normal quantile).

    .. math::

        \frac{\hat p + z^2/2n \pm z\sqrt{\hat p(1-\hat p)/n + z^2/4n^2}}{1 + z^2/n}
    """
    if total <= 0:
        raise ValueError(f"total must be >= 1, got {total}")
    p = hits / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * np.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def infer_gamma(frame: pd.DataFrame, groups: pd.DataFrame) -> float | None:
    r"""The run's focal :math:`\gamma` from a log's ``focal_weight`` column, or None without one.

    Each active group (:math:`0 < X < N`) whose logged weight :math:`g` lies in (0, 1] gives
    :math:`\gamma = \log g / \log(1 - \hat\mu)` (F-GRPO Eq. 12, :math:`g = (1-\hat\mu)^\gamma`); the median over
    groups, rounded to 6 decimals, is returned (0 when every active group's weight is 1: a GRPO run).
    """
    if "focal_weight" not in frame.columns:
        return None
    weight = frame.groupby(["step", "prompt_id"], observed=True)["focal_weight"].mean()
    keyed = groups.set_index(["step", "prompt_id"])
    weight = weight.reindex(keyed.index).to_numpy(np.float64)
    mu = (keyed["x"] / keyed["n"]).to_numpy(np.float64)
    usable = (mu > 0) & (mu < 1) & (weight > 0) & (weight <= 1)
    if not usable.any():
        return None
    return round(float(np.median(np.log(weight[usable]) / np.log1p(-mu[usable]))), 6) + 0.0
