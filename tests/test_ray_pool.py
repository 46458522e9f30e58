"""The pool on Ray: the same runs bit for bit, needs respected, a real error raised once, a lost node survived."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import tiny_ladders, tiny_llm_sweeps

from tailmiss.experiments.pool import Job, run_jobs
from tailmiss.options import RunOptions

ray = pytest.importorskip("ray", reason="the Ray executor's tests need Ray: pip install -e '.[ray]'")

pytestmark = pytest.mark.usefixtures("one_torch_thread")

_HERE = str(Path(__file__).resolve().parent)


def _local_ray(cpus: int) -> None:
    """A Ray on this machine whose workers can import this test module (its job functions live here)."""
    path = os.pathsep.join(p for p in (_HERE, os.environ.get("PYTHONPATH")) if p)
    ray.init(
        address="local",
        num_cpus=cpus,
        include_dashboard=False,
        logging_level="warning",
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )


_OURS = {"up": False}
"""Whether the Ray of this process is :func:`_local_ray`'s (a test with ``no_ray`` may have ended it)."""


@pytest.fixture(scope="module", autouse=True)
def _no_ray_after_the_module():
    yield
    ray.shutdown()


@pytest.fixture
def no_ray():
    """No Ray in this process before or after the test (a test that starts one has it shut down)."""
    ray.shutdown()
    _OURS["up"] = False
    yield
    ray.shutdown()


@pytest.fixture
def two_cpus():
    """A local Ray with 2 CPUs whose workers import this module, started once and kept for the next such test."""
    if not (ray.is_initialized() and _OURS["up"]):
        ray.shutdown()
        _local_ray(2)
        _OURS["up"] = True
    yield


def _mark(path: str, key: str, seconds: float = 0.0, options=None) -> str:
    """A job: append ``start key``, sleep ``seconds``, append ``end key``; return the key twice."""
    options.say(f"mark {key}")
    with open(path, "a") as fh:
        fh.write(f"start {key} {time.time()!r}\n")
    time.sleep(seconds)
    with open(path, "a") as fh:
        fh.write(f"end {key} {time.time()!r}\n")
    return key * 2


def _fail(path: str, options=None) -> None:
    with open(path, "a") as fh:
        fh.write("fail\n")
    raise ValueError("bad config: lr must be > 0, got -1")


def _times(path: Path) -> dict:
    out: dict = {}
    for line in path.read_text().splitlines():
        what, key, t = line.split()
        out.setdefault(key, {})[what] = float(t)
    return out


RAY = RunOptions(progress=False, executor="ray")


def test_a_ladder_on_ray_equals_the_local_pool_byte_for_byte(no_ray, tmp_path):
    """SFT, derived table policies and every rung's runs as Ray tasks (a local Ray started for the pool, 2 CPUs)
    give the local pool's files byte for byte, and the ladder's frames equal."""
    ladder = tiny_ladders()["ladder-budget"]
    local = run_ladder_here(ladder, tmp_path / "local", RunOptions(progress=False, jobs=2))
    lines: list[str] = []
    on_ray = run_ladder_here(ladder, tmp_path / "ray", RAY.replace(jobs=2, log=lines.append))
    assert ray.is_initialized() and ray.cluster_resources()["CPU"] == 2
    assert "ray: started a local Ray with 2 CPU(s) for this command" in lines
    assert any(" finished in " in line and " s on " in line for line in lines)
    pd.testing.assert_frame_equal(local.history, on_ray.history)
    pd.testing.assert_frame_equal(local.final, on_ray.final)
    names = [cfg.name for _, sweep in ladder.sweeps() for _, _, cfg in sweep.runs()]
    for name in names:
        for file in ("history.csv", "config.toml"):
            assert (tmp_path / "local" / name / file).read_bytes() == (tmp_path / "ray" / name / file).read_bytes()


def run_ladder_here(ladder, root, options):
    from tailmiss.experiments.ladder import run_ladder

    return run_ladder(ladder, root, options)


