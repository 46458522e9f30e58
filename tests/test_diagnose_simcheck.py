"""tailmiss.diagnose.simcheck: rollout spends at an equal budget on the categorical simulator."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tailmiss.diagnose.simcheck import (
    SETTINGS,
    logged_updates,
    rare_set_size,
    simulate_spends,
    start_logits,
    summarize_spends,
    updates_for,
)

COLUMNS = ["group_size", "gamma", "seed", "updates", "rollouts", "retained_mass", "q_pos", "rare_mass", "m_ret"]


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """One intra-op thread for the RL loop of the law test (simulate_spends sets it itself while it runs)."""


# ---- inputs ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(mu=[0.5, 1.0]), r"mu\[1\] = 1\.0"),
        (dict(mu=[0.0]), r"mu\[0\] = 0\.0"),
        (dict(mu=[float("nan")]), r"mu\[0\] = nan"),
        (dict(mu=[]), "non-empty"),
        (dict(rho=1.0), "rho .* got 1.0"),
        (dict(rho=0), "rho .* got 0"),
        (dict(spends=[(0, 0.0)]), "N = 0"),
        (dict(spends=[(4.0, 0.0)]), "N = 4.0"),
        (dict(spends=[(4, -0.5)]), "gamma = -0.5"),
        (dict(spends=[(4, float("inf"))]), "gamma = inf"),
        (dict(spends=[]), "at least one"),
        (dict(spends=[(4, 0.0), (4, 0.0)]), "distinct"),
        (dict(spends=[(4,)]), r"pair, got \(4,\)"),
        (dict(setting="table-adam"), "setting must be one of .*'table-adam'"),
        (dict(rollouts_per_prompt=0), "rollouts_per_prompt .* got 0"),
        (dict(seeds=()), "seeds"),
        (dict(seeds=(0, 0)), "distinct"),
        (dict(seeds=(-1,)), "seeds entry .* got -1"),
        (dict(seeds=(2**31,)), "seeds entry"),  # times 2 prompts leaves the 32-bit seeds
        (dict(num_correct=1), "num_correct"),
        (dict(num_correct=64), "num_correct"),
        (dict(points=0), "points"),
    ],
)
def test_bad_inputs_name_the_bad_value(change, message):
    args = dict(mu=[0.3, 0.6], rho=0.1, spends=[(4, 0.0)], rollouts_per_prompt=8) | change
    with pytest.raises(ValueError, match=message):
        simulate_spends(**args)


def test_importing_never_imports_torch():
    code = "import sys, tailmiss.diagnose, tailmiss.diagnose.simcheck; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- the pieces --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rho, c, k",
    [(0.01, 16, 1), (0.0625, 16, 1), (0.1, 16, 2), (0.25, 16, 4), (0.3, 10, 3), (0.99, 16, 15), (0.5, 2, 1)],
)
def test_rare_set_is_the_lightest_correct_actions(rho, c, k):
    assert rare_set_size(rho, c) == k
    p = np.exp(start_logits(0.7, rho, 40, c))
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert p[:k].sum() == pytest.approx(rho * 0.7, rel=1e-12)
    assert p[:c].sum() == pytest.approx(0.7, rel=1e-12)
    if rho <= 1 - 1 / c:  # below the cap every member weighs no more than the other correct actions
        assert p[0] <= p[k] * (1 + 1e-12)
        assert k == 1 or p[0] * k / (k - 1) > p[k]  # and k is the fewest that do: k - 1 members would be heavier


def test_budget_and_logged_updates():
    assert [updates_for(800, n) for n in (2, 8, 32, 64, 3000)] == [400, 100, 25, 12, 1]
    assert updates_for(20, 8) == 2  # round(2.5): halves to even, as Ladder.steps_for
    assert logged_updates(100, 4) == [25, 50, 75, 100]
    assert logged_updates(2, 4) == [1, 2]
    assert logged_updates(1, 4) == [1]


# ---- the simulation ----------------------------------------------------------------------------------------------


def _by_hand(mu, rho, n, gamma, seeds, steps):
    """The simulator run the wrapper should be, written out without the module (table-sgd-lr20, init='logits')."""
    from tailmiss.sim.config import SimConfig
    from tailmiss.sim.engine import simulate

    v, c, k = 64, 16, math.ceil(rho * 16)
    masses = np.concatenate(
        [np.full(k, rho * mu / k), np.full(c - k, (1 - rho) * mu / (c - k)), np.full(v - c, (1 - mu) / (v - c))]
    )
    cfg = SimConfig(
        name="by-hand",
        num_actions=v,
        num_correct=c,
        init="logits",
        logits=tuple(float(x) for x in np.log(masses)),
        reward_correct=1.0,
        reward_incorrect=0.0,
        advantage="std",
        std_kind="bessel",
        adv_eps=1e-6,
        surrogate="logprob",
        optimizer="sgd",
        lr=20.0 / (4 * 4),
        weight_decay=0.0,
        group_sizes=(n,),
        gammas=(gamma,),
        seeds=tuple(seeds),
        steps=steps,
        log_every=1,
        dtype="float64",
    )
    return simulate(cfg, device="cpu", progress=False, keep_final=True), k


def test_gamma_zero_is_the_simulator_number_for_number():
    mu, rho, n, seeds = 0.8, 0.1, 4, (0, 1, 2)
    frame = simulate_spends([mu], rho, [(n, 0.0)], 200, seeds=seeds, per_prompt=True)
    steps = updates_for(200, n)
    hand, k = _by_hand(mu, rho, n, 0.0, seeds, steps)
    hist = hand.history
    start = np.exp(np.log(rho * mu / k)) * k  # the rare set's starting mass, as the hand-built logits hold it
    for t in [0, *logged_updates(steps, 4)]:
        ours = frame[frame["updates"] == t].sort_values("seed")
        ref = hist[hist["step"] == t].sort_values("seed")
        np.testing.assert_array_equal(ours["q_pos"].to_numpy(), ref["q_pos"].to_numpy())
        np.testing.assert_array_equal(ours["m_ret"].to_numpy(), ref["retained_mass"].to_numpy())
        np.testing.assert_array_equal(ours["rollouts"].to_numpy(), t * n)
    final = frame[frame["updates"] == steps].sort_values("seed")
    np.testing.assert_array_equal(final["rare_mass"].to_numpy(), hand.final_probs[:, :k].sum(1))
    np.testing.assert_allclose(final["retained_mass"].to_numpy(), hand.final_probs[:, :k].sum(1) / start, rtol=1e-12)


def test_retained_mass_starts_at_one():
    mu = [0.2, 0.5, 0.9]
    frame = simulate_spends(mu, 0.05, [(2, 0.0), (8, 0.5)], 64, seeds=(0, 1))
    assert list(frame.columns) == COLUMNS
    start = frame[frame["rollouts"] == 0]
    assert len(start) == 2 * 2 and (start["updates"] == 0).all()
    assert (start["retained_mass"] == 1.0).all() and (start["m_ret"] == 1.0).all()
    np.testing.assert_allclose(start["q_pos"], np.mean(mu), rtol=1e-12)
    np.testing.assert_allclose(start["rare_mass"], 0.05 * np.mean(mu), rtol=1e-12)
    # every run logs its start and 4 points of its own budget: 32 and 8 updates
    assert sorted(frame.loc[frame["group_size"] == 2, "updates"].unique()) == [0, 8, 16, 24, 32]
    assert sorted(frame.loc[frame["group_size"] == 8, "rollouts"].unique()) == [0, 16, 32, 48, 64]


def test_grpo_loses_rare_mass_near_mu_one_and_the_focal_weight_keeps_more():
    """μ = 0.95, ρ = 0.1, N = 4, 1600 rollouts (400 updates): GRPO keeps about half of the rare set's mass.

    Checked beforehand on 20 seeds: γ = 0 keeps 0.55 ± 0.29 (19 of 20 seeds below 1), γ = 1 keeps 0.94 ± 0.11;
    Q_pos rises to about 0.99 either way. Seeds 0-2 below: 0.50 and 0.82.
    """
    frame = simulate_spends([0.95], 0.1, [(4, 0.0), (4, 1.0)], 1600, seeds=(0, 1, 2), per_prompt=True)
    final = frame[frame["updates"] == 400]
    grpo, focal = (final[final["gamma"] == g].sort_values("seed") for g in (0.0, 1.0))
    assert (grpo["retained_mass"] < 0.7).all()
    assert (grpo["q_pos"] > 0.97).all()  # accuracy rose while the rare set shrank: sharpening
    assert (focal["retained_mass"].to_numpy() > grpo["retained_mass"].to_numpy()).all()
    summary = summarize_spends(frame)
    assert summary["retained_mass_mean"].tolist() == pytest.approx([0.502, 0.820], abs=0.01)


def test_seeds_reproduce_and_prompts_do_not_share_draws():
    args = ([0.6, 0.6], 0.1, [(4, 0.0), (16, 0.5)], 128)
    a = simulate_spends(*args, seeds=(0, 1), per_prompt=True)
    b = simulate_spends(*args, seeds=(0, 1), per_prompt=True)
    pd.testing.assert_frame_equal(a, b)
    assert sorted(a["seed"].unique()) == [0, 1]
    end = a[a["updates"] == a.groupby("group_size")["updates"].transform("max")]
    one, two = (end[end["prompt"] == j].reset_index(drop=True) for j in (0, 1))
    assert not np.array_equal(one["q_pos"], two["q_pos"])  # the same μ twice: two independent prompts
    # seed 1 alone is seed 1 of the pair (its runs do not depend on the other seeds')
    alone = simulate_spends(*args, seeds=(1,), per_prompt=True)
    pd.testing.assert_frame_equal(alone, a[a["seed"] == 1].reset_index(drop=True))


def test_the_callers_thread_count_is_restored():
    import torch

    torch.set_num_threads(2)
    try:
        simulate_spends([0.5], 0.1, [(4, 0.0)], 8)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)


def test_settings_and_summary():
    assert set(SETTINGS) == {"table-sgd-lr20", "sim-adam"}
    assert SETTINGS["table-sgd-lr20"]["optimizer"] == "sgd" and SETTINGS["table-sgd-lr20"]["lr"] == 1.25
    assert SETTINGS["sim-adam"]["optimizer"] == "adam" and SETTINGS["sim-adam"]["lr"] == 1e-2
    args = ([0.3, 0.7], 0.1, [(4, 0.0), (16, 1.0)], 96)
    per = simulate_spends(*args, seeds=(0, 1, 2), setting="sim-adam", per_prompt=True)
    mean = simulate_spends(*args, seeds=(0, 1, 2), setting="sim-adam")
    summary = summarize_spends(mean)
    pd.testing.assert_frame_equal(summarize_spends(per), summary)
    assert summary[["group_size", "gamma", "updates", "rollouts", "seeds"]].values.tolist() == [
        [4, 0.0, 24, 96, 3],
        [16, 1.0, 6, 96, 3],
    ]
    final = mean[mean["updates"] == mean.groupby("group_size")["updates"].transform("max")]
    for _, row in summary.iterrows():
        runs = final[(final["group_size"] == row["group_size"]) & (final["gamma"] == row["gamma"])]
        assert row["retained_mass_mean"] == pytest.approx(runs["retained_mass"].mean(), rel=1e-12)
        assert row["retained_mass_sd"] == pytest.approx(runs["retained_mass"].std(ddof=1), rel=1e-12)
        assert row["q_pos_mean"] == pytest.approx(runs["q_pos"].mean(), rel=1e-12)
        assert row["q_pos_sd"] == pytest.approx(runs["q_pos"].std(ddof=1), rel=1e-12)
    other = summarize_spends(simulate_spends(*args, seeds=(0, 1, 2)))
    assert not np.allclose(other["q_pos_mean"], summary["q_pos_mean"])  # the setting is used
    with pytest.raises(ValueError, match="lacks the column"):
        summarize_spends(mean.drop(columns=["q_pos"]))


# ---- the named setting is the ladder's rung ----------------------------------------------------------------------


@pytest.mark.slow
def test_table_sgd_lr20_follows_the_ladders_table_rung_in_law(tmp_path):
    """SETTINGS['table-sgd-lr20'] against the RL loop with the ladder's own table-sgd-lr20 settings.

    The ladder preset's RL config (token-mean loss over 4 prompts per step, grad_clip 1, Bessel advantages) and
    task (4 answer tokens), SGD at the rung's lr 20, a pool of 4 prompts so that every prompt is updated at every
    step; 25 seeds, N = 4, γ = 0, 20 steps. The simulator at the setting's lr matches the pool means of Q_pos and
    M_ret at steps 10 and 20 (|z| < 4; measured 1.1), at half or twice that lr it does not (|z| > 4; measured 10.9
    and 8.4). About 10 s.
    """
    import torch

    from tailmiss.experiments.ladder import policy_prompts, write_policy_run
    from tailmiss.experiments.presets import LADDERS
    from tailmiss.llm.config import SFTConfig
    from tailmiss.llm.model import ModelConfig
    from tailmiss.llm.rollouts import training_pool
    from tailmiss.llm.tabular import tabular_from_distribution
    from tailmiss.llm.train import train_rl
    from tailmiss.sim.config import SimConfig
    from tailmiss.sim.engine import simulate

    ladder = LADDERS["ladder"]
    (rung,) = [r for r in ladder.rungs if r.name == "table-sgd-lr20"]
    task, per_step, seeds, steps, at = ladder.sft.task, ladder.rl.prompts_per_step, 25, 20, (10, 20)
    assert rung.lr / (per_step * task.max_answer_len) == SETTINGS["table-sgd-lr20"]["lr"]

    def rl(seed):
        return ladder.rl.replace(
            name=f"law-{seed}", group_size=4, gamma=0.0, train_prompts=per_step, steps=steps, optimizer=rung.optimizer,
            lr=rung.lr, eval_every=10, eval_prompts=1, checkpoint_every=1000, seed=seed,
        )  # fmt: skip

    held = policy_prompts(rl(0), task)
    logp = torch.tensor(np.log(np.stack([task.teacher_answer_probs(p) for p in held]) * 0.98))
    model = tabular_from_distribution("table", task, held, logp, torch.full((len(held),), 0.02, dtype=torch.float64))
    sft = SFTConfig(name="law-init", task=task, model=ModelConfig(kind="table"))
    init = write_policy_run(model, task, sft, tmp_path / "init")
    frames = []
    for seed in range(seeds):
        h = pd.read_csv(train_rl(rl(seed), init, tmp_path / f"s{seed}", progress=False) / "history.csv")
        frames.append(h.loc[h["step"].isin(at), ["step", "pool_mu_pos", "pool_retained_mass"]])
    llm = pd.concat(frames).rename(columns={"pool_mu_pos": "q_pos", "pool_retained_mass": "retained_mass"})
    keys = [tuple(task.prompt_tokens(p)) for p in held]
    pool = [keys.index(tuple(task.prompt_tokens(p))) for p in training_pool(task, per_step, ladder.rl.pool_seed)]

    def sim(lr):
        runs = []
        for i in pool:
            correct = np.append(task.enumerate_answers(held[i]).correct.numpy(), False)
            z = np.append(logp[i].numpy(), np.log(0.02))[np.argsort(~correct, kind="stable")]
            setting = dict(SETTINGS["table-sgd-lr20"], lr=lr)
            cfg = SimConfig(
                name="law", num_actions=len(z), num_correct=int(correct.sum()), init="logits",
                logits=tuple(float(x) for x in z), group_sizes=(4,), gammas=(0.0,),
                seeds=tuple(range(1000 * i, 1000 * i + seeds)), steps=steps, log_every=10, dtype="float64", **setting,
            )  # fmt: skip
            h = simulate(cfg, device="cpu", progress=False).history
            runs.append(h.loc[h["step"].isin(at)].assign(seed=lambda d, i=i: d["seed"] - 1000 * i))
        return pd.concat(runs).groupby(["seed", "step"], as_index=False)[["q_pos", "retained_mass"]].mean()

    def worst_z(other):
        out = []
        for metric in ("q_pos", "retained_mass"):
            for step in at:
                a = llm.loc[llm["step"] == step, metric].to_numpy()
                b = other.loc[other["step"] == step, metric].to_numpy()
                out.append(abs(a.mean() - b.mean()) / np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)))
        return max(out)

    lr = SETTINGS["table-sgd-lr20"]["lr"]
    assert worst_z(sim(lr)) < 4
    assert worst_z(sim(lr / 2)) > 4 and worst_z(sim(lr * 2)) > 4
