"""The shared-rung study: its preset, its answers on made-up ladders, and its section on tiny runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tailmiss.experiments.presets import ladder_preset
from tailmiss.studies.sharing.data import SharedRungData
from tailmiss.studies.sharing.section import HEADING, shared_rung_section, write


def test_the_shared_ladder_trains_what_the_narrowing_ladder_trains():
    base, shared = ladder_preset("narrowing-ladder"), ladder_preset("narrowing-ladder-shared")
    assert [r.model for r in shared.rungs] == ["shared"]
    assert shared.sft == base.sft and shared.rl == base.rl
    assert (shared.group_sizes, shared.gammas, shared.seeds) == (base.group_sizes, base.gammas, base.seeds)
    quick = ladder_preset("narrowing-ladder-shared-quick")
    assert quick.rungs == shared.rungs and quick.sft == ladder_preset("narrowing-ladder-quick").sft


def _typed(minority_end: dict, seeds=range(5), focal_gain: float = 0.0) -> pd.DataFrame:
    """A by-type frame: every run starts at pass@256 0.97 (minority) / 1.0 (rest) and ends at the given value plus
    a seed's wobble (F-GRPO adds ``focal_gain`` on the minority)."""
    rows = []
    for label, gain in (("GRPO N=8", 0.0), ("F-GRPO γ=1 N=8", focal_gain)):
        for seed in seeds:
            wobble = 0.004 * (seed - 2)
            for kind, start in (("minority", 0.97), ("rest", 1.0)):
                end = minority_end[kind] + (gain + wobble if kind == "minority" else 0.0)
                for step, value in ((0, start), (10, end)):
                    rows.append(dict(label=label, seed=seed, step=step, type=kind, mu_pos=0.5, pass256=value))
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    ("shared_end", "table_end", "answer"),
    [(0.6, 0.97, "**yes**"), (0.97, 0.97, "**no**: the shared rung"), (0.6, 0.6, "**no**: the table narrows")],
)
def test_enough_to_narrow_follows_the_rule(shared_end, table_end, answer):
    ladder = {
        "table-adamw-lr0.1": _typed({"minority": table_end, "rest": 1.0}),
        "shared-adamw-lr0.03": _typed({"minority": shared_end, "rest": 1.0}),
    }
    text = shared_rung_section(SharedRungData(ladder, ("a", "b"), quick=False))
    line = next(t for t in text.split("\n") if t.startswith("Is sharing of this simple kind enough"))
    assert answer in line


def test_focal_direction_needs_both_rungs_higher():
    ladder = {
        "shared-adamw-lr0.03": _typed({"minority": 0.6, "rest": 1.0}, focal_gain=0.1),
        "transformer-adamw-lr0.0002": _typed({"minority": 0.5, "rest": 1.0}, focal_gain=0.1),
    }
    text = shared_rung_section(SharedRungData(ladder, ("a", "b"), quick=False))
    assert "**yes, in direction**" in text
    ladder["transformer-adamw-lr0.0002"] = _typed({"minority": 0.5, "rest": 1.0}, focal_gain=0.0)
    text = shared_rung_section(SharedRungData(ladder, ("a", "b"), quick=False))
    assert "**no**: shared higher, transformer" in text


def test_one_seed_cannot_tell():
    ladder = {
        "table-adamw-lr0.1": _typed({"minority": 0.97, "rest": 1.0}, seeds=(0,)),
        "shared-adamw-lr0.03": _typed({"minority": 0.6, "rest": 1.0}, seeds=(0,)),
    }
    ladder["transformer-adamw-lr0.0002"] = _typed({"minority": 0.5, "rest": 1.0}, seeds=(0,), focal_gain=0.1)
    text = shared_rung_section(SharedRungData(ladder, ("a", "b"), quick=True))
    assert "enough to narrow? cannot tell" in text
    assert "as on the transformer? cannot tell (too few seeds" in text


def test_section_on_tiny_runs(quick_ctx):
    section = write(quick_ctx)
    assert section.text.startswith(HEADING) and section.rows == []
    table_rows = [t for t in section.text.split("\n") if t.startswith("| shared")]
    assert table_rows and all(np.isfinite(float(t.split("|")[6].strip())) for t in table_rows)


# ---- the shared simulator beside the rungs ---------------------------------------------------------------------


def _with_simulator(sim_minority: float, transformer_minority: float, seeds=range(5), sim_seeds=range(5)):
    ladder = {
        "shared-adamw-lr0.03": _typed({"minority": 0.6, "rest": 1.0}, seeds=seeds),
        "transformer-adamw-lr0.0002": _typed({"minority": transformer_minority, "rest": 1.0}, seeds=seeds),
    }
    simulator = _typed({"minority": sim_minority, "rest": 1.0}, seeds=sim_seeds)
    return SharedRungData(ladder, ("a", "b"), quick=False, simulator=simulator, simulator_shape=(64, 1001))


@pytest.mark.parametrize(
    ("sim_minority", "transformer_minority", "answer"),
    [
        (0.6, 0.5, "**yes**: it narrows the minority under GRPO"),
        (0.97, 0.5, "**no**: the simulator does not narrow the minority, the transformer narrows"),
        (0.6, 0.97, "**no**: the simulator narrows the minority, the transformer does not narrow"),
    ],
)
def test_the_simulator_predicts_the_minority_loss_when_both_narrow_it(sim_minority, transformer_minority, answer):
    text = shared_rung_section(_with_simulator(sim_minority, transformer_minority))
    line = next(t for t in text.split("\n") if t.startswith("Does the shared simulator predict"))
    assert answer in line
    assert "rest: the simulator does not narrow it, the transformer does not narrow it (agree)" in line


def test_the_simulators_sizes_are_welch_against_each_rung():
    text = shared_rung_section(_with_simulator(0.6, 0.5))
    vs_transformer = next(
        t for t in text.split("\n") if t.startswith("- shared simulator − transformer, GRPO N=8, min")
    )
    assert "+0.1000 (Welch t" in vs_transformer and vs_transformer.endswith("→ higher")
    vs_shared = next(t for t in text.split("\n") if t.startswith("- shared simulator − shared (log-linear"))
    assert "(Welch t" in vs_shared and "→ tie" in vs_shared


def test_one_transformer_seed_leaves_the_prediction_untold():
    text = shared_rung_section(_with_simulator(0.6, 0.5, seeds=(0,)))
    assert "predict the transformer's minority loss? cannot tell" in text


def test_the_section_on_tiny_runs_holds_the_simulator(quick_ctx):
    text = write(quick_ctx).text
    assert "### The shared simulator beside the transformer" in text
    rows = [t for t in text.split("\n") if t.startswith("| shared simulator")]
    assert len(rows) == 4 and all(t.split("|")[-2].strip() == "20" for t in rows)  # two arms × two types, 20 seeds
