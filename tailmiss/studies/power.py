r"""Power of the noise rule's paired tests, and the seeds a comparison needs: the arithmetic behind a seed count
fixed before the runs it judges.

For :math:`n` seeds paired across two arms, the per-seed differences :math:`d_s` are taken as independent normal
draws with mean :math:`\mu` and sd :math:`\sigma`. Their mean :math:`\bar d \sim N(\mu, \sigma^2/n)` and their sd
:math:`s`, with :math:`(n-1)s^2/\sigma^2 \sim \chi^2_{n-1}`, are independent, so the chance that a test deciding on
:math:`(\bar d, s)` rejects is one integral over :math:`s`:

.. math::

    P(\text{reject}) = \int_0^\infty P\big(\bar d \in R(s)\big)\, f_{s}(s)\, ds ,

:math:`R(s)` the values of the mean the test rejects with at sd :math:`s`, and :math:`c = t_{1-\alpha,\,n-1}/\sqrt n`
(:math:`t_{1-\alpha/2}` for a two-sided test).

* **Equivalence** (:func:`tost_power`, Schuirmann's two one-sided tests at the bound :math:`\pm\Delta`, each at
  :math:`\alpha`): :math:`R(s) = (-\Delta + c s,\ \Delta - c s)`, empty once :math:`c s \ge \Delta`.
* **A resolved difference** (:func:`resolve_power`, the noise rule's two-sided paired t-test at :math:`\alpha` with
  its practical threshold :math:`\delta`; :mod:`tailmiss.studies.rule`): in the direction of :math:`\mu`,
  :math:`R(s) = \{\bar d : |\bar d| > \max(\delta, c s),\ \operatorname{sign} \bar d = \operatorname{sign} \mu\}`.

Both are exact under the normal model (no large-sample step), which the Monte Carlo tests check.

References
----------
D. J. Schuirmann (1987), "A comparison of the two one-sided tests procedure and the power approach for assessing the
equivalence of average bioavailability", *J. Pharmacokinet. Biopharm.* 15:657-680. J. Cohen (1988), *Statistical
Power Analysis for the Behavioral Sciences*, 2nd ed., ch. 2 (the power of the t-test).
"""

from __future__ import annotations

import math

from scipy import integrate, stats

from tailmiss.studies.comparison import ALPHA, MIN_SEEDS

__all__ = ["tost_power", "resolve_power", "seeds_for_power"]


def _check(n: int, sd: float) -> None:
    if not (isinstance(n, int) or hasattr(n, "__index__")) or int(n) < 2:
        raise ValueError(f"power needs at least 2 paired seeds, got n={n!r}")
    if not (math.isfinite(sd) and sd >= 0):
        raise ValueError(f"the paired sd must be finite and non-negative, got sd={sd!r}")


def _over_sd(n: int, sd: float, chance_at) -> float:
    """:math:`\\int P(\\bar d \\in R(s)) f_s(s) ds` with ``chance_at(s)`` the inner probability, by quadrature over
    :math:`x = (n-1)s^2/\\sigma^2 \\sim \\chi^2_{n-1}`."""
    df = n - 1
    dist = stats.chi2(df)
    lo, hi = dist.ppf(1e-12), dist.ppf(1 - 1e-12)
    value, _ = integrate.quad(lambda x: chance_at(sd * math.sqrt(x / df)) * dist.pdf(x), lo, hi, limit=200)
    return float(min(max(value, 0.0), 1.0))


def tost_power(n: int, sd: float, bound: float, alpha: float = ALPHA, true_diff: float = 0.0) -> float:
    r"""The chance that the paired two one-sided tests show two arms equivalent within :math:`\pm` ``bound``.

    .. math::

        \mathrm{power} = \int_0^{\Delta/c} \Big[\Phi\Big(\frac{\Delta - c s - \mu}{\sigma/\sqrt n}\Big)
        - \Phi\Big(\frac{-\Delta + c s - \mu}{\sigma/\sqrt n}\Big)\Big] f_s(s)\, ds,
        \qquad c = \frac{t_{1-\alpha,\,n-1}}{\sqrt n}

    (module docstring; Schuirmann 1987).

    Parameters
    ----------
    n : int
        Paired seeds (at least 2).
    sd : float
        :math:`\sigma`, the sd of the per-seed differences.
    bound : float
        :math:`\Delta > 0`, the equivalence bound.
    alpha : float
        Level of each one-sided test.
    true_diff : float
        :math:`\mu`, the true mean difference.
    """
    _check(n, sd)
    if not bound > 0:
        raise ValueError(f"the equivalence bound must be positive, got bound={bound!r}")
    c = stats.t.ppf(1 - alpha, n - 1) / math.sqrt(n)
    if sd == 0:
        return float(abs(true_diff) < bound)
    se = sd / math.sqrt(n)

    def inside(s: float) -> float:
        half = bound - c * s
        if half <= 0:
            return 0.0
        return float(stats.norm.cdf((half - true_diff) / se) - stats.norm.cdf((-half - true_diff) / se))

    return _over_sd(n, sd, inside)


def resolve_power(n: int, sd: float, true_diff: float, alpha: float = ALPHA, threshold: float = 0.0) -> float:
    r"""The chance that the noise rule resolves a true paired difference ``true_diff`` in its direction: the
    two-sided paired t-test rejects at ``alpha`` and the mean lies beyond the practical ``threshold`` on that side.

    .. math::

        \mathrm{power} = \int_0^\infty \Phi\Big(\frac{|\mu| - \max(\delta, c s)}{\sigma/\sqrt n}\Big)
        f_s(s)\, ds, \qquad c = \frac{t_{1-\alpha/2,\,n-1}}{\sqrt n}

    (module docstring; Cohen 1988, ch. 2, with the threshold).

    Parameters
    ----------
    n : int
        Paired seeds (at least 2).
    sd : float
        :math:`\sigma`, the sd of the per-seed differences.
    true_diff : float
        :math:`\mu`, the true mean difference (its sign is the direction to resolve).
    alpha : float
        Two-sided level of the t-test.
    threshold : float
        :math:`\delta \ge 0`, the practical threshold the mean must pass.
    """
    _check(n, sd)
    if not threshold >= 0:
        raise ValueError(f"the practical threshold must be non-negative, got threshold={threshold!r}")
    mu = abs(float(true_diff))
    if sd == 0:
        return float(mu > threshold)
    c = stats.t.ppf(1 - alpha / 2, n - 1) / math.sqrt(n)
    se = sd / math.sqrt(n)
    return _over_sd(n, sd, lambda s: float(stats.norm.cdf((mu - max(threshold, c * s)) / se)))


def seeds_for_power(power_at, target: float, first: int = MIN_SEEDS, most: int = 100) -> int | None:
    """The fewest seeds ``n`` in ``first..most`` with ``power_at(n) >= target``, or None when even ``most`` falls
    short (both tests' powers rise with ``n``, so the first such ``n`` is the answer)."""
    if not 0 < target < 1:
        raise ValueError(f"the target power must lie in (0, 1), got target={target!r}")
    if not 2 <= first <= most:
        raise ValueError(f"seeds to try must satisfy 2 <= first <= most, got first={first!r}, most={most!r}")
    return next((n for n in range(first, most + 1) if power_at(n) >= target), None)
