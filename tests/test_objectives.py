"""Tests of :mod:`tailmiss.objectives`: advantages, focal weight, surrogates and token losses.

Golden values are hand-computed (spec §3.6 and §4); closed-form gradients are
checked against torch autograd of the explicit objectives in float64.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tailmiss import analytic
from tailmiss.objectives import (
    ADVANTAGE_MODES,
    AGGREGATIONS,
    POLICY_LOSSES,
    STD_KINDS,
    SURROGATES,
    LossConfig,
    PolicyLoss,
    PolicyLossOutput,
    binary_group_advantages,
    focal_weight,
    group_advantages,
    masked_mean,
    policy_loss,
    register_aggregation,
    register_policy_loss,
    register_surrogate,
    resolve_loss_config,
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
    # (clip_low, clip_high, aggregation, advantage) of each method's paper settings
    expected = {
        "grpo": (0.2, 0.2, "token-mean", "std"),
        "dapo": (0.2, 0.28, "token-mean", "std"),
        "cispo": (1.0, 5.0, "token-mean", "std"),
        "drgrpo": (0.2, 0.2, "token-sum-norm", "mean"),
    }
    assert set(POLICY_LOSSES) == set(expected)
    for name, entry in POLICY_LOSSES.items():
        d = entry.defaults
        assert entry.name == name
        assert isinstance(d, LossConfig)
        assert (d.clip_low, d.clip_high, d.aggregation, entry.advantage) == expected[name]
        assert entry.advantage in ADVANTAGE_MODES
        assert d.dual_clip is None  # off
        assert d.norm_length is None  # the mask width
        assert d.cispo_clip_mode == "relative"
    # Dr. GRPO is GRPO's PPO-clip with another aggregation and advantage
    assert POLICY_LOSSES["drgrpo"].fn is POLICY_LOSSES["grpo"].fn


def test_drgrpo_advantage_mode_is_mean_centring():
    r = _t([[1.0, 0.0, 0.0, 1.0, 1.0]])
    adv = group_advantages(r, mode=POLICY_LOSSES["drgrpo"].advantage)
    torch.testing.assert_close(adv, _t([[0.4, -0.6, -0.6, 0.4, 0.4]]), rtol=0, atol=1e-15)


def test_policy_loss_entry_requires_resolved_defaults_and_known_advantage():
    fn = POLICY_LOSSES["grpo"].fn
    with pytest.raises(ValueError, match="aggregation"):
        PolicyLoss("x", fn, LossConfig(0.2, 0.2, cispo_clip_mode="relative"), advantage="std")
    with pytest.raises(ValueError, match="advantage"):
        PolicyLoss("x", fn, POLICY_LOSSES["grpo"].defaults, advantage="rank")


def test_loss_config_fields_default_to_none():
    assert all(getattr(LossConfig(), f.name) is None for f in dataclasses.fields(LossConfig))
    for name, entry in POLICY_LOSSES.items():
        assert resolve_loss_config(name) == entry.defaults
        assert resolve_loss_config(name, LossConfig()) == entry.defaults


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


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-mean", "token-sum-norm"])
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
    elif aggregation == "token-sum-norm":
        denom = b * t
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
        ({"aggregation": "seq-mean-token-sum-norm"}, "aggregation"),
        ({"norm_length": 0}, "norm_length"),
        ({"norm_length": -3}, "norm_length"),
        ({"norm_length": 2.5}, "norm_length"),
        ({"norm_length": True}, "norm_length"),
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


# ---------------------------------------------------------------------------
# Config resolution: a partial config keeps the method's defaults
# ---------------------------------------------------------------------------


def test_partial_config_keeps_cispo_clip_bounds():
    # regression: a config that sets only the aggregation used to bring GRPO's 0.2/0.2 into CISPO
    cfg = LossConfig(aggregation="seq-mean-token-mean")
    resolved = resolve_loss_config("cispo", cfg)
    assert (resolved.clip_low, resolved.clip_high) == (1.0, 5.0)
    assert resolved.aggregation == "seq-mean-token-mean"
    # r = 5.5 lies inside CISPO's [0, 6], so its weight is 5.5 (0.2/0.2 would make it 1.2)
    old = torch.zeros(1, 1, dtype=F64)
    logp = torch.log(_t([[5.5]]))
    out = policy_loss("cispo", logp, old, _t([[-1.5]]), _ones((1, 1)), config=cfg, return_stats=True)
    assert out.loss.item() == pytest.approx(-5.5 * -1.5 * math.log(5.5), rel=1e-12)
    assert out.clip_fraction.item() == 0.0


def test_partial_config_keeps_dapo_clip_higher():
    cfg = LossConfig(aggregation="seq-mean-token-mean")
    assert resolve_loss_config("dapo", cfg).clip_high == 0.28
    # r = 1.25, A = 2: inside DAPO's 1.28, so the objective is 2.5 (GRPO's 1.2 would give 2.4)
    loss = policy_loss("dapo", torch.log(_t([[1.25]])), torch.zeros(1, 1, dtype=F64), _t([[2.0]]), _ones((1, 1)), cfg)
    assert loss.item() == pytest.approx(-2.5, rel=1e-12)


def test_overrides_win_over_config_and_none_restores_the_default():
    cfg = LossConfig(clip_high=0.1, dual_clip=3.0, norm_length=7)
    assert resolve_loss_config("dapo", cfg).clip_high == 0.1
    assert resolve_loss_config("dapo", cfg, clip_high=0.3).clip_high == 0.3
    assert resolve_loss_config("dapo", cfg, clip_high=None).clip_high == 0.28
    assert resolve_loss_config("grpo", cfg).dual_clip == 3.0
    assert resolve_loss_config("grpo", cfg, dual_clip=None).dual_clip is None
    resolved = resolve_loss_config("drgrpo", cfg, clip_low=0.1)
    assert (resolved.clip_low, resolved.clip_high, resolved.norm_length) == (0.1, 0.1, 7)
    assert resolved.aggregation == "token-sum-norm"


def test_resolve_loss_config_rejects_bad_arguments():
    with pytest.raises(ValueError, match="'clip'"):
        resolve_loss_config("grpo", clip=0.3)
    with pytest.raises(ValueError, match="name"):
        resolve_loss_config("ppo")
    with pytest.raises(ValueError, match="clip_high"):
        resolve_loss_config("grpo", clip_high=-0.5)
    with pytest.raises(TypeError, match="LossConfig"):
        resolve_loss_config("grpo", {"clip_high": 0.3})


# ---------------------------------------------------------------------------
# Golden values on a 2 x 3 batch
# ---------------------------------------------------------------------------

# ratios r = p / p_old = [[1.5, 0.5, 1.25], [0.7, 7.0, 1.1]]; the last token of row 2 is padding
_P_OLD = [[0.4, 0.6, 0.2], [0.5, 0.1, 0.3]]
_P = [[0.6, 0.3, 0.25], [0.35, 0.7, 0.33]]
_MASK = [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]
_ADV = [[2.0], [-1.0]]
_VALID_R = [1.5, 0.5, 1.25, 0.7, 7.0]
_K3 = sum((r - 1) - math.log(r) for r in _VALID_R) / 5

# PPO-clip objectives of the five response tokens, min(rA, clip(r)A):
# GRPO 0.2/0.2: r = 1.5 and 1.25 clip to 1.2 * 2; r = 0.5 keeps 0.5 * 2 (< 0.8 * 2);
# r = 0.7 clips to 0.8 * -1; r = 7 keeps 7 * -1 (< 1.2 * -1)
_GRPO_OBJ = 1.2 * 2 + 0.5 * 2 + 1.2 * 2 + 0.8 * -1 + 7.0 * -1  # = -2.0, 3 of 5 clipped
# DAPO 0.2/0.28: r = 1.25 is now inside, r = 1.5 clips to 1.28 * 2
_DAPO_OBJ = 1.28 * 2 + 0.5 * 2 + 1.25 * 2 + 0.8 * -1 + 7.0 * -1  # = -1.74, 2 of 5 clipped
# dual clip c = 3 also binds at r = 7, A = -1: max(-7, 3 * -1) = -3
_DUAL_OBJ = 1.2 * 2 + 0.5 * 2 + 1.2 * 2 + 0.8 * -1 + 3.0 * -1  # = 2.0, 4 of 5 clipped
# asymmetric bounds 0.4/0.2: r = 0.7 is now above 1 - 0.4 and keeps 0.7 * -1
_LOW_04_OBJ = 1.2 * 2 + 0.5 * 2 + 1.2 * 2 + 0.7 * -1 + 7.0 * -1  # = -1.9, 2 of 5 clipped
# CISPO relative [0, 6]: only r = 7 is clipped (to 6); the objective is w A log p
_CISPO_OBJ = (
    1.5 * 2 * math.log(0.6)
    + 0.5 * 2 * math.log(0.3)
    + 1.25 * 2 * math.log(0.25)
    + 0.7 * -1 * math.log(0.35)
    + 6.0 * -1 * math.log(0.7)
)
# CISPO absolute: min(r, 5), r = 7 -> 5
_CISPO_ABS_OBJ = _CISPO_OBJ - 6.0 * -1 * math.log(0.7) + 5.0 * -1 * math.log(0.7)


def _golden_inputs(requires_grad=False):
    logp = torch.log(_t(_P)).requires_grad_(requires_grad)
    return logp, torch.log(_t(_P_OLD)), _t(_ADV), _t(_MASK)


@pytest.mark.parametrize(
    ("name", "overrides", "loss", "clip_fraction"),
    [
        ("grpo", {}, -_GRPO_OBJ / 5, 3 / 5),
        ("dapo", {}, -_DAPO_OBJ / 5, 2 / 5),
        ("cispo", {}, -_CISPO_OBJ / 5, 1 / 5),
        ("drgrpo", {}, -_GRPO_OBJ / (2 * 3), 3 / 5),  # sum over B * L = 2 * 3
        ("grpo", {"dual_clip": 3.0}, -_DUAL_OBJ / 5, 4 / 5),
        ("grpo", {"clip_low": 0.4}, -_LOW_04_OBJ / 5, 2 / 5),
        ("cispo", {"cispo_clip_mode": "absolute"}, -_CISPO_ABS_OBJ / 5, 1 / 5),
        # per-sequence means: row 1 -(2.4 + 1 + 2.4) / 3, row 2 -(-0.8 - 7) / 2
        ("grpo", {"aggregation": "seq-mean-token-mean"}, (-(2.4 + 1.0 + 2.4) / 3 + (0.8 + 7.0) / 2) / 2, 3 / 5),
        ("drgrpo", {"norm_length": 10}, -_GRPO_OBJ / (2 * 10), 3 / 5),
    ],
)
def test_policy_loss_golden_values(name, overrides, loss, clip_fraction):
    logp, old, adv, mask = _golden_inputs()
    out = policy_loss(name, logp, old, adv, mask, return_stats=True, **overrides)
    assert out.loss.item() == pytest.approx(loss, rel=1e-12)
    assert out.clip_fraction.item() == pytest.approx(clip_fraction, rel=1e-15)
    assert out.approx_kl.item() == pytest.approx(_K3, rel=1e-12)
    # per-token advantages equal to the broadcast ones give the same numbers
    out_bt = policy_loss(name, logp, old, adv.expand(2, 3), mask, return_stats=True, **overrides)
    for a, b in zip(out, out_bt):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_golden_gradients_ppo_clip_zeroes_clipped_tokens_cispo_keeps_them():
    # PPO-clip: d(-rA)/dlogp / 5 = -rA/5 on unclipped tokens, exactly 0 on clipped and padded ones
    logp, old, adv, mask = _golden_inputs(requires_grad=True)
    (grad,) = torch.autograd.grad(policy_loss("grpo", logp, old, adv, mask), logp)
    expected = _t([[0.0, -0.5 * 2 / 5, 0.0], [0.0, -7.0 * -1 / 5, 0.0]])
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=0)
    assert (grad == 0).tolist() == [[True, False, True], [True, False, True]]
    # CISPO: -w A / 5 with w the detached clipped ratio; the clipped token (w = 6) keeps its gradient
    (grad,) = torch.autograd.grad(policy_loss("cispo", logp, old, adv, mask), logp)
    expected = _t([[-1.5 * 2 / 5, -0.5 * 2 / 5, -1.25 * 2 / 5], [-0.7 * -1 / 5, -6.0 * -1 / 5, 0.0]])
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=0)
    assert grad[1, 1].item() == pytest.approx(1.2, rel=1e-12)


# ---------------------------------------------------------------------------
# Gradients vs autograd of a per-token reference
# ---------------------------------------------------------------------------

_PAPER_CLIPS = {"grpo": (0.2, 0.2), "dapo": (0.2, 0.28), "cispo": (1.0, 5.0), "drgrpo": (0.2, 0.2)}


def _reference_loss(name, logp, old, adv, mask, aggregation, dual_clip=None):
    """The paper formulas token by token, with explicit branches instead of min/clamp."""
    lo, hi = _PAPER_CLIPS[name]
    b, t = logp.shape
    rows = []
    for i in range(b):
        row = []
        for j in range(t):
            if mask[i, j] == 0:
                continue
            a = adv[i, 0 if adv.shape[1] == 1 else j].item()
            r = torch.exp(logp[i, j] - old[i, j])
            if name == "cispo":
                w = min(max(r.item(), 0.0), 1.0 + hi)  # a number: no gradient through the weight
                obj = w * a * logp[i, j]
            elif a > 0 and r.item() > 1 + hi:
                obj = torch.tensor((1 + hi) * a, dtype=F64)  # a constant: no gradient
            elif a < 0 and r.item() < 1 - lo:
                obj = torch.tensor((1 - lo) * a, dtype=F64)
            else:
                obj = r * a
            if dual_clip is not None and a < 0 and obj.item() < dual_clip * a:
                obj = torch.tensor(dual_clip * a, dtype=F64)
            row.append(-obj)
        rows.append(row)
    tokens = [x for row in rows for x in row]
    if aggregation == "token-mean":
        return sum(tokens) / len(tokens)
    if aggregation == "token-sum-norm":
        return sum(tokens) / (b * t)
    seq_means = [sum(row) / len(row) for row in rows if row]
    return sum(seq_means) / len(seq_means)


def _random_case(seed, adv_width):
    gen = torch.Generator().manual_seed(seed)
    b, t = 4, 6
    old = torch.log(torch.rand(b, t, generator=gen, dtype=F64) * 0.9 + 0.05)
    # ratios spread over [0.08, 12]; the first three are planted so that CISPO's cap 6,
    # the PPO bounds and the interior are all hit
    log_ratio = torch.empty(b, t, dtype=F64).uniform_(-2.5, 2.5, generator=gen)
    log_ratio[0, :3] = torch.log(_t([9.0, 0.3, 1.05]))
    logp = old + log_ratio
    adv = torch.randn(b, adv_width, generator=gen, dtype=F64)
    mask = _t([[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0]])
    return logp, old, adv, mask


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-mean", "token-sum-norm"])
@pytest.mark.parametrize("adv_width", [1, 6])
def test_policy_loss_gradient_matches_reference(name, aggregation, adv_width):
    logp, old, adv, mask = _random_case(11 + adv_width, adv_width)
    ratio = torch.exp(logp - old)
    x = logp.clone().requires_grad_(True)
    got = policy_loss(name, x, old, adv, mask, aggregation=aggregation)
    (grad,) = torch.autograd.grad(got, x)
    y = logp.clone().requires_grad_(True)
    want = _reference_loss(name, y, old, adv, mask, aggregation)
    (want_grad,) = torch.autograd.grad(want, y)
    torch.testing.assert_close(got, want.detach(), rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(grad, want_grad, rtol=1e-12, atol=1e-15)
    # padding gets no gradient; PPO-clip zeroes exactly the clipped tokens (r A is never 0 here)
    assert (grad[mask == 0] == 0).all()
    if name != "cispo":
        lo, hi = _PAPER_CLIPS[name]
        a = adv.expand_as(ratio)
        clipped = ((a > 0) & (ratio > 1 + hi)) | ((a < 0) & (ratio < 1 - lo))
        assert clipped[mask == 1].any() and (~clipped)[mask == 1].any()
        assert ((grad == 0) == (clipped | (mask == 0))).all()
    else:
        assert (grad[mask == 1] != 0).all()


def test_dual_clip_gradient_matches_reference():
    logp, old, adv, mask = _random_case(5, 1)
    adv = -adv.abs()  # every sequence negative, so the dual clip can bind
    assert (torch.exp(logp - old)[mask == 1] > 3.0).any()
    x = logp.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(policy_loss("grpo", x, old, adv, mask, dual_clip=3.0), x)
    y = logp.clone().requires_grad_(True)
    (want,) = torch.autograd.grad(_reference_loss("grpo", y, old, adv, mask, "token-mean", dual_clip=3.0), y)
    torch.testing.assert_close(grad, want, rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------------------
# Dr. GRPO aggregation
# ---------------------------------------------------------------------------


def test_token_sum_norm_divides_by_batch_times_length():
    per_token_adv = _t([[1.0, 2.0, 3.0, 4.0], [10.0, 0.0, 0.0, 0.0], [5.0, 7.0, 0.0, 0.0]])
    mask = _t([[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0]])
    logp = torch.log(_t([[0.5] * 4] * 3))
    adv = per_token_adv + (1 - mask) * 1e6  # padding must be ignored
    total = 1 + 2 + 3 + 4 + 10 + 5 + 7  # ratio 1: per-token loss -A
    for name in ("grpo", "drgrpo"):
        loss = policy_loss(name, logp, logp.clone(), adv, mask, aggregation="token-sum-norm")
        assert loss.item() == pytest.approx(-total / (3 * 4), rel=1e-14)
        loss = policy_loss(name, logp, logp.clone(), adv, mask, aggregation="token-sum-norm", norm_length=10)
        assert loss.item() == pytest.approx(-total / (3 * 10), rel=1e-14)
    # Dr. GRPO by default: the mask width; vs GRPO's token mean over 7 tokens the factor is 7 / 12
    drgrpo = policy_loss("drgrpo", logp, logp.clone(), adv, mask)
    grpo = policy_loss("grpo", logp, logp.clone(), adv, mask)
    assert drgrpo.item() == pytest.approx(-total / 12, rel=1e-14)
    assert drgrpo.item() == pytest.approx(grpo.item() * 7 / 12, rel=1e-14)
    # the other aggregations ignore norm_length
    assert policy_loss("grpo", logp, logp.clone(), adv, mask, norm_length=10).item() == pytest.approx(grpo.item())


def test_drgrpo_vs_grpo_on_golden_batch():
    logp, old, adv, mask = _golden_inputs()
    drgrpo = policy_loss("drgrpo", logp, old, adv, mask)
    grpo = policy_loss("grpo", logp, old, adv, mask)
    # same per-token losses; 5 response tokens over B * L = 6
    assert drgrpo.item() == pytest.approx(grpo.item() * 5 / 6, rel=1e-12)
    assert drgrpo.item() == pytest.approx(2.0 / 6, rel=1e-12)


# ---------------------------------------------------------------------------
# Shapes and stats
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("adv_shape", [(2,), (1, 3), (1, 1), (2, 4), (3, 2), (), (2, 3, 1), (2, 1, 1)])
def test_policy_loss_rejects_bad_adv_shapes(adv_shape):
    logp = torch.zeros(2, 3, dtype=F64)
    adv = torch.ones(adv_shape, dtype=F64)
    with pytest.raises(ValueError, match="adv") as info:
        policy_loss("grpo", logp, logp, adv, _ones((2, 3)))
    assert str(adv_shape) in str(info.value) and "(2, 3)" in str(info.value)


@pytest.mark.parametrize("shape", [(3,), (2, 3, 1)])
def test_policy_loss_rejects_non_2d_inputs(shape):
    x = torch.zeros(shape, dtype=F64)
    with pytest.raises(ValueError, match=re.escape("2-D")):
        policy_loss("grpo", x, x, torch.ones(1, 1, dtype=F64), torch.ones(shape, dtype=F64))


def test_return_stats_types_and_default_return():
    logp, old, adv, mask = _golden_inputs(requires_grad=True)
    out = policy_loss("dapo", logp, old, adv, mask, return_stats=True)
    assert isinstance(out, PolicyLossOutput) and isinstance(out, tuple)
    assert out._fields == ("loss", "clip_fraction", "approx_kl")
    for value in out:
        assert isinstance(value, torch.Tensor) and value.shape == () and value.dtype == F64
    assert out.loss.requires_grad
    assert not out.clip_fraction.requires_grad and not out.approx_kl.requires_grad
    plain = policy_loss("dapo", logp, old, adv, mask)
    assert isinstance(plain, torch.Tensor) and not isinstance(plain, tuple)
    assert plain.item() == out.loss.item()


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-mean", "token-sum-norm"])
def test_all_zero_mask_gives_zero_loss_and_stats(name, aggregation):
    logp, old, adv, _ = _golden_inputs(requires_grad=True)
    mask = torch.zeros(2, 3, dtype=F64)
    out = policy_loss(name, logp, old, adv, mask, aggregation=aggregation, return_stats=True)
    assert torch.isfinite(out.loss) and out.loss.item() == 0.0
    assert out.clip_fraction.item() == 0.0 and out.approx_kl.item() == 0.0
    (grad,) = torch.autograd.grad(out.loss, logp)
    assert (grad == 0).all()


def test_approx_kl_is_zero_at_ratio_one_and_nonnegative():
    logp, _, adv, mask = _golden_inputs()
    out = policy_loss("grpo", logp, logp.clone(), adv, mask, return_stats=True)
    assert out.approx_kl.item() == 0.0 and out.clip_fraction.item() == 0.0
    logp, old, adv, mask = _random_case(2, 1)
    assert policy_loss("cispo", logp, old, adv, mask, return_stats=True).approx_kl.item() > 0


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-mean", "token-sum-norm"])
def test_a_padded_token_whose_log_ratio_overflows_leaves_loss_and_gradient_as_without_it(name, aggregation):
    """float32: exp(100) is inf. The padded token must change nothing (before: a NaN gradient for PPO-clip)."""
    logp = torch.tensor([[-1.0, -2.0, 90.0], [-0.5, -0.7, -0.9]], dtype=torch.float32, requires_grad=True)
    old = torch.tensor([[-1.1, -1.9, -10.0], [-0.4, -0.9, -0.8]], dtype=torch.float32)
    adv = torch.tensor([[1.5], [-0.5]], dtype=torch.float32)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.float32)
    out = policy_loss(name, logp, old, adv, mask, aggregation=aggregation, norm_length=3, return_stats=True)
    (grad,) = torch.autograd.grad(out.loss, logp)
    assert torch.isfinite(grad).all() and grad[0, 2] == 0
    # the same token with a harmless log-probability gives the same loss, gradient and statistics
    tame = logp.detach().clone()
    tame[0, 2] = -10.0
    tame.requires_grad_(True)
    ref = policy_loss(name, tame, old, adv, mask, aggregation=aggregation, norm_length=3, return_stats=True)
    (ref_grad,) = torch.autograd.grad(ref.loss, tame)
    torch.testing.assert_close(grad, ref_grad, rtol=0, atol=0)
    for a, b in zip(out, ref):
        torch.testing.assert_close(a.detach(), b.detach(), rtol=0, atol=0)


def test_masked_mean_selects_instead_of_multiplying():
    values = torch.tensor([1.0, 3.0, float("inf"), float("nan")], requires_grad=True)
    mask = torch.tensor([1, 1, 0, 0])
    m = masked_mean(values, mask)
    (grad,) = torch.autograd.grad(m, values)
    assert m.item() == 2.0 and torch.equal(grad, torch.tensor([0.5, 0.5, 0.0, 0.0]))
    assert masked_mean(values.detach(), torch.zeros(4)).item() == 0.0


# ---------------------------------------------------------------------------
# Registration from outside the package
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("register", "kwargs"),
    [
        (register_policy_loss, {}),
        (register_aggregation, {"denominator": lambda mask, config: 1}),
        (register_surrogate, {"description": "x"}),
    ],
    ids=["policy-loss", "aggregation", "surrogate"],
)
def test_registering_a_taken_name_is_refused(register, kwargs):
    taken = {register_policy_loss: "grpo", register_aggregation: "token-mean", register_surrogate: "prob"}[register]
    registry = {register_policy_loss: POLICY_LOSSES, register_aggregation: AGGREGATIONS, register_surrogate: SURROGATES}
    before = registry[register][taken]
    with pytest.raises(ValueError, match=f"'{taken}' is already registered"):
        register(taken, **kwargs)(lambda *a, **k: None)
    assert registry[register][taken] is before  # the entry is not replaced


def test_registries_are_read_only_mappings():
    with pytest.raises(TypeError):
        POLICY_LOSSES["x"] = POLICY_LOSSES["grpo"]  # type: ignore[index]
    with pytest.raises(KeyError, match="unknown policy loss 'x'; registered: 'grpo'"):
        POLICY_LOSSES["x"]
    assert list(POLICY_LOSSES) == ["grpo", "dapo", "cispo", "drgrpo"]
    assert list(AGGREGATIONS) == ["token-mean", "seq-mean-token-mean", "token-sum-norm"]


def test_register_policy_loss_refuses_unknown_settings():
    with pytest.raises(ValueError, match="unknown LossConfig field.*'beta'.*'x'"):
        register_policy_loss("x", beta=0.1)
    assert "x" not in POLICY_LOSSES


@pytest.fixture
def custom_loss():
    """A registered kernel that records its arguments; removed afterwards."""
    seen = []

    @register_policy_loss("test-custom", advantage="none", aggregation="token-sum-norm", clip_high=0.5)
    def kernel(logp, old_logp, adv, mask, config):
        seen.append((mask, config))
        return -adv * logp

    yield seen
    POLICY_LOSSES.remove("test-custom")


def test_registered_kernel_gets_the_mask_and_its_defaults(custom_loss):
    entry = POLICY_LOSSES["test-custom"]
    assert entry.advantage == "none"
    assert entry.defaults == LossConfig(clip_high=0.5, aggregation="token-sum-norm")
    logp = torch.log(_t([[0.5, 0.25, 0.9], [0.1, 0.2, 0.3]]))
    adv = _t([[1.0], [-2.0]])
    mask = _t([[1, 1, 0], [1, 0, 0]])
    out = policy_loss("test-custom", logp, logp.clone(), adv, mask, return_stats=True)
    ((got_mask, got_config),) = custom_loss
    assert torch.equal(got_mask, mask)
    assert got_config == resolve_loss_config("test-custom") and got_config.clip_high == 0.5
    # token-sum-norm over B * T = 6, the kernel's -A log p on the three response tokens
    expected = -(math.log(0.5) + math.log(0.25) - 2.0 * math.log(0.1)) / 6
    assert out.loss.item() == pytest.approx(expected, rel=1e-12)
    assert out.clip_fraction.item() == 0.0  # a kernel that returns the loss alone clips nothing
    assert resolve_loss_config("test-custom", aggregation="token-mean").aggregation == "token-mean"


def test_kernel_output_of_the_wrong_shape_is_refused():
    @register_policy_loss("test-bad-shape")
    def kernel(logp, old_logp, adv, mask, config):
        return (-adv * logp).sum(1)

    try:
        with pytest.raises(ValueError, match="'test-bad-shape' must return per-token tensors of shape \\(2, 3\\)"):
            policy_loss("test-bad-shape", _ones((2, 3)), _ones((2, 3)), _ones((2, 1)), _ones((2, 3)))
    finally:
        POLICY_LOSSES.remove("test-bad-shape")


def test_registered_aggregation_is_a_loss_config_choice():
    assert "test-agg" not in AGGREGATIONS
    with pytest.raises(ValueError, match="aggregation must be one of"):
        LossConfig(aggregation="test-agg")

    @register_aggregation("test-agg", denominator=lambda mask, config: int(mask.sum()))
    def total(per_token, mask, config=None):
        return torch.where(mask.bool(), per_token, 0.0).sum()

    try:
        assert LossConfig(aggregation="test-agg").aggregation == "test-agg"
        logp = torch.log(_t([[0.5, 0.25], [0.1, 0.2]]))
        loss = policy_loss("grpo", logp, logp.clone(), _t([[1.0], [2.0]]), _ones((2, 2)), aggregation="test-agg")
        assert loss.item() == pytest.approx(-6.0, rel=1e-12)  # ratio 1: -sum of A over the 4 tokens
    finally:
        AGGREGATIONS.remove("test-agg")


def test_registered_surrogate_is_used_by_name():
    @register_surrogate("test-zero", description="J = 0")
    def zero(probs, weights, out=None):
        return torch.zeros_like(probs) if out is None else out.zero_()

    try:
        assert SURROGATES["test-zero"].ascent is zero and SURROGATES["test-zero"].distinct is False
        assert torch.equal(SURROGATES["test-zero"].ascent(_t([0.5, 0.5]), _t([1.0, -1.0])), _t([0.0, 0.0]))
    finally:
        SURROGATES.remove("test-zero")
