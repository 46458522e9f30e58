"""Scientific tests of :mod:`tailmiss.analytic`.

Each closed form is checked three ways where possible:

- against the reference numbers of the spec (``paper.md`` §3, our own float64 computations, rtol 1e-3);
- against an independent exact evaluation (``fractions.Fraction``, 120-digit ``decimal``, ``math.comb``);
- against Monte Carlo of the underlying sampling model, with a tolerance of 5 binomial/sample standard
  errors, so a wrong formula fails while sampling noise (false-alarm rate below 1e-6 per check) does not.

Every comparison states its tolerance explicitly.
"""

from __future__ import annotations

import decimal
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy import integrate, special

from tailmiss import analytic as an

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)
N_SE = 5.0  # Monte-Carlo tolerance in standard errors


def assert_spec(got, printed: str, rtol: float = 1e-3) -> None:
    """``got`` matches a spec value to rtol, or to half a unit of the spec's last printed digit.

    The spec prints e.g. ``0.0038`` or ``2.60e-4``; such a value is only known to +-5e-5 or +-5e-7, which is
    looser than rtol 1e-3, so the printed precision decides in that case.
    """
    ref = float(printed)
    half_unit = 0.5 * 10.0 ** decimal.Decimal(printed).as_tuple().exponent
    tol = max(rtol * abs(ref), half_unit)
    assert abs(float(got) - ref) <= tol, f"got {float(got)!r}, spec {printed} (tolerance {tol:.3g})"


def assert_mc(
    samples: np.ndarray, exact: float, bounds: tuple[float, float], extra_atol: float = 0.0, what: str = ""
) -> None:
    """Mean of i.i.d. ``samples`` (each within ``bounds``) agrees with ``exact`` within N_SE standard errors.

    The variance is the larger of the sample variance and the Bhatia-Davis bound
    ``(hi - exact) (exact - lo)``, so a rare event that never shows up in the sample (sample variance 0)
    still gets an honest tolerance.
    """
    lo, hi = bounds
    assert np.all((samples >= lo - 1e-15) & (samples <= hi + 1e-15))
    m = samples.size
    var = max(samples.var(ddof=1), max(0.0, (hi - exact) * (exact - lo)))
    tol = N_SE * math.sqrt(var / m) + extra_atol + 1e-12
    assert abs(samples.mean() - exact) <= tol, f"{what}: MC {samples.mean()!r} vs exact {exact!r} (tol {tol:.3g})"


def random_policy(rng: np.random.Generator, v: int, min_per_class: int = 1, scale: float = 2.0):
    """Softmax of random logits, with a random correct mask holding >= min_per_class actions of each kind."""
    p = special.softmax(rng.normal(scale=scale, size=v))
    correct = np.zeros(v, dtype=bool)
    correct[:min_per_class] = True
    rest = np.arange(2 * min_per_class, v)
    correct[rest] = rng.random(rest.size) < 0.5
    return p, rng.permutation(correct)


# ---------------------------------------------------------------------------
# Exact references for Lemma 3.1
# ---------------------------------------------------------------------------

_DEC = decimal.Context(prec=120, Emin=decimal.MIN_EMIN, Emax=decimal.MAX_EMAX)


def decimal_tail_miss(mu: float, tau: float, n: int) -> float:
    """Lemma 3.1 evaluated literally, ``(1-tau)^N - (mu-tau)^N - (1-mu)^N``, with 120 significant digits.

    Why this reference: in float64 the literal formula cancels catastrophically (at N = 2, mu = 1e-12 the
    three terms are ~1 and the result ~2e-12), and asymptotics such as ``(1-tau)^N (1 - mu^N - (1-mu)^N)``
    are only approximations (their error ~N*tau is far above the 1e-12 we want to resolve). The float
    inputs convert to Decimal exactly, integer powers are exact up to rounding at 120 digits (binary
    exponentiation, ~24 squarings for N = 1e7), and the unbounded exponent range avoids underflow. The
    cancellation costs at most ~30 of the 120 digits for the inputs used below, so the result is exact to
    double precision.
    """
    m, t = decimal.Decimal(mu), decimal.Decimal(tau)
    one = decimal.Decimal(1)
    with decimal.localcontext(_DEC):
        out = (one - t) ** n - (m - t) ** n - (one - m) ** n
    return float(out)


def decimal_active(mu: float, n: int) -> float:
    m, one = decimal.Decimal(mu), decimal.Decimal(1)
    with decimal.localcontext(_DEC):
        out = one - m**n - (one - m) ** n
    return float(out)


def fraction_tail_miss(mu: float, tau: float, n: int) -> Fraction:
    """Lemma 3.1 in exact rational arithmetic on the float inputs."""
    m, t = Fraction(mu), Fraction(tau)
    return (1 - t) ** n - (m - t) ** n - (1 - m) ** n


def positive_term_tail_miss(mu: float, tau: float, n: int) -> float:
    """Positive-term expansion sum_{k=1}^{N-1} C(N,k) (1-mu)^k (mu-tau)^(N-k), each term in log space.

    Expanding (1-tau)^N = ((mu-tau) + (1-mu))^N and dropping k = 0 and k = N leaves only positive terms,
    so the float sum has no cancellation (relative error ~ N * eps).
    """
    if n == 1:
        return 0.0
    la, lb = math.log(1.0 - mu), math.log(mu - tau)
    lc = math.lgamma(n + 1)
    return math.fsum(
        math.exp(lc - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * la + (n - k) * lb) for k in range(1, n)
    )


# ---------------------------------------------------------------------------
# Lemma 3.1 and active probability
# ---------------------------------------------------------------------------


@given(
    mu=st.floats(0.02, 0.98),
    rho=st.floats(0.005, 0.95),
    n=st.integers(1, 64),
    seed=SEEDS,
)
def test_lemma31_and_active_probability_monte_carlo(mu, rho, n, seed):
    """Three-region multinomial model: event = active group (0 < X < N) with no draw in E."""
    tau = rho * mu
    m = 20_000
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, [tau, mu - tau, 1.0 - mu], size=m)
    x = counts[:, 0] + counts[:, 1]
    active = (x > 0) & (x < n)
    miss = active & (counts[:, 0] == 0)
    for event, exact in ((miss, an.tail_miss_probability(mu, tau, n)), (active, an.active_probability(mu, n))):
        se = math.sqrt(exact * (1.0 - exact) / m)
        assert abs(event.mean() - exact) <= N_SE * se + 1e-3, (event.mean(), exact)


@given(
    mu=st.floats(1e-3, 1.0),
    rho=st.floats(1e-6, 0.999),
    n=st.integers(1, 64),
)
def test_lemma31_matches_exact_fraction(mu, rho, n):
    tau = rho * mu
    assume(0.0 < tau < mu)
    exact = fraction_tail_miss(mu, tau, n)
    got = an.tail_miss_probability(mu, tau, n)
    assert got == pytest.approx(float(exact), rel=1e-10, abs=1e-300)


@given(
    mu=st.floats(1e-3, 0.999),
    rho=st.floats(1e-6, 0.999),
    n=st.integers(1, 300),
)
def test_lemma31_matches_positive_term_expansion(mu, rho, n):
    tau = rho * mu
    assume(0.0 < tau < mu < 1.0)
    ref = positive_term_tail_miss(mu, tau, n)
    assert an.tail_miss_probability(mu, tau, n) == pytest.approx(ref, rel=1e-10, abs=1e-300)


@st.composite
def extreme_lemma31_inputs(draw):
    """mu from 1e-12 to 1 - 1e-12 (log-spaced at both ends), rho down to 1e-15, N log-uniform up to 1e7."""
    if draw(st.booleans()):
        mu = 10.0 ** draw(st.floats(-12.0, 0.0, exclude_max=True))
    else:
        mu = 1.0 - 10.0 ** draw(st.floats(-12.0, -0.3))
    rho = 10.0 ** draw(st.floats(-15.0, -1e-4))
    n = int(round(10.0 ** draw(st.floats(0.0, 7.0))))
    return mu, rho * mu, n


