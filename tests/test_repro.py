"""Tests of the reproduction report (:mod:`tailmiss.report`).

The simulation section runs the quick presets; their cache folder is the one
``test_figures.py`` uses (``tmp_path_factory.getbasetemp()`` is shared by the
whole session), so a full run simulates each quick preset once.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
from conftest import tiny_llm_sweeps

from tailmiss.options import RunOptions
from tailmiss.report import render_report, write_report
from tailmiss.sim import preset
from tailmiss.studies import ledger
from tailmiss.studies.context import Context
from tailmiss.studies.simulation.section import write as simulation_section
from tailmiss.studies.theory.section import theory_section

REPORT = Path(__file__).parents[1] / "paper_repro.md"
THEORY_ITEMS = ("Fig. 1(a)", "Fig. 3", "Fig. 5", "Fig. 4", "App. N")


@pytest.fixture(scope="session")
def quick_ctx(tmp_path_factory) -> Context:
    cache = tmp_path_factory.getbasetemp() / "tailmiss-quick-cache"
    cache.mkdir(exist_ok=True)
    return Context(quick=True, cache_dir=cache, llm_sweeps=tiny_llm_sweeps(), options=RunOptions(progress=False))


@pytest.fixture(scope="module")
def quick_report(quick_ctx) -> str:
    return render_report(quick_ctx)


@contextlib.contextmanager
def _no_retraining(what: str):
    """Inside: any SFT or RL training through the run cache fails the test (``what`` must read cached runs only)."""
    from tailmiss.experiments import cached

    def _no_training(*args, **kwargs):
        raise AssertionError(f"{what} retrained a cached run")

    mp = pytest.MonkeyPatch()
    mp.setattr(cached, "train_sft", _no_training)
    mp.setattr(cached, "train_rl", _no_training)
    try:
        yield
    finally:
        mp.undo()


def _replaces_alone(ctx, tmp_path, heading: str, only: str, marker: str) -> None:
    """``write_report(..., only=only)`` replaces the section under ``heading`` (its new text has ``marker``) and
    keeps the next section."""
    from tailmiss.studies.text import fenced

    path = tmp_path / "paper_repro.md"
    path.write_text("# report\n\n" + fenced(only, heading + "\n\nold\n") + "## After\n\nkeep\n")
    write_report(path, ctx, only=only)
    new = path.read_text()
    assert "old\n" not in new and marker in new and "## After\n\nkeep" in new


def _rows(markdown: str) -> list[list[str]]:
    """Cells of every table row (header and separator included), split on unescaped ``|``."""
    return [
        [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
        for line in markdown.splitlines()
        if line.startswith("|")
    ]


def _row(markdown: str, first: str, second: str | None = None) -> str:
    """The table line whose first cell is ``first`` (and second cell ``second``, when given)."""
    hits = [
        line
        for line in markdown.splitlines()
        if line.startswith(f"| {first} |") and (second is None or line.startswith(f"| {first} | {second} |"))
    ]
    assert len(hits) == 1, (first, second, hits)
    return hits[0]


# --- theory section ------------------------------------------------------------------------


def test_theory_section_is_deterministic():
    assert theory_section() == theory_section()


def test_theory_section_rows():
    text = theory_section()
    assert text.startswith("## Theory")
    for item in THEORY_ITEMS:
        _row(text, item)


def test_every_theory_claim_reproduced():
    text = theory_section()
    assert "**no**" not in text
    for item in ("Fig. 1(a)", "Fig. 3", "Fig. 5"):
        assert _row(text, item).rstrip().rstrip("|").split("|")[-2].strip().endswith("yes"), item


def test_theory_section_numbers():
    text = theory_section()
    assert "N*=8 (0.953)" in _row(text, "Fig. 3")  # `tailmiss analytic peak --mu-pos 0.5 --rho 0.01`
    assert "0.000259" in _row(text, "Fig. 5")
    assert "6.79e-07" in _row(text, "App. N")


def test_theory_table_rows_have_header_width():
    rows = _rows(theory_section())
    widths = {len(r) for r in rows}
    assert widths == {len(rows[0])}, [(r[0], len(r)) for r in rows if len(r) != len(rows[0])]


def test_committed_report_contains_theory_section():
    if not REPORT.is_file():
        pytest.skip(f"{REPORT.name} is not generated yet (run `tailmiss repro`)")
    assert theory_section() in REPORT.read_text(encoding="utf-8"), (
        f"{REPORT.name} has drifted from the code: regenerate it with `tailmiss repro`"
    )


# --- simulation section (quick presets) --------------------------------------------------------


def test_quick_report_structure(quick_report):
    assert quick_report.startswith("# paper_repro")
    assert "`tailmiss repro --quick`" in quick_report
    assert theory_section() in quick_report
    assert "## Simulation" in quick_report
    assert quick_report.index("## Theory") < quick_report.index("## Simulation")
    for preset_name in ("fgrpo-fig2-quick", "fgrpo-fig2-prob-quick", "brorl-fig3-quick"):
        assert f"`{preset_name}`" in quick_report


def test_quick_sections_name_their_full_presets(quick_report):
    """A quick section says so after its heading and names the full presets (the LLM sweeps here are tiny
    stand-ins, which have none: only the simulation section's are named)."""
    simulation = quick_report[quick_report.index("## Simulation") :]
    assert simulation.split("\n\n")[1] == (
        "*Quick versions*: `fgrpo-fig2-quick`, `fgrpo-fig2-prob-quick`, `brorl-fig3-quick` in place of the full "
        "presets `fgrpo-fig2`, `fgrpo-fig2-prob`, `brorl-fig3` (`tailmiss repro` runs them)."
    )
    assert quick_report.count("*Quick version") == 1  # theory is the same in both modes


def test_full_preset_of_each_quick_preset():
    from tailmiss.studies.runs import full_preset

    assert full_preset("fgrpo-fig2-prob-quick") == "fgrpo-fig2-prob"
    assert full_preset("maze-nsweep-quick") == "maze-nsweep-cpu"  # what `tailmiss repro` runs on a CPU
    assert full_preset("ladder-hard-quick") == "ladder-hard"
    assert full_preset("fgrpo-fig2") is None and full_preset("maze-nsweep-quick-tiny") is None


def test_quick_report_fig2_variants(quick_report):
    for label in ("Fig. 2, log-prob + Adam", "Fig. 2, prob + AdamW"):
        for claim in (
            "Q_pos rises for every N",
            "M_ret is non-monotone in N, lowest at intermediate N",
            "γ = 1 lifts M_ret, mostly in zone II",
        ):
            _row(quick_report, label, claim)
        row = _row(
            quick_report, label, f"N = {max(preset('fgrpo-fig2-quick').group_sizes)} alone keeps M_ret ≈ 1 throughout"
        )
        # per seed, the largest N not lower than the threshold and every other N lower, one Holm family
        assert re.search(r"not lower than 0\.99 and at every other N lower → by the noise rule over seeds \(.*\): ("
                         + _WORDS + r") \|$", row.rstrip()), row  # fmt: skip
        lift = _row(quick_report, label, "γ = 1 lifts M_ret, mostly in zone II")
        assert re.search(r"by the noise rule over seeds \(.*\): (" + _WORDS + r") \|$", lift.rstrip()), lift


def test_quick_report_brorl_rows(quick_report):
    quick_report = quick_report[quick_report.index("## Simulation") :]  # the ledger repeats the claims
    for claim in (
        "larger N raises Q_pos faster",
        "worst drops vanish at large N",
        "larger N improves more correct actions",
    ):
        row = _row(quick_report, "BroRL Fig. 3", claim)
        for n in preset("brorl-fig3-quick").group_sizes:
            assert f"{n}: " in row, (claim, n)
        assert re.search(r"by the noise rule over seeds \(.*\): (" + _WORDS + r") \|$", row.rstrip()), row
    concave = _row(quick_report, "BroRL §4.1", "gains are monotone but concave in N")
    assert re.search(r"never above the one before → by the noise rule", concave), concave
    _row(quick_report, "BroRL §4.1", "small N is slow and noisy and sometimes regresses")


def test_quick_logprob_q_pos_rises_but_one_seed_cannot_tell(quick_report):
    """The quick preset runs one seed: the noise rule needs three, so the rise is shown but not judged."""
    row = _row(quick_report, "Fig. 2, log-prob + Adam", "Q_pos rises for every N")
    assert row.rstrip().endswith(": cannot tell |"), row


_WORDS = r"reproduced|\*\*refuted\*\*|partly|not resolved|cannot tell"


def test_quick_final_values_table(quick_report):
    start = quick_report.index("Final values, `fgrpo-fig2-quick`")
    table = quick_report[start:].split("\n\n")[1]
    rows = _rows(table)
    assert rows[0] == ["N", "Q_pos γ=0", "Q_pos γ=1", "M_ret γ=0", "M_ret γ=1", "entropy γ=0", "entropy γ=1"]
    assert [r[0] for r in rows[2:]] == [str(n) for n in sorted(preset("fgrpo-fig2-quick").group_sizes)]
    for r in rows[2:]:
        assert len(r) == len(rows[0])
        for cell in r[1:]:
            assert re.fullmatch(r"\d+\.\d{3}", cell), cell


def test_simulation_section_uses_cache(quick_ctx, monkeypatch):
    """After the quick report, the section is rebuilt from the cache without simulating."""
    from tailmiss.sim import engine

    simulation_section(quick_ctx)  # make sure the cache is filled

    def _no_simulate(*args, **kwargs):
        raise AssertionError("simulation_section re-simulated a cached preset")

    monkeypatch.setattr(engine, "simulate", _no_simulate)
    assert simulation_section(quick_ctx) == simulation_section(quick_ctx)


def test_write_report(quick_ctx, tmp_path, quick_report):
    path = write_report(tmp_path / "sub" / "paper_repro.md", quick_ctx)
    assert path == tmp_path / "sub" / "paper_repro.md"
    text = path.read_text(encoding="utf-8")
    assert theory_section() in text
    assert f"`{tmp_path / 'sub' / 'figures'}/`" in text
    # the report and its stamps, nothing half-written beside them
    assert sorted(p.name for p in path.parent.iterdir()) == ["paper_repro.md", "paper_repro.stamps.json"]


# --- small-transformer section (quick LLM presets) ---------------------------------------------


def _section(report: str, title: str) -> str:
    start = report.index(title)
    end = report.find("\n### ", start + 1)
    return report[start : end if end > 0 else None]


_VERDICTS = r"reproduced|\*\*refuted\*\*|partly|not resolved|cannot tell|not testable"
"""The noise rule's verdict words as the small-transformer section writes them."""


def test_quick_report_llm_section(quick_report):
    assert quick_report.index("## Simulation") < quick_report.index("## Small transformer")
    section = quick_report[quick_report.index("## Small transformer") :]
    sweeps = tiny_llm_sweeps()
    assert f"`{sweeps['nsweep'].sft.name}`" in section
    for title in ("### Group-size sweep", "### Objectives", "### Maze", "### Bridge", "### Compute"):
        assert title in section, title
    nsweep = _section(section, "### Group-size sweep")
    rows = _rows(nsweep)
    assert rows[0] == ["run", "rollouts", "pass@1", "pass@256", "rare hit@256", "M_ret", "ΔNLL_rare"]
    assert [r[0] for r in rows[2 : 3 + len(sweeps["nsweep"].variants)]] == ["SFT"] + [
        v.label for v in sweeps["nsweep"].variants
    ]
    for claim in (
        "pass@1 rises with N (36.2 → 39.2, N = 2 → 32)",
        "GRPO pass@256 is non-monotone in N: best at N = 2, worst near N = 8, partly recovered at N = 32",
    ):
        row = _row(nsweep, claim)
        assert re.search(rf": ({_VERDICTS})$", row.rstrip(" |")), row
    assert "called a tie" not in section and "report's noise rule (stated at the top)" in section
    objectives = _section(section, "### Objectives")
    for claim in (
        "the focal weight raises pass@256 for every method (math: +6.2 / +3.2 / +3.6 on Qwen2.5-7B)",
        "the focal weight keeps pass@1 (9/9 pairs within +2.8 / −0.0)",
    ):
        row = _row(objectives, claim)
        assert row.count("GRPO") >= 1 and row.count("CISPO") == 1 and row.count("DAPO+DS") == 1, row
        assert row.count("DAPO") == 2, row  # DAPO and DAPO with dynamic sampling
    for claim in ("DAPO differs from GRPO", "DAPO+DS differs from GRPO"):
        row = _row(objectives, claim).rstrip(" |")
        # a verdict from the noise rule, or every run equal to its GRPO twin
        ruled = re.search(rf"noise rule \(stated at the top\): ({_VERDICTS}): ", row)
        assert ruled or "equals its GRPO twin" in row, row
    maze = _section(section, "### Maze")
    assert _row(maze, "SFT")
    maze_row = _row(maze, "F-GRPO γ = 0.5 beats GRPO at every N on pass@1 (Table 4)")
    assert re.search(rf"paired by seed at each N.*: ({_VERDICTS})", maze_row), maze_row
    bridge = _section(section, "### Bridge")
    assert re.search(r"Spearman over N: M_ret [+-](\d\.\d\d|nan)", bridge)
    assert re.search(r"Regimes agree .*: (yes|\*\*no\*\*)", bridge)
    assert "F-GRPO §5.1 (v2)" in bridge and "a caveat, not a prediction" in bridge
    compute = _section(section, "### Compute")
    assert [r[0] for r in _rows(compute)[2:]] == [f"`{sweeps[k].name}`" for k in ("nsweep", "objectives", "maze")]


def test_llm_section_uses_cache(quick_ctx, quick_report, monkeypatch):
    """After the quick report, the LLM section is rebuilt from the cached sweeps without training or simulating."""
    from tailmiss.experiments import cached
    from tailmiss.studies.transformer.section import write as llm_section

    def _no_training(*args, **kwargs):
        raise AssertionError("llm_section retrained a cached run")

    monkeypatch.setattr(cached, "train_sft", _no_training)
    monkeypatch.setattr(cached, "train_rl", _no_training)
    import tailmiss.experiments.bridge

    monkeypatch.setattr(tailmiss.experiments.bridge, "simulate", _no_training)
    assert llm_section(quick_ctx).text.rstrip("\n") in quick_report


def test_quick_report_ladder_section(quick_report, quick_ctx):
    """The ladder section is in the quick report, from cached runs, with every part and a verdict per ingredient."""
    from tailmiss.studies.ladder.section import HEADING as LADDER_HEADING
    from tailmiss.studies.ladder.section import ladder_section

    assert LADDER_HEADING in quick_report
    section = quick_report[quick_report.index(LADDER_HEADING) :]
    for part in (
        "### GRPO: M_ret against N on every rung",
        "### Focal weight",
        "### At matched Q_pos",
        "### Equal rollout budget",
        "### Difficulty",
        "### One verdict per ingredient",
        "### The simulator setting that predicts the transformer",
        "### Where the paper's claims do and do not appear",
    ):
        assert part in section, part
    for ingredient in ("optimizer geometry", "parameter sharing", "prompt reuse", "difficulty", "compute matching"):
        assert f"| {ingredient} |" in section, ingredient
    assert "Lemma 3.1 at the pool's mean SFT μ_pos" in section

    with _no_retraining("the ladder section"):
        assert ladder_section(quick_ctx) in quick_report


def test_only_ladder_replaces_that_section_and_keeps_the_rest(quick_ctx, tmp_path):
    """A section is found by its fences, never by reading the text: a heading inside another section's text, or text
    that merely looks like a heading, does not move the boundaries."""
    from tailmiss.report import replace_section, write_report
    from tailmiss.studies.ladder.section import HEADING as LADDER_HEADING
    from tailmiss.studies.text import fenced

    ladder = fenced("ladder", LADDER_HEADING + "\n\nold ladder\n\n### A part\n\n## not a heading of ours\n")
    text = "# report\n\n" + fenced("theory", "## Theory\n\nkeep me\n") + ladder + "## After\n\nkeep me too\n"
    replaced = replace_section(text, "ladder", LADDER_HEADING + "\n\nnew ladder\n")
    assert "old ladder" not in replaced and "not a heading of ours" not in replaced and "new ladder" in replaced
    assert replaced.index("keep me\n") < replaced.index("new ladder") < replaced.index("## After")
    assert "keep me too" in replaced and replaced.count("<!-- study:ladder -->") == 1
    sub = "## LLM\n\n" + fenced("objectives", "### Objectives `a`\n\nold rows\n") + "\n### Maze\n\nmaze rows\n"
    new_sub = replace_section(sub, "objectives", "### Objectives `b`\n\nnew rows\n")
    assert new_sub == sub.replace("`a`\n\nold rows", "`b`\n\nnew rows")
    with pytest.raises(ValueError, match="no fenced section 'ladder'"):
        replace_section("# report\n\n## Theory\n\nx\n", "ladder", LADDER_HEADING + "\n\nbody\n")
    path = tmp_path / "paper_repro.md"
    write_report(path, quick_ctx, deferred=("ladder", "objectives"))
    before = path.read_text()
    write_report(path, quick_ctx, only="ladder")
    new = path.read_text()
    assert "*Not in the first look.* The ladder" in before and "*Not in the first look.* The ladder" not in new
    assert "### One verdict per ingredient" in new and new.count("## Theory") == 1
    theory = before[before.index("<!-- study:theory -->") : before.index("<!-- /study:theory -->")]
    assert theory in new  # the other sections are left as they were
    with pytest.raises(ValueError, match="only must be one of"):
        write_report(path, quick_ctx, only="theory")
    write_report(path, quick_ctx, only="objectives")
    assert "### Objectives `" in path.read_text() and "DAPO+DS" in path.read_text()
    with pytest.raises(ValueError, match="does not exist"):
        write_report(tmp_path / "missing.md", quick_ctx, only="ladder")


def test_bridge_data_is_typed_and_judged_once(quick_ctx, quick_report):
    """The bridge figure's data names its parts and carries the verdict the report prints (nothing re-judged); the
    quick bridge runs the default simulator rate only, the full one every rate of the sensitivity check."""
    from dataclasses import replace

    from tailmiss.experiments.bridge import DEFAULT_SIM_LR, SENSITIVITY_LRS, BridgeResult
    from tailmiss.experiments.sweep_result import SweepResult
    from tailmiss.studies.bridge.claims import BridgeVerdict, bridge_verdict
    from tailmiss.studies.bridge.data import BridgeData, bridge_data
    from tailmiss.studies.bridge.section import bridge_section

    data = bridge_data(quick_ctx)
    assert data.others == () and data.main.sim_lr == DEFAULT_SIM_LR
    assert data.unchecked == tuple(lr for lr in SENSITIVITY_LRS if lr != DEFAULT_SIM_LR)
    assert "Only the simulator rate 0.01 was run here" in quick_report and "| sim lr |" not in quick_report
    data = bridge_data(replace(quick_ctx, quick=False))
    assert "| sim lr |" in bridge_section(data) and data.unchecked == ()
    assert isinstance(data, BridgeData)
    assert isinstance(data.sweep, SweepResult) and isinstance(data.main, BridgeResult)
    assert data.main.sim_lr == DEFAULT_SIM_LR
    assert [b.sim_lr for b in data.others] == [lr for lr in SENSITIVITY_LRS if lr != DEFAULT_SIM_LR]
    assert isinstance(data.verdict, BridgeVerdict)
    assert repr(data.verdict) == repr(bridge_verdict(data.main.summary))  # NaN-safe equality
    assert data.agrees == data.verdict.agrees
    assert repr(data.others_verdicts) == repr(tuple(bridge_verdict(b.summary) for b in data.others))
    assert set(data.per_prompt.columns) == {"prompt", "group_size", "gamma", "tail_miss", "tau", "tau0"}
    verdict_line = [line for line in quick_report.splitlines() if "Regimes agree" in line]
    quick_agrees = bridge_data(quick_ctx).agrees
    assert len(verdict_line) == 1 and f"zone equal): {'yes' if quick_agrees else '**no**'}." in verdict_line[0]


def test_quick_report_protocol_section(quick_report, quick_ctx, tmp_path):
    """The protocol section: every rung with its three verdicts, the paper's Table 2 beside ours, the noise part;
    computed from the cached sweeps (no retraining); ``only="protocol"`` replaces it alone."""
    from tailmiss.studies.controls.section import HEADING as CONTROLS_HEADING
    from tailmiss.studies.protocol import claims as pc
    from tailmiss.studies.protocol.section import HEADING as PROTOCOL_HEADING
    from tailmiss.studies.protocol.section import write as protocol_section
    from tailmiss.studies.rule import Verdict

    assert PROTOCOL_HEADING in quick_report
    section = quick_report[quick_report.index(PROTOCOL_HEADING) : quick_report.index(CONTROLS_HEADING)]
    for part in ("### The protocol ladder", "### Could one seed show it?", "What this miniature can and cannot say"):
        assert part in section, part
    ladder = section[: section.index("What each ingredient does")]
    words = {f"**{v}**" if v == Verdict.REFUTED else str(v) for v in Verdict}
    for rung in pc.RUNGS:
        cells = _rows(_row(ladder, f"`{rung.name}`"))[0]
        assert cells[5] in words and cells[8] in words  # (a) and (b): verdicts of the noise rule
        if cells[2] in ("1", "2"):  # fewer seeds than the rule needs
            assert cells[5] == cells[8] == "cannot tell"
        assert ledger.checkable(cells[6]), cells[6]  # the dip's comparisons, printed with their tests
    assert _row(section, "GRPO N=8").count("0.641") == 1  # Table 2's N = 8 beside ours
    for scoring in ("exact-30", "sampled-30", "exact-4", "sampled-4"):  # its seed spread and single-seed rows
        assert section.count(f"| {scoring} |") == 2, scoring
    assert "| 30 | 3 |" in section  # two seeds of one config: one pair at each of 3 N, judged by App. Q

    with _no_retraining("the protocol section"):
        assert protocol_section(quick_ctx).text.rstrip("\n") in quick_report
        _replaces_alone(quick_ctx, tmp_path, PROTOCOL_HEADING, "protocol", "### Could one seed show it?")


def test_quick_report_controls_section(quick_report, quick_ctx, tmp_path):
    """The controls section: Table 3's rows and the paper's three sentences with verdicts from the paired rule, the γ
    table per method, the pass@k and trade-off parts; computed from the cached sweeps (no retraining);
    ``only="controls"`` replaces it alone."""
    from tailmiss.studies.controls.section import HEADING as CONTROLS_HEADING
    from tailmiss.studies.controls.section import write as controls_section

    assert CONTROLS_HEADING in quick_report
    section = quick_report[quick_report.index(CONTROLS_HEADING) :]
    for part in ("### Table 3", "### Tables 6-7", "### Tables 12-14", "### Fig. 1(b,c)"):
        assert part in section, part
    table3 = section[section.index("### Table 3") : section.index("### Tables 6-7")]
    for row in ("GRPO N=8", "F-GRPO γ=0.5 N=8", "GRPO low-LR", "entropy bonus", "KL penalty", "DS-GRPO"):
        cells = _rows(_row(table3, row))[0]
        assert cells[-1] == "2", row  # the same two seeds in every row
    for sentence in ("“GRPO low-LR improves", "“DS-GRPO has a higher", "“F-GRPO has the highest pass@1"):
        line = next(line for line in section.splitlines() if line.startswith(f"| {sentence}"))
        assert _rows(line)[0][-1] == "cannot tell", sentence  # two seeds: the noise rule needs three
    for method in ("GRPO", "DAPO"):
        assert section.count(f"| {method} |") == 2, method  # its γ row and its choice row
    assert "| CISPO |" not in section  # the quick γ sweep leaves CISPO out: no empty row
    assert "Gai et al. 2025" in section and "noise rule" in section

    with _no_retraining("the controls section"):
        assert controls_section(quick_ctx).text.rstrip("\n") in quick_report
        _replaces_alone(quick_ctx, tmp_path, CONTROLS_HEADING, "controls", "### Tables 12-14")


def test_the_first_look_defers_its_sections_without_reading_their_sweeps(quick_report, quick_ctx, tmp_path):
    """``tailmiss repro --quick`` (the first look) keeps each deferred section's heading with a note naming the
    commands that write it, reads none of their sweeps, trains none of their families and renders none of their
    figures; ``only=NAME`` then writes the section in place, with its quick-version line. The narrowing regime is
    not deferred: the first look shows its quick version."""
    import tailmiss.studies.controls.section as controls_section_module
    import tailmiss.studies.protocol.section as protocol_section_module
    import tailmiss.studies.transformer.section as report_llm
    from tailmiss.report import (
        QUICK_DEFERRED,
        SECTIONS,
        llm_families,
        render_report,
        report_figures,
        write_report,
    )
    from tailmiss.report.registry import FIGURES
    from tailmiss.studies.controls.section import HEADING as CONTROLS_HEADING
    from tailmiss.studies.narrowing.counterfactual import COUNTERFACTUAL
    from tailmiss.studies.narrowing.data import END_POINT, NARROWING_FAMILIES, PLATEAU, SETTINGS_READ
    from tailmiss.studies.protocol.section import HEADING as PROTOCOL_HEADING
    from tailmiss.studies.runs import resolve_family
    from tailmiss.studies.sharing.data import FRONTIER_LADDERS
    from tailmiss.studies.transformer.section import MAZE_HEADING, OBJECTIVES_HEADING

    assert set(QUICK_DEFERRED) < set(SECTIONS) and "ladder" not in QUICK_DEFERRED
    assert "narrowing" not in QUICK_DEFERRED
    # the sharing study's ladders: the shared rung's quick preset, and three with none (the first look trains none)
    sharing = ("narrowing-ladder-shared", "narrowing-ladder-shared-n", *FRONTIER_LADDERS)
    # the narrowing study's runs to the plateau and its counterfactual pool: families with no quick version (the first
    # look quotes their archived answer)
    long = (PLATEAU, END_POINT, COUNTERFACTUAL, *SETTINGS_READ)
    first_look = ("nsweep", "ladder", "ladder-budget", "ladder-hard", *NARROWING_FAMILIES, *long, *sharing)
    assert llm_families(deferred=QUICK_DEFERRED) == first_look
    bare = Context(quick=True, cache_dir=tmp_path)  # the presets themselves, no test stand-ins
    assert [resolve_family(f, bare) is None for f in sharing] == [False, True, True, True]
    assert all(resolve_family(f, bare) is None for f in long)  # the first look trains none of them
    assert set(llm_families()) - set(llm_families(deferred=QUICK_DEFERRED)) == {
        "objectives",
        "maze",
        "protocol-today",
        "protocol-difficulty",
        "protocol-on-policy",
        "paper-protocol",
        "paper-protocol-controls",
        "paper-protocol-gamma",
    }
    left_out = {f for name in QUICK_DEFERRED for f in report_figures(only=name)}
    assert left_out == {
        "llm-objectives",
        "maze",
        "protocol",
        "noise",
        "controls",
        "gamma",
        "passk",
        "tradeoff",
    }
    assert report_figures(deferred=QUICK_DEFERRED) == tuple(f for f in FIGURES if f not in left_out)
    assert report_figures() == tuple(FIGURES) and report_figures("maze") == ("maze",)

    def _refused(name):
        def _read(*args, **kwargs):
            raise AssertionError(f"the first look read the deferred {name}")

        return _read

    seen = []

    def _sweep_result(family, ctx):
        seen.append(family)
        return original(family, ctx)

    original = report_llm.sweep_result
    mp = pytest.MonkeyPatch()
    mp.setattr(report_llm, "sweep_result", _sweep_result)
    mp.setattr(protocol_section_module, "protocol_data", _refused("protocol sweeps"))
    mp.setattr(controls_section_module, "controls_data", _refused("controls sweeps"))
    try:
        with _no_retraining("the first look"):
            first = render_report(quick_ctx, deferred=QUICK_DEFERRED)
    finally:
        mp.undo()
    assert seen == ["nsweep"]
    for heading, name in (
        (OBJECTIVES_HEADING, "objectives"),
        (MAZE_HEADING, "maze"),
        (PROTOCOL_HEADING, "protocol"),
        (CONTROLS_HEADING, "controls"),
    ):
        start = first.index("\n" + heading) + 1
        end = first.find("\n#", start + 1)
        body = first[start : end if end >= 0 else None]
        assert "*Not in the first look.*" in body, name
        assert f"`tailmiss repro --quick --only {name}`" in body and f"`tailmiss repro --only {name}`" in body, name
        assert "|" not in body, name  # no table of a sweep that was not read
    assert first.count("*Not in the first look.*") == len(QUICK_DEFERRED)
    assert "### Bridge" in first and "### Group-size sweep" in first and "## Why the regimes differ" in first
    with pytest.raises(ValueError, match="deferred section must be one of"):
        render_report(quick_ctx, deferred=("theory",))

    path = tmp_path / "paper_repro.md"
    with _no_retraining("the first look"):
        write_report(path, quick_ctx, deferred=QUICK_DEFERRED)
        write_report(path, quick_ctx, only="maze")
    filled = path.read_text()
    assert filled.count("*Not in the first look.*") == len(QUICK_DEFERRED) - 1
    maze = filled[filled.index("\n" + MAZE_HEADING) + 1 : filled.index("\n### Bridge")]
    assert "| Table 4 claim | ours |" in maze
    assert filled.count("*Quick version") == first.count("*Quick version")  # tiny stand-ins name no quick preset
    assert filled.index(OBJECTIVES_HEADING) < filled.index(MAZE_HEADING) < filled.index("### Bridge")


def test_quick_notes_come_from_the_records_and_are_written_once():
    """A study's quick-version line names the quick presets its record reads, beside their full versions, right after
    its heading; a part written later with ``only=NAME`` gets its own line, and nothing is read back from the text."""
    from tailmiss.report import _quick_presets
    from tailmiss.report.registry import study
    from tailmiss.studies.context import Context
    from tailmiss.studies.text import quick_note

    quick = Context(quick=True)
    assert _quick_presets(study("maze"), quick) == [("maze-nsweep-quick", "maze-nsweep-cpu")]
    assert _quick_presets(study("theory"), quick) == []
    assert [q for q, _ in _quick_presets(study("simulation"), quick)] == [
        "fgrpo-fig2-quick",
        "fgrpo-fig2-prob-quick",
        "brorl-fig3-quick",
    ]
    body = "### Maze `maze-nsweep-quick`\n\nrows\n"
    noted = quick_note(body, _quick_presets(study("maze"), quick))
    assert noted == (
        "### Maze `maze-nsweep-quick`\n\n*Quick version*: `maze-nsweep-quick` in place of the full preset "
        "`maze-nsweep-cpu` (`tailmiss repro` runs it).\n\nrows\n"
    )
    assert quick_note(body, []) == body


def test_the_first_look_ends_with_what_it_found_as_a_table_or_json(quick_ctx, tmp_path, monkeypatch):
    """``tailmiss repro --quick`` ends with a summary: the tail miss's peak, the simulator's retained mass, the
    narrowing regime's pass@256 from the SFT model through each arm by prompt type, the ledger's counts (every claim
    once) and where the report is; ``--json`` prints the same as JSON on stdout (the written files on stderr) and
    does not go with ``--only``. Run through Typer's runner on the tiny stand-in sweeps."""
    import json

    from conftest import one_error_line
    from typer.testing import CliRunner

    import tailmiss.studies.context as context_module
    from tailmiss import analytic
    from tailmiss.cli import app
    from tailmiss.report.summary import FIG5_MU_POS, FIG5_TAU, ledger_counts
    from tailmiss.studies.ledger import CATALOGUE

    class _Tiny(Context):  # the command's own context, with the tiny sweeps in place of the quick presets
        def __init__(self, **kwargs):
            kwargs.setdefault("llm_sweeps", quick_ctx.llm_sweeps)
            kwargs.setdefault("llm_cache_dir", quick_ctx.llm_cache)
            super().__init__(**kwargs)

    monkeypatch.setattr(context_module, "Context", _Tiny)
    # the full study's answer as an archive would give it (the committed archive's own: test_plateau_claims.py)
    from tailmiss.studies.narrowing import archived

    quoted = [
        archived.ArchivedAnswer(0.5, "GRPO N=8 low-LR", "no", "on", "same point", 0.002, (10, 11, 12), 1600),
        archived.ArchivedAnswer(2.0, "GRPO N=8 low-LR-m2", "cannot tell", "above", "not judged", float("nan"),
                                (10, 11, 12), 1600),
    ]  # fmt: skip
    monkeypatch.setattr(archived, "archived_answers", lambda root=None: quoted)
    runner = CliRunner(env={"COLUMNS": "200"})
    out = tmp_path / "first" / "paper_repro.md"
    args = ["repro", "--quick", "--no-progress", "--no-figures", "--jobs", "1", "--out", str(out)]
    result = runner.invoke(app, [*args, "--cache", str(quick_ctx.cache_dir), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert f"wrote {out}" in result.stderr and f"wrote {out}" not in result.stdout
    n_star, peak = analytic.tail_miss_peak(FIG5_MU_POS, FIG5_TAU)
    assert summary["tail_miss"]["n_star"] == n_star and summary["tail_miss"]["peak"] == pytest.approx(peak)
    assert 0 <= summary["simulator"]["min_mret"] <= 1 and summary["simulator"]["preset"] == "fgrpo-fig2-quick"
    arms = [r["label"] for r in summary["narrowing"]]
    assert arms[0] == "SFT model" and "GRPO N=8" in arms and len(arms) >= 3
    assert all(0 <= r[k] <= 1 for r in summary["narrowing"] for k in ("all", "minority", "rest"))
    assert summary["ledger"] == ledger_counts(out.read_text()) and summary["ledger"]["claims"] == len(CATALOGUE)
    parts = summary["ledger"]["parts"]
    assert list(parts) == ["closed forms", *(r.name for r in ledger.REGIMES), "untested"]
    once = sum(parts["closed forms"].values()) + sum(parts["untested"].values())
    assert once + max(sum(parts[r.name].values()) for r in ledger.REGIMES) <= len(CATALOGUE)
    assert summary["report"] == str(out) and summary["figures"] == []
    assert [(a["gamma"], a["word"], a["gain256"]) for a in summary["study_answer"]] == [
        (0.5, "no", 0.002),
        (2.0, "cannot tell", None),  # JSON has no NaN: a gain not judged is null
    ]

    with _no_retraining("the summary"):  # the first call trained what was missing
        table = runner.invoke(app, [*args, "--cache", str(quick_ctx.cache_dir)])
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert "What the first look found:" in lines
    assert any(line.strip().startswith("narrowing  held-out pass@256") for line in lines)
    assert any("SFT model" in line and f"{summary['narrowing'][0]['all']:.3f}" in line for line in lines)
    assert any(line.strip().startswith("ledger") and f"{len(CATALOGUE)} claims" in line for line in lines)
    assert "under three seeds the noise rule cannot tell" in table.stdout  # the stand-ins have two seeds
    assert "the full study, read from the committed evidence archive (not these runs)" in table.stdout
    assert (
        "gamma = 0.5: no (frontier on, end point same point; pass@256 at the end point +0.002; 3 seeds, 10-12)"
        in table.stdout
    )
    assert (
        "gamma = 2: cannot tell (frontier above, end point not judged; pass@256 at the end point not judged; "
        "3 seeds, 10-12)" in table.stdout
    )
    one_error_line(runner.invoke(app, [*args, "--only", "ladder", "--json"]), "does not go with --only")


def test_the_quick_ledger_marks_every_judged_cell_as_quick_evidence(quick_ctx):
    """In the first look every judged cell says it is quick evidence, in its regime's column (the closed forms in
    their own table); the full ledger adds no such word."""
    from tailmiss.report import QUICK_DEFERRED
    from tailmiss.studies.text import fence

    text = render_report(quick_ctx, deferred=QUICK_DEFERRED)
    table = text[text.index("### The claims about training, by regime") : text.index(fence("ledger")[1])]
    table = table[: table.index("### Not testable")]
    cells = [c for line in table.splitlines()[4:] if line.startswith("| ") for c in line.split(" | ")[2:]]
    judged = [c for c in cells if c.strip(" |") != "—" and not c.startswith(("not in this report", "not judged"))]
    assert judged and all(", quick): " in c for c in judged), [c[:80] for c in judged if ", quick): " not in c]
    learning, narrowing = ledger.REGIMES
    regimes = {ledger.regime_of(c.split(" (", 1)[1].split(", quick)")[0]).name for c in judged}
    assert regimes == {learning.name, narrowing.name}  # the first look shows both regimes
    rows = [("t2-pass1", "x", "reproduced", ledger.NARROWING)]
    assert ", quick)" not in ledger.ledger_section(rows)  # the report adds the word, in quick mode only
