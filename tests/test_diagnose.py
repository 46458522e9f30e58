"""`tailmiss diagnose`: log schema and adapters, group statistics, Lemma 3.1 over observed groups, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import one_error_line
from typer.testing import CliRunner

from tailmiss import analytic
from tailmiss.cli import app
from tailmiss.diagnose import (
    diagnose,
    gamma_key,
    group_columns,
    group_counts,
    n_star_key,
    pooled_risk,
    read_rollouts,
    rho_key,
    side_text,
    step_metrics,
    success_flags,
    summary_json,
)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"COLUMNS": "200"})


def _log(tmp_path, rows, name="log.csv"):
    path = tmp_path / name
    frame = pd.DataFrame(rows)
    if name.endswith(".csv"):
        frame.to_csv(path, index=False)
    else:
        frame.to_json(path, orient="records", lines=True)
    return path


def _groups(spec):
    """Rows from {(step, prompt): [rewards]}."""
    return [{"step": s, "prompt_id": p, "reward": r} for (s, p), rewards in spec.items() for r in rewards]


# --- success and groups ----------------------------------------------------------------


def test_success_flags_binary_threshold_and_refusal():
    assert success_flags([0, 1, 1, 0]).tolist() == [False, True, True, False]
    assert success_flags([-1, 1, -1]).tolist() == [False, True, False]
    assert success_flags([1, 1]).tolist() == [True, True]
    assert success_flags([0.2, 0.9, 0.5], threshold=0.5).tolist() == [False, True, True]
    assert success_flags([0, np.nan, 1]).tolist() == [False, False, True]
    with pytest.raises(ValueError, match=r"not binary.*0\.5.*set success_threshold"):
        success_flags([0, 0.5, 1], threshold_name="success_threshold")
    with pytest.raises(ValueError, match="not binary"):
        success_flags([-1, 0])
    with pytest.raises(ValueError, match="finite"):
        success_flags([0, 1], threshold=float("nan"))


def test_group_counts_by_step_and_prompt(tmp_path):
    spec = {(1, "a"): [1, 0, 0, 0], (1, "b"): [1, 1, 1, 1], (2, "a"): [0, 0, 1, 1]}
    counts = group_counts(read_rollouts(_log(tmp_path, _groups(spec))))
    assert counts[["step", "prompt_id", "n", "x"]].values.tolist() == [[1, "a", 4, 1], [1, "b", 4, 4], [2, "a", 4, 2]]
    np.testing.assert_array_equal(counts["mu_hat"], [0.25, 1.0, 0.5])


def test_correct_column_wins_over_the_reward(tmp_path):
    rows = [{"step": 0, "prompt_id": "p", "reward": r, "correct": c} for r, c in [(0.7, 1), (0.9, 0), (0.1, 0)]]
    counts = group_counts(read_rollouts(_log(tmp_path, rows, "log.jsonl")))
    assert counts["x"].tolist() == [1]


# --- per-group and per-step numbers ----------------------------------------------------------


def test_group_columns_golden_values():
    groups = pd.DataFrame({"step": [0, 0, 0, 0], "n": [8, 8, 8, 8], "x": [2, 0, 8, 6]})
    cols = group_columns(groups, rhos=(0.05,), gammas=(0.5, 1.0))
    risk = cols[rho_key(0.05)].to_numpy()
    np.testing.assert_allclose(risk[0], analytic.tail_miss_probability(0.25, 0.0125, 8), rtol=1e-14)
    assert np.isnan(risk[1])  # X = 0: no correct mass to take a share of
    assert risk[2] == 0.0  # all correct: never active
    # spec §3.6: g(γ=0.5) at μ̂ = 0.25 is 0.8660, at 0.75 it is 0.5
    np.testing.assert_allclose(cols[gamma_key(0.5)].to_numpy()[[0, 3]], [np.sqrt(0.75), 0.5], rtol=1e-14)
    assert cols[gamma_key(1.0)].isna().tolist() == [False, True, True, False]
    assert cols["inactive"].tolist() == [False, True, True, False]


def test_step_metrics_hand_computed():
    m = step_metrics([0, 3, 8, 4], [8, 8, 8, 8], rhos=(0.1,), gammas=(1.0,))
    assert m["groups"] == 4 and m["rollouts"] == 32
    assert m["share_inactive"] == 0.5 and m["share_all_incorrect"] == 0.25 and m["share_all_correct"] == 0.25
    assert m["mu_hat_mean"] == pytest.approx((0 + 3 + 8 + 4) / 32, rel=1e-15)
    expected = np.mean([analytic.tail_miss_probability(mu, 0.1 * mu, 8) for mu in (3 / 8, 1.0, 4 / 8)])
    assert m[rho_key(0.1)] == pytest.approx(expected, rel=1e-14)
    assert m[gamma_key(1.0)] == pytest.approx(np.mean([5 / 8, 4 / 8]), rel=1e-15)
    assert m[n_star_key(0.1)] == pooled_risk([3 / 8, 1.0, 4 / 8], 0.1)["n_star"]
    one_mu = step_metrics([2, 2, 0], [8, 8, 8], rhos=(0.05,), gammas=(1.0,))
    assert one_mu[n_star_key(0.05)] == analytic.tail_miss_peak(0.25, 0.0125).n_star
    assert np.isnan(step_metrics([0, 8], [8, 8], rhos=(0.05,), gammas=(1.0,))[n_star_key(0.05)])


@pytest.mark.parametrize(("mu", "rho", "n_star", "peak"), [(0.5, 0.01, 8, 0.9532), (0.8, 0.05, 8, 0.6101)])
def test_pooled_peak_of_one_mu_is_lemma_peak(mu, rho, n_star, peak):
    out = pooled_risk([mu, mu, mu], rho)
    assert out["n_star"] == n_star  # spec §3.1
    assert out["peak"] == pytest.approx(peak, abs=1e-4)


def test_pooled_peak_of_a_mixture_is_the_brute_force_argmax():
    mus = [1 / 8, 1 / 8, 3 / 8, 7 / 8, 1.0]
    ns = np.arange(1, 5001)
    curve = np.mean([analytic.tail_miss_probability(m, 0.02 * m, ns) for m in mus], axis=0)
    out = pooled_risk(mus, 0.02)
    assert out["n_star"] == int(np.argmax(curve)) + 1
    assert out["peak"] == pytest.approx(curve.max(), rel=1e-12)
    assert pooled_risk([1.0, 1.0], 0.1)["n_star"] is None


def test_diagnose_summary_and_risk_at_observed_n(tmp_path):
    spec = {(1, "a"): [1, 0, 0, 0], (1, "b"): [0, 0, 0, 0], (2, "a"): [1, 1, 0, 0], (2, "b"): [1, 1, 1, 1]}
    d = diagnose(read_rollouts(_log(tmp_path, _groups(spec))), rhos=(0.1,), gammas=(0.5,))
    s = d.summary
    assert (s.steps, s.groups, s.group_sizes) == (2, 4, (4,))
    assert s.share_inactive == 0.5 and s.share_all_incorrect == 0.25
    (row,) = s.tail_miss
    solved = [0.25, 0.5, 1.0]
    expected = np.mean([analytic.tail_miss_probability(m, 0.1 * m, 4) for m in solved])
    assert row.risk_at_observed_n == pytest.approx(expected, rel=1e-14)
    curve = d.curve.set_index("n")["tail_miss"]
    assert curve[4] == pytest.approx(expected, rel=1e-12)  # the mixture at the run's N is the same number
    assert side_text(row) == ("below" if 4 < row.n_star else "above" if 4 > row.n_star else "at")
    assert d.steps["step"].tolist() == [1, 2]
    assert s.focal_weights[0].mu_hat == (0.25, 0.5)
    np.testing.assert_allclose(s.focal_weights[0].weight, [np.sqrt(0.75), np.sqrt(0.5)], rtol=1e-14)
    written = summary_json(d.summary, d.steps)
    json.dumps(written, allow_nan=False)
    assert [r["step"] for r in written["per_step"]] == [1, 2] and written["tail_miss"][0]["side"] == side_text(row)


# --- adapters ----------------------------------------------------------------------------------


def _verl_dump(folder, v1: bool):
    folder.mkdir()
    rng = np.random.default_rng(0)
    for step in (1, 2, 3):
        rows = []
        for p in range(4):
            for k in range(8):
                acc = bool(rng.uniform() < 0.4)
                row = {"input": f"question {p}?", "output": f"answer {k}", "gts": "42", "step": step}
                row["score"] = (1.0 if acc else 0.0) - 0.1 * (k == 7)  # shaped: overlong penalty on one rollout
                row["acc"] = acc
                if v1:
                    row["uid"] = f"uid{p}-{step}_0_{k}"
                rows.append(row)
        with open(folder / f"{step}.jsonl", "w") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
    return folder


@pytest.mark.parametrize("v1", [False, True])
def test_verl_rollout_dump_adapter(tmp_path, v1):
    log = read_rollouts(_verl_dump(tmp_path / "dump", v1))
    assert log.format == "verl" and len(log.frame) == 96
    counts = group_counts(log)  # the shaped score is not binary: acc gives X
    assert counts.shape[0] == 12 and set(counts["n"]) == {8}


def test_trl_completions_adapter(tmp_path):
    pytest.importorskip("pyarrow")
    folder = tmp_path / "completions"
    folder.mkdir()
    for step in (10, 20):
        frame = pd.DataFrame(
            {
                "step": step,
                "prompt": [f"p{i // 4}" for i in range(8)],
                "completion": ["x"] * 8,
                "accuracy_reward": [1.0, 0, 0, 0, 1, 1, 0, 1],
                "advantage": 0.0,
            }
        )
        frame.to_parquet(folder / f"completions_{step:05d}.parquet")
    log = read_rollouts(folder)
    assert log.format == "trl"
    assert group_counts(log)["x"].tolist() == [1, 3, 1, 3]
    frame["format_reward"] = 0.5
    frame.to_parquet(folder / "completions_00030.parquet")
    with pytest.raises(ValueError, match="reward-column"):
        read_rollouts(folder)
    assert len(read_rollouts(folder, reward_column="accuracy_reward").frame) == 24


# --- the command line -------------------------------------------------------------------------------


def test_cli_writes_json_csv_and_figure(runner, tmp_path):
    rng = np.random.default_rng(1)
    rows = [
        {"step": s, "prompt_id": f"p{p}", "reward": float(rng.uniform() < 0.3 + 0.05 * s)}
        for s in range(6)
        for p in range(5)
        for _ in range(8)
    ]
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["diagnose", str(_log(tmp_path, rows, "log.jsonl")), "--out", str(out), "--rho", "0.05"]
    )
    assert result.exit_code == 0, result.output + result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["diagnose.json", "diagnose_steps.csv", "diagnose_advice.csv", "diagnose.png", "diagnose.pdf"]
    )
    summary = json.loads((out / "diagnose.json").read_text())
    assert summary["groups"] == 30 and len(summary["per_step"]) == 6
    assert [r["rho"] for r in summary["tail_miss"]] == [0.05]
    assert (out / "diagnose.png").stat().st_size > 10_000
    assert len(pd.read_csv(out / "diagnose_steps.csv")) == 6
    again = runner.invoke(app, ["diagnose", str(tmp_path / "log.jsonl"), "--out", str(out), "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["groups"] == 30


def test_cli_on_a_shaped_verl_dump_needs_no_threshold(runner, tmp_path):
    dump = _verl_dump(tmp_path / "dump", v1=False)
    result = runner.invoke(app, ["diagnose", str(dump), "--out", str(tmp_path / "o"), "--json"])
    assert result.exit_code == 0, result.output + result.stderr
    assert json.loads(result.stdout)["success"] == "the log's correct flags"


@pytest.mark.parametrize(
    ("content", "args", "needles"),
    [
        ("step,prompt_id\n1,a\n", ["--format", "tailmiss"], ["needs column(s) reward"]),
        ("step,prompt,reward\n1,a,1\n", [], ["cannot tell the log format"]),
        ("step,prompt_id,reward\n1,a,0.5\n1,a,1\n", [], ["not binary", "--threshold"]),
        ("", [], ["empty"]),
        ("step,prompt_id,reward\n", [], ["empty"]),
        ("step,prompt_id,reward\n1,a,yes\n", [], ["'reward' must be numeric"]),
        ("step,prompt_id,reward\n1.5,a,1\n", [], ["whole numbers"]),
        ("step,prompt_id,reward,correct\n1,a,1,maybe\n", [], ["'correct'"]),
        ("step,prompt_id,reward\n1,a,1\n", ["--format", "xml"], ["format must be"]),
        ("step,prompt_id,reward\n1,a,1\n", ["--rho", "1.5"], ["rho"]),
        ("step,prompt_id,reward\n1,a,1\n", ["--gamma", "-1"], ["gamma"]),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(runner, tmp_path, content, args, needles):
    path = tmp_path / "log.csv"
    path.write_text(content)
    result = runner.invoke(app, ["diagnose", str(path), "--out", str(tmp_path / "o"), *args])
    one_error_line(result, *needles)
    assert not (tmp_path / "o").exists()


def test_cli_missing_path_unknown_suffix_and_foreign_out(runner, tmp_path):
    one_error_line(runner.invoke(app, ["diagnose", str(tmp_path / "nope.csv")]), "no such file")
    (tmp_path / "log.txt").write_text("x")
    one_error_line(runner.invoke(app, ["diagnose", str(tmp_path / "log.txt")]), "unknown log type")
    log = _log(tmp_path, _groups({(1, "a"): [0, 1]}))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    one_error_line(runner.invoke(app, ["diagnose", str(log), "--out", str(tmp_path / "mine")]), "refusing")


def test_cli_parquet_without_pyarrow_is_one_line(runner, tmp_path, monkeypatch):
    def no_engine(*args, **kwargs):
        raise ImportError("Unable to find a usable engine; tried using: 'pyarrow', 'fastparquet'.")

    monkeypatch.setattr(pd, "read_parquet", no_engine)
    (tmp_path / "log.parquet").write_bytes(b"PAR1")
    one_error_line(runner.invoke(app, ["diagnose", str(tmp_path / "log.parquet")]), "needs pyarrow")


def test_importing_tailmiss_imports_no_training_stack():
    import subprocess
    import sys

    code = (
        "import sys, tailmiss, tailmiss.cli, tailmiss.diagnose, tailmiss.studies.diagnose_figure, "
        "tailmiss.integrations;"
        "print(sorted(m for m in ('trl', 'transformers', 'accelerate', 'datasets', 'verl', 'ray') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
