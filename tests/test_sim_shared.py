"""The shared-parameter simulator: the table simulator exactly when nothing is shared, a brute-force softmax step
when something is, and its config, result, store and command line."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import one_error_line
from scipy import special
from typer.testing import CliRunner

from tailmiss.cli import app
from tailmiss.options import RunOptions
from tailmiss.sim import CountSampler, SimConfig, simulate
from tailmiss.sim.shared import (
    SHARED_PRESETS,
    SharedSimConfig,
    SharedSimResult,
    prompt_features,
    row_seed,
    run_shared,
    simulate_shared,
    starting_point,
)

SIM = SimConfig(
    name="tiny-shared",
    num_actions=300,
    num_correct=30,
    group_sizes=(2, 16),
    gammas=(0.0, 1.0),
    seeds=(0, 1),
    steps=20,
    log_every=5,
)


def _same_history(shared: SharedSimResult, prompt: int, table) -> None:
    h = shared.history[shared.history["prompt"] == prompt].reset_index(drop=True)
    for name in ("q_pos", "retained_mass", "entropy", "mu_hat"):
        np.testing.assert_array_equal(h[name].to_numpy(), table.history[name].to_numpy(), err_msg=name)


@pytest.mark.parametrize(
    "sim",
    [
        SIM,
        SIM.replace(surrogate="prob", optimizer="adamw", weight_decay=0.01, advantage="std", dtype="float64"),
    ],
    ids=["logprob-adam-float32", "prob-adamw-std-float64"],
)
def test_one_hot_without_bias_is_the_table_simulator_bit_for_bit(sim):
    """Nothing shared: prompt x of seed s is the table simulator's run of seed row_seed(s, x), every logged metric
    and the final policy equal bit for bit."""
    shared = simulate_shared(
        SharedSimConfig(sim=sim, num_prompts=3, minority_prompts=0, train_bias=False), progress=False, keep_final=True
    )
    for x in range(3):
        table = simulate(sim.replace(seeds=tuple(row_seed(s, x) for s in sim.seeds)), progress=False, keep_final=True)
        np.testing.assert_array_equal(shared.final_probs[:, x], table.final_probs)
        _same_history(shared, x, table)


def test_row_seed_gives_prompt_zero_the_runs_seed_and_distinct_streams():
    assert row_seed(7, 0) == 7
    seeds = {row_seed(s, x) for s in range(50) for x in range(16)}
    assert len(seeds) == 50 * 16
    assert all(0 <= s < 2**32 for s in seeds)


def _brute_force_step(config: SharedSimConfig, surrogate: str) -> np.ndarray:
    """One SGD ascent step on Θ by autograd of Σ_x g_x/N Σ_a c_xa A_xa f(p_xa) (f = log or identity), with the
    simulator's own draws, then the softmax of every prompt: [prompts, actions]."""
    sim = config.sim
    (n, gamma, seed) = sim.runs()[0]
    theta0, _, _ = starting_point(config)
    phi = torch.tensor(prompt_features(config), dtype=torch.float64)
    theta = torch.tensor(theta0, dtype=torch.float64, requires_grad=True)
    probs = torch.softmax(phi @ theta, dim=1)
    p = config.num_prompts
    sampler = CountSampler([n] * p, [row_seed(seed, x) for x in range(p)], sim.num_actions, "cpu")
    counts = sampler.counts(probs.detach(), 0).to(torch.float64)
    assert (counts.sum(1) == n).all() and (counts > 0).sum() > p  # the draws spread: the step has something to test
    objective = 0.0
    for x, kind in enumerate(config.prompt_types()):
        lo, hi = config.correct_range(kind)
        correct = torch.zeros(sim.num_actions, dtype=torch.bool)
        correct[lo:hi] = True
        k = float(counts[x, correct].sum())
        mean = (k * sim.reward_correct + (n - k) * sim.reward_incorrect) / n
        adv = torch.where(
            correct, *(torch.tensor(r - mean, dtype=torch.float64) for r in (sim.reward_correct, sim.reward_incorrect))
        )
        g = (1.0 - k / n) ** gamma
        f = torch.log(probs[x]) if surrogate == "logprob" else probs[x]
        objective = objective + g / n * (counts[x] * adv * f).sum()
    objective.backward()
    with torch.no_grad():
        theta1 = theta + sim.lr * theta.grad
        return torch.softmax(phi @ theta1, dim=1).numpy()


