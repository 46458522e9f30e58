"""Tests of the ``tailmiss llm`` commands (presets, export-presets, sft, train, eval) through typer's CliRunner.

One tiny SFT run and one tiny RL run from it are made once per module through
the CLI; the other tests read them or copy them before changing anything.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from tailmiss.cli import app
from tailmiss.cli.llm import resolve_llm_config as resolve_config
from tailmiss.experiments import LLM_PRESETS
from tailmiss.experiments.pool import default_jobs
from tailmiss.experiments.presets import LLM_SWEEPS
from tailmiss.experiments.sweep import LLMSweep, Variant, load_sweep
from tailmiss.llm import PASS_KS, ModelConfig, MultiSolutionTask, RLConfig, SFTConfig, load_config

TINY_SFT = SFTConfig(
    name="tiny",
    task=MultiSolutionTask(num_digits=2),
    model=ModelConfig(1, 2, 16),
    steps=6,
    batch_size=8,
    eval_every=3,
    eval_prompts=4,
    checkpoint_every=2,
    log_every=1,
)
TINY_RL = RLConfig(
    name="tiny-rl", group_size=4, prompts_per_step=4, steps=2, eval_every=2, eval_prompts=4, checkpoint_every=2
)
ORIGINAL_PRESETS = (
    "multisolution-sft",
    "multisolution-sft-quick",
    "multisolution-grpo",
    "multisolution-grpo-quick",
    "maze-sft",
    "maze-sft-quick",
    "maze-grpo",
    "maze-grpo-quick",
)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner(env={"COLUMNS": "200"})


def _ok(result):
    assert result.exit_code == 0, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


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


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Config files and the run folders A (SFT) and B (RL from A), made through the CLI."""
    root = tmp_path_factory.mktemp("llm-cli")
    sft_toml, rl_toml = root / "tiny.toml", root / "tiny_rl.toml"
    TINY_SFT.to_toml(sft_toml)
    TINY_RL.to_toml(rl_toml)
    return {"root": root, "sft_toml": sft_toml, "rl_toml": rl_toml, "a": root / "A", "b": root / "B"}


@pytest.fixture(scope="module")
def runs(files, runner):
    sft = _ok(
        runner.invoke(
            app, ["llm", "sft", "--config", str(files["sft_toml"]), "--out", str(files["a"]), "--no-progress"]
        )
    )
    rl = _ok(
        runner.invoke(
            app,
            [
                "llm",
                "train",
                "--config",
                str(files["rl_toml"]),
                "--init",
                str(files["a"]),
                "--out",
                str(files["b"]),
                "--no-progress",
                "--device",
                "cpu",
            ],
        )  # fmt: skip
    )
    return {**files, "sft_out": sft.stdout, "rl_out": rl.stdout}


def _eval_json(runner, run, *extra) -> dict:
    result = _ok(runner.invoke(app, ["llm", "eval", "--run", str(run), "--samples", "8", "--json", *extra]))
    return json.loads(result.stdout)


# --- presets --------------------------------------------------------------------------------


def test_llm_help(runner):
    out = _ok(runner.invoke(app, ["llm", "--help"])).stdout
    for command in ("presets", "export-presets", "sft", "train", "eval", "sweep"):
        assert command in out


def test_presets_lists_every_preset(runner):
    out = _ok(runner.invoke(app, ["llm", "presets"])).stdout
    assert set(ORIGINAL_PRESETS) <= set(LLM_PRESETS)
    for name in LLM_PRESETS:
        assert name in out, name
    assert "sft" in out and "rl" in out
    for name in LLM_SWEEPS:
        assert name in out, name


def test_export_presets_load_back_equal(runner, tmp_path):
    out = _ok(runner.invoke(app, ["llm", "export-presets", "--out", str(tmp_path / "exp")])).stdout
    written = sorted(p.name for p in (tmp_path / "exp").iterdir())
    assert written == sorted(f"{name}.toml" for name in [*LLM_PRESETS, *LLM_SWEEPS])
    assert len(written) >= len(ORIGINAL_PRESETS)
    for name, cfg in LLM_PRESETS.items():
        path = tmp_path / "exp" / f"{name}.toml"
        assert f"wrote {path}" in out
        assert load_config(path) == cfg
    for name, sweep in LLM_SWEEPS.items():
        assert load_sweep(tmp_path / "exp" / f"{name}.toml") == sweep


