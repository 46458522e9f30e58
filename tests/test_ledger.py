"""The claims ledger at the top of the report (:mod:`tailmiss.studies.ledger`)."""

from __future__ import annotations

import re

import pytest
from conftest import tiny_llm_sweeps

from tailmiss.options import RunOptions
from tailmiss.report import QUICK_DEFERRED, _merged_rows, render_report, write_report
from tailmiss.report.stamps import read_stamps
from tailmiss.studies import ledger as lg
from tailmiss.studies.context import Context
from tailmiss.studies.rule import Verdict

VERDICTS = ("reproduced", "**refuted**", "partly", "not resolved", "cannot tell", "caveat", "not testable")


@pytest.fixture(scope="module")
def ctx(tmp_path_factory) -> Context:
    cache = tmp_path_factory.getbasetemp() / "tailmiss-quick-cache"
    cache.mkdir(exist_ok=True)
    return Context(quick=True, cache_dir=cache, llm_sweeps=tiny_llm_sweeps(), options=RunOptions(progress=False))


_CELL = re.compile(r"^(\*\*refuted\*\*|[a-z ]+?) \(([^(),:]*)(?:, quick)?\): (.*)$")


def _ledger_rows(text: str) -> dict:
    """Claim sentence -> its judgements ``(verdict, section, ours)`` in the ledger of ``text``: one for a closed form
    or a claim not tested, one per regime that judges (or waits for) a claim about training."""
    body = text[text.index(lg.LEDGER_HEADING) : text.index("\n## ", text.index(lg.LEDGER_HEADING) + 1)]
    rows, header = {}, []
    for line in body.splitlines():
        if not line.startswith("| "):
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
        if cells[0] == "source":
            header = cells
            continue
        if header[2:] == ["ours", "verdict"]:  # the closed forms
            rows[cells[1]] = [(cells[3], lg.THEORY, cells[2])]
        elif header[2:] == ["why", "section"]:  # not testable, and settings
            rows[cells[1]] = [(cells[2], cells[3], "—")]
        else:  # one column per regime
            found = [_CELL.match(c) for c in cells[2:] if c != "—"]
            rows[cells[1]] = [
                m.groups() if m else (c, "", "") for m, c in zip(found, [c for c in cells[2:] if c != "—"])
            ]
    return rows


def _verdicts(judgements: list) -> list[str]:
    return [v for v, _, _ in judgements]


def test_the_catalogue_names_every_claim_of_both_papers_once():
    keys = [c.key for c in lg.CATALOGUE]
    assert len(keys) == len(set(keys))
    sources = " ".join(c.source for c in lg.CATALOGUE)
    for item in ("Lemma 3.1", "Prop. 3.2", "Lemma H.1", "App. N", "App. Q", "BroRL Thm. 1", "BroRL Cor. 3"):
        assert item in sources, item
    for fig in ("1(a)", "1(b,c)", "2", "3", "4", "5", "6", "7"):
        assert re.search(rf"F-GRPO Fig\. {re.escape(fig)}(?![\w(])", sources), fig
    tables = {int(n) for m in re.findall(r"Tables? (\d+(?:-\d+)?)", sources) for n in _span(m)}
    assert tables >= set(range(1, 15)), sorted(set(range(1, 15)) - tables)
    assert "BroRL Fig. 3" in sources and any("concave" in c.sentence for c in lg.CATALOGUE)


def _span(text: str) -> range:
    lo, _, hi = text.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def test_a_row_is_returned_not_collected_and_unknown_claims_are_refused():
    rows = lg.row("fig2-rises", "x", Verdict.REPRODUCED) + lg.row("fig2-alone", "y", Verdict.PARTLY)
    assert rows == [("fig2-rises", "x", Verdict.REPRODUCED), ("fig2-alone", "y", Verdict.PARTLY)]
    with pytest.raises(ValueError, match="unknown ledger claim"):
        lg.row("nope", "z", Verdict.REPRODUCED)
    assert not hasattr(lg, "collecting") and not hasattr(lg, "record")  # no module state to fill


@pytest.mark.parametrize("literal", [True, False, None, "partly", "reproduced"])
def test_a_verdict_is_never_a_literal(literal):
    """The ledger takes only the one verdict vocabulary (the App. Q row was once the literal string "partly")."""
    with pytest.raises(TypeError, match="must be a Verdict"):
        lg.row("appQ", "x", literal)


def test_the_ledger_has_the_out_of_domain_claims_as_rows_and_states_the_rule():
    ood = [c for c in lg.CATALOGUE if "out of domain" in c.sentence]
    assert {c.key for c in ood} == {"t1-ood", "t2-ood", "t3-ood"} and all("out-of-domain" in c.untestable for c in ood)
    text = lg.ledger_section([])
    assert "The noise rule" in text and "Holm" in text and "δ" in text
    sources = " ".join(c.source for c in lg.CATALOGUE)
    assert "§7.1" not in sources and "§J" not in sources


