"""LLM run folders and sweep results as units of the result store: sealed, verified, redone when damaged or stale."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from conftest import tiny_llm_sweeps

from tailmiss import store
from tailmiss.experiments import cached
from tailmiss.experiments.sweep import SweepResult, Variant, run_sweep
from tailmiss.options import RunOptions

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def small():
    return tiny_llm_sweeps()["nsweep"].replace(name="store-sweep", variants=(Variant("grpo", 0.0, 2),), seeds=(0,))


@pytest.fixture(scope="module")
def done(small, tmp_path_factory):
    root = tmp_path_factory.mktemp("llm-store")
    result = run_sweep(small, root, RunOptions(progress=False))
    ((_, _, cfg),) = small.runs()
    return root, result, cfg


def _fresh_copy(done, tmp_path):
    root, result, cfg = done
    copy = tmp_path / "root"
    shutil.copytree(root, copy)
    return copy, result, cfg


def test_a_finished_run_is_sealed_with_provenance_and_checksums(done):
    root, _, cfg = done
    meta = json.loads((root / cfg.name / "meta.json").read_text())
    assert meta["complete"] is True
    modules = {m: store.module_fingerprint(m) for m in store.OWN_SCOPE}
    assert meta["provenance"]["code"] == {
        "scope": "llm",
        "fingerprint": store.code_fingerprint("llm"),
        "modules": modules,
    }
    assert set(meta["checksums"]) == {"config.toml", "history.csv", "checkpoint.pt"}
    sweep_meta = json.loads((root / "store-sweep" / "meta.json").read_text())
    assert set(sweep_meta["checksums"]) == {"config.toml", "history.csv", "final.csv"}


def test_a_run_with_a_truncated_history_is_trained_again(done, tmp_path, small):
    root, result, cfg = _fresh_copy(done, tmp_path)
    run = root / cfg.name
    lines = (run / "history.csv").read_text().splitlines(keepends=True)
    (run / "history.csv").write_text("".join(lines[:-1]))  # cut at a line boundary
    shutil.rmtree(root / small.name)
    assert cached.run_state(run, cfg, root / small.sft.name) == "corrupt"
    messages: list[str] = []
    again = run_sweep(small, root, RunOptions(progress=False, log=messages.append))
    assert any("corrupt" in m and "training it again" in m for m in messages)
    assert cached.run_state(run, cfg, root / small.sft.name) == "fresh"
    pd.testing.assert_frame_equal(again.final, result.final)


def test_a_truncated_checkpoint_of_a_partial_run_is_never_resumed(done, tmp_path, small):
    root, _, cfg = _fresh_copy(done, tmp_path)
    run = root / cfg.name
    (run / "meta.json").unlink()  # as if killed before the end
    data = (run / "checkpoint.pt").read_bytes()
    (run / "checkpoint.pt").write_bytes(data[: len(data) // 2])
    assert cached.run_state(run, cfg, root / small.sft.name) == "corrupt"


def test_a_run_made_by_other_code_is_redone_unless_reuse_stale(done, tmp_path, small, monkeypatch):
    root, result, cfg = _fresh_copy(done, tmp_path)
    sft = root / small.sft.name
    monkeypatch.setattr(store, "code_fingerprint", lambda scope="bridge": "e" * 16)
    monkeypatch.setattr(cached, "code_fingerprint", lambda scope="bridge": "e" * 16)
    assert cached.run_state(root / cfg.name, cfg, sft) == "stale"
    assert cached.run_state(root / cfg.name, cfg, sft, reuse_stale=True) == "reused-stale"

    def refuse(*args, **kwargs):
        raise AssertionError("--reuse-stale must not train")

    with monkeypatch.context() as m:
        m.setattr(cached, "train_rl", refuse)
        m.setattr(cached, "train_sft", refuse)
        messages: list[str] = []
        reused = run_sweep(small, root, RunOptions(progress=False, log=messages.append, reuse_stale=True))
    assert any(m.startswith("warning: reusing the stale sweep result") for m in messages)
    pd.testing.assert_frame_equal(reused.final, result.final)

    messages = []
    run_sweep(small, root, RunOptions(progress=False, log=messages.append))
    assert any("stale" in m and "training it again" in m for m in messages)
    meta = json.loads((root / cfg.name / "meta.json").read_text())
    assert meta["provenance"]["code"]["fingerprint"] == "e" * 16


def test_a_damaged_sweep_result_is_rebuilt_from_its_runs(done, tmp_path, small, monkeypatch):
    root, result, _ = _fresh_copy(done, tmp_path)
    final = root / small.name / "final.csv"
    final.write_text(final.read_text().replace("grpo", "cispo", 1))
    with pytest.raises(store.CorruptUnit, match="damaged"):
        SweepResult.load(root / small.name)

    def refuse(*args, **kwargs):
        raise AssertionError("finished runs must be reused")

    monkeypatch.setattr(cached, "train_rl", refuse)
    monkeypatch.setattr(cached, "train_sft", refuse)
    messages: list[str] = []
    again = run_sweep(small, root, RunOptions(progress=False, log=messages.append))
    assert any("not reused" in m for m in messages)
    pd.testing.assert_frame_equal(again.final, result.final)