def test_quick_picks_the_quick_preset():
    assert resolve_config("multisolution-sft", None, True, SFTConfig) == LLM_PRESETS["multisolution-sft-quick"]
    assert resolve_config("maze-grpo", None, True, RLConfig) == LLM_PRESETS["maze-grpo-quick"]
    assert resolve_config("maze-grpo-quick", None, True, RLConfig) == LLM_PRESETS["maze-grpo-quick"]
    assert resolve_config("maze-grpo", None, False, RLConfig) == LLM_PRESETS["maze-grpo"]


# --- sft, train, eval -----------------------------------------------------------------------------


def test_sft_then_train_write_runs(runs):
    a, b = runs["a"], runs["b"]
    for run in (a, b):
        for name in ("config.toml", "history.csv", "meta.json", "checkpoint.pt"):
            assert (run / name).is_file(), (run, name)
        assert json.loads((run / "meta.json").read_text())["complete"] is True
    assert load_config(a / "config.toml") == TINY_SFT
    assert load_config(b / "config.toml") == TINY_RL
    assert f"saved {a} (step 6" in runs["sft_out"] and "mu_pos=" in runs["sft_out"]
    assert f"saved {b} (step 2" in runs["rl_out"] and "retained_mass=" in runs["rl_out"]
    assert pd.read_csv(b / "history.csv")["step"].tolist() == [0, 1, 2]


def test_eval_json_rl_run(runner, runs):
    result = _eval_json(runner, runs["b"])
    assert result["kind"] == "rl" and result["step"] == 2 and result["samples"] == 8
    assert result["task"] == "multisolution" and result["prompts"] == 4 and result["split"] == "test"
    assert list(result["pass_at_k"]) == ["1", "2", "4", "8"]
    values = list(result["pass_at_k"].values())
    assert all(0 <= v <= 1 for v in values)
    assert values == sorted(values)
    assert list(result["exact_pass_at_k"]) == [str(k) for k in PASS_KS]
    for key in ("mu_pos", "retained_mass", "dnll_rare", "off_format", "tau_rare"):
        assert isinstance(result[key], float), key
    assert 0 <= result["mu_pos"] <= 1 and 0 < result["retained_mass"] <= 1 + 1e-9
    assert result["exact_pass_at_k"]["1"] == pytest.approx(result["mu_pos"])


def test_eval_json_sft_run_is_its_own_reference(runner, runs):
    result = _eval_json(runner, runs["a"])
    assert result["kind"] == "sft" and result["step"] == 6
    assert result["retained_mass"] == 1.0
    assert result["dnll_rare"] == 0.0


def test_eval_is_seeded(runner, runs):
    assert _eval_json(runner, runs["b"], "--seed", "3") == _eval_json(runner, runs["b"], "--seed", "3")


def test_eval_table(runner, runs):
    out = _ok(runner.invoke(app, ["llm", "eval", "--run", str(runs["b"]), "--samples", "8", "--no-progress"])).stdout
    assert "pass@k (sampled)" in out and "pass@k (exact)" in out
    assert "step 2" in out
    assert "mu_pos=" in out and "retained_mass=" in out and "dnll_rare=" in out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


def test_resume_on_finished_run_exits_zero(runner, runs, tmp_path):
    copy = tmp_path / "A"
    shutil.copytree(runs["a"], copy)
    args = ["llm", "sft", "--config", str(runs["sft_toml"]), "--out", str(copy), "--resume", "--no-progress"]
    assert f"saved {copy} (step 6" in _ok(runner.invoke(app, args)).stdout


@pytest.mark.parametrize("kind", ["sft", "train"])
def test_resume_on_finished_run_leaves_history_unchanged(runner, runs, tmp_path, kind):
    source = runs["a"] if kind == "sft" else runs["b"]
    copy = tmp_path / "run"
    shutil.copytree(source, copy)
    before = pd.read_csv(copy / "history.csv")
    args = ["llm", kind, "--out", str(copy), "--resume", "--no-progress"]
    args += ["--config", str(runs["sft_toml"])] if kind == "sft" else ["--config", str(runs["rl_toml"])]
    if kind == "train":
        args += ["--init", str(runs["a"])]
    _ok(runner.invoke(app, args))
    pd.testing.assert_frame_equal(before, pd.read_csv(copy / "history.csv"), check_exact=True)