@given(extreme_lemma31_inputs())
def test_lemma31_stable_for_huge_n_and_tiny_tau(args):
    mu, tau, n = args
    assume(0.0 < tau < mu)
    got = an.tail_miss_probability(mu, tau, n)
    assert math.isfinite(got) and 0.0 <= got <= 1.0
    ref = decimal_tail_miss(mu, tau, n)
    assert got == pytest.approx(ref, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize(
    ("mu", "tau", "n"),
    [
        (0.5, 1e-15, 10**7),  # coverage factor 1 - 1e-8: needs log1p, not log(1 - tau)
        (0.64, 6.3e-5, 10**7),  # (1-tau)^N = e^-630, still a normal double
        (0.64, 6.3e-5, 2**17),  # Fig. 5 right end
        (1e-12, 1e-15, 2),  # value 2e-12: literal formula would return pure rounding noise
        (1e-12, 1e-15, 10**7),
        (1.0 - 1e-12, 1e-15, 2),
        (1.0 - 1e-12, 1e-15, 10**7),
        (1.0 - 1e-9, 1e-15, 10**7),
        (0.3, 0.3 * (1 - 1e-12), 50),  # tau -> mu
    ],
)
def test_lemma31_extreme_cases_match_decimal(mu, tau, n):
    got = an.tail_miss_probability(mu, tau, n)
    assert math.isfinite(got) and 0.0 <= got <= 1.0
    assert got == pytest.approx(decimal_tail_miss(mu, tau, n), rel=1e-12, abs=1e-300)


@given(extreme_lemma31_inputs())
def test_active_probability_matches_decimal(args):
    mu, _, n = args
    got = an.active_probability(mu, n)
    assert 0.0 <= got <= 1.0
    assert got == pytest.approx(decimal_active(mu, n), rel=1e-12, abs=1e-300)


@given(mu=st.floats(1e-6, 1.0 - 1e-6), rho=st.floats(1e-9, 0.999))
def test_lemma31_at_n2_is_2mu_1mmu_1mrho(mu, rho):
    tau = rho * mu
    assume(0.0 < tau < mu)
    expected = 2.0 * mu * (1.0 - mu) * (1.0 - tau / mu)
    assert an.tail_miss_probability(mu, tau, 2) == pytest.approx(expected, rel=1e-12)


def test_lemma31_n1_is_exactly_zero_and_mu1_is_zero():
    mu = np.array([1e-9, 0.3, 0.5, 0.999999])
    assert np.all(an.tail_miss_probability(mu, mu * 0.1, 1) == 0.0)
    assert np.all(an.active_probability(mu, 1) == 0.0)
    n = np.array([1, 2, 7, 1000, 10**7])
    assert np.all(an.tail_miss_probability(1.0, 0.2, n) == 0.0)
    assert np.all(an.tail_miss_probability(1.0, 1e-12, n) == 0.0)
    assert np.all(an.active_probability(1.0, n) == 0.0)
    assert np.all(an.active_probability(0.0, n) == 0.0)


@given(mu=st.floats(0.01, 0.99), n=st.integers(1, 10**6), log_tau=st.floats(-15.0, -3.0))
def test_lemma31_tau_to_zero_approaches_active_probability(mu, n, log_tau):
    # B ⊆ A and A \ B ⊆ {some draw in E}, so 0 <= Pr(A) - Pr(B) <= N tau (union bound).
    tau = min(10.0**log_tau, 0.5 * mu)
    gap = an.active_probability(mu, n) - an.tail_miss_probability(mu, tau, n)
    assert -1e-15 <= gap <= n * tau + 1e-15


@given(mu=st.floats(0.01, 0.99), n=st.integers(1, 10**6), log_gap=st.floats(-15.0, -3.0))
def test_lemma31_tau_to_mu_approaches_zero(mu, n, log_gap):
    # An active group that misses E must draw from C \ E at least once: Pr(B) <= N (mu - tau).
    tau = mu * (1.0 - 10.0**log_gap)
    assume(tau < mu)
    assert 0.0 <= an.tail_miss_probability(mu, tau, n) <= n * (mu - tau) * (1 + 1e-9) + 1e-300


def test_lemma31_broadcasting():
    mu = np.array([[0.2], [0.5], [0.8]])
    tau = mu * np.array([0.01, 0.1])
    n = np.array([2, 8, 32, 64]).reshape(4, 1, 1)
    out = an.tail_miss_probability(mu, tau, n)
    assert out.shape == (4, 3, 2)
    for i, j, k in np.ndindex(out.shape):
        ref = an.tail_miss_probability(float(mu[j, 0]), float(tau[j, k]), int(n[i, 0, 0]))
        assert out[i, j, k] == pytest.approx(ref, rel=1e-14)
    assert isinstance(an.tail_miss_probability(0.5, 0.1, 3), float)
    assert an.active_probability(np.full((2, 3), 0.5), 2).shape == (2, 3)


# ---------------------------------------------------------------------------
# Peaks (spec §3.1, §3.2)
# ---------------------------------------------------------------------------

# mu, rho, argmax int, peak, argmax 2^k, peak 2^k, N=2, N=8, N=32
TABLE_31 = [
    (0.8, 0.01, 15, "0.8562", 16, "0.8554", "0.3168", "0.7830", "0.7728"),
    (0.8, 0.05, 8, "0.6101", 8, "0.6101", "0.3040", "0.6101", "0.2707"),
    (0.8, 0.1, 6, "0.4670", 4, "0.4461", "0.2880", "0.4410", "0.0693"),
    (0.8, 0.2, 4, "0.3285", 4, "0.3285", "0.2560", "0.2197", "0.0038"),
    (0.5, 0.01, 8, "0.9532", 8, "0.9532", "0.4950", "0.9532", "0.8518"),
    (0.5, 0.05, 6, "0.8320", 8, "0.8102", "0.4750", "0.8102", "0.4448"),
    (0.5, 0.1, 5, "0.7241", 4, "0.7110", "0.4500", "0.6578", "0.1937"),
    (0.5, 0.2, 4, "0.5680", 4, "0.5680", "0.4000", "0.4259", "0.0343"),
    (0.2, 0.01, 21, "0.9496", 16, "0.9403", "0.3168", "0.8163", "0.9372"),
    (0.2, 0.05, 15, "0.8249", 16, "0.8233", "0.3040", "0.7550", "0.7242"),
    (0.2, 0.1, 12, "0.7160", 16, "0.6957", "0.2880", "0.6830", "0.5231"),
    (0.2, 0.2, 9, "0.5583", 8, "0.5536", "0.2560", "0.5536", "0.2700"),
    (0.3, 0.05, 9, "0.8325", 8, "0.8284", "0.3990", "0.8284", "0.6165"),
    (0.3, 0.1, 8, "0.7261", 8, "0.7261", "0.3780", "0.7261", "0.3773"),
    (0.3, 0.2, 6, "0.5720", 8, "0.5519", "0.3360", "0.5519", "0.1381"),
]
POW2 = 2 ** np.arange(10)


@pytest.mark.parametrize("row", TABLE_31, ids=[f"mu{r[0]}-rho{r[1]}" for r in TABLE_31])
def test_spec_31_peak_table(row):
    mu, rho, n_int, peak_int, n_pow, peak_pow, v2, v8, v32 = row
    tau = mu * rho
    res = an.tail_miss_peak(mu, tau, n_max=512)
    assert res.n_star == n_int
    assert_spec(res.peak, peak_int)
    res2 = an.tail_miss_peak(mu, tau, grid=POW2)
    assert res2.n_star == n_pow
    assert_spec(res2.peak, peak_pow)
    for n, printed in ((2, v2), (8, v8), (32, v32)):
        assert_spec(an.tail_miss_probability(mu, tau, n), printed)
    # the default n_max = 1e7 search must find the same global maximum
    assert an.tail_miss_peak(mu, tau) == res


@given(mu=st.floats(0.05, 0.95), rho=st.floats(0.005, 0.95), n_max=st.integers(1, 3000))
def test_peak_is_brute_force_argmax_up_to_n_max(mu, rho, n_max):
    tau = mu * rho
    brute = an.tail_miss_probability(mu, tau, np.arange(1, n_max + 2))
    if brute[n_max] > brute[:n_max].max():  # the peak lies beyond n_max: an error, not the end of the range
        with pytest.raises(ValueError, match=r"peak lies beyond n_max"):
            an.tail_miss_peak(mu, tau, n_max=n_max)
        return
    brute = brute[:n_max]
    res = an.tail_miss_peak(mu, tau, n_max=n_max)
    j = int(np.argmax(brute))
    assert 1 <= res.n_star <= n_max
    assert res.peak == pytest.approx(brute[j], rel=1e-13, abs=1e-300)
    assert res.peak == pytest.approx(brute[res.n_star - 1], rel=1e-13, abs=1e-300)
    # smallest maximiser: nothing before n_star reaches the peak (up to rounding)
    assert np.all(brute[: res.n_star - 1] <= res.peak * (1 + 1e-13))
    assert res.n_star == j + 1 or abs(brute[j] - brute[res.n_star - 1]) <= 1e-13 * brute[j]


@given(mu=st.floats(0.02, 0.98), log_tau=st.floats(-4.0, -0.5), probe=st.integers(1, 10**7))
def test_peak_with_default_n_max_is_global(mu, log_tau, probe):
    # tau >= 1e-4: (1 - tau)^N < e^-20 beyond N = 2e5, so the brute force over 1..2e5 sees the global max.
    tau = min(10.0**log_tau, 0.9 * mu)
    res = an.tail_miss_peak(mu, tau)
    brute = an.tail_miss_probability(mu, tau, np.arange(1, 200_001))
    assert res.n_star == int(np.argmax(brute)) + 1
    assert res.peak == pytest.approx(brute.max(), rel=1e-13)
    assert an.tail_miss_probability(mu, tau, probe) <= res.peak * (1 + 1e-13)


def test_peak_ties_go_to_smallest_n():
    # found by bisection: at this tau, N = 7 and N = 8 give bit-identical float64 values (mu = 0.5)
    mu, tau = 0.5, 0.00788108155206554
    brute = an.tail_miss_probability(mu, tau, np.arange(1, 513))
    if not (brute[6] == brute[7] == brute.max()):
        pytest.skip("the exact float tie does not reproduce on this platform's libm")
    assert an.tail_miss_peak(mu, tau, n_max=512) == (7, brute[6])
    assert an.tail_miss_peak(mu, tau, grid=[16, 8, 7, 8]).n_star == 7
    assert an.tail_miss_peak(mu, tau, grid=[8, 16]).n_star == 8


def test_peak_grid_is_argmax_over_grid():
    rng = np.random.default_rng(0)
    grid = np.unique(rng.integers(1, 400, size=25))
    for mu, rho in [(0.3, 0.01), (0.7, 0.2), (0.9, 0.001)]:
        vals = an.tail_miss_probability(mu, mu * rho, grid)
        res = an.tail_miss_peak(mu, mu * rho, grid=rng.permutation(grid))
        assert res.n_star == grid[np.argmax(vals)]
        assert res.peak == pytest.approx(vals.max(), rel=1e-14)


def test_peak_vectorised_shapes():
    mu = np.array([[0.8], [0.5], [0.2]])
    rho = np.array([0.01, 0.05, 0.1, 0.2])
    tau = mu * rho
    res = an.tail_miss_peak(mu, tau, n_max=512)
    resg = an.tail_miss_peak(mu, tau, grid=POW2)
    assert res.n_star.shape == res.peak.shape == resg.n_star.shape == (3, 4)
    assert np.issubdtype(res.n_star.dtype, np.integer)
    for i, j in np.ndindex(3, 4):
        single = an.tail_miss_peak(float(mu[i, 0]), float(tau[i, j]), n_max=512)
        assert res.n_star[i, j] == single.n_star
        assert res.peak[i, j] == pytest.approx(single.peak, rel=1e-14)
    # mixed rows: some finish early, some need the long search
    mixed = an.tail_miss_peak([0.5, 0.64, 0.9], [0.25, 6.3e-5, 1e-6])
    for k, (m, t) in enumerate([(0.5, 0.25), (0.64, 6.3e-5), (0.9, 1e-6)]):
        assert mixed.n_star[k] == an.tail_miss_peak(m, t).n_star
    scalar = an.tail_miss_peak(0.5, 0.005)
    assert isinstance(scalar.n_star, int) and isinstance(scalar.peak, float)
    assert an.tail_miss_peak(1.0, 0.3) == (1, 0.0)


FIG5 = {
    0: "0", 1: "0.4608", 2: "0.8152", 3: "0.9711", 4: "0.9982", 5: "0.9980", 6: "0.9960", 7: "0.9920",
    8: "0.9840", 9: "0.9683", 10: "0.9375", 11: "0.8789", 12: "0.7726", 13: "0.5968", 14: "0.3562",
    15: "0.1269", 16: "0.0161", 17: "2.59e-4",
}  # fmt: skip


def test_spec_32_figure5_curve():
    exps = np.array(sorted(FIG5))
    vals = an.tail_miss_probability(0.64, 6.3e-5, 2**exps)
    assert vals[0] == 0.0
    for e, v in zip(exps, vals, strict=True):
        assert_spec(v, FIG5[e])
    res = an.tail_miss_peak(0.64, 6.3e-5)
    assert res.n_star == 20
    assert_spec(res.peak, "0.99861")
    assert an.tail_miss_peak(0.64, 6.3e-5, grid=2 ** np.arange(18)).n_star == 16
    for n, printed in ((2, "0.4661"), (8, "0.9743"), (2**17, "2.60e-4")):
        assert_spec(an.tail_miss_probability(0.63008, 6.2967e-5, n), printed)
    # same with the exact initial distribution instead of its rounded numbers
    d = an.initial_distribution()
    assert_spec(an.tail_miss_probability(d.q_pos, d.tau_leaf, 2**17), "2.60e-4")


# ---------------------------------------------------------------------------
# One-step update: mass balance (BroRL Thm 1) and Prop. 3.2
# ---------------------------------------------------------------------------


def logit_step(p, correct, sampled, r_c, r_w, eta):
    """Eq. 5: dz_i = eta p_i (R_i - S_R), R_i = r_c / r_w on sampled actions and 0 on unsampled ones."""
    rewards = np.where(sampled, np.where(correct, r_c, r_w), 0.0)
    s_r = np.sum(rewards * p, axis=-1, keepdims=True)
    return eta * p * (rewards - s_r)


def exact_mass_change(p, dz, subset):
    """Exact change of sum_S softmax(z + dz) under the logit step, free of cancellation.

    softmax(z + dz)_i = p_i e^{dz_i} / sum_j p_j e^{dz_j}, hence
    dQ_S = (sum_S p_i expm1(dz_i) - Q_S y) / (1 + y) with y = sum_j p_j expm1(dz_j).
    """
    e = np.expm1(dz)
    y = np.sum(p * e, axis=-1)
    q_s = np.sum(p * subset, axis=-1)
    return (np.sum(p * e * subset, axis=-1) - q_s * y) / (1.0 + y)


P5 = np.array([0.4, 0.1, 0.05, 0.3, 0.15])
C5 = np.array([True, True, True, False, False])
S5 = np.array([True, False, False, True, False])


@pytest.mark.parametrize(
    ("r_c", "r_w", "s_r", "dz", "terms", "dq", "uc"),
    [
        (1.0, 0.0, "0.4", ("0.24", "-0.04", "-0.02", "-0.12", "-0.06"),
         ("0.0432", "0.0198", "0.0027"), "0.0657", ("-0.0050", "-0.0069", "-0.0119")),
        (1.0, -1.0, "0.1", ("0.36", "-0.01", "-0.005", "-0.33", "-0.015"),
         ("0.0648", "0.05445", "0.000675"), "0.119925", ("-0.00125", "-0.006225", "-0.007475")),
    ],
)  # fmt: skip
def test_spec_35_worked_example(r_c, r_w, s_r, dz, terms, dq, uc):
    mb = an.mass_balance(P5, C5, S5, r_c, r_w)
    assert_spec(mb.s_r, s_r)
    for got, printed in zip((mb.sampled_correct, mb.sampled_incorrect, mb.unsampled), terms, strict=True):
        assert_spec(got, printed)
    assert_spec(mb.delta_q_pos, dq)
    u = an.unsampled_correct_change(P5, C5, S5, r_c, r_w)
    for got, printed in zip((u.direct_drift, u.normalization_coupling, u.delta_q_u_pos), uc, strict=True):
        assert_spec(got, printed)
    assert u.q_u_pos == pytest.approx(0.15, rel=1e-12)
    # the moments quoted by the spec
    assert np.sum(P5[C5 & S5] ** 2) == pytest.approx(0.16) and np.sum(P5[~C5 & S5] ** 2) == pytest.approx(0.09)
    # our Eq. 5 helper reproduces the spec's dz / (eta/N)
    for got, printed in zip(logit_step(P5, C5, S5, r_c, r_w, 1.0), dz, strict=True):
        assert_spec(got, printed)
    # finite difference at eta/N = 1e-6 on the exact softmax agrees to 6 decimals (per unit eta/N)
    eta = 1e-6
    step = logit_step(P5, C5, S5, r_c, r_w, eta)
    z = np.log(P5)
    direct_pos = (np.sum(special.softmax(z + step)[C5]) - np.sum(P5[C5])) / eta
    direct_u = (np.sum(special.softmax(z + step)[C5 & ~S5]) - np.sum(P5[C5 & ~S5])) / eta
    assert abs(direct_pos - float(dq)) <= 5e-6 + 1e-9 * abs(float(dq))
    assert abs(direct_u - float(uc[2])) <= 5e-6


def test_exact_mass_change_helper_is_the_softmax_step():
    rng = np.random.default_rng(7)
    z = rng.normal(size=12)
    p = special.softmax(z)
    dz = rng.normal(scale=0.5, size=12)
    subset = rng.random(12) < 0.5
    direct = np.sum(special.softmax(z + dz)[subset]) - np.sum(p[subset])
    assert exact_mass_change(p, dz, subset) == pytest.approx(direct, rel=1e-12, abs=1e-15)


REWARDS = st.sampled_from([(1.0, 0.0), (1.0, -1.0), (2.0, -0.5), (0.5, -2.0), (-0.2, -1.0), (1.5, 0.5)])


@given(v=st.integers(3, 30), seed=SEEDS, rewards=REWARDS)
def test_first_order_terms_match_exact_softmax_step(v, seed, rewards):
    r_c, r_w = rewards
    rng = np.random.default_rng(seed)
    p, correct = random_policy(rng, v)
    sampled = rng.random(v) < 0.5
    unsampled_correct = correct & ~sampled
    errs = {}
    for eta in (1e-3, 1e-4):
        dz = logit_step(p, correct, sampled, r_c, r_w, eta)
        x = np.abs(dz).max()
        mb = an.mass_balance(p, correct, sampled, r_c, r_w, eta=eta)
        uc = an.unsampled_correct_change(p, correct, sampled, r_c, r_w, eta=eta)
        # exact linearisation, Eq. 19: dQ_S = sum_S p dz - Q_S sum p dz
        lin_pos = np.sum(p * dz * correct) - np.sum(p * correct) * np.sum(p * dz)
        lin_u = np.sum(p * dz * unsampled_correct) - np.sum(p * unsampled_correct) * np.sum(p * dz)
        assert mb.delta_q_pos == pytest.approx(lin_pos, rel=1e-10, abs=1e-17)
        assert uc.delta_q_u_pos == pytest.approx(lin_u, rel=1e-10, abs=1e-17)
        assert uc.q_u_pos == pytest.approx(np.sum(p * unsampled_correct), rel=1e-12, abs=1e-300)
        # remainder of the exact softmax step: |dQ - first order| <= 4 max|dz|^2 for max|dz| <= 0.05
        real_pos = exact_mass_change(p, dz, correct)
        real_u = exact_mass_change(p, dz, unsampled_correct)
        err_pos, err_u = abs(real_pos - mb.delta_q_pos), abs(real_u - uc.delta_q_u_pos)
        assert err_pos <= 4 * x**2 + 1e-18
        assert err_u <= 4 * x**2 + 1e-18
        errs[eta] = (err_pos, err_u)
        if r_w <= 0.0 <= r_c:  # terms 1 and 2 of Eq. 17 are non-negative (spec §2.5)
            assert mb.sampled_correct >= 0.0 and mb.sampled_incorrect >= 0.0
    # O(eta^2): a 10x smaller step shrinks the error ~100x (an O(eta) mistake would only give 10x)
    for big, small in zip(errs[1e-3], errs[1e-4], strict=True):
        assert small <= big / 100.0 * 1.5 + 1e-18


@given(v=st.integers(3, 20), seed=SEEDS, rewards=REWARDS)
def test_counts_and_mask_give_identical_results(v, seed, rewards):
    rng = np.random.default_rng(seed)
    p, correct = random_policy(rng, v)
    mask = rng.random(v) < 0.5
    counts = mask * rng.integers(1, 6, size=v)
    for fn in (an.mass_balance, an.unsampled_correct_change):
        a, b = fn(p, correct, mask, *rewards, eta=0.1), fn(p, correct, counts, *rewards, eta=0.1)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)