@pytest.mark.parametrize("surrogate", ["logprob", "prob"])
@pytest.mark.parametrize(("features", "dim", "bias"), [("one-hot", 0, True), ("random", 3, True), ("random", 4, False)])
def test_one_step_is_the_brute_force_softmax_step(surrogate, features, dim, bias):
    """Shared parameters, a minority with its own correct set, the focal weight: one SGD step equals autograd of
    the summed group objectives through the log-linear softmax."""
    sim = SimConfig(
        name="brute",
        num_actions=12,
        num_correct=3,
        surrogate=surrogate,
        optimizer="sgd",
        lr=0.7,
        group_sizes=(5,),
        gammas=(1.0,),
        seeds=(3,),
        steps=1,
        log_every=1,
        dtype="float64",
    )
    config = SharedSimConfig(
        sim=sim, num_prompts=4, minority_prompts=1, prompt_features=features, prompt_dim=dim, train_bias=bias
    )
    got = simulate_shared(config, progress=False, keep_final=True).final_probs[0]
    np.testing.assert_allclose(got, _brute_force_step(config, surrogate), rtol=1e-12, atol=1e-15)


def test_the_bias_carries_each_prompts_update_to_every_prompt():
    """Without the bias a prompt's trajectory does not depend on the other prompts; with it, it does."""
    alone = simulate_shared(
        SharedSimConfig(sim=SIM, num_prompts=1, minority_prompts=0, train_bias=False), progress=False, keep_final=True
    )
    apart = simulate_shared(
        SharedSimConfig(sim=SIM, num_prompts=3, minority_prompts=1, train_bias=False), progress=False, keep_final=True
    )
    together = simulate_shared(
        SharedSimConfig(sim=SIM, num_prompts=3, minority_prompts=1, train_bias=True), progress=False, keep_final=True
    )
    np.testing.assert_array_equal(apart.final_probs[:, 0], alone.final_probs[:, 0])
    assert np.abs(together.final_probs[:, 0] - alone.final_probs[:, 0]).max() > 1e-4


def test_the_minority_starts_as_the_rest_over_its_own_correct_set():
    config = SharedSimConfig(sim=SIM, num_prompts=4, minority_prompts=2)
    theta0, target, fit_kl = starting_point(config)
    c = SIM.num_correct
    assert config.prompt_types() == ["rest", "rest", "minority", "minority"]
    assert config.correct_range("minority") == (c, 2 * c)
    np.testing.assert_array_equal(target[2, c : 2 * c], target[0, :c])
    np.testing.assert_array_equal(target[2, :c], target[0, c : 2 * c])
    np.testing.assert_array_equal(target[2, 2 * c :], target[0, 2 * c :])
    assert theta0.shape == (5, SIM.num_actions)  # four prompts and the bias
    np.testing.assert_array_equal(fit_kl, 0.0)
    result = simulate_shared(config.replace(steps=5, log_every=5), progress=False)
    start = result.history[result.history["step"] == 0]
    np.testing.assert_array_equal(start["retained_mass"], 1.0)
    assert start["q_pos"].nunique() == 1  # both types start with the same correct mass


def test_random_features_fit_the_start_by_least_squares_and_say_how_well():
    config = SharedSimConfig(sim=SIM, num_prompts=6, minority_prompts=2, prompt_features="random", prompt_dim=3)
    phi = prompt_features(config)
    assert phi.shape == (6, 4) and (phi[:, :3].sum(1) >= 1).all() and (phi[:, 3] == 1).all()
    np.testing.assert_array_equal(phi, prompt_features(config))
    theta0, target, fit_kl = starting_point(config)
    logp = special.log_softmax(target, axis=1)
    logq = special.log_softmax(phi @ theta0, axis=1)
    np.testing.assert_allclose(fit_kl, (np.exp(logp) * (logp - logq)).sum(1), rtol=1e-10, atol=1e-14)
    assert (fit_kl >= 0).all()
    wide = config.replace(prompt_dim=12)  # as many features as prompts and more: the start is representable
    assert starting_point(wide)[2].max() < 1e-12


def test_by_type_averages_prompts_then_seeds_with_exact_pass_at_k():
    result = simulate_shared(SharedSimConfig(sim=SIM, num_prompts=3, minority_prompts=1), progress=False)
    final = result.final
    summary = result.by_type(ks=(1, 8), frame=final)
    assert len(summary) == 2 * 2 * 2  # N x gamma x type
    row = summary[(summary.group_size == 16) & (summary.gamma == 1.0) & (summary.prompt_type == "rest")].iloc[0]
    mine = final[(final.group_size == 16) & (final.gamma == 1.0) & (final.prompt_type == "rest")]
    assert row["q_pos"] == pytest.approx(mine["q_pos"].mean(), rel=1e-12)
    assert row["pass@8"] == pytest.approx((1 - (1 - mine["q_pos"]) ** 8).mean(), rel=1e-12)
    assert row["pass@1"] == pytest.approx(row["q_pos"], rel=1e-12)


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"num_prompts": 0}, "num_prompts"),
        ({"minority_prompts": 9}, "minority_prompts"),
        ({"prompt_features": "digits"}, "'digits'"),
        ({"prompt_dim": 3}, "prompt_dim is only read"),
        ({"prompt_features": "random"}, "prompt_dim"),
        ({"train_bias": 1}, "train_bias"),
        ({"sim": SIM.replace(num_correct=200)}, r"2 \* num_correct <= num_actions"),
        ({"sim": SimConfig(surrogate="theory", optimizer="sgd", advantage="none")}, "theory"),
        ({"sim": {"name": "x"}}, "SimConfig"),
    ],
)
def test_bad_settings_are_refused_by_name(changes, needle):
    with pytest.raises(ValueError, match=needle):
        SharedSimConfig(**{"sim": SIM, "num_prompts": 8, "minority_prompts": 2, **changes})


