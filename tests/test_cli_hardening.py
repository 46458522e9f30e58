"""The CLI at its edges: destinations checked before any work, unreadable inputs, Ctrl-C, stale caches."""

from __future__ import annotations

import os

import pytest
from conftest import one_error_line
from typer.testing import CliRunner

from tailmiss import store
from tailmiss.cli import app

TINY_SIM = """
[sim]
name = "tiny"
num_actions = 256
num_correct = 16
group_sizes = [2, 8]
gammas = [0.0, 1.0]
seeds = [0]
steps = 6
log_every = 2
"""

# The full fgrpo-fig2 sweep runs for minutes: each refusal below must come before any of it.
HEAVY = ["sim", "run", "--preset", "fgrpo-fig2", "--device", "cpu", "--no-progress"]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"COLUMNS": "200"})


def test_sim_run_refuses_a_file_as_out_before_any_work(runner, tmp_path):
    (tmp_path / "taken").write_text("x")
    one_error_line(runner.invoke(app, [*HEAVY, "--out", str(tmp_path / "taken")]), "is a file")


def test_sim_run_refuses_a_foreign_folder_before_any_work(runner, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    one_error_line(runner.invoke(app, [*HEAVY, "--out", str(tmp_path / "mine")]), "not an earlier")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


def test_sim_run_refuses_an_out_below_a_file_before_any_work(runner, tmp_path):
    (tmp_path / "file").write_text("x")
    one_error_line(runner.invoke(app, [*HEAVY, "--out", str(tmp_path / "file" / "r")]), "is a file")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a non-root POSIX user")
def test_sim_run_refuses_a_read_only_place_before_any_work(runner, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        one_error_line(runner.invoke(app, [*HEAVY, "--out", str(locked / "r")]), "not writable")
    finally:
        locked.chmod(0o700)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a non-root POSIX user")
def test_an_unreadable_config_is_one_line(runner, tmp_path):
    cfg = tmp_path / "secret.toml"
    cfg.write_text(TINY_SIM)
    cfg.chmod(0)
    try:
        one_error_line(runner.invoke(app, ["sim", "run", "--config", str(cfg)]), "secret.toml")
    finally:
        cfg.chmod(0o600)


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda p: p.mkdir(), "is a folder"),
        (lambda p: p.write_bytes(b"\xff\xfe\x00name"), "not UTF-8"),
        (lambda p: p.write_text(""), "no settings"),
        (lambda p: p.write_text("[sim]\n"), "no settings"),
    ],
    ids=["folder", "binary", "empty", "empty-table"],
)
def test_unusable_config_files_are_one_line(runner, tmp_path, make, needle):
    cfg = tmp_path / "c.toml"
    make(cfg)
    one_error_line(runner.invoke(app, ["sim", "run", "--config", str(cfg), "--out", str(tmp_path / "r")]), needle)
    assert not (tmp_path / "r").exists()


def test_figures_make_refuses_a_file_as_out(runner, tmp_path):
    (tmp_path / "f").write_text("x")
    one_error_line(runner.invoke(app, ["figures", "make", "fig3", "--out", str(tmp_path / "f")]), "--out")


def test_repro_refuses_a_folder_as_out_before_any_work(runner, tmp_path):
    one_error_line(runner.invoke(app, ["repro", "--out", str(tmp_path)]), "is a folder")


def test_repro_refuses_a_file_as_cache_before_any_work(runner, tmp_path):
    (tmp_path / "cache").write_text("x")
    args = ["repro", "--out", str(tmp_path / "r.md"), "--cache", str(tmp_path / "cache")]
    one_error_line(runner.invoke(app, args), "--cache")


def test_llm_sweep_refuses_a_file_as_root(runner, tmp_path):
    (tmp_path / "root").write_text("x")
    args = ["llm", "sweep", "--preset", "multisolution-nsweep", "--root", str(tmp_path / "root")]
    one_error_line(runner.invoke(app, args), "--root")


@pytest.mark.parametrize("value", ["0", "-3", "x"])
def test_checkpoint_every_must_be_positive(runner, tmp_path, value):
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY_SIM)
    one_error_line(runner.invoke(app, ["sim", "run", "--config", str(cfg), "--checkpoint-every", value]))