def test_one_step_broadcasts_over_batch_axis():
    rng = np.random.default_rng(3)
    b, v = 5, 9
    probs = special.softmax(rng.normal(size=(b, v)), axis=-1)
    correct = np.arange(v) < 4  # shared mask, shape (V,)
    sampled = rng.random((b, v)) < 0.4
    eta = np.linspace(0.1, 0.5, b)
    mb = an.mass_balance(probs, correct, sampled, 1.0, -1.0, eta=eta)
    uc = an.unsampled_correct_change(probs, correct, sampled, 1.0, -1.0, eta=eta)
    for field in (*mb, *uc):
        assert np.shape(field) == (b,)
    for i in range(b):
        mb_i = an.mass_balance(probs[i], correct, sampled[i], 1.0, -1.0, eta=eta[i])
        uc_i = an.unsampled_correct_change(probs[i], correct, sampled[i], 1.0, -1.0, eta=eta[i])
        np.testing.assert_allclose([x[i] for x in mb], mb_i, rtol=1e-13, atol=1e-17)
        np.testing.assert_allclose([x[i] for x in uc], uc_i, rtol=1e-13, atol=1e-17)


# ---------------------------------------------------------------------------
# Expected unsampled moments (BroRL Lemma 2 / Cor. 3; spec §3.4)
# ---------------------------------------------------------------------------

