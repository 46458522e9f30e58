"""``RLConfig.train_types``: training on some prompt types alone (the narrowing study's counterfactual pool)."""

from __future__ import annotations

import pytest

from tailmiss.llm.config import RLConfig
from tailmiss.llm.rollouts import check_train_types, step_prompts, training_pool
from tailmiss.llm.tasks import MultiSolutionTask
from tailmiss.llm.tasks.narrowing import NarrowingTask


@pytest.mark.parametrize("bad", ["rest", (), ("rest", "rest"), ("",), (1,), 3])
def test_bad_train_types_are_refused(bad):
    with pytest.raises(ValueError, match="train_types"):
        RLConfig(train_types=bad)


def test_a_list_becomes_a_tuple_and_round_trips(tmp_path):
    cfg = RLConfig(train_types=["rest"])
    assert cfg.train_types == ("rest",)
    cfg.to_toml(tmp_path / "rl.toml")
    assert RLConfig.from_toml(tmp_path / "rl.toml") == cfg
    RLConfig().to_toml(tmp_path / "default.toml")
    assert "train_types" not in (tmp_path / "default.toml").read_text()  # the default leaves every config as it was


def test_the_draw_is_the_full_draw_with_the_other_types_skipped():
    task = NarrowingTask(conflict_share=0.25)
    cfg = RLConfig(prompts_per_step=16, train_types=("rest",))
    for step in range(5):
        got = step_prompts(task, cfg, step)
        assert len(got) == 16 and all(task.prompt_type(p) == "rest" for p in got)
        full = step_prompts(task, cfg.replace(train_types=None, prompts_per_step=200), step)
        assert got == [p for p in full if task.prompt_type(p) == "rest"][:16]
    minority = step_prompts(task, cfg.replace(train_types=("minority",)), 0)
    assert all(task.prompt_type(p) == "minority" for p in minority)


def test_the_pool_and_its_epochs_hold_the_kept_types_only():
    task = NarrowingTask(conflict_share=0.25)
    pool = training_pool(task, 40, 3, ("rest",))
    assert len(set(pool)) == 40 and all(task.prompt_type(p) == "rest" for p in pool)
    assert pool == tuple(p for p in training_pool(task, 120, 3) if task.prompt_type(p) == "rest")[:40]
    cfg = RLConfig(prompts_per_step=8, train_prompts=40, pool_seed=3, pool_order="epochs", train_types=("rest",))
    assert set().union(*(step_prompts(task, cfg, s) for s in range(5))) == set(pool)


def test_a_task_without_the_named_types_is_refused():
    with pytest.raises(ValueError, match="has none"):
        check_train_types(MultiSolutionTask(), RLConfig(train_types=("rest",)))
    with pytest.raises(ValueError, match="'majority'"):
        check_train_types(NarrowingTask(), RLConfig(train_types=("majority",)))
    check_train_types(NarrowingTask(), RLConfig(train_types=("rest",)))
    check_train_types(MultiSolutionTask(), RLConfig())


def test_a_type_that_never_occurs_stops_the_draw():
    task = NarrowingTask(conflict_share=0.0)  # every prompt is "rest"
    with pytest.raises(ValueError, match="passes the filter"):
        task.prompts_where("train", 1, 0, lambda p: task.prompt_type(p) == "minority")


def test_a_run_trains_on_the_kept_types_and_evaluates_the_same_held_out_set(trained_narrowing, tmp_path):
    import pandas as pd

    from tailmiss.llm import train_rl

    root, result = trained_narrowing
    sweep = result.config
    init = root / sweep.sft.name
    cfg = sweep.rl.replace(name="rest-only", steps=2, eval_every=2, checkpoint_every=2, prompts_per_step=8)
    task = result.config.sft.task
    assert any(task.prompt_type(p) == "minority" for s in (0, 1) for p in step_prompts(task, cfg, s))
    both = train_rl(cfg, init, tmp_path / "both", device="cpu", progress=False)
    rest = train_rl(cfg.replace(train_types=("rest",)), init, tmp_path / "rest", device="cpu", progress=False)
    h_both, h_rest = (pd.read_csv(p / "history.csv") for p in (both, rest))
    assert h_both.columns.tolist() == h_rest.columns.tolist()
    evals = [c for c in h_both.columns if c.startswith(("exact_pass", "rare_pass", "mu_pos"))]
    assert h_both.loc[0, evals].equals(h_rest.loc[0, evals])  # step 0: the same SFT model, the same held-out set
    assert not h_both.equals(h_rest)  # other prompts, other rollouts
    assert RLConfig.from_toml(rest / "config.toml").train_types == ("rest",)


def test_a_sweep_with_the_override_round_trips_through_toml(tmp_path):
    from tailmiss.experiments.presets import llm_sweep
    from tailmiss.experiments.sweep_config import LLMSweep

    sweep = llm_sweep("narrowing-counterfactual")
    sweep.to_toml(tmp_path / "sweep.toml")
    back = LLMSweep.from_toml(tmp_path / "sweep.toml")
    assert back == sweep
    assert {cfg.train_types for _, _, cfg in back.runs()} == {("rest",)}
