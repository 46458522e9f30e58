"""The report's evidence: the units it reads, the plan against the archive, a regeneration in parts, the spot check,
the re-derivation's comparison, and their command line (tailmiss.evidence.plan, .regenerate, .verify)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tailmiss import archive
from tailmiss.cli import app
from tailmiss.evidence import plan as evidence
from tailmiss.experiments.units import KINDS
from tailmiss.options import RunOptions
from tailmiss.studies.context import Context
from tests.conftest import one_error_line, tiny_narrowing_sweeps


def _sweep():
    return tiny_narrowing_sweeps()["narrowing"]


def _needed(sweep=None, sections=("narrowing",)):
    from tailmiss.experiments.units import sweep_units

    return [evidence.Needed(spec, sections) for spec in sweep_units(sweep or _sweep())]


@pytest.fixture
def tiny_report(monkeypatch):
    """The report reads the tiny narrowing sweep alone (its SFT run, 10 RL runs and its result)."""
    sweep = _sweep()
    monkeypatch.setattr(evidence, "report_units", lambda ctx=None: _needed(sweep))
    return sweep


@pytest.fixture
def root(evidence_root) -> Path:
    return evidence_root


@pytest.fixture(scope="module")
def trained(trained_narrowing):
    return trained_narrowing[0]


def _ctx(cache: Path) -> Context:
    return Context(cache_dir=cache.parent / "sim", llm_cache_dir=cache, options=RunOptions(progress=False, jobs=1))


FRONTIER = ("narrowing-ladder-frontier", "narrowing-ladder-frontier-low")


# -- what the report reads ---------------------------------------------------------------------------------------


def test_the_full_report_reads_every_familys_runs_and_results_and_its_comparisons_once():
    needed = evidence.report_units(Context())
    names = [n.spec.name for n in needed]
    assert len(names) == len(set(names))
    by_name = {n.spec.name: n for n in needed}
    kinds = {n.spec.kind for n in needed}
    assert kinds == set(KINDS)  # every kind of unit is read by some section
    assert by_name["fgrpo-fig2"].sections[0] == "theory" and "simulation" in by_name["fgrpo-fig2"].sections
    assert by_name["multisolution-nsweep-bridge-lr0.1"].sections == ("transformer",)
    assert by_name["narrowing-by-type"].spec.weights and by_name["narrowing-bridge"].spec.key == {"sim_lr": 0.01}
    frontier = [n for n in needed if n.spec.preset == "narrowing-ladder-frontier"]
    assert frontier and all(n.sections == ("sharing",) for n in frontier)
    rl = next(n.spec for n in needed if n.spec.kind == "RL run" and n.spec.preset == "narrowing-ladder-shared")
    assert (
        by_name[rl.start].spec.kind == "derived policy" and by_name[by_name[rl.start].spec.start].spec.kind == "SFT run"
    )
    # the shared simulator of each shared rung, started from the rung's derived policy, read by the sharing section
    simulated = {n.spec.preset: n for n in needed if n.spec.kind == "shared simulation"}
    assert set(simulated) == {"narrowing-ladder-shared", "narrowing-ladder-shared-n", *FRONTIER}
    assert all(
        n.sections == ("sharing",) and by_name[n.spec.start].spec.kind == "derived policy" for n in simulated.values()
    )


# -- the plan ----------------------------------------------------------------------------------------------------


def test_the_plan_lists_what_the_archive_lacks_with_its_section_why_and_cost(trained, root, tiny_report):
    sweep = tiny_report
    total = len(sweep.runs()) + 2  # the SFT run, the RL runs, the result
    empty = evidence.plan(_ctx(trained), root)
    assert len(empty.todo) == len(empty.entries) == total and all(e.why == "not archived" for e in empty.todo)
    evidence.archive_units(_ctx(trained), root)
    full = evidence.plan(_ctx(trained), root)
    assert not full.todo and full.complete("narrowing") and not full.unused
    runs = [e for e in full.entries if e.spec.kind == "RL run"]
    assert all(e.cpu_s and e.cpu_s > 0 and not e.estimated for e in runs)

    _, _, lost = sweep.runs()[1]  # one run leaves the archive: it, and the result read off it, are to compute
    archive.remove(archive.find(trained / lost.name, root))
    part = evidence.plan(_ctx(trained), root)
    todo = {e.spec.name: e for e in part.todo}
    assert set(todo) == {lost.name, sweep.name}
    assert todo[lost.name].why == "not archived" and todo[lost.name].estimated  # from the other seed of its arm
    assert "read off are recomputed" in todo[sweep.name].why
    assert part.sections()["narrowing"] == {
        "units": total,
        "todo": 2,
        "cpu_s": pytest.approx(sum(e.cpu_s for e in todo.values())),
        "unknown": 0,
    }
    assert not part.complete("narrowing")


def test_a_pending_familys_units_are_planned_and_computed_last_but_never_missing(trained, root, monkeypatch):
    """A study's pending family (runs it will read once all are archived): its units are planned under
    '<study> (pending)', computed after every section's, and never what --verify calls missing."""
    from tailmiss.evidence.regenerate import priority

    later = tiny_narrowing_sweeps(full=True)["narrowing-plateau"]
    read = _needed()
    pending = [evidence.Needed(n.spec, ("narrowing" + evidence.PENDING,), pending=True) for n in _needed(later)]
    monkeypatch.setattr(evidence, "report_units", lambda ctx=None: [*pending, *read])
    found = evidence.plan(_ctx(trained), root)
    assert len(found.todo) == len(read) + len(pending) and len(found.missing) == len(read)
    assert set(found.sections()) == {"narrowing", "narrowing (pending)"}
    order = priority(found)
    assert [e.needed.pending for e in order] == [False] * len(read) + [True] * len(pending)
    evidence.archive_units(_ctx(trained), root)  # the cache holds the read units, not the pending ones
    found = evidence.plan(_ctx(trained), root)
    assert not found.missing and found.complete("narrowing") and not found.complete("narrowing (pending)")