# N, E[U_pos,2], E[U_neg,2], coupling  (V = 128,000, seeded)
TABLE_34 = [
    (2, "3.9856e-5", "1.1597e-6", "-1.401e-5"),
    (4, "3.9851e-5", "1.1597e-6", "-1.401e-5"),
    (8, "3.9841e-5", "1.1597e-6", "-1.401e-5"),
    (16, "3.9820e-5", "1.1596e-6", "-1.400e-5"),
    (512, "3.8558e-5", "1.1578e-6", "-1.353e-5"),
    (51_200, "1.5776e-6", "9.8773e-7", "3.873e-8"),
    (131_072, "1.0321e-8", "7.6894e-7", "4.807e-7"),
]


@pytest.fixture(scope="module")
def init128():
    return an.initial_distribution(128_000)


@pytest.fixture(scope="module")
def init131():
    return an.initial_distribution(131_072)


@pytest.mark.parametrize(("n", "u_pos", "u_neg", "coupling"), TABLE_34)
def test_spec_34_expected_moments_v128000(init128, n, u_pos, u_neg, coupling):
    p, c = init128.probs, init128.correct
    assert_spec(an.expected_unsampled_second_moment(p, n, c), u_pos)
    assert_spec(an.expected_unsampled_second_moment(p, n, ~c), u_neg)
    assert_spec(an.expected_unsampled_coupling(p, c, n), coupling)


def test_spec_34_before_draws_sign_change_and_escape(init128, init131):
    p, c = init128.probs, init128.correct
    assert_spec(an.expected_unsampled_second_moment(p, 0, c), "3.9861e-5")
    assert_spec(an.expected_unsampled_second_moment(p, 0, ~c), "1.1597e-6")
    assert an.expected_unsampled_coupling(p, c, 50_126) < 0.0 < an.expected_unsampled_coupling(p, c, 50_127)
    # every BroRL N <= 512 gives a negative expected coupling at init (spot checks: 1..16, powers of 2, 500..512)
    ns = np.unique(np.r_[np.arange(1, 17), 2 ** np.arange(5, 10), np.arange(500, 513)])
    assert np.all(an.expected_unsampled_coupling(p, c, ns) < 0.0)
    # both expected moments decrease in N (Corollary 3)
    ns = np.array([0, 1, 2, 16, 512, 8192, 51_200, 131_072])
    for mask in (c, ~c):
        assert np.all(np.diff(an.expected_unsampled_second_moment(p, ns, mask)) < 0.0)
    for n, printed in ((256, "0.9839"), (8192, "0.5966"), (65_536, "0.01612"), (131_072, "2.60e-4")):
        assert_spec(an.expected_unsampled_mass(p, n, c) / init128.q_pos, printed)
    p2, c2 = init131.probs, init131.correct
    assert an.expected_unsampled_coupling(p2, c2, 50_608) < 0.0 < an.expected_unsampled_coupling(p2, c2, 50_609)
    assert_spec(an.expected_unsampled_coupling(p2, c2, 51_200), "2.139e-8")
    assert_spec(an.expected_unsampled_coupling(p2, c2, 131_072), "4.808e-7")


