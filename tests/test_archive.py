"""The evidence archive as a read-only tier of the result store (tailmiss.archive): restored units, damaged ones
refused by name, stale ones never used silently, the compact form of runs, and nothing computed when nothing may."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tailmiss import archive
from tailmiss.options import RunOptions
from tailmiss.store import COMPUTE_NOTHING_ENV, MissingEvidence, UnitState


def _sim_config(name: str = "small"):
    from tailmiss.sim import SimConfig

    return SimConfig(name=name, num_actions=200, num_correct=20, group_sizes=[2, 8], steps=12, log_every=4)


def _simulate(cache: Path, log=None):
    from tailmiss.sim.runner import run_cached

    return run_cached(_sim_config(), cache, RunOptions(progress=False, log=log))


@pytest.fixture
def evidence(evidence_root) -> Path:
    return evidence_root


@pytest.fixture
def archived_sim(tmp_path, evidence):
    """A small simulation computed in a first cache and archived; the cache it came from."""
    cache = tmp_path / "first" / "sim"
    _simulate(cache)
    unit = archive.add(cache / "small")
    return cache, unit


def test_an_archived_simulation_stands_in_for_the_missing_cache_unit_bit_for_bit(tmp_path, archived_sim, monkeypatch):
    first, unit = archived_sim
    assert unit.path == archive.archive_root() / "sim" / "small"
    assert sorted(p.name for p in unit.path.iterdir()) == ["config.toml", "history.csv.xz", "meta.json"]
    lines: list[str] = []
    monkeypatch.setenv(COMPUTE_NOTHING_ENV, "1")  # found in the archive: nothing is computed
    again = _simulate(tmp_path / "second" / "sim", lines.append)
    restored = tmp_path / "second" / "sim" / "small"
    for name in ("config.toml", "history.csv"):
        assert (restored / name).read_bytes() == (first / "small" / name).read_bytes()
    pd.testing.assert_frame_equal(again.history, _simulate(first).history)
    assert any("restored from the archive" in line for line in lines), lines
    assert unit.host["cores"] >= 1 and unit.host["torch"]


@pytest.mark.parametrize(
    "damage",
    [
        ("history.csv.xz", lambda p: p.write_bytes(p.read_bytes()[:-7])),
        ("history.csv.xz", lambda p: p.write_bytes(p.read_bytes()[:40] + b"x" + p.read_bytes()[41:])),
        ("history.csv.xz", lambda p: p.unlink()),
        ("config.toml", lambda p: p.write_text(p.read_text().replace("steps = 12", "steps = 13"))),
        ("meta.json", lambda p: p.write_text(p.read_text().replace('"sim"', '"llm"', 1))),
    ],
    ids=["truncated", "edited", "deleted", "config-edited", "meta-edited"],
)
def test_a_damaged_archived_file_is_refused_with_an_error_that_names_it(tmp_path, archived_sim, damage):
    _, unit = archived_sim
    name, harm = damage
    harm(unit.path / name)
    with pytest.raises(archive.ArchiveError, match=str(unit.path / name).replace(".", r"\.")):
        _simulate(tmp_path / "second" / "sim")
    assert not (tmp_path / "second" / "sim" / "small").exists()


def test_a_stale_archived_unit_is_never_used_silently_and_reuse_stale_keeps_its_meaning(
    tmp_path, evidence, monkeypatch
):
    from tailmiss.sim.result import SIM_UNIT
    from tailmiss.store import lookup

    first = tmp_path / "first" / "sim"
    _simulate(first)
    meta = json.loads((first / "small" / "meta.json").read_text())
    meta["provenance"]["code"]["fingerprint"] = "0123456789abcdef"  # made by other code
    (first / "small" / "meta.json").write_text(json.dumps(meta))
    archive.add(first / "small")
    second = tmp_path / "second" / "sim" / "small"
    lines: list[str] = []
    found = lookup(second, SIM_UNIT, lambda r: True, reuse_stale=False, log=lines.append)
    assert found.state is UnitState.MISSING and not second.exists()
    assert "0123456789abcdef" in found.reason and "stale" in found.reason
    monkeypatch.setenv(COMPUTE_NOTHING_ENV, "1")
    with pytest.raises(MissingEvidence, match="small"):
        lookup(second, SIM_UNIT, lambda r: True)
    found = lookup(second, SIM_UNIT, lambda r: True, reuse_stale=True, log=lines.append)
    assert found.state is UnitState.REUSED_STALE and found.usable and second.is_dir()
    assert any("reusing the stale" in line for line in lines), lines


def test_the_archive_replaces_a_cached_unit_that_differs_from_it(tmp_path, archived_sim):
    from tailmiss.store import file_sha256

    first, unit = archived_sim
    cached = tmp_path / "second" / "sim"
    shutil.copytree(first, cached)
    history = cached / "small" / "history.csv"
    history.write_text(history.read_text().replace("0.", "0.9", 1))  # another host's last digits
    meta = json.loads((cached / "small" / "meta.json").read_text())
    meta["checksums"]["history.csv"] = file_sha256(history)  # still a sealed, current unit
    (cached / "small" / "meta.json").write_text(json.dumps(meta))
    lines: list[str] = []
    _simulate(cached, lines.append)
    assert (cached / "small" / "history.csv").read_bytes() == (first / "small" / "history.csv").read_bytes()
    assert any("differs from the cached unit it replaced" in line for line in lines), lines


def test_a_cache_of_another_name_finds_its_units_in_the_tier_of_their_kind(tmp_path, archived_sim, monkeypatch):
    first, unit = archived_sim
    elsewhere = tmp_path / "mine"
    shutil.copytree(first, elsewhere)
    assert archive.add(elsewhere / "small").path == unit.path
    monkeypatch.setenv(COMPUTE_NOTHING_ENV, "1")
    _simulate(tmp_path / "other-cache")
    assert (tmp_path / "other-cache" / "small" / "history.csv").is_file()


def test_a_unit_archived_twice_with_the_same_files_is_left_as_it_is(archived_sim):
    first, unit = archived_sim
    stored = (unit.path / "history.csv.xz").stat().st_mtime_ns
    again = archive.add(first / "small")
    assert again.meta == unit.meta and (unit.path / "history.csv.xz").stat().st_mtime_ns == stored


def test_archive_refuses_what_is_no_finished_unit(tmp_path, evidence):
    (tmp_path / "llm" / "half").mkdir(parents=True)
    with pytest.raises(ValueError, match="meta.json"):
        archive.add(tmp_path / "llm" / "half")


# -- runs: the compact form ------------------------------------------------------------------------------------


def _tiny_sweep():
    from tests.conftest import tiny_narrowing_sweeps

    return tiny_narrowing_sweeps()["narrowing"]


@pytest.fixture(scope="module")
def trained(trained_narrowing):
    return trained_narrowing


def _archive_sweep(root: Path, sweep) -> None:
    for name in [sweep.sft.name, *(cfg.name for _, _, cfg in sweep.runs()), sweep.name]:
        archive.add(root / name)


def test_an_archived_rl_run_keeps_no_checkpoint_and_comes_back_a_finished_run(tmp_path, evidence, trained):
    from tailmiss.experiments.cached import run_state

    root, result = trained
    sweep = result.config
    _archive_sweep(root, sweep)
    _, _, cfg = sweep.runs()[0]
    stored = archive.find(root / cfg.name)
    assert "checkpoint.pt" in stored.record["dropped"] and "checkpoint.pt" in stored.checksums
    assert not any(p.name.startswith("checkpoint") for p in stored.path.iterdir())
    sft = archive.find(root / sweep.sft.name)
    assert "checkpoint.pt" in sft.record["files"]  # the SHA-256 every RL run keys on: kept byte for byte
    cache = tmp_path / "fresh" / "llm"
    assert run_state(cache / sweep.sft.name, sweep.sft, None) is UnitState.FRESH
    assert run_state(cache / cfg.name, cfg, cache / sweep.sft.name) is UnitState.FRESH
    assert not (cache / cfg.name / "checkpoint.pt").exists()
    assert (cache / sweep.sft.name / "checkpoint.pt").read_bytes() == (
        root / sweep.sft.name / "checkpoint.pt"
    ).read_bytes()


def test_the_compact_runs_give_a_sweep_exactly_the_numbers_of_the_full_runs(tmp_path, evidence, trained, monkeypatch):
    from tailmiss.experiments.sweep import collect, per_prompt_evals, run_sweep

    root, result = trained
    sweep = result.config
    _archive_sweep(root, sweep)
    monkeypatch.setenv(COMPUTE_NOTHING_ENV, "1")
    cache = tmp_path / "fresh" / "llm"
    again = run_sweep(sweep, cache, RunOptions(progress=False, jobs=1))
    pd.testing.assert_frame_equal(again.history, result.history)
    pd.testing.assert_frame_equal(again.final, result.final)
    full, compact = per_prompt_evals(sweep, root), per_prompt_evals(sweep, cache)
    assert full.keys() == compact.keys()
    for key in full:
        assert (full[key][0] == compact[key][0]).all() and (full[key][1] == compact[key][1]).all()
    # a result collected again from the compact runs is the stored one (the sweep's runs score its prompts)
    recollected = collect(sweep, cache)
    pd.testing.assert_frame_equal(recollected.final.reset_index(drop=True), result.final, check_exact=False, rtol=1e-9)


def test_nothing_is_trained_when_nothing_may_be_computed(tmp_path, monkeypatch):
    from tailmiss.experiments.cached import cached_sft

    monkeypatch.setenv(COMPUTE_NOTHING_ENV, "1")
    sweep = _tiny_sweep()
    with pytest.raises(MissingEvidence, match=sweep.sft.name):
        cached_sft(sweep.sft, tmp_path / "llm", RunOptions(progress=False))
    assert not (tmp_path / "llm" / sweep.sft.name).exists()
