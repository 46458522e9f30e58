"""``examples/llm_rollout_log.py``: the package's own SFT + GRPO runs, logged per rollout for ``tailmiss diagnose``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd

import tailmiss.llm.train as rl_loop
from tailmiss.diagnose import group_counts, read_rollouts

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llm_rollout_log.py"
_spec = importlib.util.spec_from_file_location("llm_rollout_log_example", EXAMPLE)
ex = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ex)


def test_the_example_logs_the_trainers_own_rollouts(tmp_path, one_torch_thread, capsys):
    """Tiny runs (60 SFT steps: mixed rewards): the log reads, every group holds N rollouts, its steps are the RL
    steps, and each step's rewards give the trainer's logged reward_mean, mu_hat mean / q10 / q90 and share of
    all-equal groups: the log is the trainer's batch."""
    steps, n = 3, 4
    original = rl_loop.gather_groups
    result = ex.main(
        ["--out", str(tmp_path), "--sft-steps", "60", "--steps", str(steps), "--group-size", str(n), "--no-progress"]
    )
    assert rl_loop.gather_groups is original  # the trainer is left as it was
    assert f"tailmiss diagnose {result.log}" in capsys.readouterr().out

    log = read_rollouts(result.log)
    assert log.format == "tailmiss" and log.cut_lines == 0 and not log.warnings
    frame = log.frame
    assert (frame["correct"] == (frame["reward"] == 1.0)).all() and set(frame["reward"]) <= {0.0, 1.0}
    groups = group_counts(log)
    assert (groups["n"] == n).all()
    assert sorted(frame["step"].unique()) == list(range(steps))
    assert sorted(set(frame["rollout"].astype(str))) == [str(i) for i in range(n)]

    history = pd.read_csv(result.rl / "history.csv").set_index("step").loc[: steps - 1]
    assert len(groups) == history["groups"].sum() == steps * 16  # the preset's 16 prompts per step
    np.testing.assert_allclose(frame.groupby("step")["reward"].mean(), history["reward_mean"], rtol=0, atol=1e-9)
    by_step = groups.groupby("step")["mu_hat"]
    np.testing.assert_allclose(by_step.mean(), history["mu_hat_mean"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(by_step.quantile(0.1), history["mu_hat_q10"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(by_step.quantile(0.9), history["mu_hat_q90"], rtol=0, atol=1e-9)
    same = ((groups["x"] == 0) | (groups["x"] == n)).groupby(groups["step"]).mean()
    np.testing.assert_allclose(same, history["frac_zero_std"], rtol=0, atol=1e-9)
    assert 0 < frame["reward"].mean() < 1
    assert len(frame) == history["rollouts"].iloc[-1] == steps * 16 * n
