"""Tests of :mod:`tailmiss.objectives`: advantages, focal weight, surrogates and token losses.

Golden values are hand-computed (spec §3.6 and §4); closed-form gradients are
checked against torch autograd of the explicit objectives in float64.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tailmiss import analytic
from tailmiss.objectives import (
    ADVANTAGE_MODES,
    POLICY_LOSSES,
    STD_KINDS,
    SURROGATES,
    LossConfig,
    binary_group_advantages,
    focal_weight,
    group_advantages,
    policy_loss,
)

F64 = torch.float64


def _t(values, dtype=F64):
    return torch.tensor(values, dtype=dtype)


def _binary(n: int, x: int, r_c: float = 1.0, r_w: float = 0.0) -> torch.Tensor:
    return _t([r_c] * x + [r_w] * (n - x))


# ---------------------------------------------------------------------------
# group_advantages
# ---------------------------------------------------------------------------


def test_group_advantages_none_returns_rewards():
    r = _t([[1.0, -2.0, 0.5], [3.0, 3.0, 3.0]])
    torch.testing.assert_close(group_advantages(r, mode="none"), r, rtol=0, atol=0)


def test_group_advantages_mean_centres_each_row():
    r = _t([[1.0, 0.0, 0.0, 1.0], [2.0, 4.0, 6.0, 8.0]])
    expected = _t([[0.5, -0.5, -0.5, 0.5], [-3.0, -1.0, 1.0, 3.0]])
    torch.testing.assert_close(group_advantages(r, mode="mean"), expected, rtol=0, atol=1e-15)


def test_group_advantages_std_population_and_bessel():
    r = _t([[2.0, 4.0, 6.0, 8.0]])
    centred = _t([[-3.0, -1.0, 1.0, 3.0]])
    pop = math.sqrt(5.0)  # mean of (9, 1, 1, 9)
    bes = math.sqrt(20.0 / 3.0)
    torch.testing.assert_close(
        group_advantages(r, mode="std", std="population", eps=0.0), centred / pop, rtol=1e-14, atol=0
    )
    torch.testing.assert_close(
        group_advantages(r, mode="std", std="bessel", eps=0.0), centred / bes, rtol=1e-14, atol=0
    )


def test_group_advantages_eps_is_added_to_sigma():
    r = _t([1.0, 0.0])
    for eps in (1e-6, 0.5, 1.0):
        got = group_advantages(r, mode="std", std="population", eps=eps)
        torch.testing.assert_close(got, _t([0.5, -0.5]) / (0.5 + eps), rtol=1e-14, atol=0)


def test_group_advantages_default_is_bessel_with_eps_1e6():
    r = _t([1.0, 0.0])
    expected = _t([0.5, -0.5]) / (math.sqrt(0.5) + 1e-6)
    torch.testing.assert_close(group_advantages(r), expected, rtol=1e-14, atol=0)


def test_group_advantages_uniform_group_is_zero():
    r = _t([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    for mode in ("mean", "std"):
        for std in STD_KINDS:
            out = group_advantages(r, mode=mode, std=std)
            torch.testing.assert_close(out, torch.zeros_like(r), rtol=0, atol=1e-12)


def test_group_of_size_one():
    r = _t([[3.0], [-2.0]])
    # Bessel's std of a single value is taken as 1 (verl), population std is 0
    assert torch.isfinite(group_advantages(r, mode="std", std="bessel", eps=0.0)).all()
    torch.testing.assert_close(group_advantages(r, mode="std", std="bessel", eps=0.0), torch.zeros_like(r))
    torch.testing.assert_close(group_advantages(r, mode="std", std="population", eps=1e-6), torch.zeros_like(r))
    torch.testing.assert_close(group_advantages(r, mode="mean"), torch.zeros_like(r))
    torch.testing.assert_close(group_advantages(r, mode="none"), r)


@pytest.mark.parametrize(
    ("n", "x", "bessel", "population"),
    [
        # spec §3.6: Bessel A+/A- (population in brackets), rewards 1/0, eps = 0
        (2, 1, (0.7071, -0.7071), (1.0, -1.0)),
        (4, 3, (0.5, -1.5), (0.5774, -1.7321)),
        (8, 7, (0.3536, -2.4749), (0.3780, -2.6458)),
    ],
)
def test_spec_bessel_golden_values(n, x, bessel, population):
    r = _binary(n, x)
    for std, (a_pos, a_neg) in (("bessel", bessel), ("population", population)):
        adv = group_advantages(r, mode="std", std=std, eps=0.0)
        expected = _t([a_pos] * x + [a_neg] * (n - x))
        torch.testing.assert_close(adv, expected, rtol=0, atol=5e-5)
        # tiny eps changes nothing at this tolerance
        torch.testing.assert_close(group_advantages(r, mode="std", std=std, eps=1e-12), expected, rtol=0, atol=5e-5)


def test_group_advantages_shape_g_by_n():
    torch.manual_seed(0)
    r = torch.randint(0, 2, (5, 8)).to(F64)
    for mode in ADVANTAGE_MODES:
        out = group_advantages(r, mode=mode)
        assert out.shape == (5, 8)
        # rows are independent groups
        for g in range(5):
            torch.testing.assert_close(out[g], group_advantages(r[g], mode=mode), rtol=1e-14, atol=1e-14)
    assert group_advantages(r[None], mode="std").shape == (1, 5, 8)


def test_group_advantages_rejects_bad_arguments():
    r = _t([1.0, 0.0])
    with pytest.raises(ValueError, match="mode"):
        group_advantages(r, mode="median")
    with pytest.raises(ValueError, match="std"):
        group_advantages(r, std="sample")
    with pytest.raises(ValueError, match="rewards"):
        group_advantages(_t(1.0))


# ---------------------------------------------------------------------------
# binary_group_advantages
# ---------------------------------------------------------------------------


@st.composite
def _binary_case(draw):
    n = draw(st.integers(1, 64))
    x = draw(st.integers(0, n))
    r_w = draw(st.floats(-5.0, 5.0, allow_nan=False))
    r_c = r_w + draw(st.floats(0.01, 10.0, allow_nan=False))
    mode = draw(st.sampled_from(ADVANTAGE_MODES))
    std = draw(st.sampled_from(STD_KINDS))
    eps = draw(st.sampled_from([1e-6, 1e-4, 0.1]))
    return n, x, r_c, r_w, mode, std, eps


@given(_binary_case())
def test_binary_group_advantages_matches_explicit_rewards(case):
    n, x, r_c, r_w, mode, std, eps = case
    explicit = group_advantages(_binary(n, x, r_c, r_w), mode=mode, std=std, eps=eps)
    a_pos, a_neg = binary_group_advantages(_t(x), _t(n), r_c, r_w, mode=mode, std=std, eps=eps)
    scale = max(1.0, abs(r_c), abs(r_w))
    # only the advantages of rollouts that exist are defined by the explicit vector
    if x > 0:
        torch.testing.assert_close(explicit[:x], a_pos.expand(x), rtol=1e-9, atol=1e-9 * scale)
    if x < n:
        torch.testing.assert_close(explicit[x:], a_neg.expand(n - x), rtol=1e-9, atol=1e-9 * scale)


@pytest.mark.parametrize("mode", ["mean", "std"])
@pytest.mark.parametrize("std", STD_KINDS)
@pytest.mark.parametrize("n", [1, 2, 7, 64])
def test_binary_group_advantages_uniform_groups_are_zero(mode, std, n):
    # X = 0: every rollout is incorrect; X = N: every rollout is correct
    _, a_neg = binary_group_advantages(_t(0), _t(n), 1.0, -1.0, mode=mode, std=std)
    a_pos, _ = binary_group_advantages(_t(n), _t(n), 1.0, -1.0, mode=mode, std=std)
    assert a_neg.item() == 0.0
    assert a_pos.item() == 0.0


def test_binary_group_advantages_batched_shapes_and_values():
    x = _t([[1, 3, 7]])
    n = _t([[2], [4], [8]])  # broadcast to (3, 3)
    a_pos, a_neg = binary_group_advantages(x, n, 1.0, 0.0, mode="std", std="bessel", eps=0.0)
    assert a_pos.shape == a_neg.shape == (3, 3)
    # diagonal holds the spec §3.6 cases
    torch.testing.assert_close(a_pos.diagonal(), _t([0.7071, 0.5, 0.3536]), rtol=0, atol=5e-5)
    torch.testing.assert_close(a_neg.diagonal(), _t([-0.7071, -1.5, -2.4749]), rtol=0, atol=5e-5)


def test_binary_group_advantages_none_and_mean_closed_forms():
    a_pos, a_neg = binary_group_advantages(_t([0, 1, 4]), _t(4), 1.0, -1.0, mode="none")
    torch.testing.assert_close(a_pos, _t([1.0, 1.0, 1.0]))
    torch.testing.assert_close(a_neg, _t([-1.0, -1.0, -1.0]))
    a_pos, a_neg = binary_group_advantages(_t([0, 1, 4]), _t(4), 1.0, -1.0, mode="mean")
    # |A+| = (1 - mu)(Rc - Rw), |A-| = mu (Rc - Rw) (spec §4.5)
    torch.testing.assert_close(a_pos, _t([2.0, 1.5, 0.0]), rtol=0, atol=1e-15)
    torch.testing.assert_close(a_neg, _t([0.0, -0.5, -2.0]), rtol=0, atol=1e-15)


def test_binary_group_advantages_rejects_bad_mode():
    with pytest.raises(ValueError, match="mode"):
        binary_group_advantages(_t(1), _t(2), mode="z")
    with pytest.raises(ValueError, match="std"):
        binary_group_advantages(_t(1), _t(2), std="z")


# ---------------------------------------------------------------------------
# focal_weight
# ---------------------------------------------------------------------------


def test_focal_weight_golden_values():
    x = _t([0, 1, 2, 4, 6, 7, 8])
    n = _t(8)
    mu = x / 8
    for gamma in (0.0, 0.5, 1.0, 2.0):
        torch.testing.assert_close(focal_weight(x, n, gamma), (1 - mu) ** gamma, rtol=1e-15, atol=0)
    # spec §3.6 table (N = 8 grid)
    g = focal_weight(_t([1, 2, 4, 6, 7]), n, 0.5)
    torch.testing.assert_close(g, _t([0.9354, 0.8660, 0.7071, 0.5, 0.3536]), rtol=0, atol=5e-5)


def test_focal_weight_zero_to_the_zero_is_one():
    g = focal_weight(_t([8]), _t([8]), 0.0)
    assert g.item() == 1.0
    assert focal_weight(_t([8]), _t([8]), 1.0).item() == 0.0


def test_focal_weight_per_group_gamma_and_integer_inputs():
    x = torch.tensor([1, 3, 2])
    n = torch.tensor([4, 4, 2])
    gamma = _t([0.0, 1.0, 2.0])
    out = focal_weight(x, n, gamma)
    assert out.dtype == F64
    torch.testing.assert_close(out, _t([1.0, 0.25, 0.0]), rtol=0, atol=0)


@pytest.mark.parametrize("gamma", [-1.0, -1e-9, [0.0, -0.5]])
def test_focal_weight_negative_gamma_raises(gamma):
    with pytest.raises(ValueError, match="gamma"):
        focal_weight(_t([1.0, 1.0]), _t([2.0, 2.0]), gamma)


@given(
    n=st.integers(1, 10_000),
    frac=st.floats(0.0, 1.0),
    gamma=st.floats(0.0, 8.0, allow_nan=False),
)
def test_focal_weight_agrees_with_analytic(n, frac, gamma):
    x = round(frac * n)
    got = focal_weight(_t(x), _t(n), gamma).item()
    want = analytic.focal_weight(x / n, gamma)
    assert got == pytest.approx(want, rel=1e-12, abs=1e-300)


# ---------------------------------------------------------------------------
# Categorical surrogates: closed form vs autograd of the explicit objective
# ---------------------------------------------------------------------------


def _draw_case(v: int, n: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(v, generator=gen, dtype=F64) * 1.5
    p = torch.softmax(z, 0)
    draws = torch.multinomial(p, n, replacement=True, generator=gen)
    adv_of_action = torch.randn(v, generator=gen, dtype=F64)  # A(i): a function of the action
    return z, draws, adv_of_action


def _grad(objective, z):
    z = z.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(objective(z), z)
    return g


@pytest.mark.parametrize(("v", "n", "seed"), [(7, 5, 0), (7, 40, 1), (23, 12, 2), (50, 200, 3), (50, 3, 4)])
def test_logprob_surrogate_matches_autograd(v, n, seed):
    z, draws, adv = _draw_case(v, n, seed)

    def objective(zz):  # J = sum_j A_j log p(a_j)
        logp = torch.log_softmax(zz, 0)
        return sum(adv[a] * logp[a] for a in draws.tolist())

    counts = torch.bincount(draws, minlength=v).to(F64)
    got = SURROGATES["logprob"].ascent(torch.softmax(z, 0), counts * adv)
    torch.testing.assert_close(got, _grad(objective, z), rtol=1e-12, atol=1e-13)
    assert SURROGATES["logprob"].distinct is False


@pytest.mark.parametrize(("v", "n", "seed"), [(7, 5, 0), (7, 40, 1), (23, 12, 2), (50, 200, 3), (50, 3, 4)])
def test_prob_surrogate_matches_autograd(v, n, seed):
    z, draws, adv = _draw_case(v, n, seed)

    def objective(zz):  # J = sum_j A_j p(a_j)
        p = torch.softmax(zz, 0)
        return sum(adv[a] * p[a] for a in draws.tolist())

    counts = torch.bincount(draws, minlength=v).to(F64)
    got = SURROGATES["prob"].ascent(torch.softmax(z, 0), counts * adv)
    torch.testing.assert_close(got, _grad(objective, z), rtol=1e-12, atol=1e-14)
    assert SURROGATES["prob"].distinct is False


@pytest.mark.parametrize(("v", "n", "seed"), [(7, 5, 0), (7, 40, 1), (23, 12, 2), (50, 200, 3), (50, 3, 4)])
@pytest.mark.parametrize(("r_c", "r_w"), [(1.0, 0.0), (1.0, -1.0)])
def test_theory_surrogate_matches_autograd(v, n, seed, r_c, r_w):
    z, draws, _ = _draw_case(v, n, seed)
    correct = torch.arange(v) < max(1, v // 3)
    reward = torch.where(correct, _t(r_c), _t(r_w))
    distinct = sorted(set(draws.tolist()))

    def objective(zz):  # J = sum over DISTINCT sampled i of R_i p_i
        p = torch.softmax(zz, 0)
        return sum(reward[i] * p[i] for i in distinct)

    sampled = torch.bincount(draws, minlength=v) > 0
    surrogate = SURROGATES["theory"]
    assert surrogate.distinct is True
    got = surrogate.ascent(torch.softmax(z, 0), sampled.to(F64) * reward)
    torch.testing.assert_close(got, _grad(objective, z), rtol=1e-12, atol=1e-14)
    # Eq. 5: dz_i = p_i (R_i - S_R), R = 0 off the sample
    p = torch.softmax(z, 0)
    r_sampled = sampled.to(F64) * reward
    s_r = (r_sampled * p).sum()
    torch.testing.assert_close(got, p * (r_sampled - s_r), rtol=1e-13, atol=1e-15)


def test_surrogates_with_per_draw_advantages_and_batched_rows():
    # advantages may differ between draws of the same action: weights are their sums
    gen = torch.Generator().manual_seed(7)
    rows, v, n = 3, 11, 9
    z = torch.randn(rows, v, generator=gen, dtype=F64)
    draws = torch.randint(0, v, (rows, n), generator=gen)
    adv = torch.randn(rows, n, generator=gen, dtype=F64)
    weights = torch.zeros(rows, v, dtype=F64).scatter_add_(1, draws, adv)
    for name, link in (("logprob", torch.log_softmax), ("prob", torch.softmax)):

        def objective(zz, link=link):
            return (adv * link(zz, 1).gather(1, draws)).sum()

        got = SURROGATES[name].ascent(torch.softmax(z, 1), weights)
        torch.testing.assert_close(got, _grad(objective, z), rtol=1e-12, atol=1e-14)


def test_logprob_centred_advantages_leave_unsampled_actions_alone():
    # spec §5.2: with sum_j A_j = 0 the log-prob gradient of an unsampled action is 0
    p = torch.softmax(_t([1.0, 0.0, -1.0, 2.0, 0.5]), 0)
    weights = _t([1.5, -1.5, 0.0, 0.0, 0.0])
    got = SURROGATES["logprob"].ascent(p, weights)
    torch.testing.assert_close(got, weights, rtol=0, atol=1e-15)


def test_surrogate_registry_names():
    assert set(SURROGATES) == {"logprob", "prob", "theory"}
    for name, s in SURROGATES.items():
        assert s.name == name
        assert s.description


# ---------------------------------------------------------------------------
# Token-level policy losses
# ---------------------------------------------------------------------------


def _ones(shape):
    return torch.ones(shape, dtype=F64)


def test_policy_loss_registry_defaults():
    assert set(POLICY_LOSSES) == {"grpo", "dapo", "cispo"}
    assert (POLICY_LOSSES["grpo"].defaults.clip_low, POLICY_LOSSES["grpo"].defaults.clip_high) == (0.2, 0.2)
    assert (POLICY_LOSSES["dapo"].defaults.clip_low, POLICY_LOSSES["dapo"].defaults.clip_high) == (0.2, 0.28)
    assert (POLICY_LOSSES["cispo"].defaults.clip_low, POLICY_LOSSES["cispo"].defaults.clip_high) == (1.0, 5.0)
    for entry in POLICY_LOSSES.values():
        assert entry.defaults.dual_clip is None
        assert entry.defaults.aggregation == "token-mean"
        assert entry.defaults.cispo_clip_mode == "relative"


@pytest.mark.parametrize("name", ["grpo", "dapo"])
def test_ratio_one_gives_minus_token_mean_advantage(name):
    logp = torch.log(_t([[0.3, 0.5, 0.2, 0.9], [0.1, 0.4, 0.7, 0.6]]))
    adv = _t([[2.0], [-1.0]])
    mask = _t([[1, 1, 1, 0], [1, 0, 0, 0]])
    loss = policy_loss(name, logp, logp.clone(), adv, mask)
    # token-mean: (3 * 2 + 1 * (-1)) / 4 tokens
    assert loss.item() == pytest.approx(-(3 * 2.0 - 1.0) / 4, rel=1e-14)


def _clip_case(ratio, adv, name, **overrides):
    old = torch.zeros(1, 1, dtype=F64)
    logp = torch.log(_t([[ratio]])).requires_grad_(True)
    loss = policy_loss(name, logp, old, _t([[adv]]), _ones((1, 1)), **overrides)
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.item(), grad.item()


@pytest.mark.parametrize(
    ("name", "ratio", "adv", "objective", "clipped"),
    [
        # A > 0: min(rA, clip(r)A); upper clip at 1 + eps_high
        ("grpo", 1.5, 2.0, 1.2 * 2.0, True),
        ("dapo", 1.5, 2.0, 1.28 * 2.0, True),
        ("grpo", 1.1, 2.0, 1.1 * 2.0, False),
        ("dapo", 1.25, 2.0, 1.25 * 2.0, False),  # inside DAPO's clip-higher, outside GRPO's
        ("grpo", 1.25, 2.0, 1.2 * 2.0, True),
        ("grpo", 0.5, 2.0, 0.5 * 2.0, False),  # below 1 - eps_low: the unclipped rA is smaller
        ("dapo", 0.5, 2.0, 0.5 * 2.0, False),
        # A < 0: lower clip at 1 - eps_low binds, large ratios stay unclipped
        ("grpo", 0.5, -1.0, 0.8 * -1.0, True),
        ("dapo", 0.5, -1.0, 0.8 * -1.0, True),
        ("grpo", 1.5, -1.0, 1.5 * -1.0, False),
        ("dapo", 0.9, -1.0, 0.9 * -1.0, False),
    ],
)
def test_ppo_clip_values_and_gradients(name, ratio, adv, objective, clipped):
    loss, grad = _clip_case(ratio, adv, name)
    assert loss == pytest.approx(-objective, rel=1e-12)
    # d(-rA)/dlogp = -rA where unclipped; a clipped token has no gradient
    assert grad == pytest.approx(0.0 if clipped else -ratio * adv, abs=1e-12, rel=1e-12)


def test_dual_clip_bounds_negative_advantage_objective():
    # A < 0, r = 5: min(5A, 1.2A) = 5A = -10; dual clip max(-10, 3A = -6) = -6
    loss, grad = _clip_case(5.0, -2.0, "grpo", dual_clip=3.0)
    assert loss == pytest.approx(6.0, rel=1e-12)
    assert grad == pytest.approx(0.0, abs=1e-15)
    # without dual clip the loss is 10 and the gradient is -rA = 10
    loss, grad = _clip_case(5.0, -2.0, "grpo")
    assert loss == pytest.approx(10.0, rel=1e-12)
    assert grad == pytest.approx(10.0, rel=1e-12)
    # below c the dual clip is inactive; positive advantages are untouched
    assert _clip_case(2.0, -2.0, "grpo", dual_clip=3.0)[0] == pytest.approx(4.0, rel=1e-12)
    assert _clip_case(5.0, 2.0, "grpo", dual_clip=3.0)[0] == pytest.approx(-2.4, rel=1e-12)


@pytest.mark.parametrize(
    ("mode", "ratio", "weight"),
    [
        ("relative", 7.0, 6.0),  # clip(r, 1 - 1, 1 + 5) = clip(r, 0, 6)
        ("relative", 5.5, 5.5),
        ("relative", 0.01, 0.01),
        ("absolute", 7.0, 5.0),  # TRL: min(r, 5), no floor
        ("absolute", 5.5, 5.0),
        ("absolute", 0.01, 0.01),
        ("absolute", 1.0, 1.0),
    ],
)
def test_cispo_clip_modes(mode, ratio, weight):
    adv = -1.5
    old = torch.zeros(1, 1, dtype=F64)
    logp = torch.log(_t([[ratio]]))
    loss = policy_loss("cispo", logp, old, _t([[adv]]), _ones((1, 1)), cispo_clip_mode=mode)
    assert loss.item() == pytest.approx(-weight * adv * math.log(ratio), rel=1e-12)


def test_cispo_relative_floor_with_small_clip_low():
    old = torch.zeros(1, 2, dtype=F64)
    logp = torch.log(_t([[0.5, 9.0]]))
    loss = policy_loss("cispo", logp, old, _t([[1.0]]), _ones((1, 2)), clip_low=0.2, clip_high=0.28)
    expected = -(0.8 * math.log(0.5) + 1.28 * math.log(9.0)) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-mean"])
def test_cispo_gradient_is_detached_clipped_ratio(aggregation):
    gen = torch.Generator().manual_seed(3)
    b, t = 4, 6
    old = torch.log(torch.rand(b, t, generator=gen, dtype=F64) * 0.9 + 0.05)
    # ratios spread over [0.02, 12] so both the cap (6) and the interior are hit
    logp = (old + torch.empty(b, t, dtype=F64).uniform_(-4.0, 2.5, generator=gen)).requires_grad_(True)
    adv = torch.randn(b, 1, generator=gen, dtype=F64)
    mask = _t([[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0], [1, 0, 0, 0, 0, 0]])
    loss = policy_loss("cispo", logp, old, adv, mask, aggregation=aggregation)
    (grad,) = torch.autograd.grad(loss, logp)
    r_hat = torch.exp(logp.detach() - old).clamp(0.0, 6.0)
    assert (r_hat == 6.0).any() and ((r_hat > 0) & (r_hat < 6)).any()
    if aggregation == "token-mean":
        denom = mask.sum()
    else:
        denom = b * mask.sum(1, keepdim=True)
    expected = -r_hat * adv * mask / denom
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-15)


def test_aggregation_token_mean_vs_seq_mean_token_mean():
    per_token_adv = _t([[1.0, 2.0, 3.0, 4.0], [10.0, 0.0, 0.0, 0.0], [5.0, 7.0, 0.0, 0.0]])
    mask = _t([[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0]])
    logp = torch.log(_t([[0.5] * 4] * 3))
    # ratio 1: per-token loss is -A; padded positions hold arbitrary values that must be ignored
    per_token_adv_padded = per_token_adv + (1 - mask) * 1e6
    tok = policy_loss("grpo", logp, logp.clone(), per_token_adv_padded, mask, aggregation="token-mean")
    seq = policy_loss("grpo", logp, logp.clone(), per_token_adv_padded, mask, aggregation="seq-mean-token-mean")
    assert tok.item() == pytest.approx(-(1 + 2 + 3 + 4 + 10 + 5 + 7) / 7, rel=1e-14)
    assert seq.item() == pytest.approx(-(2.5 + 10.0 + 6.0) / 3, rel=1e-14)


def test_policy_loss_explicit_config_and_overrides():
    old = torch.zeros(1, 1, dtype=F64)
    logp = torch.log(_t([[1.5]]))
    cfg = LossConfig(clip_low=0.1, clip_high=0.1)
    assert policy_loss("grpo", logp, old, _t([[1.0]]), _ones((1, 1)), cfg).item() == pytest.approx(-1.1)
    # overrides replace fields of the given config
    loss = policy_loss("grpo", logp, old, _t([[1.0]]), _ones((1, 1)), cfg, clip_high=0.3)
    assert loss.item() == pytest.approx(-1.3)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"clip_low": -0.1}, "clip"),
        ({"clip_high": -1.0}, "clip"),
        ({"dual_clip": 1.0}, "dual_clip"),
        ({"dual_clip": 0.5}, "dual_clip"),
        ({"cispo_clip_mode": "both"}, "cispo_clip_mode"),
        ({"aggregation": "seq-sum"}, "aggregation"),
    ],
)
def test_loss_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        LossConfig(**kwargs)
    logp = torch.zeros(1, 2, dtype=F64)
    with pytest.raises(ValueError, match=field):
        policy_loss("grpo", logp, logp, _t([[1.0]]), _ones((1, 2)), **kwargs)


def test_policy_loss_rejects_unknown_name_and_shape_mismatch():
    logp = torch.zeros(2, 3, dtype=F64)
    with pytest.raises(ValueError, match="name") as info:
        policy_loss("ppo", logp, logp, _t([[1.0], [1.0]]), _ones((2, 3)))
    assert "grpo" in str(info.value)
    with pytest.raises(ValueError, match="shape"):
        policy_loss("grpo", logp, torch.zeros(2, 4, dtype=F64), _t([[1.0], [1.0]]), _ones((2, 3)))
    with pytest.raises(ValueError, match="shape"):
        policy_loss("grpo", logp, logp, _t([[1.0], [1.0]]), _ones((3, 2)))


def test_focal_weight_scales_loss_linearly():
    # spec §4.6: g multiplies the advantage; for unclipped tokens the loss scales by g
    gen = torch.Generator().manual_seed(5)
    old = torch.log(torch.rand(3, 4, generator=gen, dtype=F64) + 0.1)
    logp = old + 0.01 * torch.randn(3, 4, generator=gen, dtype=F64)
    adv = torch.randn(3, 1, generator=gen, dtype=F64)
    mask = _ones((3, 4))
    g = focal_weight(_t([[1], [2], [3]]), _t(4), 1.0)
    for name in POLICY_LOSSES:
        base = [policy_loss(name, logp[i : i + 1], old[i : i + 1], adv[i : i + 1], mask[i : i + 1]) for i in range(3)]
        weighted = [
            policy_loss(name, logp[i : i + 1], old[i : i + 1], g[i : i + 1] * adv[i : i + 1], mask[i : i + 1])
            for i in range(3)
        ]
        np.testing.assert_allclose([w.item() for w in weighted], [g[i, 0].item() * base[i].item() for i in range(3)])


def test_seq_mean_ignores_sequences_without_response_tokens():
    logp = torch.zeros(2, 3)
    mask = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    adv = torch.ones(2, 1)
    loss = policy_loss("grpo", logp, logp, adv, mask, aggregation="seq-mean-token-mean")
    assert loss.item() == pytest.approx(-1.0, abs=1e-12)


def test_unknown_override_is_a_value_error():
    x = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="'clip'"):
        policy_loss("grpo", x, x, torch.ones(1, 1), torch.ones(1, 2), clip=0.3)
