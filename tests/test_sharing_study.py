"""The shared-rung study: its preset, its answers on made-up ladders, and its section on tiny runs."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from tailmiss.experiments.presets import ladder_preset
from tailmiss.studies.rule import Verdict
from tailmiss.studies.sharing.data import SharedRungData
from tailmiss.studies.sharing.section import HEADING, shared_rung_section, write, zones_row


def test_the_shared_ladder_trains_what_the_narrowing_ladder_trains():
    base, shared = ladder_preset("narrowing-ladder"), ladder_preset("narrowing-ladder-shared")
    assert [r.model for r in shared.rungs] == ["shared"]
    assert shared.sft == base.sft and shared.rl == base.rl
    assert (shared.group_sizes, shared.gammas, shared.seeds) == (base.group_sizes, base.gammas, base.seeds)
    quick = ladder_preset("narrowing-ladder-shared-quick")
    assert quick.rungs == shared.rungs and quick.sft == ladder_preset("narrowing-ladder-quick").sft


def _typed(minority_end: dict, seeds=range(5), focal_gain: float = 0.0, wobble: float = 0.004) -> pd.DataFrame:
    """A by-type frame: every run starts at pass@256 0.97 (minority) / 0.9 (rest) and ends at the given value plus
    a seed's wobble, ``wobble × (seed − 2)`` (F-GRPO adds ``focal_gain`` on the minority)."""
    rows = []
    for label, gain in (("GRPO N=8", 0.0), ("F-GRPO γ=1 N=8", focal_gain)):
        for seed in seeds:
            for kind, start in (("minority", 0.97), ("rest", 0.9)):
                end = minority_end[kind] + wobble * (seed - 2) + (gain if kind == "minority" else 0.0)
                for step, value in ((0, start), (10, end)):
                    rows.append(dict(label=label, seed=seed, step=step, type=kind, mu_pos=0.5, pass256=value))
    return pd.DataFrame(rows)


_WORDS = re.compile(r"\): (lower|higher|tie|not lower|not higher|same|not shown)(?=; |\)\.$)")
"""The words of a sentence's parts in an answer's line (its cell, :meth:`~tailmiss.studies.rule.Sentence.cell`)."""


@pytest.mark.parametrize(
    ("shared_end", "table_end", "answer", "words"),
    [
        (0.6, 0.97, "**yes** (", ["lower", "not lower"]),  # the table keeps the minority within the margin
        (0.99, 0.97, "**no** (", ["higher", "not lower"]),  # the shared rung widens it
        (0.6, 0.6, "**no** (", ["lower", "lower"]),  # the table narrows too
        (0.97, 0.97, "cannot tell (partly: a tie is not a *no*)", ["tie", "not lower"]),  # the shared rung: a tie
    ],
)
def test_enough_to_narrow_follows_the_rule(shared_end, table_end, answer, words):
    """The shared rung's minority change *lower* and the table's *not lower* (within the margin: a small paired
    spread), one Holm family; a tie of the shared rung is no *no*."""
    ladder = {
        "table-adamw-lr0.1": _typed({"minority": table_end, "rest": 0.9}, wobble=0.001),
        "shared-adamw-lr0.03": _typed({"minority": shared_end, "rest": 0.9}, wobble=0.001),
    }
    text = shared_rung_section(SharedRungData(ladder, ("a", "b"), quick=False))
    line = next(t for t in text.split("\n") if t.startswith("Is sharing of this simple kind enough"))
    assert line.split("? ")[1].startswith(answer) and _WORDS.findall(line) == words


