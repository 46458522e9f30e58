"""Every ``experiments/*.toml`` file loads to exactly its code preset, and every preset has a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tailmiss.experiments import LLM_PRESETS
from tailmiss.experiments.presets import LLM_SWEEPS
from tailmiss.experiments.sweep import load_sweep
from tailmiss.llm import load_config
from tailmiss.sim import PRESETS, SimConfig
from tailmiss.sim.shared import SHARED_PRESETS, SharedSimConfig

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"
FILES = sorted(EXPERIMENTS.glob("*.toml"))


def test_registries_do_not_share_names():
    assert not set(PRESETS) & set(LLM_PRESETS)
    assert not (set(PRESETS) | set(LLM_PRESETS)) & set(LLM_SWEEPS)
    assert not set(SHARED_PRESETS) & (set(PRESETS) | set(LLM_PRESETS) | set(LLM_SWEEPS))


def test_experiments_folder_has_files():
    assert EXPERIMENTS.is_dir()
    assert FILES


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_file_loads_to_its_preset(path):
    stem = path.stem
    known = stem in PRESETS or stem in SHARED_PRESETS or stem in LLM_PRESETS or stem in LLM_SWEEPS
    assert known, f"{path.name} is not a preset of tailmiss.sim or tailmiss.llm"
    if stem in SHARED_PRESETS:
        assert SharedSimConfig.from_toml(path) == SHARED_PRESETS[stem]
    elif stem in PRESETS:
        assert SimConfig.from_toml(path) == PRESETS[stem]
    elif stem in LLM_SWEEPS:
        assert load_sweep(path) == LLM_SWEEPS[stem]
    else:
        assert load_config(path) == LLM_PRESETS[stem]


@pytest.mark.parametrize("name", [*PRESETS, *SHARED_PRESETS, *LLM_PRESETS, *LLM_SWEEPS])
def test_preset_has_a_file(name):
    assert (EXPERIMENTS / f"{name}.toml").is_file(), f"experiments/{name}.toml is missing"


def test_only_presets_and_readme():
    names = {p.name for p in EXPERIMENTS.iterdir() if not p.name.startswith(".")}
    expected = {f"{n}.toml" for n in [*PRESETS, *SHARED_PRESETS, *LLM_PRESETS, *LLM_SWEEPS]} | {"README.md"}
    assert names - expected == set(), "files in experiments/ that are no preset"
