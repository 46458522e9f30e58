"""Real processes: SIGKILL and resume, Ctrl-C, and torchrun with two gloo processes (simulator and LLM trainer)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch_dist = pytest.importorskip("torch.distributed")

SLOW_SIM = """
[sim]
name = "slow"
num_actions = 65536
num_correct = 4096
group_sizes = [2, 8, 64]
gammas = [0.0, 1.0]
seeds = [0, 1]
steps = 300
log_every = 10
"""

SMALL_SIM = """
[sim]
name = "small"
num_actions = 4096
num_correct = 256
group_sizes = [2, 8, 64]
gammas = [0.0, 0.5, 1.0]
seeds = [0, 1, 2]
steps = 40
log_every = 5
"""


def _env() -> dict:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"  # what torchrun sets; the same in every process compared here
    env.pop("WORLD_SIZE", None)
    return env


def _tailmiss(*args: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tailmiss", *args], cwd=cwd, env=_env(), capture_output=True, text=True, **kw
    )


def _start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tailmiss", *args],
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path_glob, folder: Path, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not list(folder.glob(path_glob)):
        if proc.poll() is not None:
            raise AssertionError(f"the process ended before writing {path_glob}: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"no {path_glob} after {timeout} s")
        time.sleep(0.05)


def _torchrun(args: list[str], cwd: Path, nproc: int = 2, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--standalone"]
    return subprocess.run(
        [*cmd, "-m", "tailmiss", *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout
    )


def test_a_simulation_killed_with_sigkill_resumes_to_the_same_history(tmp_path):
    (tmp_path / "slow.toml").write_text(SLOW_SIM)
    run = ["sim", "run", "--config", "slow.toml", "--no-progress", "--checkpoint-every", "25"]
    proc = _start([*run, "--out", "killed"], tmp_path)
    _wait_for(".killed.resume/*.pt", tmp_path, proc)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "killed").exists()  # nothing half-written at the destination

    resumed = _tailmiss(*run, "--out", "killed", cwd=tmp_path, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    line = next(x for x in resumed.stderr.splitlines() if "resuming" in x)
    step = int(line.split("from step ")[1].split()[0])
    assert 0 < step < 300
    whole = _tailmiss(*run, "--out", "whole", cwd=tmp_path, timeout=600)
    assert whole.returncode == 0, whole.stderr
    assert (tmp_path / "killed" / "history.csv").read_bytes() == (tmp_path / "whole" / "history.csv").read_bytes()
    assert not (tmp_path / ".killed.resume").exists()

    again = _tailmiss(*run, "--out", "killed", cwd=tmp_path, timeout=600)
    assert "reusing" in again.stderr  # a finished unit is skipped, and the command says so


def test_ctrl_c_prints_one_line_and_leaves_no_result(tmp_path):
    (tmp_path / "slow.toml").write_text(SLOW_SIM)
    proc = _start(
        ["sim", "run", "--config", "slow.toml", "--no-progress", "--out", "r", "--checkpoint-every", "25"], tmp_path
    )
    _wait_for(".r.resume/*.pt", tmp_path, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: interrupted"), err
    assert "Traceback" not in err
    assert not (tmp_path / "r").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_torchrun_with_two_gloo_processes_writes_the_single_process_result(tmp_path):
    (tmp_path / "small.toml").write_text(SMALL_SIM)
    one = _tailmiss("sim", "run", "--config", "small.toml", "--no-progress", "--out", "one", cwd=tmp_path, timeout=600)
    assert one.returncode == 0, one.stderr
    two = _torchrun(
        ["sim", "run", "--config", "small.toml", "--no-progress", "--out", "two", "--device", "cpu"], tmp_path
    )
    assert two.returncode == 0, two.stderr
    assert (tmp_path / "one" / "history.csv").read_bytes() == (tmp_path / "two" / "history.csv").read_bytes()
    import json

    meta = json.loads((tmp_path / "two" / "meta.json").read_text())
    assert meta["processes"] == 2
    assert two.stdout.count("result in") == 1  # rank 0 alone reports and writes


# --- the LLM trainer -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llm_setup(tmp_path_factory):
    """A tiny SFT run made through the CLI, and an RL config long enough to be killed mid-run."""
    from tailmiss.llm import ModelConfig, MultiSolutionTask, RLConfig, SFTConfig

    root = tmp_path_factory.mktemp("llm-processes")
    sft = SFTConfig(
        name="sft",
        task=MultiSolutionTask(num_digits=2),
        model=ModelConfig(1, 2, 16),
        steps=20,
        batch_size=8,
        eval_every=10,
        eval_prompts=4,
        checkpoint_every=10,
        log_every=1,
    )
    sft.to_toml(root / "sft.toml")
    made = _tailmiss("llm", "sft", "--config", "sft.toml", "--out", "sft", "--no-progress", cwd=root, timeout=600)
    assert made.returncode == 0, made.stderr
    rl = RLConfig(
        name="rl",
        group_size=4,
        prompts_per_step=4,
        minibatches=2,
        steps=80,
        eval_every=20,
        eval_prompts=4,
        checkpoint_every=5,
    )
    rl.to_toml(root / "rl.toml")
    return root


def test_an_llm_run_killed_with_sigkill_resumes_to_the_same_history(llm_setup, tmp_path):
    import pandas as pd

    root = llm_setup
    train = ["llm", "train", "--init", str(root / "sft"), "--config", str(root / "rl.toml"), "--no-progress"]
    proc = _start([*train, "--out", "killed"], tmp_path)
    _wait_for("killed/checkpoint.pt", tmp_path, proc)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert not (tmp_path / "killed" / "meta.json").exists()  # not finished, and not claiming to be

    resumed = _tailmiss(*train, "--out", "killed", "--resume", cwd=tmp_path, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    meta = __import__("json").loads((tmp_path / "killed" / "meta.json").read_text())
    assert 0 < meta["resumed_from"] < 80
    whole = _tailmiss(*train, "--out", "whole", cwd=tmp_path, timeout=600)
    assert whole.returncode == 0, whole.stderr
    a = pd.read_csv(tmp_path / "killed" / "history.csv")
    b = pd.read_csv(tmp_path / "whole" / "history.csv")
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_torchrun_with_two_gloo_processes_trains_the_single_process_llm_run(llm_setup, tmp_path):
    import numpy as np
    import pandas as pd

    root = llm_setup
    (tmp_path / "rl.toml").write_text((root / "rl.toml").read_text().replace("steps = 80", "steps = 6"))
    train = ["llm", "train", "--init", str(root / "sft"), "--config", "rl.toml", "--no-progress", "--device", "cpu"]
    one = _tailmiss(*train, "--out", "one", cwd=tmp_path, timeout=600)
    assert one.returncode == 0, one.stderr
    two = _torchrun([*train, "--out", "two"], tmp_path)
    assert two.returncode == 0, two.stderr
    assert two.stdout.count("saved") == 1  # rank 0 alone reports
    a = pd.read_csv(tmp_path / "one" / "history.csv")
    b = pd.read_csv(tmp_path / "two" / "history.csv")
    exact = ["reward_mean", "frac_zero_std", "rollouts", "tokens", "groups", "mu_hat_mean", "response_len"]
    pd.testing.assert_frame_equal(a[exact], b[exact], check_exact=True)  # the same global batch, step by step
    for col in ("loss", "entropy", "kl_ref", "grad_norm", "mu_pos", "retained_mass"):
        ok = a[col].isna() == b[col].isna()
        assert ok.all(), col
        np.testing.assert_allclose(b[col].dropna(), a[col].dropna(), rtol=1e-4, atol=1e-6, err_msg=col)
    meta = __import__("json").loads((tmp_path / "two" / "meta.json").read_text())
    assert meta["processes"] == 2


def test_torchrun_shares_an_llm_sweeps_runs_and_writes_the_single_process_result(tmp_path):
    from conftest import tiny_llm_sweeps

    from tailmiss.experiments.sweep import Variant

    sweep = tiny_llm_sweeps()["nsweep"].replace(
        name="shared", variants=(Variant("grpo", 0.0, 2), Variant("grpo", 0.5, 4)), seeds=(0,)
    )
    sweep.to_toml(tmp_path / "sweep.toml")
    args = ["llm", "sweep", "--config", "sweep.toml", "--no-progress", "--device", "cpu"]
    one = _tailmiss(*args, "--root", "one", cwd=tmp_path, timeout=600)
    assert one.returncode == 0, one.stderr
    two = _torchrun([*args, "--root", "two"], tmp_path)
    assert two.returncode == 0, two.stderr
    assert "(rank 0)" in two.stdout and "(rank 1)" in two.stdout  # each rank trained one of the two runs
    for name in ("final.csv", "history.csv"):
        assert (tmp_path / "one" / "shared" / name).read_bytes() == (tmp_path / "two" / "shared" / name).read_bytes()