def test_a_sweep_on_ray_equals_the_local_pool_and_a_rerun_reuses_every_run(no_ray, tmp_path, monkeypatch):
    from tailmiss.experiments.sweep import run_sweep

    sweep = tiny_llm_sweeps()["nsweep"]
    local = run_sweep(sweep, tmp_path / "local", RunOptions(progress=False, jobs=2))
    on_ray = run_sweep(sweep, tmp_path / "ray", RAY.replace(jobs=2))
    pd.testing.assert_frame_equal(local.final, on_ray.final)
    pd.testing.assert_frame_equal(local.history, on_ray.history)
    for _, _, cfg in sweep.runs():
        for file in ("history.csv", "config.toml"):
            assert (tmp_path / "local" / cfg.name / file).read_bytes() == (
                tmp_path / "ray" / cfg.name / file
            ).read_bytes()
    # the result folder gone, every run is found done and reused without a task
    import shutil

    shutil.rmtree(tmp_path / "ray" / sweep.name)
    ray.shutdown()
    lines: list[str] = []
    again = run_sweep(sweep, tmp_path / "ray", RAY.replace(jobs=2, log=lines.append))
    assert sum(line.endswith(": done, reused") for line in lines) == len(sweep.runs()) + 1  # the runs and the SFT
    assert not any(" finished in " in line for line in lines)
    assert not ray.is_initialized()  # nothing to train: no Ray started
    pd.testing.assert_frame_equal(again.final, local.final)


def test_on_ray_a_job_starts_after_the_jobs_it_needs(two_cpus, tmp_path):
    marks = tmp_path / "marks.txt"
    jobs = [
        Job("c", _mark, (str(marks), "c"), needs=("a", "b")),
        Job("a", _mark, (str(marks), "a", 0.3)),
        Job("b", _mark, (str(marks), "b")),
        Job("d", _mark, (str(marks), "d"), needs=("b",)),
    ]
    lines: list[str] = []
    results = run_jobs(jobs, workers=2, options=RAY.replace(log=lines.append))
    assert results == {"a": "aa", "b": "bb", "c": "cc", "d": "dd"}
    t = _times(marks)
    assert t["c"]["start"] >= max(t["a"]["end"], t["b"]["end"])
    assert t["d"]["start"] >= t["b"]["end"]
    assert "mark a" in lines and "a: training" in lines


def test_on_ray_a_job_that_raises_fails_once_with_its_message_and_the_others_are_cancelled(two_cpus, tmp_path):
    marks, fails = tmp_path / "marks.txt", tmp_path / "fails.txt"
    jobs = [
        Job("slow", _mark, (str(marks), "slow", 60.0)),
        Job("bad", _fail, (str(fails),)),
        Job("after", _mark, (str(marks), "after"), needs=("bad",)),
    ]
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"^bad config: lr must be > 0, got -1$"):
        run_jobs(jobs, workers=2, options=RAY)
    assert time.monotonic() - started < 30  # the 60-s job was not waited for
    assert fails.read_text() == "fail\n"  # not retried
    time.sleep(1.0)
    t = _times(marks) if marks.exists() else {}
    assert "after" not in t and "end" not in t.get("slow", {})  # the job that needs it never ran; the slow one killed


def test_ctrl_c_on_the_driver_cancels_the_commands_tasks(two_cpus, tmp_path):
    marks = tmp_path / "marks.txt"

    def interrupt(line: str) -> None:
        if line.startswith("quick: finished"):
            raise KeyboardInterrupt

    jobs = [Job("slow", _mark, (str(marks), "slow", 60.0)), Job("quick", _mark, (str(marks), "quick", 0.5))]
    with pytest.raises(KeyboardInterrupt):
        run_jobs(jobs, workers=2, options=RAY.replace(log=interrupt))
    time.sleep(1.0)
    assert "end" not in _times(marks)["slow"]
    # the cluster is free again: a new pool runs at once
    assert run_jobs([Job("next", _mark, (str(marks), "next"))], workers=2, options=RAY) == {"next": "nextnext"}


