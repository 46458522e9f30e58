"""LLM sweeps: configuration, TOML round trip, the run store (reuse, resume, atomic result) and the tidy tables."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import tiny_llm_sweeps

from tailmiss.analytic.advantages import lr_matched_scale
from tailmiss.experiments import cached
from tailmiss.experiments.presets import LLM_SWEEPS, llm_sweep, quick_name
from tailmiss.experiments.sweep import LLMSweep, SweepResult, Variant, collect, load_sweep, run_sweep
from tailmiss.io import ConfigError
from tailmiss.options import RunOptions

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny():
    return tiny_llm_sweeps()["nsweep"]


@pytest.fixture(scope="module")
def tiny_run(tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep-root")
    messages: list[str] = []
    result = run_sweep(tiny, root, RunOptions(progress=False, log=messages.append))
    return root, result, messages


# --- configuration ---------------------------------------------------------------------------------


def test_variant_labels_and_slugs():
    assert Variant("grpo", 0.0, 8).label == "GRPO N=8"
    assert Variant("grpo", 0.5, 8).label == "F-GRPO γ=0.5 N=8"
    assert Variant("cispo", 1, 4).label == "F-CISPO γ=1 N=4"
    assert Variant("dapo", 0.5, 16).slug == "dapo-n16-g0.5"


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"method": "ppo"}, "method"),
        ({"gamma": -1.0}, "gamma"),
        ({"gamma": float("nan")}, "gamma"),
        ({"gamma": True}, "gamma"),
        ({"group_size": 1}, "group_size"),
        ({"group_size": 4.0}, "group_size"),
    ],
)
def test_variant_rejects_bad_values(kwargs, word):
    with pytest.raises(ValueError, match=word):
        Variant(**kwargs)


def test_sweep_validation(tiny):
    with pytest.raises(ValueError, match="variants must not be empty"):
        tiny.replace(variants=())
    with pytest.raises(ValueError, match="distinct"):
        tiny.replace(variants=(Variant(), Variant()))
    with pytest.raises(ValueError, match="seeds"):
        tiny.replace(seeds=(0, 0))
    with pytest.raises(ValueError, match="seeds"):
        tiny.replace(seeds=(-1,))
    with pytest.raises(ValueError, match="name"):
        tiny.replace(name="a/b")
    with pytest.raises(ValueError, match="name"):
        tiny.replace(name="")
    # a variant that the RL config rejects is named in the error
    with pytest.raises(ValueError, match="GRPO N=2"):
        tiny.replace(rl=tiny.rl.replace(minibatches=5, prompts_per_step=2), variants=(Variant("grpo", 0.0, 2),))


def test_runs_replace_only_the_variant_fields(tiny):
    runs = tiny.runs()
    assert len(runs) == len(tiny.variants) * len(tiny.seeds)
    for variant, seed, cfg in runs:
        assert (cfg.method, cfg.gamma, cfg.group_size, cfg.seed) == (
            variant.method,
            variant.gamma,
            variant.group_size,
            seed,
        )
        assert cfg.name == f"{tiny.rl.name}-{variant.slug}-s{seed}"
        assert cfg.replace(**{k: getattr(tiny.rl, k) for k in ("name", "method", "gamma", "group_size", "seed")}) == (
            tiny.rl
        )


@pytest.mark.parametrize("name", sorted(LLM_SWEEPS))
def test_sweep_toml_round_trip(name, tmp_path):
    sweep = llm_sweep(name)
    sweep.to_toml(tmp_path / "s.toml")
    assert load_sweep(tmp_path / "s.toml") == sweep


def test_sweep_toml_errors(tiny, tmp_path):
    data = tiny.to_dict()
    bad = dict(data, extra={})
    with pytest.raises(ValueError, match=r"\[sweep\], \[sft\] and \[rl\]"):
        LLMSweep.from_dict(bad)
    body = dict(data["sweep"], colour="red")
    with pytest.raises(ValueError, match="colour"):
        LLMSweep.from_dict(dict(data, sweep=body))
    body = dict(data["sweep"], variants=[{"method": "grpo", "group": 4}])
    with pytest.raises(ValueError, match="variant 0"):
        LLMSweep.from_dict(dict(data, sweep=body))
    body = dict(data["sweep"], variants=[{"method": "grpo", "group_size": 0}])
    with pytest.raises(ValueError, match="variant 0: variant group_size"):
        LLMSweep.from_dict(dict(data, sweep=body))
    with pytest.raises(ValueError, match="lr"):
        LLMSweep.from_dict(dict(data, rl=dict(data["rl"], optim={"lr": -1.0})))
    flat = {k: v for k, v in data["sft"].items() if k != "optim"} | {"lr": 1e-3}  # the layout before [optim]
    with pytest.raises(ConfigError, match=r"lr moved under \[sft.optim\]"):  # a stored result in it is redone
        LLMSweep.from_dict(dict(data, sft=flat))
    old = {"method": "grpo", "group_size": 8, "tag": "low", "overrides": {"lr": 1e-5}}  # an override before [optim]
    with pytest.raises(ConfigError, match="variant 0: .*'lr' is an \\[rl.optim\\] setting: write 'optim.lr'"):
        LLMSweep.from_dict(dict(data, sweep=dict(data["sweep"], variants=[old])))


def test_quick_names_of_sweeps():
    assert quick_name("multisolution-nsweep") == "multisolution-nsweep-quick"
    assert quick_name("maze-nsweep") == "maze-nsweep-quick"
    for name in LLM_SWEEPS:
        quick = LLM_SWEEPS.get(quick_name(name))
        if name.endswith("-quick") or quick is None:
            continue
        # a quick arm is an arm of the full study (the preset or its controls, e.g. narrowing-controls); only a
        # rate matched to the quick preset's own may differ
        full = [v for n, s in LLM_SWEEPS.items() if n.startswith(name) and not n.endswith("-quick") for v in s.variants]
        arm = lambda v: (v.method, v.gamma, v.group_size, v.dynamic_sampling, v.tag)  # noqa: E731
        assert {arm(v) for v in quick.variants} <= {arm(v) for v in full}, name
        for v in quick.variants:
            if v.overrides and v not in full:
                assert dict(v.overrides) == {"optim.lr": quick.rl.optim.lr * lr_matched_scale(0.5)}, (name, v)


def test_presets_follow_the_paper_grid():
    ns = llm_sweep("multisolution-nsweep")
    grpo = sorted(v.group_size for v in ns.variants if v.gamma == 0)
    assert grpo == [2, 4, 8, 16, 32]
    assert {(v.gamma, v.group_size) for v in ns.variants if v.gamma > 0} == {(0.5, 8), (1.0, 8)}
    assert len(ns.seeds) >= 3
    obj = llm_sweep("multisolution-objectives")
    assert {(v.method, v.gamma) for v in obj.variants} == {
        (m, g) for m in ("grpo", "dapo", "cispo") for g in (0.0, 0.5)
    }
    assert {v.group_size for v in obj.variants} == {8}
    maze = llm_sweep("maze-nsweep")
    assert sorted({v.group_size for v in maze.variants}) == [4, 8, 16, 32, 64, 128]
    assert sorted({v.gamma for v in maze.variants}) == [0.0, 0.5, 1.0]
    quick = llm_sweep("maze-nsweep-quick")
    assert {(v.gamma, v.group_size) for v in quick.variants} == {(g, n) for g in (0.0, 0.5) for n in (4, 16)}
    # shared runs: the objective sweep's GRPO and F-GRPO arms are the N sweep's runs
    shared = {c.name for _, _, c in ns.runs()} & {c.name for _, _, c in obj.runs()}
    assert shared == {f"multisolution-rl-grpo-n8-g{g}-s{s}" for g in ("0", "0.5") for s in obj.seeds}


# --- the store ------------------------------------------------------------------------------------


def test_sweep_result_tables(tiny, tiny_run):
    root, result, messages = tiny_run
    assert messages[0].startswith("SFT")
    assert sum("training" in m for m in messages[1:]) == len(tiny.runs())
    final, history = result.final, result.history
    assert len(final) == len(tiny.runs()) + 1
    sft = final[final["method"] == "sft"]
    assert len(sft) == 1 and sft["retained_mass"].iloc[0] == 1.0 and sft["dnll_rare"].iloc[0] == 0.0
    runs = final[final["method"] != "sft"]
    # equal prompts and steps: rollouts are proportional to N
    per_n = runs.groupby("group_size")["rollouts"].first()
    np.testing.assert_array_equal(per_n.to_numpy(), per_n.index.to_numpy() * tiny.rl.prompts_per_step * tiny.rl.steps)
    for col in ("mu_pos", "retained_mass", "dnll_rare", "tau_ratio", "exact_pass_at_256", "rare_pass_at_256"):
        assert runs[col].notna().all(), col
    assert ((runs["exact_pass_at_1"] - runs["mu_pos"]).abs() < 1e-12).all()
    assert (runs["rare_pass_at_1"] <= runs["exact_pass_at_1"] + 1e-12).all()
    # the history holds every run's evaluation steps
    assert set(history["step"]) == {0, tiny.rl.steps}
    assert len(history) == 2 * len(tiny.runs())
    meta = result.meta
    assert meta["total_rollouts"] == int(runs["rollouts"].sum())
    assert all(r["device"] == "cpu" and r["elapsed_s"] >= 0 for r in meta["runs"])


def test_final_metrics_are_the_runs_own_on_fixed_prompts(tiny, tiny_run):
    """The final table's exact μ_pos equals the run history's last evaluation when the seeds agree."""
    root, result, _ = tiny_run
    for variant, seed, cfg in tiny.runs():
        if seed != tiny.rl.seed:
            continue
        history = pd.read_csv(root / cfg.name / "history.csv")
        row = result.final[(result.final["label"] == variant.label) & (result.final["seed"] == seed)].iloc[0]
        assert row["mu_pos"] == pytest.approx(history["mu_pos"].iloc[-1], abs=1e-9)
        assert row["retained_mass"] == pytest.approx(history["retained_mass"].iloc[-1], abs=1e-9)


def test_rerun_reuses_everything(tiny, tiny_run, monkeypatch):
    root, result, _ = tiny_run

    def refuse(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(cached, "train_rl", refuse)
    monkeypatch.setattr(cached, "train_sft", refuse)
    messages: list[str] = []
    again = run_sweep(tiny, root, RunOptions(progress=False, log=messages.append))
    assert messages == [f"{tiny.name}: every run done by this code, reusing {root / tiny.name}"]
    pd.testing.assert_frame_equal(again.final, result.final)
    # with the result folder gone, the runs are still reused one by one and the result rebuilt
    import shutil

    shutil.rmtree(root / tiny.name)
    messages.clear()
    rebuilt = run_sweep(tiny, root, RunOptions(progress=False, log=messages.append))
    assert sum("done, reused" in m for m in messages) == len(tiny.runs()) + 1
    pd.testing.assert_frame_equal(rebuilt.final, result.final)


def test_partial_run_resumes(tiny, tmp_path):
    """A run killed after its first checkpoint is resumed, not restarted, and ends equal to an uninterrupted one."""
    small = tiny.replace(variants=(Variant("grpo", 0.0, 2),), seeds=(0,))
    root = tmp_path / "root"
    run_sweep(small, root, RunOptions(progress=False))
    ((_, _, cfg),) = small.runs()
    reference = pd.read_csv(root / cfg.name / "history.csv")
    # simulate a kill: drop the result and meta, put the step-1 state back as the last checkpoint
    from tailmiss.llm.train import train_rl

    run_dir = root / cfg.name
    import shutil

    shutil.rmtree(run_dir)
    shutil.rmtree(root / small.name)

    class Killed(Exception):
        pass

    def stop(step):
        if step == cfg.checkpoint_every - 1:  # killed right after the first checkpoint
            raise Killed

    with pytest.raises(Killed):
        train_rl(cfg, root / small.sft.name, run_dir, progress=False, on_step=stop)
    assert not (run_dir / "meta.json").exists()
    assert cached.run_state(run_dir, cfg, root / small.sft.name) == "partial"
    messages: list[str] = []
    run_sweep(small, root, RunOptions(progress=False, log=messages.append))
    assert any("resuming" in m for m in messages)
    resumed = pd.read_csv(run_dir / "history.csv")
    pd.testing.assert_frame_equal(resumed, reference)


def test_result_folder_is_atomic_and_guarded(tiny_run, tmp_path):
    root, result, _ = tiny_run
    path = result.save(tmp_path / "copy")
    assert sorted(p.name for p in path.iterdir()) == ["config.toml", "final.csv", "history.csv", "meta.json"]
    loaded = SweepResult.load(path)
    assert loaded.config == result.config
    pd.testing.assert_frame_equal(loaded.final, result.final)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="refusing to replace"):
        result.save(foreign)
    (path / "final.csv").unlink()
    with pytest.raises(ValueError, match="final.csv is missing"):
        SweepResult.load(path)


def test_collect_equals_saved_result(tiny, tiny_run):
    root, result, _ = tiny_run
    again = collect(tiny, root)
    pd.testing.assert_frame_equal(again.final, result.final)
    assert json.loads(json.dumps(again.meta["runs"], default=str))[0]["run"] == tiny.runs()[0][2].name


def test_seed_mean_has_spread(tiny_run):
    _, result, _ = tiny_run
    m = result.seed_mean()
    runs = m[m["method"] != "sft"]
    assert (runs["mu_pos_sd"] >= 0).all()
    assert runs["mu_pos_sd"].max() > 0  # two seeds of RL do not land on the same model
    assert list(m["label"])[0] == "SFT"


def test_the_sft_models_sampled_evaluation_is_drawn_once_for_the_runs_that_share_it(tmp_path, monkeypatch):
    """Step 0 samples the SFT model with the run seed's generator: runs of one seed share that draw (per process),
    with the numbers an undisturbed draw gives."""
    from tailmiss.llm import rl_eval
    from tailmiss.llm import train as train_mod

    maze = tiny_llm_sweeps()["maze"].replace(seeds=(0,))
    root = tmp_path / "root"
    calls: list[int] = []
    real = rl_eval.sample_correct_counts
    monkeypatch.setattr(rl_eval, "sample_correct_counts", lambda *a, **k: calls.append(1) or real(*a, **k))
    rl_eval._SFT_CACHE.clear()
    result = run_sweep(maze, root, RunOptions(progress=False))
    runs = len(maze.runs())
    assert len(calls) == runs + 1  # every run's last step, and step 0 once
    first = result.history[result.history["step"] == 0]
    assert first["pass_at_256"].nunique() == 1 and len(first) == runs
    # drawn again from scratch (empty cache, one run alone): the same counts
    (_, _, cfg), *_ = maze.runs()
    rl_eval._SFT_CACHE.clear()
    alone = train_mod.train_rl(cfg, root / maze.sft.name, tmp_path / "alone", progress=False)
    again = pd.read_csv(alone / "history.csv")
    assert again.loc[again["step"] == 0, "pass_at_256"].iloc[0] == first["pass_at_256"].iloc[0]


def test_a_final_row_read_from_the_history_equals_scoring_the_run_again(tiny, tiny_run):
    """The shortcut of collect(): a run whose prompts are the sweep's is not scored again, with the same numbers."""
    from tailmiss.experiments.sweep import _FINAL, _final_row, _score_final_row

    root, _, _ = tiny_run
    same = [cfg for _, seed, cfg in tiny.runs() if seed == tiny.rl.seed]
    assert same
    for cfg in same:
        read = _final_row(root / cfg.name, tiny.rl.eval_prompt_seed, {})
        scored = _score_final_row(root / cfg.name, tiny.rl.eval_prompt_seed, {})
        assert set(read) == set(scored) == set(_FINAL)
        for column in _FINAL:  # history.csv holds 10 significant digits
            assert read[column] == pytest.approx(scored[column], rel=1e-9, abs=1e-12, nan_ok=True), column
