"""Stamps of the report and its figures, and ``tailmiss repro --check`` (:mod:`tailmiss.report.stamps`)."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import tiny_llm_sweeps
from typer.testing import CliRunner

from tailmiss import store
from tailmiss.cli import app
from tailmiss.options import RunOptions
from tailmiss.report import QUICK_DEFERRED, write_report
from tailmiss.report.stamps import STAMP_LINE, check_stamps, read_stamps, section_stamp, stamps_path, write_stamps
from tailmiss.studies.context import Context

THEORY = "## Theory (closed forms)"


@pytest.fixture(scope="module")
def ctx(tmp_path_factory) -> Context:
    cache = tmp_path_factory.getbasetemp() / "tailmiss-quick-cache"
    cache.mkdir(exist_ok=True)
    return Context(quick=True, cache_dir=cache, llm_sweeps=tiny_llm_sweeps(), options=RunOptions(progress=False))


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A copy of the package that the stamps read instead of the installed one (edit it to change "the code")."""
    pkg = tmp_path / "pkg" / "tailmiss"
    shutil.copytree(store._PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(store, "_PACKAGE", pkg)
    yield pkg
    store.code_fingerprint.cache_clear()
    store.module_fingerprint.cache_clear()


def _refingerprint():
    """Forget the fingerprints a process keeps (the code under the stamps was edited)."""
    store.code_fingerprint.cache_clear()
    store.module_fingerprint.cache_clear()


def _edit(pkg, rel, old, new):
    path = pkg / rel
    assert old in path.read_text(), (rel, old)
    path.write_text(path.read_text().replace(old, new))


def _stale(report, ctx):
    return {s.name.split(" (")[0].split(":")[0]: s.why for s in check_stamps(report, ctx=ctx)}


def test_each_section_is_stamped_and_the_check_names_what_changed(ctx, tmp_path, package_copy):
    """Each ``## `` section ends with its stamp line and the stamps file holds its code, files and presets; the
    check passes on the report as written, names the sections whose code changed with the changed file (a loss kernel
    stales the transformer's sections, not the closed forms'; a reworded verdict its own section only) and a
    stamp line edited by hand."""
    report = tmp_path / "paper_repro.md"
    write_report(report, ctx)
    text = report.read_text()
    record = read_stamps(report)
    headings = [line for line in text.split("\n") if line.startswith("## ")]
    assert set(record["sections"]) == set(headings) and record["quick"] is True and record["deferred"] == []
    for heading in headings:
        section = text[text.index(heading) :]
        nxt = section.find("\n## ", 1)
        section = section if nxt < 0 else section[:nxt]
        last = [line for line in section.split("\n") if line and not line.startswith("<!-- ")][-1]  # fences aside
        assert last.startswith(STAMP_LINE) and record["sections"][heading]["code"] in last, heading
    small = next(h for h in headings if h.startswith("## Small transformer"))
    assert set(record["sections"][small]["presets"]) == {
        ctx.llm_sweeps[f].name for f in ("nsweep", "objectives", "maze")
    }
    assert "objectives/token_losses.py" in record["sections"][small]["files"]
    assert "objectives/token_losses.py" not in record["sections"][THEORY]["files"]
    assert check_stamps(report, ctx=ctx) == []

    _edit(package_copy, "objectives/token_losses.py", "ratio.clamp(max=cfg.clip_high)", "ratio.clamp(max=3.0)")
    stale = _stale(report, ctx)
    assert "## Small transformer" in stale and "objectives/token_losses.py" in stale["## Small transformer"]
    assert "## Theory" not in stale
    _edit(package_copy, "objectives/token_losses.py", "ratio.clamp(max=3.0)", "ratio.clamp(max=cfg.clip_high)")
    assert check_stamps(report, ctx=ctx) == []
    _edit(package_copy, "studies/protocol/section.py", '"the test (a one-run', '"this test (a one-run')
    stale = _stale(report, ctx)
    protocol = "## The paper's protocol"
    assert list(stale) == [protocol] and "studies/protocol/section.py" in stale[protocol]
    _edit(package_copy, "studies/protocol/section.py", '"this test (a one-run', '"the test (a one-run')

    report.write_text(text.replace(record["sections"][THEORY]["code"], "0" * 16, 1))
    assert "edited by hand" in _stale(report, ctx)["## Theory"]
    stamps_path(report).unlink()
    (only,) = check_stamps(report, ctx=ctx)
    assert "no stamps" in only.why


def test_the_first_look_and_a_section_added_later_stay_current(ctx, tmp_path):
    """A deferred section is stamped as the note it is; ``only=NAME`` fills it in, the record stops deferring it and
    the report is still current; a ``### `` section written into an otherwise stale section leaves it stale."""
    report = tmp_path / "paper_repro.md"
    write_report(report, ctx, deferred=QUICK_DEFERRED)
    assert read_stamps(report)["deferred"] == list(QUICK_DEFERRED) and check_stamps(report, ctx=ctx) == []
    write_report(report, ctx, only="maze")
    record = read_stamps(report)
    assert "maze" not in record["deferred"] and check_stamps(report, ctx=ctx) == []
    small = next(h for h in record["sections"] if h.startswith("## Small transformer"))
    assert ctx.llm_sweeps["maze"].name in record["sections"][small]["presets"]
    write_report(report, ctx, only="controls")
    assert "controls" not in read_stamps(report)["deferred"] and check_stamps(report, ctx=ctx) == []

    record["sections"][small]["code"] = "0" * 16  # as if the rest of the section had been made by older code
    stamps_path(report).write_text(json.dumps(record))
    report.write_text(report.read_text().replace(read_stamps(report)["sections"][small]["code"], "0" * 16))
    write_report(report, ctx, only="objectives")
    assert read_stamps(report)["sections"][small]["code"] == "0" * 16  # kept: still stale
    assert any(s.name == small and "code changed" in s.why for s in check_stamps(report, ctx=ctx))


def test_figure_stamps_hold_the_files_and_the_code(ctx, tmp_path):
    from tailmiss.report.registry import FIGURES, make
    from tailmiss.report.stamps import figure_stamp

    report = tmp_path / "paper_repro.md"
    report.write_text(f"# r\n\n{THEORY}\n\nx\n")
    write_stamps(report, {THEORY: section_stamp(THEORY, ctx)}, quick=True, deferred=())
    report.write_text(report.read_text().replace("x\n", "x\n\n" + _stamp_line(report)))
    written = make(["fig3"], tmp_path / "figures", ctx)
    write_stamps(report, {}, figures={"fig3": figure_stamp(FIGURES["fig3"], ctx, written)})
    assert set(read_stamps(report)["figures"]["fig3"]["sha256"]) == {"png", "pdf"}
    assert check_stamps(report, FIGURES, lambda deferred: ["fig3"], ctx) == []
    missing = check_stamps(report, FIGURES, lambda deferred: ["fig3", "fig4"], ctx)
    assert [(s.name, s.why) for s in missing] == [("fig4", "not stamped")]
    (tmp_path / "figures" / "fig3.png").write_bytes(b"not the figure")
    (stale,) = check_stamps(report, FIGURES, lambda deferred: ["fig3"], ctx)
    assert stale.name == "fig3" and "fig3.png" in stale.why


def _stamp_line(report) -> str:
    from tailmiss.report.stamps import _line

    return _line(read_stamps(report)["sections"][THEORY]) + "\n"


def test_repro_check_on_the_command_line(ctx, tmp_path):
    """``tailmiss repro --check``: exit 0 with one line when current, exit 1 naming each stale part, exit 2 with one
    line when there is no report."""
    runner = CliRunner()
    report = tmp_path / "paper_repro.md"
    report.write_text(f"# r\n\n{THEORY}\n\nx\n")
    write_stamps(report, {THEORY: section_stamp(THEORY, ctx)}, quick=True, deferred=QUICK_DEFERRED)
    report.write_text(report.read_text().replace("x\n", "x\n\n" + _stamp_line(report)))
    # the theory section alone, and none of the first look's figures: those are named as not stamped
    result = runner.invoke(app, ["repro", "--check", "--out", str(report)])
    assert result.exit_code == 1 and "stale figure 'fig3': not stamped" in result.output
    assert THEORY not in result.output
    report.write_text(report.read_text().replace(read_stamps(report)["sections"][THEORY]["code"], "f" * 16))
    result = runner.invoke(app, ["repro", "--check", "--out", str(report)])
    assert result.exit_code == 1 and f"stale section '{THEORY}'" in result.output
    result = runner.invoke(app, ["repro", "--check", "--out", str(tmp_path / "none.md")])
    assert result.exit_code == 2 and "does not exist" in result.output and "Traceback" not in result.output


def test_a_change_to_any_verdict_rule_stales_the_ledger(ctx, package_copy):
    """The ledger's stamp holds every claims module and the one noise rule: editing the rule's α, or a section's
    claims module, changes the ledger's code (before, a rule change left the ledger current)."""
    from tailmiss.studies.ledger import LEDGER_HEADING

    before = section_stamp(LEDGER_HEADING, ctx)
    rules = ("studies/rule.py", "studies/comparison.py")  # the sentence rule and the comparisons it reads
    for rel in (*rules, "studies/ladder/claims.py", "studies/controls/claims.py", "studies/ledger.py"):
        assert rel in before["files"], rel
    _edit(package_copy, "studies/comparison.py", "ALPHA = 0.05", "ALPHA = 0.01")
    after = section_stamp(LEDGER_HEADING, ctx)
    changed = "studies/comparison.py"
    assert after["code"] != before["code"] and after["files"][changed] != before["files"][changed]
    _edit(package_copy, "studies/comparison.py", "ALPHA = 0.01", "ALPHA = 0.05")
    assert section_stamp(LEDGER_HEADING, ctx)["code"] == before["code"]
    _edit(package_copy, "studies/controls/claims.py", "def _start(", "def _start_(")
    _edit(package_copy, "studies/controls/claims.py", "_start(history)", "_start_(history)")
    assert section_stamp(LEDGER_HEADING, ctx)["files"] != before["files"]


def test_a_change_to_the_claims_catalogue_stales_the_ledger(ctx, package_copy):
    """The catalogue is data (``studies/claims.toml``), outside every import closure: its bytes count in the ledger's
    stamp, so rewording a claim stales the ledger and undoing it makes the ledger current again."""
    from tailmiss.studies.ledger import LEDGER_HEADING

    before = section_stamp(LEDGER_HEADING, ctx)
    assert "studies/claims.toml" in before["files"]
    _edit(package_copy, "studies/claims.toml", "Q_pos rises for every N", "Q_pos rises for each N")
    after = section_stamp(LEDGER_HEADING, ctx)
    assert after["code"] != before["code"]
    assert after["files"]["studies/claims.toml"] != before["files"]["studies/claims.toml"]
    _edit(package_copy, "studies/claims.toml", "Q_pos rises for each N", "Q_pos rises for every N")
    assert section_stamp(LEDGER_HEADING, ctx) == {**before, "made": section_stamp(LEDGER_HEADING, ctx)["made"]}


def test_a_trainer_change_declared_equivalent_keeps_the_sections_current(ctx, tmp_path, package_copy, monkeypatch):
    """Each stamp records the fingerprints of the unit scopes its code reaches; a change inside them stales the
    sections until the new fingerprints are declared to compute what the recorded ones did (EQUIVALENT), and then
    keeps them current; a change outside every scope stales as always, and so does an undeclared one. A stamp written
    before stamps held scopes stays exact until ``record_scopes`` gives it those of the code it is current with."""
    from tailmiss.report.stamps import record_scopes

    report = tmp_path / "paper_repro.md"
    write_report(report, ctx)
    recorded = {h: s["scopes"] for h, s in read_stamps(report)["sections"].items()}
    small = next(h for h in recorded if h.startswith("## Small transformer"))
    key = "## Small transformer"  # how _stale names it
    assert {"llm", "sim"} <= set(recorded[small]) and all(
        scopes == recorded[small] for h, scopes in recorded.items() if "llm" in scopes
    )
    assert check_stamps(report, ctx=ctx) == []

    _edit(package_copy, "llm/optim.py", "lr, decay = group[", "lr, decay = 1.0 * group[")
    _refingerprint()
    now = {name: store.code_fingerprint(name) for name in ("llm", "sim")}
    assert now["llm"] != recorded[small]["llm"] and now["sim"] == recorded[small]["sim"]
    stale = _stale(report, ctx)
    assert key in stale and "llm/optim.py" in stale[key] and "## Theory" not in stale

    monkeypatch.setattr(store, "EQUIVALENT", {"llm": {now["llm"]: recorded[small]["llm"]}})
    assert check_stamps(report, ctx=ctx) == []
    monkeypatch.setattr(store, "EQUIVALENT", {"llm": {now["llm"]: "0" * 16}})  # declared, but for other code
    assert key in _stale(report, ctx)

    monkeypatch.setattr(store, "EQUIVALENT", {"llm": {now["llm"]: recorded[small]["llm"]}})
    _edit(package_copy, "studies/transformer/section.py", "Held-out SFT ", "Held-out SFT: ")  # outside every scope
    assert key in _stale(report, ctx)
    _edit(package_copy, "studies/transformer/section.py", "Held-out SFT: ", "Held-out SFT ")
    assert check_stamps(report, ctx=ctx) == []

    record = read_stamps(report)
    for stamp in record["sections"].values():
        del stamp["scopes"]
    stamps_path(report).write_text(json.dumps(record))
    assert key in _stale(report, ctx)  # no scopes recorded: exact
    untouched = {h for h, stamp in record["sections"].items() if "llm/optim.py" not in stamp["files"]}
    assert small not in untouched and set(record_scopes(report)) == untouched  # only the stamps current by files
    _edit(package_copy, "llm/optim.py", "lr, decay = 1.0 * group[", "lr, decay = group[")
    _refingerprint()
    assert set(record_scopes(report)) == set(record["sections"]) - untouched
    assert read_stamps(report)["sections"][small]["scopes"] == recorded[small]


def test_a_gone_file_is_judged_by_the_scopes_whose_entries_held_it(monkeypatch):
    """A module renamed or removed inside a scope (``llm/_loop.py`` became ``llm/loop.py``) keeps a stamp current
    when the scope that held it runs code declared equivalent to what the stamp recorded, and only then."""
    from tailmiss.report.stamp_scopes import excused, forget

    forget()
    now = {"llm": store.code_fingerprint("llm"), "sim": store.code_fingerprint("sim")}
    assert excused("llm/a_module_that_is_gone.py", now)  # the scope runs the recorded code
    assert not excused("llm/a_module_that_is_gone.py", {**now, "llm": "0" * 16})  # other code, not declared
    monkeypatch.setattr(store, "EQUIVALENT", {"llm": {now["llm"]: "0" * 16}})
    assert excused("llm/a_module_that_is_gone.py", {**now, "llm": "0" * 16})  # declared
    assert not excused("studies/a_module_that_is_gone.py", now)  # no scope held it: stale as any other change