@given(v=st.integers(2, 8), n=st.integers(0, 25), seed=SEEDS)
def test_expected_unsampled_moments_monte_carlo(v, n, seed):
    rng = np.random.default_rng(seed)
    p, correct = random_policy(rng, v, scale=1.5)
    m = 20_000
    unsampled = rng.multinomial(n, p, size=m) == 0
    q_pos = np.sum(p[correct])
    u_pos2 = (unsampled * correct * p**2).sum(axis=1)
    u_neg2 = (unsampled * ~correct * p**2).sum(axis=1)
    a2, b2 = np.sum(p[correct] ** 2), np.sum(p[~correct] ** 2)
    checks = [
        (u_pos2 + u_neg2, an.expected_unsampled_second_moment(p, n), (0.0, a2 + b2), "U_2"),
        (u_pos2, an.expected_unsampled_second_moment(p, n, correct), (0.0, a2), "U_pos,2"),
        (u_neg2, an.expected_unsampled_second_moment(p, n, ~correct), (0.0, b2), "U_neg,2"),
        ((unsampled * p).sum(axis=1), an.expected_unsampled_mass(p, n), (0.0, 1.0), "Q_u"),
        ((unsampled * correct * p).sum(axis=1), an.expected_unsampled_mass(p, n, correct), (0.0, q_pos), "Q_u,pos"),
        (
            q_pos * u_neg2 - (1 - q_pos) * u_pos2,
            an.expected_unsampled_coupling(p, correct, n),
            (-(1 - q_pos) * a2, q_pos * b2),
            "coupling",
        ),
    ]
    for samples, exact, bounds, what in checks:
        assert_mc(samples, float(exact), bounds, what=what)


def test_expected_moments_vectorised_over_n_and_batch():
    rng = np.random.default_rng(11)
    probs = special.softmax(rng.normal(size=(3, 6)), axis=-1)
    mask = np.array([True, False, True, False, False, True])
    ns = np.array([0, 3, 40])
    out = an.expected_unsampled_second_moment(probs, ns, mask)
    out_q = an.expected_unsampled_mass(probs, ns[:, None], mask)
    out_c = an.expected_unsampled_coupling(probs, mask, ns)
    assert out.shape == out_c.shape == (3,) and out_q.shape == (3, 3)
    for i in range(3):
        ref = np.sum(probs[i] ** 2 * (1 - probs[i]) ** ns[i] * mask)
        assert out[i] == pytest.approx(ref, rel=1e-12)
        for j in range(3):
            ref_q = np.sum(probs[j] * (1 - probs[j]) ** ns[i] * mask)
            assert out_q[i, j] == pytest.approx(ref_q, rel=1e-12)


def test_expected_moments_tiny_p_huge_n_keep_digits():
    # (1 - p)^N for p = 1e-12, N = 1e9: exp(-1e-3); the naive power of a rounded 1 - p is off by ~1e-7
    p = np.array([1e-12, 1.0 - 1e-12])
    got = an.expected_unsampled_mass(p, 10**9, np.array([True, False]))
    assert got == pytest.approx(1e-12 * math.exp(10**9 * math.log1p(-1e-12)), rel=1e-13)


# ---------------------------------------------------------------------------
# Lemma H.1 / Corollary H.2
# ---------------------------------------------------------------------------


@given(v=st.integers(4, 10), n=st.integers(1, 16), seed=SEEDS)
def test_lemma_h1_monte_carlo(v, n, seed):
    rng = np.random.default_rng(seed)
    p, correct = random_policy(rng, v, min_per_class=2, scale=1.5)
    k = int(rng.integers(0, n + 1))
    m = 20_000
    pp, pn = p[correct], p[~correct]
    hit_pos = rng.multinomial(k, pp / pp.sum(), size=m) > 0
    hit_neg = rng.multinomial(n - k, pn / pn.sum(), size=m) > 0
    s_pos, s_neg = (hit_pos * pp).sum(axis=1), (hit_neg * pn).sum(axis=1)
    res = an.expected_sampled_mass(p, correct, n, k)
    q_pos, q_neg = pp.sum(), pn.sum()
    assert_mc(s_pos, float(res.p_pos), (0.0, q_pos), what="E[P_pos|X=k]")
    assert_mc(s_neg, float(res.p_neg), (0.0, q_neg), what="E[P_neg|X=k]")
    mood = an.expected_batch_mood(p, correct, n, k, r_c=2.0, r_w=-0.5)
    assert_mc(2.0 * s_pos - 0.5 * s_neg, float(mood), (-0.5 * q_neg, 2.0 * q_pos), what="E[S_R|X=k]")


@given(
    v=st.integers(4, 40),
    n=st.integers(1, 64),
    seed=SEEDS,
    r_c=st.floats(0.0, 3.0),
    r_w=st.floats(-3.0, 0.0),
)
def test_corollary_h2_mood_non_decreasing_in_k(v, n, seed, r_c, r_w):
    assume(r_c > r_w)
    rng = np.random.default_rng(seed)
    p, correct = random_policy(rng, v, min_per_class=2)
    ks = np.arange(n + 1)
    res = an.expected_sampled_mass(p, correct, n, ks)
    mood = an.expected_batch_mood(p, correct, n, ks, r_c=r_c, r_w=r_w)
    assert res.p_pos.shape == res.p_neg.shape == mood.shape == (n + 1,)
    assert np.all(np.diff(res.p_pos) >= -1e-15)
    assert np.all(np.diff(res.p_neg) <= 1e-15)
    assert np.all(np.diff(mood) >= -1e-14)
    # exact increment of Eq. 24: sum_C pi q_pos (1 - q_pos)^k
    q = p[correct] / p[correct].sum()
    inc = np.array([np.sum(p[correct] * q * (1 - q) ** k) for k in ks[:-1]])
    np.testing.assert_allclose(np.diff(res.p_pos), inc, rtol=1e-9, atol=1e-15)
    # end points: nothing sampled from a class with zero draws
    assert res.p_pos[0] == 0.0 and res.p_neg[-1] == 0.0


def test_corollary_h2_needs_non_positive_r_w():
    # correct mass on one heavy and one light action, incorrect mass spread over 50 tiny actions: for
    # k >= 2, E[P_pos] barely grows while E[P_neg] falls, so a positive r_w makes the mood decrease. The
    # condition r_w <= 0 of Corollary H.2 is therefore not vacuous.
    p = np.r_[0.499, 0.001, np.full(50, 0.01)]
    correct = np.arange(52) < 2
    ks = np.arange(2, 9)
    assert np.all(np.diff(an.expected_batch_mood(p, correct, 8, ks, r_c=1.0, r_w=0.5)) < 0.0)
    assert np.all(np.diff(an.expected_batch_mood(p, correct, 8, ks, r_c=1.0, r_w=-0.5)) > 0.0)


# ---------------------------------------------------------------------------
# Focal weight, advantages, LR-matched scale (spec §2.10-2.11, §3.6)
# ---------------------------------------------------------------------------

# mu_hat, g(0.5), g(1), g|A+| for gamma 0/.5/1, g|A-| for gamma 0/.5/1
TABLE_36 = [
    (0.125, "0.9354", "0.875", ("2.6458", "2.4749", "2.3150"), ("0.3780", "0.3536", "0.3307")),
    (0.25, "0.8660", "0.75", ("1.7321", "1.5000", "1.2990"), ("0.5774", "0.5000", "0.4330")),
    (0.5, "0.7071", "0.5", ("1", "0.7071", "0.5"), ("1", "0.7071", "0.5")),
    (0.75, "0.5", "0.25", ("0.5774", "0.2887", "0.1443"), ("1.7321", "0.8660", "0.4330")),
    (0.875, "0.3536", "0.125", ("0.3780", "0.1336", "0.0472"), ("2.6458", "0.9354", "0.3307")),
]