@pytest.mark.parametrize(
    ("transformer_gain", "answer", "words"),
    [
        (0.1, "**yes** (", ["higher", "higher", "same"]),
        (-0.05, "**no** (", ["higher", "lower", "higher"]),  # the transformer's minority loses under F-GRPO
        (0.3, "**no** (", ["higher", "higher", "lower"]),  # both higher, but not by the same amount
    ],
)
def test_focal_direction_needs_both_rungs_higher(transformer_gain, answer, words):
    """Both focal effects on the minority *higher* and their gap the *same* (Welch on the per-seed effects)."""
    ladder = {
        "shared-adamw-lr0.03": _typed({"minority": 0.6, "rest": 0.9}, focal_gain=0.1),
        "transformer-adamw-lr0.0002": _typed({"minority": 0.5, "rest": 0.9}, focal_gain=transformer_gain),
    }
    text = shared_rung_section(SharedRungData(ladder, ("a", "b"), quick=False))
    line = next(t for t in text.split("\n") if t.startswith("Does the focal weight act on the shared rung"))
    assert line.split("? ")[1].startswith(answer) and _WORDS.findall(line.split(". F-GRPO")[0] + ".") == words


def test_one_seed_cannot_tell():
    ladder = {
        "table-adamw-lr0.1": _typed({"minority": 0.97, "rest": 0.9}, seeds=(0,)),
        "shared-adamw-lr0.03": _typed({"minority": 0.6, "rest": 0.9}, seeds=(0,)),
    }
    ladder["transformer-adamw-lr0.0002"] = _typed({"minority": 0.5, "rest": 0.9}, seeds=(0,), focal_gain=0.1)
    text = shared_rung_section(SharedRungData(ladder, ("a", "b"), quick=True))
    assert "enough to narrow? cannot tell (too few seeds" in text and "(cannot tell, 1 seed)" in text
    assert "as on the transformer? cannot tell (too few seeds" in text
    rows = [t for t in text.split("\n") if t.startswith(("| table", "| shared", "| transformer"))]
    assert len(rows) == 12 and all(t.split("|")[7].strip() == "cannot tell" for t in rows)  # one seed: never a *no*


def test_section_on_tiny_runs(quick_ctx):
    section = write(quick_ctx)
    assert section.text.startswith(HEADING)
    ((key, ours, verdict),) = section.rows  # the §5.1 caveat in the narrowing regime
    assert key == "fig2-zones-narrowing" and verdict == Verdict.CAVEAT and "minority" in ours
    table_rows = [t for t in section.text.split("\n") if t.startswith("| shared") and t.count("|") == 9]  # 8 columns
    assert table_rows and all(np.isfinite(float(t.split("|")[6].strip())) for t in table_rows)


# ---- the shared simulator beside the rungs ---------------------------------------------------------------------


def _with_simulator(sim_minority: float, transformer_minority: float, seeds=range(5), sim_seeds=range(5)):
    ladder = {
        "shared-adamw-lr0.03": _typed({"minority": 0.6, "rest": 0.9}, seeds=seeds),
        "transformer-adamw-lr0.0002": _typed({"minority": transformer_minority, "rest": 0.9}, seeds=seeds),
    }
    simulator = _typed({"minority": sim_minority, "rest": 0.9}, seeds=sim_seeds)
    return SharedRungData(ladder, ("a", "b"), quick=False, simulator=simulator, simulator_shape=(64, 1001))


NOT, UNTOLD = "does not narrow", "cannot tell whether it narrows"


