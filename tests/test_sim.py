"""Tests of the batched categorical-policy simulator (:mod:`tailmiss.sim`).

The default run is kept light (small action spaces, few steps); the qualitative
reproduction of spec §5.4 is marked ``slow``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tailmiss import analytic
from tailmiss.sim import (
    METRICS,
    PRESETS,
    CountSampler,
    SimConfig,
    SimResult,
    hash_uniform,
    initial_logits,
    preset,
    quick_name,
    simulate,
)

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

ID_COLUMNS = ["run", "group_size", "gamma", "seed", "step"]


def _small(**changes) -> SimConfig:
    base = SimConfig(
        name="small",
        num_actions=500,
        num_correct=50,
        group_sizes=(2, 8),
        gammas=(0.0, 1.0),
        seeds=(0,),
        steps=25,
        log_every=10,
        dtype="float64",
    )
    return dataclasses.replace(base, **changes)


def _p0_rows(config: SimConfig) -> torch.Tensor:
    p0 = torch.softmax(torch.as_tensor(initial_logits(config), dtype=torch.float64), 0)
    return p0.expand(config.num_runs, -1).contiguous()


def _step0_counts(config: SimConfig) -> torch.Tensor:
    runs = config.runs()
    sampler = CountSampler([r[0] for r in runs], [r[2] for r in runs], config.num_actions, "cpu")
    return sampler.counts(_p0_rows(config), step=0)


# ---------------------------------------------------------------------------
# Theory step (Eq. 5) against the first-order closed forms (Eq. 17, Prop. 3.2)
# ---------------------------------------------------------------------------


def _theory_config(lr: float, r_w: float) -> SimConfig:
    return SimConfig(
        name="theory-test",
        num_actions=300,
        num_correct=30,
        surrogate="theory",
        optimizer="sgd",
        advantage="none",
        reward_correct=1.0,
        reward_incorrect=r_w,
        lr=lr,
        group_sizes=(4, 32),
        gammas=(0.0,),
        seeds=(0, 1),
        steps=1,
        log_every=1,
        dtype="float64",
    )


def _theory_step(lr: float, r_w: float) -> dict:
    """Simulate one theory step and return realised and first-order changes per run."""
    config = _theory_config(lr, r_w)
    result = simulate(config, device="cpu", progress=False)
    hist = result.history
    h0 = hist[hist["step"] == 0].sort_values("run")
    h1 = hist[hist["step"] == 1].sort_values("run")

    v, c = config.num_actions, config.num_correct
    correct = np.arange(v) < c
    n = np.array([r[0] for r in config.runs()], dtype=np.float64)
    eta = lr / n
    p0 = _p0_rows(config).numpy()
    counts = _step0_counts(config).numpy()
    sampled = counts > 0

    # the engine drew exactly these counts at step 0
    np.testing.assert_allclose(h0["mu_hat"].to_numpy(), counts[:, :c].sum(1) / n, rtol=0, atol=0)
    q_u_pos0 = (p0 * (correct & ~sampled)).sum(1)
    np.testing.assert_allclose(h0["q_u_pos"].to_numpy(), q_u_pos0, rtol=1e-13)

    # our own exact step: dz_i = (lr/N) p_i (R_i 1[sampled] - S_R)
    reward = np.where(correct, 1.0, r_w) * sampled
    s_r = (reward * p0).sum(1, keepdims=True)
    z1 = initial_logits(config)[None, :] + eta[:, None] * p0 * (reward - s_r)
    p1 = torch.softmax(torch.as_tensor(z1), 1).numpy()
    np.testing.assert_allclose(h1["q_pos"].to_numpy(), p1[:, :c].sum(1), rtol=1e-13)
    np.testing.assert_allclose(h1["entropy"].to_numpy(), -(p1 * np.log(p1)).sum(1), rtol=1e-12)
    np.testing.assert_allclose(h1["anchor_prob"].to_numpy(), p1[:, 0], rtol=1e-12)
    # Eq. 26 and the BroRL metrics, recomputed from p1
    q0 = p0[0, :c].sum()
    drop = np.clip(p0[:, :c] - p1[:, :c], 0, None).sum(1)
    np.testing.assert_allclose(h1["retained_mass"].to_numpy(), 1 - drop / q0, rtol=1e-13)
    np.testing.assert_allclose(h1["worst_drop"].to_numpy(), (p1[:, :c] - p0[:, :c]).min(1), rtol=1e-9, atol=1e-18)
    np.testing.assert_array_equal(h1["frac_correct_improved"].to_numpy(), (p1[:, :c] > p0[:, :c]).mean(1))

    mb = analytic.mass_balance(p0, correct, counts, 1.0, r_w, eta=eta)
    uc = analytic.unsampled_correct_change(p0, correct, counts, 1.0, r_w, eta=eta)
    np.testing.assert_allclose(uc.q_u_pos, q_u_pos0, rtol=1e-13)
    return {
        "dq_pos": h1["q_pos"].to_numpy() - h0["q_pos"].to_numpy(),
        "dq_pos_first": mb.delta_q_pos,
        "dq_u_pos": ((p1 - p0) * (correct & ~sampled)).sum(1),
        "dq_u_pos_first": uc.delta_q_u_pos,
    }


@pytest.mark.parametrize("r_w", [0.0, -1.0])
def test_theory_step_matches_first_order_with_quadratic_error(r_w):
    big, small = _theory_step(1e-2, r_w), _theory_step(1e-3, r_w)
    for key in ("dq_pos", "dq_u_pos"):
        first_big, first_small = big[f"{key}_first"], small[f"{key}_first"]
        # first-order terms are linear in eta
        np.testing.assert_allclose(first_big, 10 * first_small, rtol=1e-12)
        moving = np.abs(first_small) > 0
        assert moving.sum() >= 3, f"{key}: too few runs moved to test anything"
        # a run that sampled nothing rewarding (R_w = 0) does not move at all
        np.testing.assert_array_equal(small[key][~moving], 0.0)
        err_big = np.abs(big[key] - first_big)[moving]
        err_small = np.abs(small[key] - first_small)[moving]
        assert np.all(err_small / np.abs(first_small[moving]) < 1e-2), (key, err_small, first_small)
        # O(eta^2): ten times the step, a hundred times the error
        ratio = err_big / err_small
        assert np.all((ratio > 30) & (ratio < 300)), (key, ratio)


def test_theory_preset_is_valid_theory_setup():
    cfg = preset("theory")
    assert (cfg.surrogate, cfg.optimizer, cfg.advantage, cfg.dtype) == ("theory", "sgd", "none", "float64")
    assert cfg.reward_incorrect == 0.0


# ---------------------------------------------------------------------------
# Sampler
# ---------------------------------------------------------------------------


def _uneven_probs() -> torch.Tensor:
    head = [0.3, 0.15, 0.1, 0.08, 0.07, 0.06, 0.05, 0.04, 0.03, 0.025]
    tail = [0.02, 0.018, 0.015, 0.012, 0.01, 0.008, 0.005, 0.004, 0.002, 0.001]
    w = torch.tensor(head + tail, dtype=torch.float64)
    return w / w.sum()


def test_sampler_counts_follow_multinomial_law():
    p = _uneven_probs()
    group_sizes = [1, 3, 17, 256, 1000]
    sampler = CountSampler(group_sizes, [0, 1, 2, 3, 4], p.numel(), "cpu")
    probs = p.expand(len(group_sizes), -1).contiguous()
    total = torch.zeros(p.numel(), dtype=torch.int64)
    for step in range(200):
        counts = sampler.counts(probs, step)
        assert counts.dtype == torch.int64
        assert counts.sum(1).tolist() == group_sizes
        assert (counts >= 0).all()
        total += counts.sum(0)
    n_draws = 200 * sum(group_sizes)
    expected = (p * n_draws).numpy()
    assert expected.min() > 200  # the 1e-3 action still has a usable expected count
    test = stats.chisquare(total.numpy(), expected)
    assert test.pvalue > 1e-4, test


def test_sampler_single_row_binomial_per_action():
    # each action's count in one big group is Binomial(N, p_i): z-scores within 5
    p = _uneven_probs()
    n = 200_000
    counts = CountSampler([n], [123], p.numel(), "cpu").counts(p[None], step=0)[0].numpy()
    z = (counts - n * p.numpy()) / np.sqrt(n * p.numpy() * (1 - p.numpy()))
    assert np.abs(z).max() < 5, z


def test_sampler_never_draws_zero_probability_actions():
    p = torch.tensor([0.0, 0.5, 0.0, 0.0, 0.5, 0.0], dtype=torch.float64)
    sampler = CountSampler([500, 500, 1], [0, 1, 2], 6, "cpu")
    for step in range(5):
        counts = sampler.counts(p.expand(3, -1).contiguous(), step)
        assert counts[:, [0, 2, 3, 5]].sum() == 0
        assert counts.sum(1).tolist() == [500, 500, 1]


def test_sampler_steps_give_different_draws_and_are_reproducible():
    v = 1000
    probs = torch.full((2, v), 1.0 / v, dtype=torch.float64)
    sampler = CountSampler([500, 500], [0, 1], v, "cpu")
    c0, c1 = sampler.counts(probs, 0), sampler.counts(probs, 1)
    assert not torch.equal(c0, c1)
    assert not torch.equal(c0[0], c0[1])  # different seeds, different draws
    assert torch.equal(c0, sampler.counts(probs, 0))
    # a fresh sampler with the same (seed, step) reproduces them
    assert torch.equal(c1, CountSampler([500, 500], [0, 1], v, "cpu").counts(probs, 1))


def test_sampler_rows_are_invariant_to_batch_membership_and_order():
    gen = torch.Generator().manual_seed(0)
    v = 64
    group_sizes = [1, 5, 64, 300, 5, 1024]
    seeds = [7, 7, 3, 11, 12, 7]
    probs = torch.softmax(2 * torch.randn(len(group_sizes), v, generator=gen, dtype=torch.float64), 1)
    for step in (0, 3, 1000):
        full = CountSampler(group_sizes, seeds, v, "cpu").counts(probs, step)
        perm = [4, 2, 0, 5, 1, 3]
        permuted = CountSampler([group_sizes[i] for i in perm], [seeds[i] for i in perm], v, "cpu").counts(
            probs[perm], step
        )
        assert torch.equal(permuted, full[perm])
        for r in range(len(group_sizes)):
            alone = CountSampler([group_sizes[r]], [seeds[r]], v, "cpu").counts(probs[r : r + 1], step)
            assert torch.equal(alone[0], full[r])
        # common random numbers: runs sharing seed and N share draws under equal probabilities
        shared = CountSampler([64, 64], [3, 3], v, "cpu").counts(probs[[2, 2]], step)
        assert torch.equal(shared[0], shared[1])


def test_sweep_independence_at_the_full_preset_size():
    """Every run of the full fgrpo-fig2 sweep (136 runs x 128,000 actions) gets the same draws alone, bit for bit.

    A float64 prefix sum across all rows laid end to end rounded each row's CDF differently depending on its
    position, so a few of the 20M draws per step of this sweep landed on a neighbouring action; the sampler now
    takes every prefix sum and search within one row.
    """
    config = preset("fgrpo-fig2")
    runs = config.runs()
    assert len(runs) == 136
    gen = torch.Generator().manual_seed(1)
    # a policy some way into training: uneven, with ties broken differently per run
    z = torch.from_numpy(initial_logits(config)).float().expand(len(runs), -1).clone()
    z += 3 * torch.randn(z.shape, generator=gen)
    probs = torch.softmax(z, 1)
    sampler = CountSampler([r[0] for r in runs], [r[2] for r in runs], config.num_actions, "cpu")
    starts = np.concatenate([[0], np.cumsum([r[0] for r in runs])])
    for step in (0, 999):
        full = sampler.counts(probs, step)
        queries = sampler.queries(probs, step)
        for r in (0, 1, 57, 100, 133, 135):  # N = 2 .. 2^17, both gammas, several seeds
            n, _, seed = runs[r]
            single = CountSampler([n], [seed], config.num_actions, "cpu")
            assert torch.equal(single.counts(probs[r : r + 1], step)[0], full[r]), (r, step)
            # the searched values themselves, not only their rounding to actions, are the row's own
            assert torch.equal(single.queries(probs[r : r + 1], step), queries[starts[r] : starts[r + 1]]), (r, step)


def test_simulated_run_equals_itself_inside_the_full_sweep():
    """Three steps of the full sweep against the same runs simulated alone: identical histories.

    With one intra-op thread. With several, torch may split the reduction of a lone row across threads (a
    sweep's rows are split between threads instead), so a run alone can differ from itself in the sweep in
    the last bits of its sums (about 1e-6 relative in Q_pos after three steps); its draws stay identical
    (the test above).
    """
    config = preset("fgrpo-fig2").replace(steps=3, log_every=1)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _compare_alone_and_in_sweep(config)
    finally:
        torch.set_num_threads(before)


def _compare_alone_and_in_sweep(config):
    whole = simulate(config, device="cpu", progress=False).history
    cols = [c for c in whole.columns if c not in ("run",)]
    for n, gamma, seed in ((2, 0.0, 0), (8192, 1.0, 3), (131072, 0.0, 1)):
        alone = simulate(
            config.replace(group_sizes=(n,), gammas=(gamma,), seeds=(seed,)), device="cpu", progress=False
        ).history
        sub = whole[(whole["group_size"] == n) & (whole["gamma"] == gamma) & (whole["seed"] == seed)]
        pd.testing.assert_frame_equal(
            sub[cols].reset_index(drop=True), alone[cols].reset_index(drop=True), check_exact=True
        )


def test_sampler_chunking_does_not_change_draws():
    p = _uneven_probs()
    probs = p.expand(3, -1).contiguous()
    args = ([10, 333, 4096], [0, 5, 9], p.numel(), "cpu")
    whole = CountSampler(*args).counts(probs, 4)
    chunked = CountSampler(*args, max_draws_per_chunk=7).counts(probs, 4)
    assert torch.equal(whole, chunked)


def test_sampler_rejects_bad_input():
    with pytest.raises(ValueError, match="group_sizes"):
        CountSampler([2, 0], [0, 1], 5, "cpu")
    sampler = CountSampler([2, 3], [0, 1], 5, "cpu")
    with pytest.raises(ValueError, match="shape"):
        sampler.counts(torch.full((2, 4), 0.25, dtype=torch.float64), 0)


# ---------------------------------------------------------------------------
# hash_uniform
# ---------------------------------------------------------------------------


def _uniform_grid(step: int, seeds: int = 1000, index: int = 1000) -> torch.Tensor:
    seed = torch.arange(seeds)[:, None]
    idx = torch.arange(index)[None, :]
    return hash_uniform(seed, idx, step)


def test_hash_uniform_moments_and_range():
    u = _uniform_grid(0)
    assert u.shape == (1000, 1000) and u.dtype == torch.float64
    assert (u >= 0).all() and (u < 1).all()
    flat = u.flatten().numpy()
    n = flat.size
    assert abs(flat.mean() - 0.5) < 5 * np.sqrt(1 / 12 / n)
    # Var of the sample variance of U(0,1): (1/80 - 1/144) / n
    assert abs(flat.var() - 1 / 12) < 5 * np.sqrt((1 / 80 - 1 / 144) / n)
    hist = np.histogram(flat, bins=100, range=(0, 1))[0]
    assert stats.chisquare(hist).pvalue > 1e-4
    # 53-bit grid
    scaled = flat * 2.0**53
    assert np.array_equal(scaled, np.floor(scaled))


def test_hash_uniform_no_lag_one_correlation():
    u0, u1 = _uniform_grid(5), _uniform_grid(6)
    bound = 5 / np.sqrt(u0.numel())

    def corr(a, b):
        return float(np.corrcoef(a.flatten().numpy(), b.flatten().numpy())[0, 1])

    assert abs(corr(u0, u1)) < bound  # across steps
    assert abs(corr(u0[:, :-1], u0[:, 1:])) < bound  # across draw indices
    assert abs(corr(u0[:-1, :], u0[1:, :])) < bound  # across seeds
    line = hash_uniform(torch.tensor(0), torch.arange(10**6), 0)  # one long run of indices
    assert abs(corr(line[:-1], line[1:])) < bound


def test_hash_uniform_is_a_pure_function():
    seed, idx = torch.tensor([3, 3, 4]), torch.tensor([10, 11, 10])
    a = hash_uniform(seed, idx, 2)
    assert torch.equal(a, hash_uniform(seed, idx, 2))
    assert torch.equal(a[1:2], hash_uniform(torch.tensor([3]), torch.tensor([11]), 2))
    assert len(set(a.tolist())) == 3
    assert not torch.equal(a, hash_uniform(seed, idx, 3))
    # broadcasting of seed against index
    b = hash_uniform(torch.tensor(3), torch.tensor([10, 11]), 2)
    assert torch.equal(b, a[:2])


# ---------------------------------------------------------------------------
# Empirical tail miss at the initial distribution (Lemma 3.1)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "calls"), [(2, 6), (8, 4), (64, 2), (1024, 2)])
def test_empirical_tail_miss_matches_lemma_3_1(n, calls):
    init = analytic.initial_distribution()
    rows, c = 100, int(init.correct.sum())
    probs = torch.as_tensor(init.probs).expand(rows, -1).contiguous()
    sampler = CountSampler([n] * rows, list(range(rows)), probs.shape[1], "cpu")
    values = []
    for step in range(calls):
        counts = sampler.counts(probs, step)
        x = counts[:, :c].sum(1)
        active = ((x > 0) & (x < n)).to(torch.float64)
        leaf_missed = (counts[:, 1:c] == 0).to(torch.float64).mean(1)  # non-anchor correct actions
        values.append((active * leaf_missed).numpy())
        del counts
    values = np.concatenate(values)
    se = values.std(ddof=1) / np.sqrt(values.size)
    expected = analytic.tail_miss_probability(init.q_pos, init.tau_leaf, n)
    assert abs(values.mean() - expected) < 5 * se + 1e-4, (values.mean(), expected, se)


# ---------------------------------------------------------------------------
# Batched sweep == runs one by one
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "rtol"),
    [
        ({"surrogate": "logprob", "optimizer": "adam", "dtype": "float64"}, 1e-10),
        ({"surrogate": "prob", "optimizer": "adamw", "weight_decay": 0.01, "dtype": "float64"}, 1e-10),
        ({"surrogate": "logprob", "optimizer": "adam", "dtype": "float32"}, 1e-5),
    ],
)
def test_batched_sweep_equals_runs_one_by_one(changes, rtol):
    config = SimConfig(
        name="batch",
        num_actions=2000,
        num_correct=200,
        group_sizes=(2, 16, 128),
        gammas=(0.0, 1.0),
        seeds=(0, 1),
        steps=15,
        log_every=5,
        **changes,
    )
    sweep = simulate(config, device="cpu", progress=False).history
    assert sweep["run"].nunique() == 12
    finals = sweep[sweep["step"] == 15]
    assert finals["q_pos"].nunique() > 1  # the runs do differ
    for run, (n, g, s) in enumerate(config.runs()):
        alone = simulate(
            dataclasses.replace(config, group_sizes=[n], gammas=[g], seeds=[s]), device="cpu", progress=False
        ).history
        batched = sweep[sweep["run"] == run].reset_index(drop=True)
        assert (batched[["group_size", "gamma", "seed"]].drop_duplicates().to_numpy() == [[n, g, s]]).all()
        np.testing.assert_array_equal(alone["step"].to_numpy(), batched["step"].to_numpy())
        for col in METRICS:
            np.testing.assert_allclose(
                alone[col].to_numpy(),
                batched[col].to_numpy(),
                rtol=rtol,
                atol=1e-300,
                err_msg=f"run {run} ({n}, {g}, {s}) column {col}",
            )


@pytest.mark.gpu
@requires_cuda
def test_cpu_and_cuda_agree():
    config = _small(num_actions=2000, num_correct=200, group_sizes=(2, 64, 1024), seeds=(0, 1), steps=20)
    cpu = simulate(config, device="cpu", progress=False)
    gpu = simulate(config, device="cuda", progress=False)
    assert gpu.meta["device"].startswith("cuda")
    pd.testing.assert_frame_equal(cpu.history, gpu.history, rtol=1e-9, atol=1e-12)


@pytest.mark.gpu
@requires_cuda
def test_sampler_cpu_and_cuda_draw_alike():
    """Integer hashing gives the same uniforms on both devices; only CDF rounding may move a rare draw."""
    config = preset("fgrpo-fig2")
    runs = config.runs()[::9]
    probs = torch.softmax(torch.from_numpy(initial_logits(config)).float(), 0).expand(len(runs), -1).contiguous()
    args = ([r[0] for r in runs], [r[2] for r in runs], config.num_actions)
    cpu, gpu = CountSampler(*args, "cpu"), CountSampler(*args, "cuda")
    for step in (0, 7):
        c_cpu, c_gpu = cpu.counts(probs, step), gpu.counts(probs.cuda(), step).cpu()
        moved = (c_cpu - c_gpu).abs().sum().item() / 2
        assert moved <= 1e-6 * c_cpu.sum().item() + 1, moved


@pytest.mark.gpu
@requires_cuda
def test_cuda_run_with_a_million_actions():
    config = preset("fgrpo-fig2").replace(
        num_actions=2**20, num_correct=2**16, group_sizes=(2, 1024, 131072), seeds=(0,), steps=50, log_every=25
    )
    result = simulate(config, device="cuda", progress=False)
    assert np.isfinite(result.history[list(METRICS[:6])].to_numpy()).all()
    final, start = result.final, result.history[result.history["step"] == 0]
    assert (final["q_pos"].to_numpy() > start["q_pos"].to_numpy()).all()


def test_simulate_rejects_bad_arguments():
    with pytest.raises(ValueError, match="SimConfig"):
        simulate({"steps": 1}, device="cpu", progress=False)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            simulate(_small(steps=1), device="cuda", progress=False)


# ---------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------


def test_toml_unknown_key_rejected(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[sim]\nname = "x"\nnum_actions = 100\nnum_correct = 10\nlearning_rate = 0.1\n')
    with pytest.raises(ValueError, match="learning_rate"):
        SimConfig.from_toml(path)
    path.write_text("steps = 3\nbogus = 1\n")  # top-level keys work too
    with pytest.raises(ValueError, match="bogus"):
        SimConfig.from_toml(path)
    path.write_text("[sim]\nsteps = 3\n[extra]\nx = 1\n")
    with pytest.raises(ValueError, match="extra"):
        SimConfig.from_toml(path)
    path.write_text("steps = 3\nseeds = [4, 5]\n")
    assert SimConfig.from_toml(path) == SimConfig(steps=3, seeds=(4, 5))


def test_toml_syntax_error_and_missing_file(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("[sim\nsteps = ")
    with pytest.raises(ValueError, match="broken.toml"):
        SimConfig.from_toml(path)
    with pytest.raises(ValueError, match="not found"):
        SimConfig.from_toml(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"num_actions": 100, "num_correct": 100}, "num_correct"),
        ({"num_actions": 100, "num_correct": 150}, "num_correct"),
        ({"lr": 0.0}, "lr"),
        ({"lr": -1e-3}, "lr"),
        ({"optimizer": "rmsprop"}, "optimizer"),
        ({"surrogate": "theory", "optimizer": "adam", "advantage": "none"}, "theory"),
        ({"surrogate": "theory", "optimizer": "sgd", "advantage": "mean"}, "theory"),
        ({"surrogate": "policy"}, "surrogate"),
        ({"seeds": ()}, "seeds"),
        ({"seeds": [-1]}, "seeds"),
        ({"gammas": [0.0, -0.5]}, "gammas"),
        ({"gammas": []}, "gammas"),
        ({"group_sizes": [2, 0]}, "group_sizes"),
        ({"group_sizes": [2.5]}, "group_sizes"),
        ({"steps": 0}, "steps"),
        ({"log_every": 0}, "log_every"),
        ({"dtype": "float16"}, "dtype"),
        ({"advantage": "rank"}, "advantage"),
        ({"std_kind": "sample"}, "std_kind"),
        ({"init": "random"}, "init"),
        ({"reward_correct": -1.0, "reward_incorrect": 1.0}, "reward_correct"),
        ({"betas": (0.9, 1.0)}, "betas"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"group_sizes": 4}, "group_sizes"),
    ],
)
def test_config_rejects_bad_values(changes, field):
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(SimConfig(), **changes)


def test_replace_preset_with_lists():
    cfg = dataclasses.replace(preset("fgrpo-fig2"), group_sizes=[2, 256], seeds=[0])
    assert cfg.group_sizes == (2, 256) and cfg.seeds == (0,)
    assert cfg.num_runs == 4
    assert cfg.runs() == [(2, 0.0, 0), (2, 1.0, 0), (256, 0.0, 0), (256, 1.0, 0)]
    assert cfg.replace(steps=5).steps == 5
    assert hash(cfg) == hash(dataclasses.replace(cfg))


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_toml_round_trip(tmp_path, name):
    cfg = preset(name)
    cfg.to_toml(tmp_path / "c.toml")
    back = SimConfig.from_toml(tmp_path / "c.toml")
    assert back == cfg
    assert SimConfig.from_dict(cfg.to_dict()) == cfg


def test_preset_unknown_name_lists_known_ones():
    with pytest.raises(ValueError, match="nope") as info:
        preset("nope")
    for name in ("fgrpo-fig2", "brorl-fig3", "theory"):
        assert name in str(info.value)
    assert quick_name("fgrpo-fig2") == "fgrpo-fig2-quick"
    assert quick_name("fgrpo-fig2-quick") == "fgrpo-fig2-quick"
    assert quick_name("theory") == "theory"


def test_paper_presets():
    fig2 = preset("fgrpo-fig2")
    assert fig2.group_sizes == tuple(2**k for k in range(1, 18))
    assert (fig2.num_actions, fig2.num_correct, fig2.lr, fig2.steps) == (128_000, 10_000, 1e-2, 1000)
    assert (fig2.surrogate, fig2.optimizer, fig2.advantage) == ("logprob", "adam", "mean")
    brorl = preset("brorl-fig3")
    assert brorl.group_sizes == (4, 8, 16, 512, 51200)
    assert (brorl.surrogate, brorl.optimizer, brorl.lr) == ("prob", "adamw", 1e-3)


# ---------------------------------------------------------------------------
# SimResult
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_result() -> SimResult:
    return simulate(_small(), device="cpu", progress=False)


def test_history_layout(small_result):
    hist, cfg = small_result.history, small_result.config
    for col in ID_COLUMNS + ["q_pos", "retained_mass", "entropy", "anchor_prob", "frac_correct_improved", "worst_drop"]:
        assert col in hist.columns
    logged = [0, 10, 20, 25]
    assert len(hist) == cfg.num_runs * len(logged)
    assert not hist.duplicated(["run", "step"]).any()
    for run, (n, g, s) in enumerate(cfg.runs()):
        rows = hist[hist["run"] == run]
        assert rows["step"].tolist() == logged
        assert (rows["group_size"] == n).all() and (rows["gamma"] == g).all() and (rows["seed"] == s).all()
    # draw-dependent columns are NaN only at the final step
    last = hist["step"] == cfg.steps
    draw_metrics = ["q_u_pos", "mu_hat", "mb_sampled_correct", "mb_sampled_incorrect", "mb_unsampled"]
    assert hist.loc[last, draw_metrics].isna().all().all()
    assert hist.loc[~last, draw_metrics].notna().all().all()
    assert hist.loc[:, [m for m in METRICS if m not in draw_metrics]].notna().all().all()


def test_history_metric_ranges(small_result):
    hist = small_result.history
    assert hist["q_pos"].between(0, 1).all()
    assert hist["retained_mass"].between(0, 1).all()
    assert hist["frac_correct_improved"].between(0, 1).all()
    assert (hist["worst_drop"] <= 0).all()
    assert (hist["q_u_pos"].dropna() <= hist.loc[hist["q_u_pos"].notna(), "q_pos"] + 1e-15).all()
    mu = hist["mu_hat"].dropna() * hist.loc[hist["mu_hat"].notna(), "group_size"]
    np.testing.assert_allclose(mu, np.round(mu), atol=1e-9)  # X/N with integer X


def test_final_one_row_per_run(small_result):
    final = small_result.final
    assert len(final) == small_result.config.num_runs
    assert final["run"].tolist() == list(range(small_result.config.num_runs))
    assert (final["step"] == small_result.config.steps).all()
    means = small_result.seed_mean(final)
    assert len(means) == len(small_result.config.group_sizes) * len(small_result.config.gammas)


def test_save_load_round_trip_values(tmp_path, small_result):
    path = small_result.save(tmp_path / "res")
    assert sorted(p.name for p in path.iterdir()) == ["config.toml", "history.csv", "meta.json"]
    back = SimResult.load(path)
    assert back.config == small_result.config
    assert back.meta == small_result.meta
    pd.testing.assert_frame_equal(back.history, small_result.history, rtol=1e-9, check_dtype=False)


def test_save_load_round_trip_keeps_dtypes(tmp_path, small_result):
    back = SimResult.load(small_result.save(tmp_path / "res"))
    pd.testing.assert_frame_equal(back.history, small_result.history, rtol=1e-9)


def test_save_replaces_existing_directory_atomically(tmp_path, small_result):
    target = tmp_path / "res"
    target.mkdir()
    (target / "notes.txt").write_text("not a result")
    with pytest.raises(ValueError, match="refusing to replace"):
        small_result.save(target)  # a folder holding anything else is never replaced
    assert (target / "notes.txt").read_text() == "not a result"
    (target / "notes.txt").unlink()
    small_result.save(target)  # an empty folder is fine
    small_result.save(target)  # again over a complete result
    assert sorted(p.name for p in target.iterdir()) == ["config.toml", "history.csv", "meta.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["res"]  # no .tmp / .old folders left behind


def test_load_rejects_non_result(tmp_path):
    (tmp_path / "x").mkdir()
    with pytest.raises(ValueError, match="not a saved SimResult: meta.json is missing"):
        SimResult.load(tmp_path / "x")


# ---------------------------------------------------------------------------
# Metrics at step 0 against the closed-form initial distribution
# ---------------------------------------------------------------------------


def test_step_zero_metrics_match_analytic_initial_distribution():
    config = SimConfig(name="init", group_sizes=(1,), gammas=(0.0,), seeds=(0,), steps=1, dtype="float64")
    result = simulate(config, device="cpu", progress=False)
    row = result.history[result.history["step"] == 0].iloc[0]
    init = analytic.initial_distribution()
    assert row["q_pos"] == pytest.approx(init.q_pos, rel=1e-12)
    assert row["q_pos"] == pytest.approx(0.63008, abs=5e-6)  # spec §3.3
    assert row["retained_mass"] == 1.0
    assert row["worst_drop"] == 0.0
    assert row["frac_correct_improved"] == 0.0
    assert row["entropy"] == pytest.approx(init.entropy, rel=1e-12)
    assert row["entropy"] == pytest.approx(10.7817, abs=5e-5)
    assert row["anchor_prob"] == pytest.approx(4.6527e-4, rel=1e-4)
    assert row["mu_hat"] in (0.0, 1.0)
    assert result.meta["initial"]["q_pos"] == pytest.approx(init.q_pos, rel=1e-12)
    assert result.meta["initial"]["tau_leaf"] == pytest.approx(6.2967e-5, rel=1e-4)


def test_initial_logits_layouts():
    z = initial_logits(_small())
    assert z.shape == (500,) and z[0] == 5.0 and (z[1:50] == 3.0).all() and (z[50:] == 0.0).all()
    assert (initial_logits(_small(init="zero")) == 0).all()


# ---------------------------------------------------------------------------
# Qualitative reproduction of spec §5.4 (slow)
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def quick_fig2() -> SimResult:
    return simulate(preset("fgrpo-fig2-quick"), progress=False)


def _by_n_gamma(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.set_index(["group_size", "gamma"])


@pytest.mark.slow
def test_fgrpo_fig2_quick_regimes_one_and_three(quick_fig2):
    final = _by_n_gamma(quick_fig2.final)
    initial = _by_n_gamma(quick_fig2.history[quick_fig2.history["step"] == 0])
    retained = final["retained_mass"]
    assert retained[(2, 0.0)] > 0.9  # regime I: small N preserves correct mass
    assert retained[(131072, 0.0)] > 0.98  # regime III; spec §5.4: ≈1.0 at 1000 steps (0.995 here)
    assert retained[(256, 1.0)] > retained[(256, 0.0)]  # gamma = 1 keeps more mass at intermediate N
    # Q_pos rises for every N (and gamma)
    assert (final["q_pos"] > initial["q_pos"]).all(), final["q_pos"] - initial["q_pos"]


@pytest.mark.slow
def test_fgrpo_fig2_quick_shows_concentration_zone(quick_fig2):
    assert _by_n_gamma(quick_fig2.final)["retained_mass"][(256, 0.0)] < 0.3


@pytest.mark.slow
def test_fgrpo_fig2_concentration_zone_at_paper_length():
    # spec §5.4 at the paper's V, lr and 1000 steps, for the intermediate N only (keeps it to two runs)
    config = dataclasses.replace(preset("fgrpo-fig2"), group_sizes=[256], gammas=[0.0, 1.0], seeds=[0], log_every=100)
    final = _by_n_gamma(simulate(config, progress=False).final)
    assert final.loc[(256, 0.0), "retained_mass"] < 0.3  # reference: ~0.04
    assert final.loc[(256, 1.0), "retained_mass"] > final.loc[(256, 0.0), "retained_mass"]  # reference: ~0.14
    assert (final["q_pos"] > 0.63008).all()
    assert final.loc[(256, 0.0), "entropy"] < 1.0


def test_logged_metrics_do_not_hold_the_policy_matrix():
    # every logged value must own a [runs]-sized buffer: a view into p would keep one
    # [runs, actions] matrix alive per logged step (gigabytes over a paper sweep)
    from tailmiss.sim.metrics import _Metrics

    for dtype in (torch.float32, torch.float64):
        config = SimConfig(num_actions=400, num_correct=40, group_sizes=(2, 4), gammas=(0.0,), seeds=(0,))
        p = torch.softmax(torch.randn(2, 400, dtype=dtype), 1)
        for name, value in _Metrics(config)(p).items():
            assert value.untyped_storage().nbytes() <= 2 * 8, name


@given(seed=st.integers(0, 2**31 - 1), r_w=st.sampled_from([0.0, -1.0, -0.5]))
@settings(max_examples=25, deadline=None)
def test_realised_mass_balance_matches_analytic(seed, r_w):
    from tailmiss.sim.metrics import realised_mass_balance

    gen = torch.Generator().manual_seed(seed)
    p = torch.softmax(3 * torch.randn(4, 60, generator=gen, dtype=torch.float64), 1)
    counts = torch.randint(0, 3, (4, 60), generator=gen)
    got = torch.stack(realised_mass_balance(p, counts, 12, 1.0, r_w), 1).numpy()
    mb = analytic.mass_balance(p.numpy(), np.arange(60) < 12, counts.numpy(), 1.0, r_w)
    want = np.stack([mb.sampled_correct, mb.sampled_incorrect, mb.unsampled], 1)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_history_logs_realised_mass_balance_and_runs_at_131072_actions():
    config = SimConfig(num_actions=131_072, group_sizes=(2, 4096), gammas=(0.0,), seeds=(0,), steps=2, log_every=1)
    history = simulate(config, progress=False).history
    terms = ["mb_sampled_correct", "mb_sampled_incorrect", "mb_unsampled"]
    drawn = history[history["step"] < config.steps]
    assert np.isfinite(drawn[terms].to_numpy()).all()
    assert (drawn["mb_sampled_correct"] >= 0).all() and (drawn["mb_sampled_incorrect"] >= 0).all()
    assert history.loc[history["step"] == config.steps, terms].isna().all().all()
    start = history[history["step"] == 0].set_index("group_size")
    assert start.loc[2, "q_pos"] == pytest.approx(0.62407, rel=1e-4)  # spec §3.3, V = 131,072


# --- memory estimate and dry run -----------------------------------------------------------------------


@pytest.mark.gpu
@requires_cuda
def test_memory_estimate_bounds_the_cuda_peak():
    from tailmiss.sim.memory import memory_estimate

    config = preset("fgrpo-fig2").replace(steps=3, log_every=1)
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    simulate(config, device="cuda", progress=False)
    peak = torch.cuda.max_memory_allocated() - before
    assert 0.5 * memory_estimate(config)["total"] < peak <= memory_estimate(config)["total"]


def test_sweep_that_cannot_fit_is_refused_before_running(monkeypatch):
    from tailmiss.sim import memory

    monkeypatch.setattr(memory, "device_memory", lambda device: 10 * 2**20)
    with pytest.raises(ValueError, match=r"needs about .* GiB on cpu but 0.0 GiB are free"):
        simulate(preset("fgrpo-fig2"), device="cpu", progress=False)


def test_memory_estimate_scales_with_the_sweep():
    from tailmiss.sim.memory import memory_estimate

    small = memory_estimate(preset("fgrpo-fig2").replace(seeds=(0,)))
    full = memory_estimate(preset("fgrpo-fig2"))
    assert full["runs"] == 4 * small["runs"] == 136
    assert full["draws_per_step"] == sum(n for n, _, _ in preset("fgrpo-fig2").runs())
    assert full["state"] == 4 * small["state"]
    # on the CPU a step works through tiles of at most 8 rows here: they do not grow with the sweep
    assert full["tile_rows"] == 8 and full["tile"] == small["tile"] * 8 // small["tile_rows"]
    assert small["total"] < full["total"] < 4 * small["total"]
    sgd = memory_estimate(preset("fgrpo-fig2").replace(optimizer="sgd"))
    assert sgd["state"] == full["state"] // 2


def test_one_shared_policy_row_draws_what_every_row_holding_it_draws():
    """A ``(1, actions)`` policy shared by all rows gives each row the draws it gets from its own copy."""
    torch.manual_seed(0)
    probs = torch.softmax(torch.randn(1, 300, dtype=torch.float64), 1)
    sampler = CountSampler([5, 5, 64, 1000], [0, 1, 2, 3], 300, "cpu", max_draws_per_chunk=600)
    for step in (0, 7):
        shared = sampler.indices(probs, step)
        own = sampler.indices(probs.expand(4, -1).contiguous(), step)
        assert torch.equal(shared, own)