def test_the_full_reports_pending_families_are_no_sections_reads():
    """The registry's pending families plan units no section reads (else they would not be pending)."""
    needed = evidence.report_units(Context())
    read = {n.key for n in needed if not n.pending}
    pending = [n for n in needed if n.pending]
    assert all(n.key not in read and len(n.sections) == 1 and n.sections[0].endswith(evidence.PENDING) for n in pending)


def test_the_plan_follows_starts_configs_and_code(trained, root, tiny_report, monkeypatch):
    from tailmiss.experiments.units import sweep_units

    sweep = tiny_report
    evidence.archive_units(_ctx(trained), root)
    archive.remove(archive.find(trained / sweep.sft.name, root))
    found = evidence.plan(_ctx(trained), root)
    assert len(found.todo) == len(sweep.runs()) + 2
    assert all(e.why.startswith(f"its start {sweep.sft.name}") for e in found.todo if e.spec.kind == "RL run")

    longer = sweep.replace(rl=sweep.rl.replace(steps=sweep.rl.steps + 2))  # the report asks for longer runs
    monkeypatch.setattr(
        evidence, "report_units", lambda ctx=None: [evidence.Needed(s, ("narrowing",)) for s in sweep_units(longer)]
    )
    evidence.archive_units(_ctx(trained), root, needed=_needed(sweep))
    other = evidence.plan(_ctx(trained), root)
    whys = {e.spec.kind: e.why for e in other.todo}
    assert whys["RL run"] == "archived, but it holds another config" and not other.unused  # the same names

    monkeypatch.setattr(evidence, "report_units", lambda ctx=None: _needed(sweep))
    from tailmiss import store

    monkeypatch.setattr(store, "same_code", lambda scope, stored, current=None: False)
    stale = evidence.plan(_ctx(trained), root)
    assert all("made by code" in e.why for e in stale.todo if e.spec.kind != "RL run")


def test_a_comparison_read_off_weights_retrains_its_runs_and_recomputes_nothing_else(
    trained, root, tiny_report, monkeypatch
):
    """The archive keeps no RL run's weights: a comparison read off them (an attribution) retrains its runs, and the
    units read off those runs' archived copies (the sweep result) stay as they are."""
    from tailmiss.experiments.units import attribution_unit
    from tailmiss.studies.narrowing.attribution_text import ARMS

    sweep = tiny_report
    read = evidence.Needed(attribution_unit(sweep, ARMS, (0,), 1, 1), ("narrowing",))
    monkeypatch.setattr(evidence, "report_units", lambda ctx=None: [*_needed(sweep), read])
    evidence.archive_units(_ctx(trained), root)
    todo = {e.spec.name: e.why for e in evidence.plan(_ctx(trained), root, cache=None).todo}
    runs = {cfg.name for v, s, cfg in sweep.runs() if v.label in ARMS and s == 0}
    assert set(todo) == {read.spec.name, *runs}
    assert all("from its weights" in todo[name] for name in runs)
    # with the weights in the cache, only the comparison is left
    assert {e.spec.name for e in evidence.plan(_ctx(trained), root, cache=trained).todo} == {read.spec.name}