def test_ctrl_c_is_one_line_with_exit_130(runner, tmp_path, monkeypatch):
    from tailmiss.sim import runner as sim_runner

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sim_runner, "simulate", interrupted)
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY_SIM)
    result = runner.invoke(app, ["sim", "run", "--config", str(cfg), "--out", str(tmp_path / "r"), "--no-progress"])
    one_error_line(result, "interrupted", code=130)
    assert not (tmp_path / "r").exists()


def test_sim_run_reuses_then_refuses_stale_results_unless_asked(runner, tmp_path, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY_SIM)
    args = ["sim", "run", "--config", str(cfg), "--out", str(tmp_path / "r"), "--no-progress"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and "reusing" in again.stderr
    monkeypatch.setattr(store, "code_fingerprint", lambda scope="bridge": "0" * 16)
    stale = runner.invoke(app, [*args, "--reuse-stale"])
    assert stale.exit_code == 0 and "warning: reusing the stale SimResult" in stale.stderr
    redo = runner.invoke(app, args)
    assert redo.exit_code == 0 and "stale" in redo.stderr and "redoing" in redo.stderr
    rerun = runner.invoke(app, [*args, "--rerun"])
    assert rerun.exit_code == 0 and "reusing" not in rerun.stderr


def test_a_read_only_place_is_refused_before_any_work_even_for_root(runner, tmp_path, monkeypatch):
    """root may write anywhere, so the permission check is exercised by denying access to one folder."""
    import tailmiss.io as tio

    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(
        tio.os, "access", lambda p, mode: False if os.fspath(p) == str(locked) else real_access(p, mode)
    )
    one_error_line(runner.invoke(app, [*HEAVY, "--out", str(locked / "r")]), "not writable")
    one_error_line(runner.invoke(app, ["figures", "make", "fig3", "--out", str(locked / "figs")]), "not writable")
    one_error_line(runner.invoke(app, ["repro", "--out", str(locked / "report.md")]), "not writable")
    assert list(locked.iterdir()) == []


@pytest.mark.parametrize("args", [["figures", "make", "fig3"], ["repro", "--quick"]], ids=["figures", "repro"])
def test_commands_that_run_in_one_process_refuse_torchrun(runner, tmp_path, monkeypatch, args):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.chdir(tmp_path)
    one_error_line(runner.invoke(app, args), "under torchrun")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["analytic", "tail-miss", "--mu-pos", "0.5", "--tau", "0.1", "-n", "8"], 0),
        (["analytic", "tail-miss", "--mu-pos", "0.5", "--tau", "0.9", "-n", "8"], 2),  # tau > mu_pos
        (["repro", "--quick"], 2),  # refused under torchrun before any work
    ],
)
def test_main_under_torchrun_ends_with_os_exit_and_the_commands_code(monkeypatch, capsys, args, code):
    """Under torchrun, main() skips the interpreter's teardown (os._exit) but keeps the command's exit code."""
    import tailmiss.cli as cli

    class Exited(Exception):
        pass

    def fake_exit(value):
        raise Exited(value)

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(cli.sys, "argv", ["tailmiss", *args])
    monkeypatch.setattr(cli.os, "_exit", fake_exit)
    with pytest.raises(Exited) as got:
        cli.main()
    assert got.value.args == (code,)
    err = capsys.readouterr().err
    assert (err.count("Error:") == 1) == (code == 2)


def test_main_in_one_process_exits_through_sys_exit(monkeypatch):
    import tailmiss.cli as cli

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    argv = ["tailmiss", "analytic", "tail-miss", "--mu-pos", "0.5", "--tau", "2", "-n", "8"]
    monkeypatch.setattr(cli.sys, "argv", argv)
    monkeypatch.setattr(cli.os, "_exit", lambda code: pytest.fail("os._exit outside torchrun"))
    with pytest.raises(SystemExit) as got:
        cli.main()
    assert got.value.code == 2


def test_repro_every_section_needs_quick(runner, tmp_path):
    one_error_line(runner.invoke(app, ["repro", "--every-section", "--out", str(tmp_path / "r.md")]), "--quick")