def test_toml_round_trip_and_unknown_keys(tmp_path):
    config = SharedSimConfig(sim=SIM, num_prompts=5, minority_prompts=1, prompt_features="random", prompt_dim=2)
    config.to_toml(tmp_path / "c.toml")
    assert SharedSimConfig.from_toml(tmp_path / "c.toml") == config
    text = (tmp_path / "c.toml").read_text().replace("[shared]", "[shared]\nprompts = 3")
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(ValueError, match="unknown key.*'prompts'"):
        SharedSimConfig.from_toml(tmp_path / "bad.toml")
    (tmp_path / "lone.toml").write_text("[shared]\nnum_prompts = 3\n")
    with pytest.raises(ValueError, match=r"\[sim\] table"):
        SharedSimConfig.from_toml(tmp_path / "lone.toml")


def test_replace_sends_simulator_keys_to_sim():
    config = SharedSimConfig(sim=SIM).replace(steps=3, num_prompts=2, minority_prompts=1)
    assert config.sim.steps == 3 and config.num_prompts == 2 and config.sim.name == SIM.name


def test_saved_result_loads_equal_and_the_store_reuses_it(tmp_path):
    config = SharedSimConfig(sim=SIM.replace(steps=6, log_every=3), num_prompts=2, minority_prompts=1)
    said = []
    options = RunOptions(progress=False, log=said.append)
    first = run_shared(config, tmp_path / "r", options)
    loaded = SharedSimResult.load(tmp_path / "r")
    assert loaded.config == config
    np.testing.assert_allclose(loaded.history["q_pos"], first.history["q_pos"], rtol=1e-9)
    assert list(loaded.history["prompt_type"].unique()) == ["rest", "minority"]
    run_shared(config, tmp_path / "r", options)
    assert any("reusing" in line for line in said)
    (tmp_path / "r" / "history.csv").write_text("run\n0\n")
    with pytest.raises(ValueError, match="history.csv"):
        SharedSimResult.load(tmp_path / "r")


def test_presets_are_fgrpo_fig2_on_eight_prompts_and_the_quick_one_keeps_the_setting():
    full, quick = SHARED_PRESETS["shared-conflict"], SHARED_PRESETS["shared-conflict-quick"]
    assert (full.sim.num_actions, full.sim.num_correct, full.sim.lr) == (128_000, 10_000, 1e-2)
    assert (full.num_prompts, full.minority_prompts, full.train_bias) == (8, 2, True)
    same = ("num_actions", "num_correct", "init", "surrogate", "optimizer", "lr", "advantage", "gammas")
    assert all(getattr(quick.sim, k) == getattr(full.sim, k) for k in same)
    assert (quick.num_prompts, quick.minority_prompts) == (full.num_prompts, full.minority_prompts)


def test_cli_runs_a_config_and_prints_each_prompt_type(tmp_path):
    config = SharedSimConfig(sim=SIM.replace(steps=4, log_every=2, seeds=(0,)), num_prompts=3, minority_prompts=1)
    config.to_toml(tmp_path / "c.toml")
    runner = CliRunner()
    args = ["sim", "shared", "--config", str(tmp_path / "c.toml"), "--out", str(tmp_path / "r"), "--no-progress"]
    result = runner.invoke(app, [*args, "--k", "4"])
    assert result.exit_code == 0, result.output
    assert "minority" in result.output and "rest" in result.output and "pass@4" in result.output
    assert (tmp_path / "r" / "history.csv").is_file()
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and "reusing" in again.output


def test_cli_refuses_bad_input_in_one_line(tmp_path):
    runner = CliRunner()
    one_error_line(runner.invoke(app, ["sim", "shared", "--preset", "nope"]), "unknown shared preset 'nope'")
    one_error_line(runner.invoke(app, ["sim", "shared"]), "exactly one of --preset and --config")
    (tmp_path / "c.toml").write_text("[sim]\nnum_actions = 10\nnum_correct = 6\n[shared]\nnum_prompts = 2\n")
    one_error_line(runner.invoke(app, ["sim", "shared", "--config", str(tmp_path / "c.toml")]), "2 * num_correct")