def test_a_run_trained_again_for_its_weights_says_where_it_differs_from_its_archived_copy(
    trained, root, tiny_report, tmp_path
):
    from tailmiss.evidence.regenerate import retrain_for_weights

    sweep = tiny_report
    evidence.archive_units(_ctx(trained), root)
    cache = tmp_path / "llm"
    cache.mkdir()
    _, _, cfg = sweep.runs()[0]
    assert retrain_for_weights(cfg, cache / sweep.sft.name, cache) == []  # the SFT run restored, the run the same
    history = cache / cfg.name / "history.csv"
    history.write_text(history.read_text().replace("\n", "\n", 1) + "\n")  # as a run trained on another CPU
    when = (cache / cfg.name / "checkpoint.pt").stat().st_mtime_ns
    assert retrain_for_weights(cfg, cache / sweep.sft.name, cache) == ["history.csv"]
    assert (cache / cfg.name / "checkpoint.pt").stat().st_mtime_ns == when  # kept, not trained a third time


def test_a_damaged_archived_unit_shows_in_the_plan(trained, root, tiny_report):
    evidence.archive_units(_ctx(trained), root)
    _, _, cfg = tiny_report.runs()[0]
    stored = archive.find(trained / cfg.name, root)
    history = stored.path / "history.csv.xz"
    history.write_bytes(history.read_bytes()[:-3])
    (entry,) = [e for e in evidence.plan(_ctx(trained), root).todo if e.spec.name == cfg.name]
    assert entry.why.startswith("damaged") and str(history) in entry.why


# -- a regeneration in parts -------------------------------------------------------------------------------------


def test_a_budget_stops_and_the_next_call_goes_on_from_the_archive(
    tmp_path, root, tiny_report, monkeypatch, one_torch_thread
):
    from tailmiss.evidence.regenerate import regenerate
    from tailmiss.experiments import pool

    started = []
    allows = pool.Schedule.allows

    def three(self, job):  # the budget runs out after three jobs have started
        if len(started) >= 3:
            return False
        started.append(job.key)
        return allows(self, job)

    monkeypatch.setattr(pool.Schedule, "allows", three)
    ctx = _ctx(tmp_path / "runs" / "llm")
    first = regenerate(3600, ctx, root)
    sweep = tiny_report
    total = len(sweep.runs()) + 2
    assert started[0] == sweep.sft.name and len(first.archived) == 3 and first.selected == total
    assert len(first.left.todo) == total - 3
    shutil.rmtree(tmp_path / "runs")  # a later sitting: a fresh clone holding the committed archive
    monkeypatch.setattr(pool.Schedule, "allows", allows)
    second = regenerate(3600, ctx, root)
    assert second.selected == total - 3 and set(second.archived) | set(first.archived) == {
        e.spec.name for e in first.left.entries
    }
    assert not second.left.todo


def test_a_budget_starts_no_job_that_would_end_after_it():
    from tailmiss.experiments.jobs import Job
    from tailmiss.experiments.pool import Schedule, _Queue

    jobs = [Job("long", print), Job("short", print)]
    schedule = Schedule(until=time.monotonic() + 60, cost=lambda job: 3600 if job.key == "long" else 1)
    queue = _Queue(list(jobs), lambda line: None, None, schedule)
    assert [j.key for j in queue.ready(2)] == ["short"]
    late = _Queue(list(jobs), lambda line: None, None, Schedule(until=time.monotonic() - 1))
    assert late.ready(2) == []


@pytest.mark.parametrize("text,seconds", [("2h", 7200), ("90m", 5400), ("1h30m", 5400), ("45s", 45), ("120", 120)])
def test_durations_are_read_as_people_write_them(text, seconds):
    from tailmiss.evidence.regenerate import parse_duration

    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2x", "h", "-5", "0"])
def test_a_bad_duration_is_refused_by_value(text):
    from tailmiss.evidence.regenerate import parse_duration

    with pytest.raises(ValueError, match=repr(text).replace("(", r"\(")):
        parse_duration(text)


# -- the spot check ----------------------------------------------------------------------------------------------


def test_runs_trained_again_here_come_out_the_same_bit_for_bit(trained, root, tiny_report):
    from tailmiss.evidence.spot_check import spot_check

    evidence.archive_units(_ctx(trained), root)
    seed, checks = spot_check(2, seed=3, root=root)
    assert seed == 3 and len(checks) == 2
    assert all(c.same and not c.moved for c in checks), checks
    assert [c.name for c in spot_check(2, seed=3, root=root)[1]] == [c.name for c in checks]


def test_how_far_a_retrained_history_moved_is_measured_per_column():
    from tailmiss.evidence.spot_check import _distance

    a = b"step,mu_pos,loss\n0,0.5,1.0\n1,0.6,0.9\n"
    b = b"step,mu_pos,loss\n0,0.5,1.0\n1,0.6000003,0.9\n"
    moved = _distance("history.csv", a, b)
    assert moved["column"] == "mu_pos" and moved["max_abs"] == pytest.approx(3e-7)