def test_default_out_folder(runner, files, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "two.toml"
    TINY_SFT.replace(name="two", steps=2).to_toml(cfg)
    _ok(runner.invoke(app, ["llm", "sft", "--config", str(cfg), "--no-progress", "--device", "cpu"]))
    assert (tmp_path / "runs" / "llm" / "two" / "checkpoint.pt").is_file()


# --- errors -------------------------------------------------------------------------------------------


def _sft(files, *extra):
    return ["llm", "sft", "--no-progress", *extra]


def test_sft_preset_and_config(runner, files, tmp_path):
    args = _sft(
        files, "--preset", "multisolution-sft", "--config", str(files["sft_toml"]), "--out", str(tmp_path / "o")
    )
    _assert_usage_error(runner.invoke(app, args), "--preset", "--config")
    assert not (tmp_path / "o").exists()


def test_sft_neither_preset_nor_config(runner, files, tmp_path):
    _assert_usage_error(runner.invoke(app, _sft(files, "--out", str(tmp_path / "o"))), "--preset", "--config")


def test_unknown_preset_lists_known(runner, files, tmp_path):
    line = _assert_usage_error(
        runner.invoke(app, _sft(files, "--preset", "nope", "--out", str(tmp_path / "o"))), "nope"
    )
    assert "multisolution-sft" in line


def test_sft_with_rl_config(runner, files, tmp_path):
    args = _sft(files, "--config", str(files["rl_toml"]), "--out", str(tmp_path / "o"))
    _assert_usage_error(runner.invoke(app, args), "sft")
    assert not (tmp_path / "o").exists()


def test_sft_with_rl_preset(runner, files, tmp_path):
    args = _sft(files, "--preset", "multisolution-grpo", "--out", str(tmp_path / "o"))
    _assert_usage_error(runner.invoke(app, args), "multisolution-grpo", "sft")


def test_train_with_sft_config(runner, runs, tmp_path):
    args = ["llm", "train", "--config", str(runs["sft_toml"]), "--init", str(runs["a"]), "--out", str(tmp_path / "o")]
    _assert_usage_error(runner.invoke(app, args), "rl")
    assert not (tmp_path / "o").exists()


def test_missing_config_file(runner, files, tmp_path):
    args = _sft(files, "--config", str(tmp_path / "missing.toml"), "--out", str(tmp_path / "o"))
    _assert_usage_error(runner.invoke(app, args), "missing.toml")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[sft]\nlr = -1\n", "lr"),
        ("[sft]\nsteps = 0\n", "steps"),
        ('[sft]\nlr_schedule = "linear"\n', "lr_schedule"),
        ("[sft]\nstepz = 3\n", "stepz"),
        ('[sft]\n[sft.task]\nname = "multisolution"\nnum_digitz = 2\n', "num_digitz"),
        ("[sft]\n[sft.model]\nn_embed = 8\n", "n_embed"),
        ("[sim]\nsteps = 3\n", "[sft] or [rl]"),
        ("[sft]\nlr = \n", "bad.toml"),
    ],
    ids=["negative-lr", "zero-steps", "bad-schedule", "unknown-key", "unknown-task-key", "unknown-model-key",
         "sim-table", "invalid-toml"],
)  # fmt: skip
def test_bad_config_file(runner, files, tmp_path, text, needle):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    _assert_usage_error(runner.invoke(app, _sft(files, "--config", str(cfg), "--out", str(tmp_path / "o"))), needle)
    assert not (tmp_path / "o").exists()