@pytest.mark.parametrize("row", TABLE_36, ids=[str(r[0]) for r in TABLE_36])
def test_spec_36_focal_magnitudes(row):
    mu, g05, g1, a_pos, a_neg = row
    assert_spec(an.focal_weight(mu, 0.5), g05)
    assert_spec(an.focal_weight(mu, 1.0), g1)
    adv = an.advantage_magnitudes(mu)
    for gamma, pos, neg in zip((0.0, 0.5, 1.0), a_pos, a_neg, strict=True):
        g = an.focal_weight(mu, gamma)
        assert_spec(g * adv.positive, pos)
        assert_spec(g * adv.negative, neg)
        # closed forms of spec §2.10
        assert g * adv.positive == pytest.approx((1 - mu) ** (gamma + 0.5) * mu**-0.5, rel=1e-13)
        assert g * adv.negative == pytest.approx((1 - mu) ** (gamma - 0.5) * mu**0.5, rel=1e-13)


@pytest.mark.parametrize(
    ("n", "x", "pos", "neg", "pop_pos", "pop_neg"),
    [
        (2, 1, "0.7071", "0.7071", "1", "1"),
        (4, 3, "0.5", "1.5", "0.5774", "1.7321"),
        (8, 7, "0.3536", "2.4749", "0.3780", "2.6458"),
    ],
)
def test_spec_36_bessel_examples(n, x, pos, neg, pop_pos, pop_neg):
    b = an.advantage_magnitudes(x / n, std="bessel", n=n)
    assert_spec(b.positive, pos)
    assert_spec(b.negative, neg)
    a = an.advantage_magnitudes(x / n, std="population")
    assert_spec(a.positive, pop_pos)
    assert_spec(a.negative, pop_neg)


@given(
    n=st.integers(2, 64),
    data=st.data(),
    r_w=st.floats(-3.0, 1.0),
    spread=st.floats(0.1, 5.0),
)
def test_advantage_magnitudes_match_numpy_std(n, data, r_w, spread):
    x = data.draw(st.integers(1, n - 1))
    r_c = r_w + spread
    rewards = np.where(np.arange(n) < x, r_c, r_w)
    for ddof, kwargs in ((0, {"std": "population"}), (1, {"std": "bessel", "n": n})):
        adv = (rewards - rewards.mean()) / rewards.std(ddof=ddof)
        res = an.advantage_magnitudes(x / n, **kwargs)
        assert res.positive == pytest.approx(adv[0], rel=1e-11)
        assert res.negative == pytest.approx(-adv[-1], rel=1e-11)
    # group mean of |A| is 2 sqrt(mu (1 - mu)) for the population std
    pop = an.advantage_magnitudes(x / n)
    mean_abs = (x * pop.positive + (n - x) * pop.negative) / n
    assert mean_abs == pytest.approx(2 * math.sqrt(x / n * (1 - x / n)), rel=1e-12)


def test_focal_and_advantage_vectorised_and_edge_values():
    mu = np.array([0.0, 0.25, 1.0])
    np.testing.assert_array_equal(an.focal_weight(mu, 0.0), [1.0, 1.0, 1.0])  # 0**0 = 1
    np.testing.assert_allclose(an.focal_weight(mu, 2.0), [1.0, 0.5625, 0.0], rtol=1e-15)
    out = an.focal_weight(np.array([[0.1], [0.5]]), np.array([0.5, 1.0, 2.0]))
    assert out.shape == (2, 3)
    assert out[1, 2] == pytest.approx(0.25, rel=1e-15)
    adv = an.advantage_magnitudes(np.array([0.25, 0.5]), std="bessel", n=np.array([4, 8]))
    np.testing.assert_allclose(adv.positive, [math.sqrt(3) * math.sqrt(3 / 4), math.sqrt(7 / 8)], rtol=1e-14)


@pytest.mark.parametrize(("gamma", "printed"), [(0.0, "1"), (0.5, "0.67906"), (1.0, "0.5"), (2.0, "0.3125")])
def test_lr_matched_scale_spec_values(gamma, printed):
    assert_spec(an.lr_matched_scale(gamma), printed)
    exact = {0.0: 1.0, 1.0: 0.5, 2.0: 0.3125}
    if gamma in exact:
        assert an.lr_matched_scale(gamma) == pytest.approx(exact[gamma], rel=1e-14)
    # the paper's "GRPO low-LR" control: 6.8e-7 = m_0.5 x 1e-6, rounded to 2 digits
    assert round(an.lr_matched_scale(0.5) * 1e-6, 8) == pytest.approx(6.8e-7, rel=1e-12)


@given(gamma=st.floats(0.0, 20.0))
def test_lr_matched_scale_against_quadrature(gamma):
    def num(mu):
        return (1 - mu) ** gamma * math.sqrt(mu * (1 - mu))

    top = integrate.quad(num, 0.0, 1.0, epsabs=0.0, epsrel=1e-12, limit=200)[0]
    bottom = integrate.quad(lambda mu: math.sqrt(mu * (1 - mu)), 0.0, 1.0, epsabs=0.0, epsrel=1e-12)[0]
    assert bottom == pytest.approx(math.pi / 8, rel=1e-9)
    assert an.lr_matched_scale(gamma) == pytest.approx(top / bottom, rel=1e-8)


@given(gamma=st.floats(0.0, 1e6))
def test_lr_matched_scale_against_gamma_closed_form(gamma):
    ref = 4 / math.sqrt(math.pi) * math.exp(math.lgamma(gamma + 1.5) - math.lgamma(gamma + 3))
    got = an.lr_matched_scale(gamma)
    assert math.isfinite(got) and 0.0 < got <= 1.0
    # lgamma differences of large numbers carry ~|lgamma| * eps absolute error
    assert got == pytest.approx(ref, rel=1e-12 + 1e-15 * abs(math.lgamma(gamma + 3)))


def test_lr_matched_scale_vectorised_and_decreasing():
    g = np.linspace(0, 10, 41)
    m = an.lr_matched_scale(g)
    assert m.shape == (41,) and np.all(np.diff(m) < 0)


# ---------------------------------------------------------------------------
# pass@k (spec §2.9, §3.7)
# ---------------------------------------------------------------------------

GOLDEN_37 = [
    ((10, 3, 1), "0.3"),
    ((10, 3, 2), "0.533333"),
    ((10, 0, 5), "0"),
    ((10, 10, 5), "1"),
    ((10, 8, 3), "1"),
    ((1024, 1, 256), "0.25"),
    ((1024, 10, 256), "0.944511"),
    ((1024, 100, 1), "0.0976563"),
    ((256, 1, 256), "1"),
]


@pytest.mark.parametrize(("nck", "printed"), GOLDEN_37)
def test_spec_37_pass_at_k_golden(nck, printed):
    got = an.pass_at_k(*nck)
    assert_spec(got, printed)
    if printed in ("0", "1"):
        assert got == float(printed)  # exact where the answer is certain
    assert got != 1.0 or nck[0] - nck[1] < nck[2]  # the buggy ``c >= k`` shortcut would return 1.0 at (10,3,2)


def exact_pass_at_k(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


@st.composite
def nck(draw, n_max=2000):
    n = draw(st.integers(1, n_max))
    c = draw(st.one_of(st.integers(0, min(n, 5)), st.integers(0, n)))
    k = draw(st.one_of(st.integers(1, min(n, 5)), st.integers(1, n)))
    return n, c, k


@given(nck())
def test_pass_at_k_matches_math_comb(args):
    n, c, k = args
    exact = float(exact_pass_at_k(n, c, k))
    assert an.pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-9, abs=1e-300)


# small values at large n: a betaln difference would carry ~1e-11 absolute error here
@pytest.mark.parametrize(("n", "c", "k"), [(1269, 1, 1), (2000, 1, 1), (18171, 1, 1), (10**6, 1, 1)])
def test_pass_at_k_full_relative_precision(n, c, k):
    assert an.pass_at_k(n, c, k) == pytest.approx(float(exact_pass_at_k(n, c, k)), rel=1e-9)


@given(nck())
def test_pass_at_k_identities(args):
    n, c, k = args
    assert an.pass_at_k(n, 0, k) == 0.0
    assert an.pass_at_k(n, n, k) == 1.0
    assert an.pass_at_k(n, c, n) == float(c > 0)
    assert an.pass_at_k(n, c, 1) == pytest.approx(c / n, rel=1e-9, abs=1e-11)
    if n - c < k:
        assert an.pass_at_k(n, c, k) == 1.0


