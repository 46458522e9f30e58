"""The bridge: per-prompt categorical policies from exact SFT answer distributions, the simulation started
from them, Lemma 3.1 per prompt, zones and the numeric verdict rebuilt from a tiny real sweep."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import tiny_llm_sweeps
from scipy import special, stats

from tailmiss import analytic
from tailmiss.analytic.regimes import zones
from tailmiss.experiments.bridge import (
    BRIDGE_GAMMAS,
    BridgeResult,
    _sim_config,
    prompt_policies,
    run_bridge,
)
from tailmiss.experiments.sweep import run_sweep
from tailmiss.llm.checkpoint import LoadedRun
from tailmiss.llm.evaluate import answer_distribution, exact_metrics
from tailmiss.options import RunOptions
from tailmiss.sim import SimConfig, simulate
from tailmiss.studies.bridge.claims import bridge_verdict

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_bridge(tmp_path_factory):
    sweep = tiny_llm_sweeps()["nsweep"]
    root = tmp_path_factory.mktemp("bridge-root")
    result = run_sweep(sweep, root, RunOptions(progress=False))
    return root, result, run_bridge(result, root, options=RunOptions(progress=False))


@pytest.fixture(scope="module")
def sft_reference(tiny_bridge):
    root, result, _ = tiny_bridge
    sweep = result.config
    sft = LoadedRun(root / sweep.sft.name)
    prompts = sft.task.prompts(sweep.rl.eval_split, sweep.rl.eval_prompts, seed=sweep.rl.seed, distinct=True)
    return sft, prompts, answer_distribution(sft.model, sft.task, prompts)


# --- SimConfig grows an initial-logits source ---------------------------------------------------------


def test_sim_config_logits_validation():
    cfg = SimConfig(num_actions=3, num_correct=1, init="logits", logits=(0.0, 1.0, 2.0), group_sizes=(2,), steps=1)
    assert cfg.logits == (0.0, 1.0, 2.0)
    with pytest.raises(ValueError, match="logits must hold num_actions=3"):
        SimConfig(num_actions=3, num_correct=1, init="logits", logits=(0.0, 1.0))
    with pytest.raises(ValueError, match="finite"):
        SimConfig(num_actions=3, num_correct=1, init="logits", logits=(0.0, float("-inf"), 1.0))
    with pytest.raises(ValueError, match="only read with init='logits'"):
        SimConfig(num_actions=3, num_correct=1, init="zero", logits=(0.0, 1.0, 2.0))


def test_sim_config_logits_toml_round_trip(tmp_path):
    cfg = SimConfig(num_actions=4, num_correct=2, init="logits", logits=(0.5, -1.25, 3.0, 0.0), group_sizes=(2,))
    cfg.to_toml(tmp_path / "c.toml")
    assert SimConfig.from_toml(tmp_path / "c.toml") == cfg


def test_simulation_starts_from_the_given_logits():
    z = np.array([2.0, -1.0, 0.5, 0.0, -3.0])
    cfg = SimConfig(
        num_actions=5,
        num_correct=2,
        init="logits",
        logits=tuple(z),
        group_sizes=(4,),
        gammas=(0.0,),
        steps=3,
        log_every=1,
        dtype="float64",
    )
    res = simulate(cfg, device="cpu", progress=False, keep_final=True)
    start = res.history[res.history["step"] == 0].iloc[0]
    p = special.softmax(z)
    assert start["q_pos"] == pytest.approx(p[:2].sum(), rel=1e-12)
    assert start["retained_mass"] == 1.0
    assert np.isnan(start["anchor_prob"])  # no anchor without the seeded init
    assert res.final_probs.shape == (1, 5)
    np.testing.assert_allclose(res.final_probs.sum(1), 1.0, rtol=1e-12)
    final = res.final.iloc[0]
    assert final["q_pos"] == pytest.approx(res.final_probs[0, :2].sum(), rel=1e-12)


# --- prompt policies ---------------------------------------------------------------------------------


def test_prompt_policies_reproduce_the_answer_distribution(sft_reference):
    sft, prompts, ref = sft_reference
    policies = prompt_policies(ref, 0.1)
    metrics = exact_metrics(ref, None, rare_share=0.1)
    assert len(policies) == len(prompts)
    for i, pol in enumerate(policies):
        answers = sft.task.enumerate_answers(prompts[i])
        assert len(pol.logits) == len(answers.correct) + 1  # every well-formed answer plus off-format
        assert pol.num_correct == int(answers.correct.sum())
        p = special.softmax(pol.logits)
        # the logits are log-masses, so the softmax is the distribution itself (it sums to 1 with off-format)
        np.testing.assert_allclose(np.exp(pol.logits).sum(), 1.0, rtol=1e-9)
        assert p[: pol.num_correct].sum() == pytest.approx(float(ref.mu_pos[i]), rel=1e-9)
        assert p[-1] == pytest.approx(max(float(ref.off_format[i]), 1e-30), rel=1e-6, abs=1e-12)
        assert pol.mu_pos == pytest.approx(metrics["mu_pos"][i], rel=1e-12)
        assert pol.tau == pytest.approx(metrics["tau_rare_ref"][i], rel=1e-9, abs=1e-15)
        assert not pol.rare[pol.num_correct :].any()  # the rare set holds correct answers only
        assert pol.tau <= 0.1 * pol.mu_pos + 1e-15
        if pol.rare.any():  # the rarest correct answers: every rare one is at most every kept one
            kept = np.flatnonzero(~pol.rare[: pol.num_correct])
            assert p[pol.rare].max() <= p[kept].min() + 1e-15


def test_sim_config_follows_the_sweep(tiny_bridge, sft_reference):
    _, result, _ = tiny_bridge
    _, _, ref = sft_reference
    sweep = result.config
    pol = prompt_policies(ref, sweep.rl.rare_share)[0]
    cfg = _sim_config(pol, sweep, (2, 8), sweep.seeds, 1e-2)
    assert cfg.steps == sweep.rl.steps
    assert cfg.advantage == "std" and cfg.std_kind == sweep.rl.std_kind and cfg.surrogate == "logprob"
    assert cfg.gammas == BRIDGE_GAMMAS and cfg.seeds == sweep.seeds
    assert (cfg.reward_correct, cfg.reward_incorrect) == (1.0, 0.0)


# --- zones and verdict ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "retained, expected",
    [
        ([0.9, 0.8, 0.7], ["I", "I", "I"]),
        ([0.9, 0.3, 0.2, 0.7], ["I", "II", "II", "III"]),
        ([0.2, 0.6, 0.4], ["II", "III", "II"]),
        ([0.49, 0.5], ["II", "III"]),
    ],
)
def test_zones(retained, expected):
    assert zones(np.arange(len(retained)) + 2, retained) == expected


def test_zones_shape_error():
    with pytest.raises(ValueError, match="same shape"):
        zones([2, 4], [0.5])


def _summary(llm, sim, focal_llm, focal_sim):
    rows = []
    for n, v in llm.items():
        rows.append({"source": "llm", "group_size": n, "gamma": 0.0, "retained_mass": v, "q_pos": v / 2})
    for n, v in sim.items():
        rows.append({"source": "sim", "group_size": n, "gamma": 0.0, "retained_mass": v, "q_pos": v / 3})
        rows.append({"source": "sim", "group_size": n, "gamma": 0.5, "retained_mass": v + focal_sim, "q_pos": 0.0})
    rows.append({"source": "llm", "group_size": 8, "gamma": 0.5, "retained_mass": llm[8] + focal_llm, "q_pos": 0.0})
    return pd.DataFrame(rows)


def test_verdict_on_a_constructed_summary():
    llm = {2: 0.9, 8: 0.3, 32: 0.6}
    sim = {2: 0.95, 8: 0.2, 32: 0.9, 128: 1.0}
    v = bridge_verdict(_summary(llm, sim, 0.1, 0.05))
    assert v.group_sizes == (2, 8, 32)
    assert v.spearman_retained_mass == pytest.approx(1.0)
    assert v.llm_zones == ("I", "II", "III") and v.sim_zones == ("I", "II", "III")
    assert v.zone_agreement == 1.0
    (f,) = v.focal
    assert f.gamma == 0.5 and f.llm_delta_retained == pytest.approx(0.1) and f.helps_in_both
    v = bridge_verdict(_summary({2: 0.9, 8: 0.6, 32: 0.3}, sim, -0.1, 0.05))
    assert v.spearman_retained_mass == pytest.approx(0.5)  # ranks (3, 2, 1) vs (3, 1, 2)
    assert v.llm_zones == ("I", "I", "II")
    assert v.zone_agreement == pytest.approx(1 / 3)
    assert not v.focal[0].helps_in_both


# --- the verdict rebuilt from a tiny real sweep ---------------------------------------------------------


def test_bridge_frames(tiny_bridge):
    _, result, bridge = tiny_bridge
    sweep = result.config
    frame = bridge.prompts
    n_prompts = sweep.rl.eval_prompts
    llm, sim = frame[frame["source"] == "llm"], frame[frame["source"] == "sim"]
    assert len(llm) == len(sweep.runs()) * n_prompts
    ns = sorted({v.group_size for v in sweep.variants})
    assert len(sim) == len(ns) * len(BRIDGE_GAMMAS) * len(sweep.seeds) * n_prompts
    assert frame[["q_pos", "retained_mass", "tau", "mu_pos0", "tau0"]].notna().all().all()
    assert ((frame["retained_mass"] > 0) & (frame["retained_mass"] <= 1 + 1e-12)).all()


def test_llm_side_matches_the_sweep_table(tiny_bridge):
    """Two code paths, one number: the bridge's per-prompt M_ret and μ_pos average to the sweep's final table."""
    _, result, bridge = tiny_bridge
    llm = bridge.prompts[bridge.prompts["source"] == "llm"]
    means = llm.groupby(["group_size", "gamma", "seed"])[["retained_mass", "q_pos"]].mean()
    for _, row in result.final[result.final["method"] != "sft"].iterrows():
        m = means.loc[(row["group_size"], row["gamma"], row["seed"])]
        assert m["retained_mass"] == pytest.approx(row["retained_mass"], abs=1e-10)
        assert m["q_pos"] == pytest.approx(row["mu_pos"], abs=1e-10)


STORED = 1e-9
"""The bridge is read back from its stored tables (10 significant digits, :func:`tailmiss.store.save_tables`), so a
first run and a cached read give the same numbers: rebuilt values agree to that precision."""


def test_sim_side_matches_a_direct_simulation(tiny_bridge, sft_reference):
    """Rebuild one prompt's simulation from scratch and compare with the bridge's rows."""
    _, result, bridge = tiny_bridge
    _, _, ref = sft_reference
    sweep = result.config
    i = 1
    pol = prompt_policies(ref, sweep.rl.rare_share)[i]
    ns = sorted({v.group_size for v in sweep.variants})
    res = simulate(
        _sim_config(pol, sweep, ns, sweep.seeds, bridge.sim_lr), device="cpu", progress=False, keep_final=True
    )
    sim = bridge.prompts[(bridge.prompts["source"] == "sim") & (bridge.prompts["prompt"] == i)]
    for r, (n, g, s) in enumerate(res.config.runs()):
        row = sim[(sim["group_size"] == n) & (sim["gamma"] == g) & (sim["seed"] == s)].iloc[0]
        assert row["retained_mass"] == pytest.approx(res.final["retained_mass"].iloc[r], rel=STORED)
        assert row["tau"] == pytest.approx(res.final_probs[r, pol.rare].sum(), rel=STORED)


def test_tail_miss_column_is_lemma_3_1(tiny_bridge):
    _, _, bridge = tiny_bridge
    f = bridge.prompts[bridge.prompts["tau0"] > 0]
    assert len(f) > 0
    expected = analytic.tail_miss_probability(f.mu_pos0.to_numpy(), f.tau0.to_numpy(), f.group_size.to_numpy())
    np.testing.assert_allclose(f.tail_miss.to_numpy(), expected, rtol=STORED)
    assert bridge.prompts.loc[bridge.prompts["tau0"] == 0, "tail_miss"].isna().all()


def test_verdict_rebuilt_from_the_per_prompt_rows(tiny_bridge):
    """The verdict of the saved summary equals one recomputed by hand from prompts.csv (means over prompts, then
    seeds)."""
    _, _, bridge = tiny_bridge
    frame = bridge.prompts
    per_seed = frame.groupby(["source", "group_size", "gamma", "seed"])["retained_mass"].mean()
    mean = per_seed.groupby(["source", "group_size", "gamma"]).mean()
    ns = sorted(frame.loc[(frame["source"] == "llm") & (frame["gamma"] == 0), "group_size"].unique())
    llm = np.array([mean[("llm", n, 0.0)] for n in ns])
    sim = np.array([mean[("sim", n, 0.0)] for n in ns])
    v = bridge_verdict(bridge.summary)
    np.testing.assert_allclose(v.llm_retained_mass, llm, rtol=STORED)
    np.testing.assert_allclose(v.sim_retained_mass, sim, rtol=STORED)
    constant = np.ptp(llm) == 0 or np.ptp(sim) == 0  # a rank correlation is undefined: the verdict says NaN
    expected = float("nan") if constant else stats.spearmanr(llm, sim).statistic
    assert v.spearman_retained_mass == pytest.approx(expected, nan_ok=True)
    assert list(v.llm_zones) == zones(ns, llm) and list(v.sim_zones) == zones(ns, sim)
    (f,) = v.focal
    # a difference of two stored means near 1: absolute, at the stored precision
    assert f.llm_delta_retained == pytest.approx(mean[("llm", 8, 0.5)] - mean[("llm", 8, 0.0)], abs=STORED)
    assert f.sim_delta_retained == pytest.approx(mean[("sim", 8, 0.5)] - mean[("sim", 8, 0.0)], abs=STORED)


def test_bridge_is_cached_and_reloads(tiny_bridge, monkeypatch):
    root, result, bridge = tiny_bridge
    import tailmiss.experiments.bridge as bridge_module

    def refuse(*args, **kwargs):
        raise AssertionError("the cached bridge was recomputed")

    monkeypatch.setattr(bridge_module, "simulate", refuse)
    again = run_bridge(result, root, options=RunOptions(progress=False))
    pd.testing.assert_frame_equal(again.summary, bridge.summary)
    loaded = BridgeResult.load(root / f"{result.config.name}-bridge")
    pd.testing.assert_frame_equal(loaded.summary, bridge.summary)


def test_bridge_rejects_bad_input(tiny_bridge):
    root, result, _ = tiny_bridge
    with pytest.raises(ValueError, match="sim_lr"):
        run_bridge(result, root, options=RunOptions(progress=False), sim_lr=0.0)
    with pytest.raises(ValueError, match="SweepResult"):
        run_bridge("nope", root, options=RunOptions(progress=False))


def test_other_learning_rates_are_kept_apart(tiny_bridge):
    root, result, bridge = tiny_bridge
    other = run_bridge(result, root, options=RunOptions(progress=False), sim_lr=0.1)
    assert other.sim_lr == 0.1 and bridge.sim_lr == 0.01
    assert (root / f"{result.config.name}-bridge-lr0.1").is_dir() and (root / f"{result.config.name}-bridge").is_dir()
    llm = ["source", "group_size", "gamma", "retained_mass"]
    pd.testing.assert_frame_equal(  # the transformer side does not depend on the simulator's rate
        other.summary[other.summary["source"] == "llm"][llm].reset_index(drop=True),
        bridge.summary[bridge.summary["source"] == "llm"][llm].reset_index(drop=True),
    )
    sim = other.summary[other.summary["source"] == "sim"]
    assert not np.allclose(sim["q_pos"], bridge.summary[bridge.summary["source"] == "sim"]["q_pos"])