def test_bad_rl_config_file(runner, runs, tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[rl]\nmethod = "ppo"\n')
    args = ["llm", "train", "--config", str(cfg), "--init", str(runs["a"]), "--out", str(tmp_path / "o")]
    _assert_usage_error(runner.invoke(app, args), "method", "ppo")


def test_out_is_an_existing_file(runner, runs, tmp_path):
    target = tmp_path / "afile"
    target.write_text("x")
    _assert_usage_error(runner.invoke(app, _sft(runs, "--config", str(runs["sft_toml"]), "--out", str(target))), "file")
    args = ["llm", "train", "--config", str(runs["rl_toml"]), "--init", str(runs["a"]), "--out", str(target)]
    _assert_usage_error(runner.invoke(app, args), "file")
    assert target.read_text() == "x"


def test_rerun_into_existing_run_needs_resume(runner, runs):
    before = (runs["a"] / "history.csv").read_text()
    args = _sft(runs, "--config", str(runs["sft_toml"]), "--out", str(runs["a"]))
    _assert_usage_error(runner.invoke(app, args), "--resume")
    args = ["llm", "train", "--config", str(runs["rl_toml"]), "--init", str(runs["a"]), "--out", str(runs["b"])]
    _assert_usage_error(runner.invoke(app, args), "--resume")
    assert (runs["a"] / "history.csv").read_text() == before


def test_resume_with_other_config(runner, runs, tmp_path):
    other = tmp_path / "other.toml"
    TINY_SFT.replace(optim=TINY_SFT.optim.replace(lr=5e-3)).to_toml(other)
    copy = tmp_path / "A"
    shutil.copytree(runs["a"], copy)
    args = _sft(runs, "--config", str(other), "--out", str(copy), "--resume")
    _assert_usage_error(runner.invoke(app, args), "differs")


def test_out_with_foreign_files(runner, runs, tmp_path):
    victim = tmp_path / "project"
    victim.mkdir()
    (victim / "notes.txt").write_text("keep me\n")
    _assert_usage_error(runner.invoke(app, _sft(runs, "--config", str(runs["sft_toml"]), "--out", str(victim))))
    assert [p.name for p in victim.iterdir()] == ["notes.txt"]


def test_train_init_errors(runner, runs, tmp_path):
    base = ["llm", "train", "--config", str(runs["rl_toml"]), "--no-progress", "--out", str(tmp_path / "o")]
    _assert_usage_error(runner.invoke(app, [*base, "--init", str(tmp_path / "nowhere")]), "nowhere")
    _assert_usage_error(runner.invoke(app, [*base, "--init", str(runs["b"])]), "sft")
    _assert_usage_error(runner.invoke(app, base), "--init")
    assert not (tmp_path / "o").exists()


def test_train_resume_with_init_of_other_shape(runner, runs, tmp_path):
    other_cfg = tmp_path / "wide.toml"
    TINY_SFT.replace(model=ModelConfig(1, 2, 32), steps=1).to_toml(other_cfg)
    other = tmp_path / "wide"
    _ok(runner.invoke(app, _sft(runs, "--config", str(other_cfg), "--out", str(other))))
    copy = tmp_path / "B"
    shutil.copytree(runs["b"], copy)
    args = ["llm", "train", "--config", str(runs["rl_toml"]), "--init", str(other), "--out", str(copy), "--resume"]
    _assert_usage_error(runner.invoke(app, [*args, "--no-progress"]))


def test_eval_non_run_folder(runner, tmp_path):
    (tmp_path / "empty").mkdir()
    _assert_usage_error(runner.invoke(app, ["llm", "eval", "--run", str(tmp_path / "empty")]), "config.toml")
    _assert_usage_error(runner.invoke(app, ["llm", "eval", "--run", str(tmp_path / "nowhere")]), "nowhere")


def test_eval_run_without_checkpoint(runner, runs, tmp_path):
    half = tmp_path / "half"
    half.mkdir()
    shutil.copy(runs["a"] / "config.toml", half / "config.toml")
    _assert_usage_error(runner.invoke(app, ["llm", "eval", "--run", str(half)]), "checkpoint.pt")


@pytest.mark.parametrize("samples", ["0", "-3"])
def test_eval_samples_must_be_positive(runner, runs, samples):
    _assert_usage_error(runner.invoke(app, ["llm", "eval", "--run", str(runs["a"]), "--samples", samples]), "samples")


def test_eval_samples_not_a_number(runner, runs):
    _assert_usage_error(runner.invoke(app, ["llm", "eval", "--run", str(runs["a"]), "--samples", "many"]), "--samples")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_device_cuda_without_cuda(runner, runs, tmp_path):
    args = _sft(runs, "--config", str(runs["sft_toml"]), "--out", str(tmp_path / "o"), "--device", "cuda")
    _assert_usage_error(runner.invoke(app, args), "cuda")
    assert not (tmp_path / "o").exists()
    args = ["llm", "eval", "--run", str(runs["a"]), "--device", "cuda"]
    _assert_usage_error(runner.invoke(app, args), "cuda")


def test_bad_device_name(runner, runs, tmp_path):
    args = _sft(runs, "--config", str(runs["sft_toml"]), "--out", str(tmp_path / "o"), "--device", "tpu")
    _assert_usage_error(runner.invoke(app, args), "tpu")


# --- sweep ----------------------------------------------------------------------------------------------

TINY_SWEEP = LLMSweep("tiny-sweep", TINY_SFT, TINY_RL, (Variant("grpo", 0.0, 2), Variant("grpo", 0.5, 4)), seeds=(0, 1))


@pytest.fixture(scope="module")
def sweep_root(runner, tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    TINY_SWEEP.to_toml(root / "sweep.toml")
    result = _ok(
        runner.invoke(
            app, ["llm", "sweep", "--config", str(root / "sweep.toml"), "--root", str(root / "runs"), "--no-progress"]
        )
    )
    return root, result.stdout


def test_sweep_runs_every_run_and_prints_a_table(sweep_root):
    root, out = sweep_root
    assert out.count(": training") == len(TINY_SWEEP.runs()) + 1  # the SFT run too
    if default_jobs("cpu", 2) > 1:  # the CLI's default: one process per core, each job's end said
        assert out.count(": finished in") == len(TINY_SWEEP.runs()) + 1
    assert "GRPO N=2" in out and "F-GRPO γ=0.5 N=4" in out and "mean over 2 seed(s)" in out
    assert f"saved {root / 'runs' / 'tiny-sweep'}" in out
    for _, _, cfg in TINY_SWEEP.runs():
        assert (root / "runs" / cfg.name / "meta.json").is_file()
    final = pd.read_csv(root / "runs" / "tiny-sweep" / "final.csv")
    assert len(final) == len(TINY_SWEEP.runs()) + 1


def test_sweep_rerun_says_it_reuses(runner, sweep_root):
    root, _ = sweep_root
    out = _ok(
        runner.invoke(
            app, ["llm", "sweep", "--config", str(root / "sweep.toml"), "--root", str(root / "runs"), "--no-progress"]
        )
    ).stdout
    assert "every run done by this code, reusing" in out and ": training" not in out


@pytest.mark.parametrize(
    "args, needle",
    [
        ([], "exactly one of --preset and --config"),
        (["--preset", "multisolution-nsweep", "--config", "x.toml"], "exactly one of --preset and --config"),
        (["--preset", "no-such-sweep"], "unknown LLM sweep 'no-such-sweep'"),
        (["--config", "missing.toml"], "config file not found"),
        (["--preset", "multisolution-nsweep", "--jobs", "0"], "Invalid value for '--jobs'"),
        (["--preset", "multisolution-nsweep", "--threads", "0"], "Invalid value for '--threads'"),
    ],
)
def test_sweep_errors(runner, tmp_path, args, needle):
    result = runner.invoke(app, ["llm", "sweep", *args, "--root", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert needle in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_sweep_bad_toml_and_root(runner, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[sweep]\nname = "x"\nvariants = []\n[sft]\n[rl]\n')
    result = runner.invoke(app, ["llm", "sweep", "--config", str(bad), "--root", str(tmp_path)])
    assert result.exit_code == 2 and "Error:" in result.output
    TINY_SWEEP.to_toml(tmp_path / "ok.toml")
    (tmp_path / "file").write_text("x")
    result = runner.invoke(
        app, ["llm", "sweep", "--config", str(tmp_path / "ok.toml"), "--root", str(tmp_path / "file")]
    )
    assert result.exit_code == 2 and "is a file, not a folder" in result.output


# --- ladders ----------------------------------------------------------------------------------------------


def test_sweep_runs_a_ladder_preset_and_prints_its_shapes(runner, tmp_path, monkeypatch):
    from conftest import tiny_ladders

    from tailmiss.experiments import presets

    tiny = tiny_ladders()["ladder-hard"]
    monkeypatch.setitem(presets.LADDERS, tiny.name, tiny)
    args = ["llm", "sweep", "--preset", tiny.name, "--root", str(tmp_path), "--no-progress"]
    out = _ok(runner.invoke(app, args)).stdout
    for rung in tiny.rungs:
        assert rung.name in out
        assert (tmp_path / f"{tiny.name}-{rung.name}" / "final.csv").is_file()
    assert "M_ret by N = 2, 4, 8" in out and "recovers" in out and "saved 2 rung sweeps" in out
    again = _ok(runner.invoke(app, args)).stdout
    assert ": training" not in again  # every run reused


def test_ladder_quick_names_and_unknown_ladder(runner, tmp_path):
    from tailmiss.experiments.presets import LADDERS, quick_name

    for name in ("ladder", "ladder-budget", "ladder-hard"):
        assert quick_name(name) == f"{name}-quick" and f"{name}-quick" in LADDERS
    result = runner.invoke(app, ["llm", "sweep", "--preset", "ladder-nope", "--root", str(tmp_path)])
    assert result.exit_code == 2 and "ladders: ladder" in result.output and "Traceback" not in result.output