@pytest.mark.parametrize(
    ("sim_minority", "transformer_minority", "kind", "size", "minority"),
    [
        (0.5, 0.5, "yes, in kind", "**yes**", ("narrows", "narrows", "agree")),
        (0.6, 0.5, "yes, in kind", "**no**", ("narrows", "narrows", "agree")),  # 0.1 apart: not the same size
        (0.99, 0.5, "no, not in kind", "**no**", (NOT, "narrows", "disagree")),  # shown to widen it
        (0.6, 0.99, "no, not in kind", "**no**", ("narrows", NOT, "disagree")),
        (0.97, 0.5, "cannot tell in kind", "**no**", (UNTOLD, "narrows", "cannot tell")),  # a tie: no *no* in kind
    ],
)
def test_the_simulator_predicts_the_minority_loss_when_both_narrow_it(
    sim_minority, transformer_minority, kind, size, minority
):
    """In kind: both narrow the minority under GRPO; in size, besides: the final minority pass@256 the *same*
    (Welch, within the margin), one Holm family."""
    text = shared_rung_section(_with_simulator(sim_minority, transformer_minority))
    line = next(t for t in text.split("\n") if t.startswith("Does the shared simulator predict"))
    assert line.split("? ")[1].startswith(kind) and f"; in kind and size: {size} (" in line
    mine, theirs, agreement = minority
    assert f"minority: the simulator {mine} it, the transformer {theirs} it ({agreement})" in line
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
    rows = [t for t in text.split("\n") if t.startswith("| shared simulator |") and "N=8 |" in t and t.count("|") == 9]
    assert len(rows) == 4 and all(t.split("|")[-2].strip() == "20" for t in rows)  # two arms × two types, 20 seeds
    # the tiny N ladder (N = 2 and 8) of the test's own sweeps runs even at the quick size
    n_rows = [
        t for t in text.split("\n") if t.startswith(("| transformer | ", "| shared simulator | ")) and "N=" not in t
    ]
    assert "### The N shape" in text and "reproduce the transformer's N shape?" in text
    assert {t.split("|")[2].strip() for t in n_rows} >= {"minority", "rest"}
    # and so do the tiny frontier ladders: every policy compares F-GRPO with GRPO and with GRPO at half the rate
    pairs = [t for t in text.split("\n") if " against GRPO N=8" in t and t.startswith("| ")]
    assert len(pairs) == 6 and "reproduce the transformer's frontier answer?" in text


# ---- the N shape ------------------------------------------------------------------------------------------------


def _n_typed(minority_by_n: dict, seeds=range(5)) -> pd.DataFrame:
    """GRPO runs at each N of ``minority_by_n``: the minority ends at the given pass@256 (plus a seed's wobble), the
    rest at 1.0."""
    rows = []
    for n, end in minority_by_n.items():
        for seed in seeds:
            for kind, value in (("minority", end + 0.004 * (seed - 2)), ("rest", 1.0)):
                for step, v in ((0, 0.97 if kind == "minority" else 1.0), (10, value)):
                    rows.append(dict(label=f"GRPO N={n}", seed=seed, step=step, type=kind, mu_pos=0.5, pass256=v))
    return pd.DataFrame(rows)


def _n_data(shared: dict, transformer: dict, simulator: dict, seeds=range(5)) -> SharedRungData:
    ladder = {"shared-adamw-lr0.03": _typed({"minority": 0.6, "rest": 0.9})}
    n_shape = {
        "shared": _n_typed(shared, seeds),
        "transformer": _n_typed(transformer, seeds),
        "shared simulator": _n_typed(simulator),
    }
    return SharedRungData(ladder, ("a", "b"), quick=False, n_shape=n_shape)


FALLING = {2: 0.8, 4: 0.7, 8: 0.6, 16: 0.5, 32: 0.4}
DIP = {2: 0.8, 4: 0.5, 8: 0.4, 16: 0.5, 32: 0.7}
RISING = {2: 0.4, 4: 0.5, 8: 0.6, 16: 0.7, 32: 0.8}
FLAT = {n: 0.6 for n in FALLING}


@pytest.mark.parametrize(
    ("shared", "simulator", "answers"),
    [
        (FALLING, FALLING, ("minority: **yes**", "minority: **yes**")),
        (DIP, FALLING, ("minority: **no**", "minority: **yes**")),  # the same direction, but a dip
        (RISING, {n: 0.9 - 0.1 * i for i, n in enumerate(FALLING)}, ("**no**", "**yes**")),  # the other direction
        (FLAT, FALLING, ("cannot tell (its own N effect: identical)", "**yes**")),  # no direction is no *no*
    ],
)
def test_the_n_shape_is_reproduced_by_direction_and_dip(shared, simulator, answers):
    text = shared_rung_section(_n_data(shared, FALLING, simulator))
    lines = [t for t in text.split("\n") if "reproduce the transformer's N shape?" in t]
    assert len(lines) == 2
    for line, answer in zip(lines, answers):
        assert answer in line.split("?")[1].split(";")[0]
    # the rest does not move with N anywhere: the transformer's N effect is no direction, so nothing reproduces it
    assert all("rest: cannot tell" in line for line in lines)