# -- the comparison behind the CI check --------------------------------------------------------------------------


def _report(folder: Path, number: str = "0.737", date: str = "2026-12-06") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "figures").mkdir(exist_ok=True)
    stamp = f"<sub>Stamp: tailmiss 0.1.0 on {date}, code `abc`.</sub>"
    (folder / "paper_repro.md").write_text(f"# r\n\nGRPO N = 8 takes pass@256 to {number}.\n\n{stamp}\n")
    figure = {"code": "abc", "made": f"tailmiss 0.1.0 on {date}", "sha256": {"png": date}}
    (folder / "paper_repro.stamps.json").write_text(json.dumps({"sections": {}, "figures": {"f": figure}}))
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, float(number)])
    fig.savefig(folder / "figures" / "f.png")
    plt.close(fig)
    return folder / "paper_repro.md"


def test_the_comparison_sets_dates_aside_and_fails_on_an_edited_number(tmp_path):
    from tailmiss.evidence.verify import compare

    committed = _report(tmp_path / "committed")
    assert compare(committed, _report(tmp_path / "same", date="2027-01-02")) == []
    edited = committed.read_text().replace("0.737", "0.738")
    (tmp_path / "hand").mkdir()
    shutil.copytree(tmp_path / "committed", tmp_path / "hand", dirs_exist_ok=True)
    (tmp_path / "hand" / "paper_repro.md").write_text(edited)
    differences = compare(committed, tmp_path / "hand" / "paper_repro.md")
    assert [(d.where, d.what[:1]) for d in differences] == [("paper_repro.md", "-"), ("paper_repro.md", "+")]
    assert "0.737" in differences[0].what and "0.738" in differences[1].what
    moved = compare(committed, _report(tmp_path / "moved", number="0.5"))
    assert any(d.where == "figures/f.png" for d in moved)


# -- the command line --------------------------------------------------------------------------------------------


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"COLUMNS": "200"})


def test_repro_plan_lists_the_missing_units_and_the_totals_per_section(runner, trained, root, tiny_report):
    evidence.archive_units(_ctx(trained), root)
    _, _, cfg = tiny_report.runs()[0]
    archive.remove(archive.find(trained / cfg.name, root))
    args = ["repro", "--plan", "--evidence", str(root), "--cache", str(trained.parent / "sim")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"{cfg.name} [RL run; {tiny_report.name}; narrowing]: not archived" in result.stdout
    assert f"narrowing    {len(tiny_report.runs()) + 2:>5} units: 2 to compute" in result.stdout
    payload = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert {row["unit"] for row in payload["todo"]} == {cfg.name, tiny_report.name}


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--plan", "--budget", "1h"], "do not go together"),
        (["--budget", "2x"], "2x"),
        (["--plan", "--quick"], "--quick"),
        (["--partial"], "--verify"),
        (["--seed", "3"], "--spot-check"),
        (["--verify", "--out", "nowhere/paper_repro.md"], "does not exist"),
        (["--plan", "--evidence", "README.md"], "is a file"),
    ],
)
def test_repro_refuses_bad_evidence_options_in_one_line(runner, args, needle, tmp_path):
    result = runner.invoke(app, ["repro", *args])
    one_error_line(result, needle)


# -- the re-derivation end to end ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_report_rederived_from_its_archive_alone_is_the_committed_one_until_a_number_is_edited(
    tmp_path, quick_ctx, monkeypatch
):
    from tailmiss.evidence.make import make
    from tailmiss.evidence.verify import verify

    root = tmp_path / "evidence"
    root.mkdir()
    monkeypatch.setenv(archive.ARCHIVE_ENV, str(root))
    report = tmp_path / "committed" / "paper_repro.md"
    report.parent.mkdir()
    monkeypatch.chdir(report.parent)  # as in a checkout: the report names its figures' folder relative to itself
    make(Path(report.name), quick_ctx, figures=True)
    assert evidence.archive_units(quick_ctx, root)
    result = verify(report, root, ctx=quick_ctx, options=RunOptions(progress=False, jobs=1))
    assert result.ok, [str(d) for d in result.differences] + [str(result.lacking)]
    text = report.read_text()
    number = next(w for w in text.split() if w.count(".") == 1 and w.replace(".", "").isdigit() and len(w) > 3)
    report.write_text(text.replace(number, number[:-1] + str((int(number[-1]) + 1) % 10), 1))
    edited = verify(report, root, ctx=quick_ctx, options=RunOptions(progress=False, jobs=1))
    assert not edited.ok and any(d.where == "paper_repro.md" for d in edited.differences)
