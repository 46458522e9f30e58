"""``--executor`` and ``--ray-address`` on the commands that train through the pool: bad input is one line, before
any work, with or without Ray installed."""

from __future__ import annotations

import importlib.util

import pytest
from conftest import one_error_line
from typer.testing import CliRunner

from tailmiss.cli import app
from tailmiss.options import RunOptions

COMMANDS = {
    "llm sweep": ["llm", "sweep", "--preset", "multisolution-nsweep", "--quick"],
    "figures make": ["figures", "make", "fig5", "--quick"],
    "repro": ["repro", "--quick"],
}


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"COLUMNS": "200"})


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--executor", "spark"], "--executor must be one of 'local', 'ray', got 'spark'"),
        (["--ray-address", "10.0.0.1:6379"], "--ray-address '10.0.0.1:6379' goes with --executor ray"),
    ],
)
def test_a_bad_executor_setting_is_one_line_before_any_work(runner, tmp_path, monkeypatch, command, args, needle):
    monkeypatch.chdir(tmp_path)
    one_error_line(runner.invoke(app, [*COMMANDS[command], *args]), needle)
    assert list(tmp_path.iterdir()) == []  # nothing trained, nothing written


@pytest.mark.parametrize("command", list(COMMANDS))
def test_executor_ray_without_ray_installed_says_how_to_install_it(runner, tmp_path, monkeypatch, command):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    monkeypatch.chdir(tmp_path)
    one_error_line(runner.invoke(app, [*COMMANDS[command], "--executor", "ray"]), "pip install 'tailmiss[ray]'")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray (pip install -e '.[ray]')")
def test_jobs_beside_a_ray_cluster_is_refused(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [*COMMANDS["llm sweep"], "--executor", "ray", "--jobs", "4"]
    one_error_line(runner.invoke(app, [*args, "--ray-address", "10.0.0.1:6379"]), "--jobs 4 sets the CPUs")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.2:6379")
    one_error_line(runner.invoke(app, args), "the cluster at '10.0.0.2:6379'")
    assert list(tmp_path.iterdir()) == []


def test_run_options_check_the_executor():
    assert RunOptions(executor="ray", ray_address="auto").ray_address == "auto"
    with pytest.raises(ValueError, match="executor must be one of 'local', 'ray', got 'dask'"):
        RunOptions(executor="dask")
    with pytest.raises(ValueError, match="ray_address 'auto' needs executor='ray', got 'local'"):
        RunOptions(ray_address="auto")
    with pytest.raises(ValueError, match="ray_address must be a non-empty string"):
        RunOptions(executor="ray", ray_address=" ")


def test_without_ray_the_local_pool_still_runs_and_ray_pool_says_what_is_missing(monkeypatch):
    import sys

    from tailmiss.experiments.pool import Job, run_jobs
    from tailmiss.experiments.ray_pool import run_on_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now fails
    with pytest.raises(ValueError, match=r"needs Ray: pip install 'tailmiss\[ray\]'"):
        run_on_ray([Job("a", _twice, (1,))], 1, RunOptions(executor="ray", progress=False))
    assert run_jobs([Job("a", _twice, (1,))], options=RunOptions(progress=False)) == {"a": 2}


def _twice(x, options=None):
    return 2 * x


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_stack_below_one_is_one_line_before_any_work(runner, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    one_error_line(runner.invoke(app, [*COMMANDS[command], "--stack", "0"]), "Invalid value for '--stack'")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("command", "target"), [("llm sweep", "tailmiss.experiments.sweep.run_sweep"),
                                                 ("repro", "tailmiss.studies.context.Context")])  # fmt: skip
@pytest.mark.parametrize("stack", [None, 1, 6])
def test_stack_reaches_the_pools_run_options(runner, tmp_path, monkeypatch, command, target, stack):
    """``--stack K`` is ``RunOptions.stack``; without it the pool picks (1 on the CPU, see RunOptions)."""
    seen = []

    def capture(*args, options=None, **kw):
        seen.append(options if options is not None else args[-1])
        raise ValueError("captured")

    monkeypatch.setattr(target, capture)
    monkeypatch.chdir(tmp_path)
    extra = [] if stack is None else ["--stack", str(stack)]
    one_error_line(runner.invoke(app, [*COMMANDS[command], "--no-progress", *extra]), "captured")
    assert len(seen) == 1 and isinstance(seen[0], RunOptions) and seen[0].stack == stack