def test_the_n_shape_table_reads_every_n_and_the_dip():
    text = shared_rung_section(_n_data(DIP, FALLING, FALLING))
    row = next(t for t in text.split("\n") if t.startswith("| shared (log-linear across prompts) | minority"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:7] == ["0.800±0.006", "0.500±0.006", "0.400±0.006", "0.500±0.006", "0.700±0.006"]
    assert cells[7].endswith("→ lower") and cells[8:] == ["8", "yes", "5"]


def test_the_first_look_leaves_the_n_shape_out():
    data = SharedRungData({"shared-adamw-lr0.03": _typed({"minority": 0.6, "rest": 0.9})}, ("a", "b"), quick=True)
    assert "Not at the first look's size" in shared_rung_section(data)


def test_the_ledger_row_says_where_the_simulator_agrees_with_the_transformer():
    ((key, ours, verdict),) = zones_row(_with_simulator(0.6, 0.5))
    assert key == "fig2-zones-narrowing" and verdict == Verdict.CAVEAT
    assert "minority narrows / narrows (agree)" in ours and "rest does not narrow / does not narrow (agree)" in ours
    assert "in kind and in size: " in ours and "shared simulator − transformer pass256 +0.1000 [" in ours
    assert ours.endswith("): higher: refuted")  # the simulator keeps 0.1 more of the minority than the transformer
    ((_, ours, _),) = zones_row(_with_simulator(0.5, 0.5))
    assert ours.endswith("): same: reproduced")
    assert zones_row(SharedRungData({}, ("a", "b"), quick=True)) == []


# ---- the frontier -----------------------------------------------------------------------------------------------


def _arms(lift: float, seeds=range(5), seed: int = 0) -> pd.DataFrame:
    """The three frontier arms over all prompts: pass@1 rises to a plateau at 0.7 (GRPO at half the rate more slowly),
    pass@256 falls along one path, F-GRPO ``lift`` above it; a little noise on pass@256 per arm, seed and step."""
    rng = np.random.default_rng(seed)
    rows = []
    for label, rate, up in (("GRPO N=8", 1.0, 0.0), ("GRPO N=8 low-LR", 0.8, 0.0), ("F-GRPO γ=1 N=8", 1.0, lift)):
        for s in seeds:
            for step in range(0, 1601, 100):
                p1 = 0.3 + 0.4 * (1 - np.exp(-rate * step / 100)) + 0.001 * s + rng.normal(0, 0.0005)
                p256 = 1 - 0.5 * (p1 - 0.3) + (up if step else 0.0) + rng.normal(0, 0.002)
                rows.append(dict(label=label, seed=s, step=step, type="all", mu_pos=p1, pass256=p256))
    return pd.DataFrame(rows)


def _frontier_data(shared_lift: float, simulator_lift: float, transformer_lift: float = 0.05) -> SharedRungData:
    ladder = {"shared-adamw-lr0.03": _typed({"minority": 0.6, "rest": 0.9})}
    frontier = {
        "shared": _arms(shared_lift, seed=1),
        "transformer": _arms(transformer_lift, seed=2),
        "shared simulator": _arms(simulator_lift, range(20), seed=3),
    }
    return SharedRungData(ladder, ("a", "b"), quick=False, frontier=frontier)


def test_the_frontier_answer_is_reproduced_when_both_words_are_the_transformers():
    text = shared_rung_section(_frontier_data(0.05, 0.0))
    rung = next(
        t for t in text.split("\n") if t.startswith("Does the shared rung reproduce the transformer's frontier")
    )
    sim = next(t for t in text.split("\n") if t.startswith("Does the shared simulator reproduce the transformer's fr"))
    assert "against GRPO N=8: **yes**" in rung and "against GRPO N=8 low-LR: **yes**" in rung
    assert "against GRPO N=8: **no** (on, same point)" in sim
    row = next(t for t in text.split("\n") if t.startswith("| transformer | F-GRPO γ=1 N=8 against GRPO N=8 |"))
    assert "above (" in row and "dominates:" in row and "plateaued (pass@1" in row


def test_an_unresolved_transformer_leaves_the_frontier_answer_untold():
    text = shared_rung_section(_frontier_data(0.05, 0.05, transformer_lift=0.0))
    lines = [t for t in text.split("\n") if "reproduce the transformer's frontier answer?" in t]
    assert len(lines) == 2 and all(
        line.count("cannot tell (the transformer's answer is not resolved)") == 2 for line in lines
    )


def test_the_first_look_leaves_the_frontier_out():
    data = SharedRungData({"shared-adamw-lr0.03": _typed({"minority": 0.6, "rest": 0.9})}, ("a", "b"), quick=True)
    text = shared_rung_section(data)
    assert "### The frontier" in text and "`narrowing-ladder-frontier`" in text


# ---- the shared simulator as a unit of the store -----------------------------------------------------------------


def test_the_shared_simulator_is_stored_once_and_read_back(quick_ctx, monkeypatch, tmp_path):
    """The section's simulator is the stored unit: what a first call saves is what simulate_rung gives, read by
    type (to the stored tables' 10 digits); a second call reads it back; other seeds are simulated again; with
    nothing to be computed (the report re-derived from the archive) a missing unit is an error that names it."""
    from tailmiss.experiments.ladder import run_ladder
    from tailmiss.experiments.shared_bridge import (
        SIM_SEEDS,
        run_rung_simulation,
        rung_simulation_name,
        simulate_rung,
        typed_history,
    )
    from tailmiss.store import COMPUTE_NOTHING_ENV, MissingEvidence
    from tailmiss.studies.runs import resolve_family
    from tailmiss.studies.sharing.data import SHARED_LADDER, sharing_units

    ladder = resolve_family(SHARED_LADDER, quick_ctx)
    run_ladder(ladder, quick_ctx.llm_cache, quick_ctx.options)
    root = quick_ctx.llm_cache
    seeds = SIM_SEEDS[:3]
    folder = root / rung_simulation_name(ladder)
    first = run_rung_simulation(ladder, root, seeds, quick_ctx.options)
    direct = typed_history(simulate_rung(ladder, root, seeds=seeds))
    pd.testing.assert_frame_equal(first.typed, direct, rtol=1e-9, check_dtype=False)
    assert sorted(first.typed["seed"].unique()) == list(seeds) and first.num_actions > first.num_prompts > 0
    made = (folder / "meta.json").stat().st_mtime_ns
    again = run_rung_simulation(ladder, root, seeds, quick_ctx.options)
    assert (folder / "meta.json").stat().st_mtime_ns == made
    pd.testing.assert_frame_equal(again.typed, first.typed)
    other = run_rung_simulation(ladder, root, seeds[:2], quick_ctx.options)
    assert sorted(other.typed["seed"].unique()) == list(seeds[:2])
    monkeypatch.setenv(COMPUTE_NOTHING_ENV, "1")
    with pytest.raises(MissingEvidence, match=rung_simulation_name(ladder)):
        run_rung_simulation(ladder, root, seeds, quick_ctx.options)
    # the study declares the unit, keyed by the report's seeds and started from the shared policy
    (spec,) = [u for u in sharing_units(quick_ctx) if u.name == rung_simulation_name(ladder)]
    assert spec.kind == "shared simulation" and spec.key == {"seeds": list(SIM_SEEDS)}
    assert spec.start == ladder.sweeps()[0][1].sft.name
