"""The job pool: order by needs, skipping finished runs, errors, and runs on a process pool equal to one process."""

from __future__ import annotations

import time

import pandas as pd
import pytest
from conftest import tiny_ladders

from tailmiss.experiments.ladder import run_ladder
from tailmiss.experiments.pool import Job, default_jobs, run_jobs
from tailmiss.options import RunOptions
from tailmiss.store import UnitState

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _log_span(path: str, key: str, seconds: float, until: str | None = None, options=None) -> str:
    """A job: append its start and end time to ``path``, say so, and return its key.

    It lasts ``seconds``, or with ``until`` until job ``until`` has started (at most 60 s): a
    test of overlap that does not depend on how fast a loaded machine starts the second worker.
    """
    options.say(f"span {key}")
    with open(path, "a") as fh:
        fh.write(f"start {key} {time.time()!r}\n")
    time.sleep(seconds)
    deadline = time.monotonic() + 60
    while until is not None and f"start {until} " not in open(path).read() and time.monotonic() < deadline:
        time.sleep(0.01)
    with open(path, "a") as fh:
        fh.write(f"end {key} {time.time()!r}\n")
    return key * 2


def _refuse(options=None) -> None:
    raise AssertionError("a finished job ran")


def _fail(word: str, options=None) -> None:
    raise ValueError(f"bad input {word!r}")


def _spans(path) -> dict:
    out: dict = {}
    for line in path.read_text().splitlines():
        what, key, t = line.split()
        out.setdefault(key, {})[what] = float(t)
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_a_job_starts_after_the_jobs_it_needs(workers, tmp_path):
    spans = tmp_path / "spans.txt"
    jobs = [
        Job("c", _log_span, (str(spans), "c", 0.05), needs=("a", "b")),
        Job("a", _log_span, (str(spans), "a", 0.3, "b" if workers == 2 else None)),
        Job("b", _log_span, (str(spans), "b", 0.05)),
        Job("d", _log_span, (str(spans), "d", 0.05), needs=("b",)),
    ]
    messages: list[str] = []
    results = run_jobs(jobs, options=RunOptions(progress=False, log=messages.append), workers=workers)
    assert results == {"a": "aa", "b": "bb", "c": "cc", "d": "dd"}
    t = _spans(spans)
    assert t["c"]["start"] >= max(t["a"]["end"], t["b"]["end"])
    assert t["d"]["start"] >= t["b"]["end"]
    assert sum(m.endswith(": training") for m in messages) == 4
    assert sorted(m for m in messages if m.startswith("span")) == ["span a", "span b", "span c", "span d"]
    if workers == 2:  # a and b are independent: they overlap in time, and each job reports its duration
        assert t["b"]["start"] < t["a"]["end"]
        assert sum("finished in" in m for m in messages) == 4


def test_finished_runs_are_skipped_and_said_so():
    done = lambda: UnitState.FRESH  # noqa: E731
    jobs = [Job("a", _refuse, label="run a", state=done), Job("b", _refuse, needs=("a",), state=done)]
    messages: list[str] = []
    assert run_jobs(jobs, options=RunOptions(progress=False, log=messages.append), workers=2) == {"a": None, "b": None}
    assert messages == ["run a: done, reused", "b: done, reused"]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_jobs_error_reaches_the_caller(workers, tmp_path):
    spans = tmp_path / "spans.txt"
    jobs = [Job("bad", _fail, ("x",)), Job("after", _log_span, (str(spans), "after", 0.0), needs=("bad",))]
    with pytest.raises(ValueError, match="bad input 'x'"):
        run_jobs(jobs, options=RunOptions(progress=False), workers=workers)
    assert not spans.exists()  # what needed the failed job never started


def test_bad_job_lists_are_refused():
    with pytest.raises(ValueError, match="distinct"):
        run_jobs([Job("a", _refuse), Job("a", _refuse)])
    with pytest.raises(ValueError, match="unknown job"):
        run_jobs([Job("a", _refuse, needs=("z",))])
    for workers in (1, 2):
        with pytest.raises(ValueError, match="wait on each other"):
            run_jobs([Job("a", _refuse, needs=("b",)), Job("b", _refuse, needs=("a",))], workers=workers)