def test_the_report_opens_with_the_ledger_and_it_agrees_with_the_sections(ctx):
    """Every claim is one row; a judged row's verdict is the one its section prints (same rule, same numbers)."""
    text = render_report(ctx)
    assert text.index(lg.LEDGER_HEADING) < text.index("## Theory")
    rows = _ledger_rows(text)
    assert len(rows) == len(lg.CATALOGUE) and set(rows) == {c.sentence for c in lg.CATALOGUE}
    judged = {s: r for s, r in rows.items() if set(_verdicts(r)) <= set(VERDICTS)}
    untestable = {s for s, r in rows.items() if r[0][0].startswith("not testable at this scale")}
    assert {c.sentence for c in lg.CATALOGUE if c.untestable} == untestable
    assert len(judged) + len(untestable) + 1 == len(rows)  # and Table 5, a setting
    # the section's row and the ledger's cell carry one verdict for the reading both print
    [(_, where, ours)] = rows["N = 131,072 alone keeps M_ret ≈ 1 throughout"]
    assert where == lg.SIM
    section_row = next(
        line for line in text.splitlines() if "Fig. 2, log-prob + Adam | N = " in line and "alone keeps" in line
    )
    said = section_row.rstrip(" |").rsplit(": ", 1)[-1].strip("*")
    reading = ours.split("(the reading that follows the figure): ", 1)[1].split("; literal", 1)[0]
    assert reading.rsplit(": ", 1)[-1].strip("*") == said
    assert "DAPO differs from GRPO" not in rows  # this project's check of its DAPO, not a claim of the paper
    zones = next(s for s in rows if "not LLM predictions" in s)
    assert _verdicts(rows[zones]) == ["caveat"]  # a caution of the paper's beside our numbers, never "reproduced"


def test_the_first_look_names_the_command_for_each_deferred_claim_and_only_fills_it_in(ctx, tmp_path):
    report = tmp_path / "paper_repro.md"
    write_report(report, ctx, deferred=QUICK_DEFERRED)
    rows = _ledger_rows(report.read_text())
    waiting = {s: r for s, r in rows.items() if any(v.startswith("not in this report") for v in _verdicts(r))}
    ds = "DS-GRPO has a higher pass@256 and a lower pass@1 than F-GRPO"
    assert "not in this report: `tailmiss repro --quick --only controls` adds it" in _verdicts(rows[ds])
    # objectives (t1-pass256, t1-pass1), maze (2), protocol (2), controls (DS-GRPO, and γ = 2: the first look's
    # narrowing regime has no γ = 2 arm; it judges the other control rows)
    assert len(waiting) == 8
    write_report(report, ctx, only="controls")
    rows = _ledger_rows(report.read_text())
    assert set(_verdicts(rows[ds])) <= set(VERDICTS)
    assert sum(any(v.startswith("not in this report") for v in _verdicts(r)) for r in rows.values()) == 8 - 2
    assert set(_verdicts(rows["pass@1 rises with N"])) <= set(VERDICTS)  # the other rows are kept from the stamps
    # writing the section again replaces its rows: the stamps file records each once, where they stood
    recorded = read_stamps(report)["ledger"]
    write_report(report, ctx, only="controls")
    assert read_stamps(report)["ledger"] == recorded


def test_a_section_written_again_replaces_its_rows_in_place():
    recorded = [
        ("a", "1", "reproduced", "S"),
        ("b", "2", "refuted", "T"),
        ("c", "3", "partly", "T"),
        ("d", "4", "x", "U"),
    ]
    new = [("b", "5", "reproduced", "T"), ("c", "6", "refuted", "T")]
    assert _merged_rows(recorded, new) == [recorded[0], *new, recorded[3]]
    assert _merged_rows(_merged_rows(recorded, new), new) == _merged_rows(recorded, new)
    # the same claim judged by another section is another row; a section judged for the first time comes last
    other = [("b", "7", "caveat", "V")]
    assert _merged_rows(recorded, other) == [*recorded, *other]


def test_the_catalogue_file_is_refused_with_a_repeated_key_or_an_unknown_section(tmp_path):
    """``claims.toml`` is read whole: a key written twice or a section the report does not have is a ValueError
    naming it, not a ledger with a row missing."""
    text = lg.CATALOGUE_PATH.read_text()
    again = tmp_path / "again.toml"
    again.write_text(text + '\n[[claim]]\nkey = "appQ"\nsource = "x"\nsentence = "y"\nsection = "Theory"\n')
    with pytest.raises(ValueError, match="appQ"):
        lg._catalogue(again)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text(text.replace('section = "Theory"', 'section = "Theroy"', 1))
    with pytest.raises(ValueError, match="Theroy"):
        lg._catalogue(unknown)
    assert lg._catalogue(lg.CATALOGUE_PATH) == lg.CATALOGUE


@pytest.mark.parametrize(
    "ours, ok",
    [
        ("+1.24; −0.54", False),  # numbers without the comparison or the evidence behind them
        ("F-GRPO − GRPO +0.031 (p = 0.004)", True),
        ("F-GRPO − GRPO +0.031, 90% CI [+0.01, +0.05]", True),
        ("F-GRPO − GRPO +0.031", False),  # no p-value, interval or reason
        ("F-GRPO − GRPO +0.000: identical", True),
        ("pass@256 N=8 − N=32 −0.02: cannot tell", True),
        ("reproduced", False),
        ("F-GRPO against GRPO: cannot tell (no run raises pass@1 above the SFT model's)", True),
        ("cannot tell", False),
    ],
)
def test_a_ledger_cell_is_checkable_only_with_its_comparison_its_number_and_its_evidence(ours, ok):
    assert lg.checkable(ours) is ok


def test_every_judged_row_of_the_report_names_its_comparisons_and_their_evidence(ctx):
    """A reader checks a verdict from its cell: a row judged by the noise rule (not Theory's closed forms, not a
    caveat) names each comparison, its signed difference and its p-value or interval, or says why there is none."""
    text = render_report(ctx)
    rows = _ledger_rows(text)
    judged = {
        (s, where): ours
        for s, r in rows.items()
        for verdict, where, ours in r
        if where != lg.THEORY and verdict in ("reproduced", "**refuted**", "partly", "not resolved", "cannot tell")
    }
    assert judged
    bare = {k: ours for k, ours in judged.items() if not lg.checkable(ours)}
    assert not bare, bare