@given(n=st.integers(1, 2000), data=st.data())
def test_pass_at_k_monotone_in_k(n, data):
    c = data.draw(st.integers(0, n))
    vals = an.pass_at_k(n, c, np.arange(1, n + 1))
    assert vals.shape == (n,)
    assert np.all((vals >= 0.0) & (vals <= 1.0))
    assert np.all(np.diff(vals) >= -1e-12)


def test_pass_at_k_broadcasts():
    out = an.pass_at_k(1024, np.array([[1], [10], [100]]), np.array([1, 256]))
    assert out.shape == (3, 2)
    assert out[1, 1] == pytest.approx(0.944511, rel=1e-6)
    assert out[2, 0] == pytest.approx(100 / 1024, rel=1e-9)
    assert isinstance(an.pass_at_k(10, 3, 2), float)


@given(q=st.floats(1e-12, 1.0), k=st.integers(1, 10**6))
def test_pass_at_k_from_mass_matches_decimal(q, k):
    d = decimal.Decimal(q)
    with decimal.localcontext(_DEC):
        ref = float(1 - (1 - d) ** k)
    assert an.pass_at_k_from_mass(q, k) == pytest.approx(ref, rel=1e-12)


def test_pass_at_k_from_mass_edges_and_vectorised():
    assert an.pass_at_k_from_mass(0.0, 7) == 0.0
    assert an.pass_at_k_from_mass(1.0, 7) == 1.0
    assert an.pass_at_k_from_mass(0.3, 1) == pytest.approx(0.3, rel=1e-15)
    out = an.pass_at_k_from_mass(np.array([[0.1], [0.5]]), np.array([1, 2, 4]))
    np.testing.assert_allclose(out, 1 - (1 - np.array([[0.1], [0.5]])) ** np.array([1, 2, 4]), rtol=1e-14)


@given(q=st.floats(0.01, 0.5), k=st.integers(1, 64), seed=SEEDS)
def test_pass_at_k_estimator_is_unbiased_for_mass_formula(q, k, seed):
    # c ~ Binomial(n, q): E[pass_at_k(n, c, k)] = 1 - (1 - q)^k exactly (Chen et al.)
    n, m = 64, 4000
    c = np.random.default_rng(seed).binomial(n, q, size=m)
    est = an.pass_at_k(n, c, k)
    assert_mc(est, an.pass_at_k_from_mass(q, k), (0.0, 1.0), extra_atol=1e-3, what="pass@k")


# ---------------------------------------------------------------------------
# Initial distribution (spec §3.3)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("v", "q_pos", "p_anchor", "tau_leaf", "p_incorrect", "entropy", "ln_v"),
    [
        (128_000, "0.63008", "4.6527e-4", "6.2967e-5", "3.1350e-6", "10.7817", "11.7598"),
        (131_072, "0.62407", "4.6083e-4", "6.2367e-5", "3.1051e-6", "10.8094", "11.7835"),
    ],
)
def test_spec_33_initial_distribution(v, q_pos, p_anchor, tau_leaf, p_incorrect, entropy, ln_v):
    d = an.initial_distribution(v)
    assert d.probs.shape == d.correct.shape == (v,)
    assert d.probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert d.correct.sum() == 10_000 and d.anchor == 0 and d.correct[0]
    assert_spec(d.q_pos, q_pos)
    assert_spec(d.p_anchor, p_anchor)
    assert_spec(d.tau_leaf, tau_leaf)
    assert_spec(d.p_incorrect, p_incorrect)
    assert_spec(d.entropy, entropy)
    assert_spec(math.log(v), ln_v)
    z = math.exp(5) + 9999 * math.exp(3) + (v - 10_000)
    assert 1.0 / d.p_incorrect == pytest.approx(z, rel=1e-12)
    if v == 128_000:
        assert_spec(z, "318983.70")
    assert d.p_anchor == pytest.approx(math.exp(5) / z, rel=1e-12)
    assert d.tau_leaf == pytest.approx(math.exp(3) / z, rel=1e-12)


@pytest.mark.parametrize(("v", "printed"), [(128_000, "0.078125"), (131_072, "0.0762939")])
def test_spec_33_zero_init(v, printed):
    d = an.initial_distribution(v, init="zero")
    assert_spec(d.q_pos, printed)
    assert d.q_pos == pytest.approx(10_000 / v, rel=1e-12)
    assert d.anchor is None and math.isnan(d.p_anchor)
    assert d.entropy == pytest.approx(math.log(v), rel=1e-12)
    assert np.all(d.probs == d.probs[0])


# ---------------------------------------------------------------------------
# Edge cases: a class whose whole mass sits on one action (q = 1)
# ---------------------------------------------------------------------------


SINGLE_ACTION_CLASS = [
    # (p, correct, k, E[P_pos | X=k], E[P_neg | X=k]) at n = 2
    ([0.3, 0.3, 0.4], [True, True, False], 0, 0.0, 0.4),  # one incorrect action carries all of Q_neg
    ([0.3, 0.3, 0.4], [True, True, False], 1, 0.3, 0.4),
    ([0.3, 0.3, 0.4], [True, True, False], 2, 0.45, 0.0),
    ([0.3, 0.7], [True, False], 0, 0.0, 0.7),  # a single correct action (e.g. the single-solution maze)
    ([0.3, 0.35, 0.35], [True, False, False], 1, 0.3, 0.35),
]


@pytest.mark.parametrize(("p", "correct", "k", "expected_pos", "expected_neg"), SINGLE_ACTION_CLASS)
def test_expected_sampled_mass_single_action_class_values(p, correct, k, expected_pos, expected_neg):
    res = an.expected_sampled_mass(np.array(p), np.array(correct), 2, k)
    assert res.p_pos == pytest.approx(expected_pos, rel=1e-12, abs=1e-300)
    assert res.p_neg == pytest.approx(expected_neg, rel=1e-12, abs=1e-300)


def test_expected_sampled_mass_single_action_class_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        an.expected_sampled_mass(np.array([0.3, 0.35, 0.35]), np.array([True, False, False]), 2, 1)


def test_expected_unsampled_mass_with_certain_action_n0():
    assert an.expected_unsampled_mass(np.array([1.0, 0.0]), 0) == pytest.approx(1.0, rel=1e-15)


def test_expected_unsampled_mass_with_certain_action_n_positive():
    assert an.expected_unsampled_mass(np.array([1.0, 0.0]), 3) == 0.0
    assert an.expected_unsampled_second_moment(np.array([1.0, 0.0]), 3) == 0.0


# ---------------------------------------------------------------------------
# Validation: ValueError naming the argument and the bad value
# ---------------------------------------------------------------------------

_P = P5
_C = C5
_S = S5
NAN = float("nan")

