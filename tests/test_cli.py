"""Tests of the ``tailmiss`` command line (:mod:`tailmiss.cli`).

Every command runs in-process through typer's ``CliRunner``. Rich sizes its
tables from the ``COLUMNS`` environment variable at print time, so the runner
pins a wide terminal to keep the table tests independent of the caller's
terminal (the 80-column behaviour has its own test).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from tailmiss.cli import app
from tailmiss.report.registry import FIGURES
from tailmiss.sim import PRESETS, SimResult

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

TINY_TOML = """\
[sim]
name = "tiny"
num_actions = 500
num_correct = 50
group_sizes = [2, 16]
gammas = [0.0, 1.0]
seeds = [0]
steps = 5
log_every = 1
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"COLUMNS": "200"})


def _ok(result):
    assert result.exit_code == 0, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result


def _json(result) -> list[dict]:
    return json.loads(_ok(result).stdout)


def _assert_usage_error(result, *needles: str) -> str:
    """Exit code 2, one ``Error: ...`` line on stderr naming the problem, no traceback anywhere."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    (line,) = lines
    assert line.startswith("Error:"), line
    assert len(line) > len("Error: "), line
    for needle in needles:
        assert needle.lower() in line.lower(), (needle, line)
    for text in (result.output, result.stdout, result.stderr):
        assert "Traceback" not in text
    return line


# --- help ---------------------------------------------------------------------------


def test_help_lists_sub_apps(runner):
    out = _ok(runner.invoke(app, ["--help"])).stdout
    for name in ("analytic", "sim", "figures", "repro"):
        assert name in out


@pytest.mark.parametrize("sub", ["analytic", "sim", "figures", "repro"])
def test_sub_app_help(runner, sub):
    out = _ok(runner.invoke(app, [sub, "--help"])).stdout
    assert "Usage" in out


@pytest.mark.parametrize("sub", ["analytic", "sim", "figures"])
def test_sub_app_without_command_shows_help(runner, sub):
    out = _ok(runner.invoke(app, [sub])).stdout
    assert "Usage" in out


def test_no_arguments_shows_help(runner):
    out = _ok(runner.invoke(app, [])).stdout
    assert "Usage" in out and "analytic" in out


@pytest.mark.parametrize(
    "args",
    [
        ["analytic", "tail-miss", "--help"],
        ["analytic", "peak", "--help"],
        ["analytic", "pass-at-k", "--help"],
        ["sim", "presets", "--help"],
        ["sim", "run", "--help"],
        ["figures", "list", "--help"],
        ["figures", "make", "--help"],
    ],
)
def test_command_help(runner, args):
    assert "Usage" in _ok(runner.invoke(app, args)).stdout


# --- analytic -------------------------------------------------------------------------

TAIL_MISS_ARGS = ["analytic", "tail-miss", "--mu-pos", "0.64", "--tau", "6.3e-5", "-n", "2", "-n", "8", "-n", "131072"]


def test_tail_miss_json(runner):
    rows = _json(runner.invoke(app, [*TAIL_MISS_ARGS, "--json"]))
    assert [r["N"] for r in rows] == [2, 8, 131072]
    assert all(isinstance(r["N"], int) for r in rows)
    miss = [r["tail_miss"] for r in rows]
    np.testing.assert_allclose(miss[0], 0.460755, rtol=1e-3)
    assert miss[0] == pytest.approx(0.4608, abs=1e-4)
    np.testing.assert_allclose(miss[1], 0.97109, rtol=1e-4)
    np.testing.assert_allclose(miss[2], 2.59e-4, rtol=2e-3)
    np.testing.assert_allclose(rows[0]["active"], 1 - 0.64**2 - 0.36**2, rtol=1e-12)
    assert rows[2]["active"] == pytest.approx(1.0)
    assert all(0 <= r["tail_miss"] <= r["active"] <= 1 for r in rows)


def test_tail_miss_long_n_option(runner):
    rows = _json(
        runner.invoke(app, ["analytic", "tail-miss", "--mu-pos", "0.64", "--tau", "6.3e-5", "--n", "2", "--json"])
    )
    assert [r["N"] for r in rows] == [2]


def test_tail_miss_table(runner):
    out = _ok(runner.invoke(app, TAIL_MISS_ARGS)).stdout
    for n in ("2", "8", "131072"):
        assert f" {n} " in out
    assert "0.460755" in out
    assert "tail_miss" in out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


def test_peak_rho_json(runner):
    rows = _json(runner.invoke(app, ["analytic", "peak", "--mu-pos", "0.5", "--rho", "0.01", "--json"]))
    by_grid = {r["grid"]: r for r in rows}
    assert set(by_grid) == {"integer", "power of two"}
    integer = by_grid["integer"]
    assert integer["N*"] == 8 and isinstance(integer["N*"], int)
    assert integer["peak"] == pytest.approx(0.9532, abs=1e-4)
    pow2 = by_grid["power of two"]
    assert pow2["N*"] & (pow2["N*"] - 1) == 0  # a power of two
    assert pow2["peak"] <= integer["peak"] + 1e-12


def test_peak_tau_matches_rho(runner):
    by_rho = _json(runner.invoke(app, ["analytic", "peak", "--mu-pos", "0.5", "--rho", "0.01", "--json"]))
    by_tau = _json(runner.invoke(app, ["analytic", "peak", "--mu-pos", "0.5", "--tau", "0.005", "--json"]))
    assert by_tau[0]["N*"] == 8
    assert [r["N*"] for r in by_tau] == [r["N*"] for r in by_rho]
    np.testing.assert_allclose([r["peak"] for r in by_tau], [r["peak"] for r in by_rho], rtol=1e-12)


def test_peak_table(runner):
    out = _ok(runner.invoke(app, ["analytic", "peak", "--mu-pos", "0.5", "--rho", "0.01"])).stdout
    assert "integer" in out and "power of two" in out and "0.953182" in out


@pytest.mark.parametrize(
    "extra",
    [[], ["--rho", "0.01", "--tau", "0.005"]],
    ids=["neither", "both"],
)
def test_peak_needs_exactly_one_of_rho_and_tau(runner, extra):
    result = runner.invoke(app, ["analytic", "peak", "--mu-pos", "0.5", *extra])
    _assert_usage_error(result, "--rho", "--tau")


def test_pass_at_k_json(runner):
    rows = _json(runner.invoke(app, ["analytic", "pass-at-k", "-n", "1024", "-c", "10", "-k", "256", "--json"]))
    assert len(rows) == 1 and rows[0]["k"] == 256
    np.testing.assert_allclose(rows[0]["pass@k"], 0.944511, rtol=1e-6)


def test_pass_at_k_several_k(runner):
    rows = _json(runner.invoke(app, ["analytic", "pass-at-k", "-n", "10", "-c", "3", "-k", "1", "-k", "10", "--json"]))
    assert [r["k"] for r in rows] == [1, 10]
    assert rows[0]["pass@k"] == pytest.approx(0.3)
    assert rows[1]["pass@k"] == pytest.approx(1.0)


# --- bad input: one line on stderr, exit code 2 -----------------------------------------


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["analytic", "tail-miss", "--mu-pos", "0.5", "--tau", "0.5", "-n", "2"], ["tau"]),
        (["analytic", "tail-miss", "--mu-pos", "0.5", "--tau", "0.7", "-n", "2"], ["tau"]),
        (["analytic", "tail-miss", "--mu-pos", "0.5", "--tau", "0", "-n", "2"], ["tau"]),
        (["analytic", "tail-miss", "--mu-pos", "0.5", "--tau", "-0.1", "-n", "2"], ["tau"]),
        (["analytic", "tail-miss", "--mu-pos", "0.5", "--tau", "0.1", "-n", "0"], ["n"]),
        (["analytic", "tail-miss", "--mu-pos", "abc", "--tau", "0.1", "-n", "2"], ["--mu-pos"]),
        (["analytic", "tail-miss", "--mu-pos", "0.5", "--tau", "0.1", "-n", "two"], ["-n"]),
        (["analytic", "tail-miss", "--tau", "0.1", "-n", "2"], ["--mu-pos"]),
        (["analytic", "tail-miss", "--mu-pos", "0.5", "--tau", "0.1", "-n", "2", "--bogus"], ["--bogus"]),
        (["--bogus"], ["--bogus"]),
        (["nope"], ["nope"]),
        (["analytic", "peak", "--mu-pos", "0.5", "--rho", "1.5"], ["rho"]),
        (["analytic", "pass-at-k", "-n", "10", "-c", "11", "-k", "2"], ["c"]),
        (["figures", "make", "nope"], ["nope"]),
        (["figures", "make"], ["--all"]),
        (["figures", "make", "fig3", "--all"], ["--all"]),
        (["sim", "run"], ["--preset", "--config"]),
        (["sim", "run", "--preset", "nope"], ["nope"]),
    ],
    ids=[
        "tau-equals-mu",
        "tau-above-mu",
        "tau-zero",
        "tau-negative",
        "n-zero",
        "mu-not-a-number",
        "n-not-an-int",
        "missing-option",
        "unknown-option",
        "unknown-top-option",
        "unknown-command",
        "rho-above-one",
        "c-above-n",
        "unknown-figure",
        "no-figures",
        "names-and-all",
        "no-preset-no-config",
        "unknown-preset",
    ],
)
def test_bad_input_is_one_error_line(runner, args, needles):
    _assert_usage_error(runner.invoke(app, args), *needles)


def test_unknown_preset_lists_known(runner):
    line = _assert_usage_error(runner.invoke(app, ["sim", "run", "--preset", "nope"]))
    assert "fgrpo-fig2" in line


def test_unknown_figure_lists_known(runner):
    line = _assert_usage_error(runner.invoke(app, ["figures", "make", "nope"]))
    for name in FIGURES:
        assert name in line


def test_sim_run_missing_config(runner, tmp_path):
    missing = tmp_path / "missing.toml"
    _assert_usage_error(runner.invoke(app, ["sim", "run", "--config", str(missing)]), "missing.toml")


def test_sim_run_preset_and_config(runner, tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY_TOML)
    _assert_usage_error(runner.invoke(app, ["sim", "run", "--preset", "theory", "--config", str(cfg)]), "--preset")


def test_sim_run_config_unknown_key(runner, tmp_path):
    cfg = tmp_path / "unknown.toml"
    cfg.write_text("[sim]\nnum_actions = 500\nnum_corect = 50\n")
    _assert_usage_error(runner.invoke(app, ["sim", "run", "--config", str(cfg), "--no-progress"]), "num_corect")


def test_sim_run_config_unknown_top_level_key(runner, tmp_path):
    cfg = tmp_path / "top.toml"
    cfg.write_text("[sim]\nnum_actions = 500\n[extra]\nx = 1\n")
    _assert_usage_error(runner.invoke(app, ["sim", "run", "--config", str(cfg), "--no-progress"]), "extra")


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("lr = -1", "lr"),
        ("steps = 0", "steps"),
        ("group_sizes = []", "group_sizes"),
        ('optimizer = "rmsprop"', "optimizer"),
        ("num_correct = 600\nnum_actions = 500", "num_correct"),
    ],
    ids=["negative-lr", "zero-steps", "empty-group-sizes", "unknown-optimizer", "too-many-correct"],
)
def test_sim_run_config_invalid_value(runner, tmp_path, body, needle):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(f"[sim]\n{body}\n")
    _assert_usage_error(runner.invoke(app, ["sim", "run", "--config", str(cfg), "--no-progress"]), needle)


def test_sim_run_config_invalid_toml(runner, tmp_path):
    cfg = tmp_path / "broken.toml"
    cfg.write_text("[sim]\nlr = \n")
    _assert_usage_error(runner.invoke(app, ["sim", "run", "--config", str(cfg), "--no-progress"]), "broken.toml")


# --- sim --------------------------------------------------------------------------------


def test_sim_presets_lists_every_preset(runner):
    out = _ok(runner.invoke(app, ["sim", "presets"])).stdout
    for name in ("fgrpo-fig2", "fgrpo-fig2-quick", "fgrpo-fig2-prob", "fgrpo-fig2-prob-quick", "brorl-fig3"):
        assert name in out
    assert "brorl-fig3-quick" in out
    for name in PRESETS:
        assert name in out


def test_sim_presets_names_readable_at_80_columns():
    out = _ok(CliRunner(env={"COLUMNS": "80"}).invoke(app, ["sim", "presets"])).stdout
    for name in PRESETS:
        assert name in out


def test_sim_run_config(runner, tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY_TOML)
    out_dir = tmp_path / "result"
    result = _ok(runner.invoke(app, ["sim", "run", "--config", str(cfg), "--out", str(out_dir), "--no-progress"]))
    out = result.stdout
    assert "Q_pos" in out and "M_ret" in out and "entropy" in out
    assert "tiny: step 5" in out
    assert f"result in {out_dir}" in out
    for name in ("config.toml", "history.csv", "meta.json"):
        assert (out_dir / name).is_file(), name
    loaded = SimResult.load(out_dir)
    assert loaded.config.group_sizes == (2, 16)
    assert loaded.config.gammas == (0.0, 1.0)
    assert loaded.config.steps == 5
    runs, logged_steps = 2 * 2 * 1, 5 + 1  # (N, gamma, seed) x steps 0..5
    assert len(loaded.history) == runs * logged_steps
    assert sorted(loaded.history["step"].unique()) == list(range(6))
    assert len(loaded.final) == runs
    # one summary row per (N, gamma)
    table_rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(table_rows) == runs


def test_sim_run_preset(runner, tmp_path):
    out_dir = tmp_path / "theory"
    _ok(runner.invoke(app, ["sim", "run", "--preset", "theory", "--out", str(out_dir), "--no-progress"]))
    loaded = SimResult.load(out_dir)
    assert loaded.config == PRESETS["theory"]


def test_sim_run_bad_device(runner, tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY_TOML)
    result = runner.invoke(app, ["sim", "run", "--config", str(cfg), "--device", "tpu", "--out", str(tmp_path / "o")])
    _assert_usage_error(result, "tpu")


def test_sim_run_out_keeps_unrelated_files(runner, tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY_TOML)
    victim = tmp_path / "project"
    victim.mkdir()
    (victim / "notes.txt").write_text("keep me\n")
    runner.invoke(app, ["sim", "run", "--config", str(cfg), "--out", str(victim), "--no-progress"])
    assert (victim / "notes.txt").is_file()


# --- figures ----------------------------------------------------------------------------


def test_figures_list_names_every_figure(runner):
    out = _ok(runner.invoke(app, ["figures", "list"])).stdout
    assert FIGURES
    for name, spec in FIGURES.items():
        assert name in out
        assert spec.paper_ref in out


def test_figures_make(runner, tmp_path):
    out_dir = tmp_path / "figs"
    out = _ok(runner.invoke(app, ["figures", "make", "fig1a", "fig4", "--out", str(out_dir)])).stdout
    for name in ("fig1a", "fig4"):
        png, pdf = out_dir / f"{name}.png", out_dir / f"{name}.pdf"
        assert f"wrote {png}" in out and f"wrote {pdf}" in out
        assert png.stat().st_size > 0 and pdf.stat().st_size > 0
        assert png.read_bytes()[:8] == PNG_MAGIC
        assert pdf.read_bytes()[:5] == b"%PDF-"
    assert sorted(p.name for p in out_dir.iterdir()) == ["fig1a.pdf", "fig1a.png", "fig4.pdf", "fig4.png"]


def test_figures_make_out_is_a_file(runner, tmp_path):
    target = tmp_path / "afile"
    target.write_text("")
    _assert_usage_error(runner.invoke(app, ["figures", "make", "fig1a", "--out", str(target)]))


def test_sim_run_dry_run_prints_the_estimate_and_runs_nothing(runner, tmp_path, monkeypatch):
    from tailmiss.sim import memory
    from tailmiss.sim.memory import memory_estimate

    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["sim", "run", "--preset", "fgrpo-fig2", "--dry-run", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    total = memory_estimate(PRESETS["fgrpo-fig2"])["total"]
    assert "136 runs x 128,000 actions x 1000 steps" in result.output
    assert "draws per step: 2,097,136" in result.output
    assert f"({total:,} bytes)" in result.output
    assert not (tmp_path / "runs").exists()
    monkeypatch.setattr(memory, "device_memory", lambda device: 1024)
    result = runner.invoke(app, ["sim", "run", "--preset", "fgrpo-fig2", "--dry-run", "--device", "cpu"])
    assert result.exit_code == 0 and "does NOT fit" in result.output
    result = runner.invoke(app, ["sim", "run", "--preset", "fgrpo-fig2", "--device", "cpu", "--no-progress"])
    assert result.exit_code == 2 and result.output.startswith("Error: sweep 'fgrpo-fig2' needs about")
    assert not (tmp_path / "runs").exists()