def test_timing_lines_name_the_node_that_ran_each_job(two_cpus, tmp_path, monkeypatch):
    import json
    import socket

    from tailmiss.experiments.pool import TIMINGS_ENV

    out = tmp_path / "timings.jsonl"
    monkeypatch.setenv(TIMINGS_ENV, str(out))
    marks = tmp_path / "marks.txt"
    run_jobs([Job("a", _mark, (str(marks), "a"), label="run a")], workers=2, options=RAY)
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["phase"] == "job" and record["label"] == "run a" and record["executor"] == "ray"
    assert record["node"].startswith(socket.gethostname() + " (")
    assert record["wall_s"] >= 0 and record["cpu_s"] >= 0


def test_jobs_that_wait_on_each_other_are_refused_before_any_task(no_ray):
    from tailmiss.experiments.jobs import job_order

    with pytest.raises(ValueError, match="jobs wait on each other"):
        job_order([Job("a", _fail, needs=("b",)), Job("b", _fail, needs=("a",))])
    assert not ray.is_initialized()
    jobs = [Job("c", _fail, needs=("a",)), Job("a", _fail), Job("b", _fail), Job("d", _fail, needs=("c",))]
    assert [j.key for j in job_order(jobs)] == ["a", "b", "c", "d"]


def _watch_and_remove(cluster, node, folders: list[Path], seen: dict, deadline_s: float = 120.0) -> None:
    """Remove ``node`` from ``cluster`` once every run folder in ``folders`` holds a checkpoint but is not finished
    (each run is in flight, one of them on ``node``)."""
    from tailmiss.llm.checkpoint import CHECKPOINT

    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if all((f / CHECKPOINT).is_file() and not (f / "meta.json").exists() for f in folders):
            cluster.remove_node(node, allow_graceful=False)
            seen["removed"] = True
            return
        if any((f / "meta.json").exists() for f in folders):
            seen["late"] = True  # a run finished before the other had a checkpoint: nothing was cut
            return
        time.sleep(0.01)


def test_a_sweep_survives_a_node_lost_mid_run_and_the_lost_run_resumes(no_ray, tmp_path):
    """Two RL runs in flight on a two-node Ray cluster (one CPU each); one node is removed once both runs have a
    checkpoint: the sweep completes, the lost run is retried on the other node and resumes from its checkpoint, and
    every run and the result equal an uninterrupted local sweep's byte for byte."""
    from ray.cluster_utils import Cluster

    from tailmiss.experiments.cached import run_state
    from tailmiss.experiments.sweep import Variant, run_sweep

    tiny = tiny_llm_sweeps()["nsweep"]
    sweep = tiny.replace(
        variants=(Variant("grpo", 0.0, 2), Variant("grpo", 0.0, 4)),
        seeds=(0,),
        rl=tiny.rl.replace(steps=400, checkpoint_every=5, eval_every=200),
    )
    local = run_sweep(sweep, tmp_path / "local", RunOptions(progress=False))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        doomed = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level="warning")
        root = tmp_path / "ray"
        runs = [cfg for _, _, cfg in sweep.runs()]
        seen: dict = {}
        watcher = threading.Thread(
            target=_watch_and_remove, args=(cluster, doomed, [root / c.name for c in runs], seen)
        )
        watcher.start()
        lines: list[str] = []
        try:
            result = run_sweep(sweep, root, RAY.replace(log=lines.append))
        finally:
            watcher.join()
        assert seen == {"removed": True}, seen
        assert sum(line.endswith(": resuming") for line in lines) == 1, lines
        # the resumed run ended on the node that was kept
        (resumed,) = [line.split(": resuming")[0] for line in lines if line.endswith(": resuming")]
        (ended,) = [line for line in lines if line.startswith(resumed + ": finished in ")]
        assert ended.endswith(f"({cluster.head_node.node_id[:8]})"), ended
        pd.testing.assert_frame_equal(result.final, local.final)
        for cfg in runs:
            assert run_state(root / cfg.name, cfg, root / sweep.sft.name) == "fresh"
            for file in ("history.csv", "config.toml"):
                assert (root / cfg.name / file).read_bytes() == (tmp_path / "local" / cfg.name / file).read_bytes()
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_llm_sweep_on_ray_from_the_command_line_with_a_relative_root(no_ray, tmp_path, monkeypatch):
    """``tailmiss llm sweep --executor ray``: the tasks write under the command's own relative ``--root`` (they move
    to its folder), print each job's end with its node, and the result equals the local pool's."""
    from typer.testing import CliRunner

    from tailmiss.cli import app
    from tailmiss.experiments.sweep import SweepResult

    sweep = tiny_llm_sweeps()["nsweep"]
    monkeypatch.chdir(tmp_path)
    sweep.to_toml(tmp_path / "sweep.toml")
    runner = CliRunner(env={"COLUMNS": "200"})
    base = ["llm", "sweep", "--config", "sweep.toml", "--no-progress", "--jobs", "2"]
    ray_run = runner.invoke(app, [*base, "--root", "on-ray", "--executor", "ray"])
    assert ray_run.exit_code == 0, ray_run.output
    assert "ray: started a local Ray with 2 CPU(s) for this command" in ray_run.stdout
    assert ray_run.stdout.count(" s on ") == len(sweep.runs()) + 1
    local_run = runner.invoke(app, [*base, "--root", "local"])
    assert local_run.exit_code == 0, local_run.output
    on_ray = SweepResult.load(tmp_path / "on-ray" / sweep.name)
    local = SweepResult.load(tmp_path / "local" / sweep.name)
    pd.testing.assert_frame_equal(on_ray.final, local.final)


