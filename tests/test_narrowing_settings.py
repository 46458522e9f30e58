"""The narrowing study's runs at other settings of the task (``narrowing-settings-*``): the plateau recipe and arms at
each setting, pending in the study until the archive holds them."""

from __future__ import annotations

from dataclasses import replace

from tailmiss.experiments.narrowing_presets import PLATEAU_SEEDS, SETTINGS, SETTINGS_SEEDS
from tailmiss.experiments.presets import workload
from tailmiss.studies.narrowing import STUDY
from tailmiss.studies.runs import SETTINGS_FAMILIES, SWEEPS


def test_each_setting_runs_the_plateau_recipe_and_arms_on_its_own_task():
    plateau = workload("narrowing-plateau")
    assert SETTINGS_FAMILIES == tuple(f"narrowing-settings-{tag}" for tag in SETTINGS)
    assert SETTINGS_SEEDS == PLATEAU_SEEDS
    for tag, (strength, share) in SETTINGS.items():
        sweep = workload(f"narrowing-settings-{tag}")
        task = sweep.sft.task
        assert (task.conflict_strength, task.conflict_share, task.conflict_visible) == (strength, share, False)
        assert task != plateau.sft.task  # another setting than the study's
        # the same SFT recipe and RL recipe but for the task and the names: not tuned per setting
        assert replace(sweep.sft, name=plateau.sft.name, task=plateau.sft.task) == plateau.sft
        assert sweep.rl.replace(name=plateau.rl.name) == plateau.rl
        assert [v.label for v in sweep.variants] == [v.label for v in plateau.variants if v.tag != "speed-LR"]
        assert sweep.seeds == SETTINGS_SEEDS and SWEEPS[sweep.name] == (sweep.name, None)
    assert workload("narrowing-settings-str0.25").sft == workload("narrowing-search-str0.25").sft  # one SFT model


def test_a_settings_family_is_read_or_pending_never_both():
    from tailmiss.studies.narrowing.data import SETTINGS_READ

    assert "narrowing-endpoint" in STUDY.families and set(SETTINGS_READ) <= set(SETTINGS_FAMILIES)
    assert STUDY.pending == tuple(f for f in SETTINGS_FAMILIES if f not in SETTINGS_READ)
    assert set(SETTINGS_READ) <= set(STUDY.families) and not set(STUDY.pending) & set(STUDY.families)