VALIDATION = [
    ("active mu>1", lambda: an.active_probability(1.5, 4), r"mu_pos.*1\.5"),
    ("active mu NaN", lambda: an.active_probability(NAN, 4), r"mu_pos.*nan"),
    ("active n=0", lambda: an.active_probability(0.5, 0), r"\bn\b.*\b0"),
    ("active n=2.5", lambda: an.active_probability(0.5, 2.5), r"\bn\b.*2\.5"),
    ("tail tau=mu", lambda: an.tail_miss_probability(0.5, 0.5, 4), r"tau.*0\.5.*mu_pos"),
    ("tail tau>mu", lambda: an.tail_miss_probability(0.3, 0.7, 4), r"tau.*0\.7"),
    ("tail tau=0", lambda: an.tail_miss_probability(0.5, 0.0, 4), r"tau.*0\.0"),
    ("tail tau<0", lambda: an.tail_miss_probability(0.5, -0.001, 4), r"tau.*-0\.001"),
    ("tail tau NaN", lambda: an.tail_miss_probability(0.5, NAN, 4), r"tau.*nan"),
    ("tail mu>1", lambda: an.tail_miss_probability(1.5, 0.1, 4), r"mu_pos.*1\.5"),
    ("tail mu=0", lambda: an.tail_miss_probability(0.0, 0.1, 4), r"mu_pos.*0\.0"),
    ("tail n=0", lambda: an.tail_miss_probability(0.5, 0.1, 0), r"\bn\b.*\b0"),
    ("tail n=2.5", lambda: an.tail_miss_probability(0.5, 0.1, 2.5), r"\bn\b.*2\.5"),
    ("tail array tau", lambda: an.tail_miss_probability([0.5, 0.5], [0.1, 0.6], 3), r"tau.*0\.6"),
    ("peak tau>=mu", lambda: an.tail_miss_peak(0.5, 0.6), r"tau.*0\.6"),
    ("peak n_max=0", lambda: an.tail_miss_peak(0.5, 0.1, n_max=0), r"n_max.*\b0"),
    ("peak grid=0", lambda: an.tail_miss_peak(0.5, 0.1, grid=[0, 4]), r"grid.*\b0"),
    ("peak grid=1.5", lambda: an.tail_miss_peak(0.5, 0.1, grid=[1.5, 4]), r"grid.*1\.5"),
    ("mb probs sum", lambda: an.mass_balance([0.5, 0.4], [True, False], [True, False]), r"probs.*0\.9"),
    ("mb probs neg", lambda: an.mass_balance([1.2, -0.2], [True, False], [True, False]), r"probs.*-0\.2"),
    ("mb probs NaN", lambda: an.mass_balance([NAN, 1.0], [True, False], [True, False]), r"probs.*nan"),
    ("mb correct int", lambda: an.mass_balance(_P, _C.astype(int), _S), r"correct.*int"),
    ("mb correct shape", lambda: an.mass_balance(_P, _C[:3], _S), r"correct.*\(3,\)"),
    ("mb sampled neg", lambda: an.mass_balance(_P, _C, np.array([-1, 0, 0, 1, 0])), r"sampled.*-1"),
    ("mb sampled frac", lambda: an.mass_balance(_P, _C, np.array([0.5, 0, 0, 1, 0])), r"sampled.*0\.5"),
    ("mb r_c<=r_w", lambda: an.mass_balance(_P, _C, _S, r_c=0.0, r_w=0.25), r"r_c.*0\..*r_w.*0\.25"),
    ("mb eta=0", lambda: an.mass_balance(_P, _C, _S, eta=0.0), r"eta.*0\.0"),
    ("mb eta<0", lambda: an.mass_balance(_P, _C, _S, eta=-0.5), r"eta.*-0\.5"),
    ("uc r_c<=r_w", lambda: an.unsampled_correct_change(_P, _C, _S, 1.0, 1.0), r"r_c.*r_w"),
    ("uc probs sum", lambda: an.unsampled_correct_change(_P * 1.1, _C, _S), r"probs.*1\.1"),
    ("uc sampled int", lambda: an.unsampled_correct_change(_P, _C, np.array([1.5, 0, 0, 1, 0])), r"sampled.*1\.5"),
    ("uc eta NaN", lambda: an.unsampled_correct_change(_P, _C, _S, eta=NAN), r"eta.*nan"),
    ("eu2 n<0", lambda: an.expected_unsampled_second_moment(_P, -1), r"\bn\b.*-1"),
    ("eu2 n frac", lambda: an.expected_unsampled_second_moment(_P, 2.5), r"\bn\b.*2\.5"),
    ("eu2 mask int", lambda: an.expected_unsampled_second_moment(_P, 2, _C.astype(int)), r"mask.*int"),
    ("eu2 probs", lambda: an.expected_unsampled_second_moment([0.7, 0.7], 2), r"probs.*1\.4"),
    ("euq n frac", lambda: an.expected_unsampled_mass(_P, 3.5), r"\bn\b.*3\.5"),
    ("euq probs neg", lambda: an.expected_unsampled_mass([1.5, -0.5], 3), r"probs.*-0\.5"),
    ("euc correct int", lambda: an.expected_unsampled_coupling(_P, _C.astype(int), 3), r"correct.*int"),
    ("euc n<0", lambda: an.expected_unsampled_coupling(_P, _C, -2), r"\bn\b.*-2"),
    ("esm k>n", lambda: an.expected_sampled_mass(_P, _C, 3, 4), r"\bk\b.*4.*\bn\b.*3"),
    ("esm k<0", lambda: an.expected_sampled_mass(_P, _C, 3, -1), r"\bk\b.*-1"),
    ("esm n=0", lambda: an.expected_sampled_mass(_P, _C, 0, 0), r"\bn\b.*\b0"),
    ("esm correct int", lambda: an.expected_sampled_mass(_P, _C.astype(int), 3, 1), r"correct.*int"),
    ("mood r_c<=r_w", lambda: an.expected_batch_mood(_P, _C, 3, 1, r_c=-1.0, r_w=0.0), r"r_c.*-1\..*r_w"),
    ("mood k>n", lambda: an.expected_batch_mood(_P, _C, 3, 5), r"\bk\b.*5.*\bn\b.*3"),
    ("focal mu>1", lambda: an.focal_weight(1.5, 1.0), r"mu_hat.*1\.5"),
    ("focal mu<0", lambda: an.focal_weight(-0.1, 1.0), r"mu_hat.*-0\.1"),
    ("focal gamma<0", lambda: an.focal_weight(0.5, -0.5), r"gamma.*-0\.5"),
    ("focal gamma NaN", lambda: an.focal_weight(0.5, NAN), r"gamma.*nan"),
    ("adv mu=0", lambda: an.advantage_magnitudes(0.0), r"mu_pos.*0\.0"),
    ("adv mu=1", lambda: an.advantage_magnitudes(1.0), r"mu_pos.*1\.0"),
    ("adv std", lambda: an.advantage_magnitudes(0.5, std="foo"), r"std.*foo"),
    ("adv bessel no n", lambda: an.advantage_magnitudes(0.5, std="bessel"), r"\bn\b.*None"),
    ("adv bessel n=1", lambda: an.advantage_magnitudes(0.5, std="bessel", n=1), r"\bn\b.*\b1"),
    ("lr gamma<0", lambda: an.lr_matched_scale(-1.0), r"gamma.*-1\.0"),
    ("lr gamma inf", lambda: an.lr_matched_scale(math.inf), r"gamma.*inf"),
    ("pass k>n", lambda: an.pass_at_k(10, 3, 11), r"\bk\b.*11.*\bn\b.*10"),
    ("pass c>n", lambda: an.pass_at_k(10, 11, 3), r"\bc\b.*11.*\bn\b.*10"),
    ("pass c<0", lambda: an.pass_at_k(10, -1, 3), r"\bc\b.*-1"),
    ("pass k=0", lambda: an.pass_at_k(10, 3, 0), r"\bk\b.*\b0"),
    ("pass n=0", lambda: an.pass_at_k(0, 0, 1), r"\bn\b.*\b0"),
    ("pass n frac", lambda: an.pass_at_k(10.5, 3, 1), r"\bn\b.*10\.5"),
    ("pass NaN", lambda: an.pass_at_k(10, NAN, 1), r"\bc\b.*nan"),
    ("pmass q>1", lambda: an.pass_at_k_from_mass(1.5, 3), r"q_pos.*1\.5"),
    ("pmass k=0", lambda: an.pass_at_k_from_mass(0.5, 0), r"\bk\b.*\b0"),
    ("init V=1", lambda: an.initial_distribution(num_actions=1), r"num_actions.*\b1"),
    ("init C=0", lambda: an.initial_distribution(num_correct=0), r"num_correct.*\b0"),
    ("init C>=V", lambda: an.initial_distribution(100, 100), r"num_correct.*100"),
    ("init kind", lambda: an.initial_distribution(init="foo"), r"init.*foo"),
]


@pytest.mark.parametrize(("call", "pattern"), [v[1:] for v in VALIDATION], ids=[v[0] for v in VALIDATION])
def test_validation_errors_name_argument_and_value(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


def test_every_public_function_is_validated():
    covered = {name for name in an.__all__ if callable(getattr(an, name)) and not name[0].isupper()}
    src = "\n".join(v[0] for v in VALIDATION)
    prefixes = {
        "active_probability": "active", "tail_miss_probability": "tail", "tail_miss_peak": "peak",
        "mass_balance": "mb", "unsampled_correct_change": "uc", "expected_unsampled_second_moment": "eu2",
        "expected_unsampled_mass": "euq", "expected_unsampled_coupling": "euc",
        "expected_sampled_mass": "esm", "expected_batch_mood": "mood", "focal_weight": "focal",
        "advantage_magnitudes": "adv", "lr_matched_scale": "lr", "pass_at_k": "pass",
        "pass_at_k_from_mass": "pmass", "initial_distribution": "init",
    }  # fmt: skip
    assert covered == set(prefixes)
    for prefix in prefixes.values():
        assert any(line.split()[0] == prefix for line in src.splitlines())