@pytest.mark.slow
def test_the_quick_report_on_ray_equals_the_local_pools(no_ray, tmp_path, monkeypatch):
    """``tailmiss repro --quick --executor ray`` writes the report that ``--executor local`` writes but for the
    measured times and its own path; the stamps are equal and so is every run file (about 3 min on 2 cores)."""
    import json
    import re

    from typer.testing import CliRunner

    from tailmiss.cli import app

    monkeypatch.chdir(tmp_path)
    runner = CliRunner(env={"COLUMNS": "200"})
    for executor in ("local", "ray"):
        args = ["repro", "--quick", "--no-progress", "--jobs", "2", "--executor", executor]
        result = runner.invoke(app, [*args, "--out", f"{executor}/paper_repro.md", "--cache", f"{executor}/sim"])
        assert result.exit_code == 0, result.output

    def text(executor: str) -> str:
        report = (tmp_path / executor / "paper_repro.md").read_text().replace(f"{executor}/", "OUT/")
        return re.sub(r"\d+(\.\d+)? (s|min)\b", "T", report)  # measured times

    assert text("local") == text("ray")
    stamps = [json.loads((tmp_path / e / "paper_repro.stamps.json").read_text()) for e in ("local", "ray")]
    assert stamps[0] == stamps[1]
    files = sorted(p.relative_to(tmp_path / "local" / "llm") for p in (tmp_path / "local" / "llm").rglob("*.csv"))
    assert len(files) > 50
    for rel in files:
        assert (tmp_path / "local" / "llm" / rel).read_bytes() == (tmp_path / "ray" / "llm" / rel).read_bytes(), rel


def test_a_node_that_does_not_see_the_commands_folder_fails_once_with_a_message(two_cpus, tmp_path, monkeypatch):
    """The store must be shared: a task whose node lacks the command's folder says so (and is not retried)."""
    marks = tmp_path / "marks.txt"
    monkeypatch.setattr(os, "getcwd", lambda: str(tmp_path / "not-mounted-here"))  # the command's folder, elsewhere
    with pytest.raises(ValueError, match=r"does not see the folder .*not-mounted-here.* every node mounts"):
        run_jobs([Job("a", _mark, (str(marks), "a"))], workers=2, options=RAY)
    assert not marks.exists()