@pytest.mark.parametrize("workers", [1, 2])
def test_jobs_that_wait_on_each_other_are_refused_before_any_job_runs(workers, tmp_path):
    """A cycle is found before the pool starts, not after every other job has run."""
    spans = tmp_path / "spans.txt"
    jobs = [
        Job("free", _log_span, (str(spans), "free", 0.0)),
        Job("a", _refuse, needs=("c",)),
        Job("b", _refuse, needs=("a",)),
        Job("c", _refuse, needs=("b",)),
    ]
    with pytest.raises(ValueError, match=r"^jobs wait on each other: "):
        run_jobs(jobs, workers=workers, options=RunOptions(progress=False))
    assert not spans.exists()


def test_default_jobs_one_per_core_on_the_cpu_only():
    assert default_jobs("cpu", 1) == 1
    assert 1 <= default_jobs("cpu", 100) <= 100
    assert default_jobs(None, 3) == min(3, default_jobs("cpu", 3))
    assert default_jobs("meta", 100) == 1  # an accelerator-like device: one process


def test_a_ladder_on_two_processes_equals_one_process(tmp_path):
    """SFT, derived table policies and every rung's runs on a 2-process pool give the one-process files, byte for
    byte (one intra-op thread each)."""
    ladder = tiny_ladders()["ladder-budget"]
    one = run_ladder(ladder, tmp_path / "one", RunOptions(progress=False, jobs=1))
    two = run_ladder(ladder, tmp_path / "two", RunOptions(progress=False, jobs=2))
    pd.testing.assert_frame_equal(one.history, two.history)
    pd.testing.assert_frame_equal(one.final, two.final)
    names = [cfg.name for _, sweep in ladder.sweeps() for _, _, cfg in sweep.runs()]
    assert len(names) == 6
    for name in names:
        for file in ("history.csv", "config.toml"):
            assert (tmp_path / "one" / name / file).read_bytes() == (tmp_path / "two" / name / file).read_bytes()


def test_a_free_process_takes_the_first_ready_job_in_list_order(tmp_path):
    """No queue: when a process frees up it takes the first ready job of the list, so a job that others wait on (or
    that became ready late) is not stuck behind fillers submitted earlier."""
    spans = tmp_path / "spans.txt"
    # "long" holds its process until "late" has started, so a process frees up for "filler" only after the pool
    # chose "late": were the order wrong, "filler" would start first (and "long" wait out its 60 s) however slowly a
    # loaded machine starts the processes
    jobs = [
        Job("long", _log_span, (str(spans), "long", 0.6, "late")),
        Job("short", _log_span, (str(spans), "short", 0.1)),
        Job("late", _log_span, (str(spans), "late", 0.05), needs=("short",)),
        Job("filler", _log_span, (str(spans), "filler", 0.05)),
    ]
    run_jobs(jobs, workers=2, options=RunOptions(progress=False))
    t = _spans(spans)
    assert t["late"]["start"] < t["filler"]["start"]


def test_phases_and_jobs_are_timed_into_the_file_named_by_the_environment(tmp_path, monkeypatch):
    import json

    from tailmiss.experiments.pool import TIMINGS_ENV, phase

    with phase("nothing"):  # unset: nothing is written anywhere
        pass
    out = tmp_path / "timings.jsonl"
    monkeypatch.setenv(TIMINGS_ENV, str(out))
    spans = tmp_path / "spans.txt"
    with phase("pool", quick=True):
        run_jobs(
            [Job("a", _log_span, (str(spans), "a", 0.05), label="run a"), Job("b", _log_span, (str(spans), "b", 0.05))],
            workers=2,
            options=RunOptions(progress=False),
        )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    jobs = sorted((r for r in records if r["phase"] == "job"), key=lambda r: r["label"])
    assert [(r["label"], r["worker"]) for r in jobs] == [("b", True), ("run a", True)]
    (pool,) = [r for r in records if r["phase"] == "pool"]
    assert pool["quick"] is True and pool["start"] <= min(r["start"] for r in jobs)
    for r in records:
        assert r["wall_s"] >= 0 and r["cpu_s"] >= 0 and r["peak_rss_mb"] > 0 and r["end"] >= r["start"]
    assert pool["cpu_s"] >= sum(r["cpu_s"] for r in jobs) * 0.5  # the workers' CPU, reaped inside the phase
