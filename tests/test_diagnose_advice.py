"""The verdict and the budget advice of ``tailmiss diagnose`` (tailmiss.diagnose.rates / advice) and the command's
own defects: each closed form against brute force, the advice against Lemma 3.1 by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import one_error_line
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats
from typer.testing import CliRunner

from tailmiss import analytic
from tailmiss.cli import app
from tailmiss.diagnose import (
    SHARE_LEVEL,
    RateFit,
    advise,
    diagnose,
    fit_rates,
    judge,
    read_rollouts,
    spend_outcomes,
    verdicts,
)
from tailmiss.diagnose.advice import phase_of_steps, spends_for_budget
from tailmiss.diagnose.rates import outcome_pmf, plug_in_risk


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"COLUMNS": "200"})


def _groups(n: int, prompts: int, steps: int, mu, seed: int = 0) -> pd.DataFrame:
    """Groups (step, n, x) of ``prompts`` prompts per step, each prompt's success rate from ``mu`` (a number or a
    callable drawing rates)."""
    rng = np.random.default_rng(seed)
    step = np.repeat(np.arange(steps), prompts)
    rates = mu(rng, step.size) if callable(mu) else np.full(step.size, mu)
    return pd.DataFrame({"step": step, "n": n, "x": rng.binomial(n, rates)})


def _write_log(path, groups: pd.DataFrame) -> None:
    """A tailmiss-schema CSV with one row per rollout (correct rollouts first in each group)."""
    rows = []
    for i, g in enumerate(groups.itertuples()):
        for k in range(g.n):
            rows.append((g.step, f"p{i % 997}-{g.step}", k, float(k < g.x)))
    pd.DataFrame(rows, columns=["step", "prompt_id", "rollout", "reward"]).to_csv(path, index=False)


# ---------------------------------------------------------------------------
# rates: the beta-binomial and its exact sums
# ---------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    a=st.floats(0.2, 30),
    b=st.floats(0.2, 30),
    n=st.integers(1, 300),
    rho=st.floats(0.001, 0.9),
    gamma=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
)
def test_spend_outcomes_equal_the_integrals_over_the_beta(a, b, n, rho, gamma):
    fit = RateFit(a, b, 1, 0.0, False)
    out = spend_outcomes(fit, n, rho, [gamma])[0]
    pdf = stats.beta(a, b).pdf

    def expect(f):
        # the integrand is smooth but the Beta density may be singular at 0 or 1: split the range
        return sum(
            integrate.quad(lambda m: pdf(m) * f(m), lo, hi, limit=200, epsabs=1e-12)[0]
            for lo, hi in ((0, 0.5), (0.5, 1))
        )

    def binom_sum(weights):
        xs = np.arange(n + 1)
        return lambda m: float(stats.binom.pmf(xs, n, m) @ weights)

    xs = np.arange(n + 1)
    mixed = (xs > 0) & (xs < n)
    g = np.where(mixed, (1 - xs / n) ** gamma, 0.0)
    assert out.active == pytest.approx(expect(lambda m: 1 - m**n - (1 - m) ** n), abs=1e-7)
    lemma = expect(lambda m: float(analytic.tail_miss_probability(m, rho * m, n)) if 0 < m < 1 else 0.0)
    assert out.risk == pytest.approx(lemma, abs=1e-7)
    assert out.signal == pytest.approx(expect(binom_sum(g)), abs=1e-7)
    assert out.drift == pytest.approx(expect(binom_sum(g * (1 - rho) ** xs * xs / n)), abs=1e-7)


def test_outcome_pmf_is_scipys_beta_binomial_at_sizes_users_run():
    for a, b, n in ((0.7, 0.4, 8), (34.9, 1.07, 64), (0.05, 0.02, 4096)):
        pmf = outcome_pmf(RateFit(a, b, 1, 0.0, False), n)
        np.testing.assert_allclose(pmf, stats.betabinom(n, a, b).pmf(np.arange(n + 1)), rtol=1e-8, atol=1e-300)


def test_plug_in_risk_is_lemma_3_1_at_each_groups_mu_hat():
    x, n = np.array([0, 1, 4, 8, 3]), np.array([8, 8, 8, 8, 4])
    want = [0.0] + [float(analytic.tail_miss_probability(k / m, 0.1 * k / m, m)) for k, m in zip(x[1:], n[1:])]
    np.testing.assert_allclose(plug_in_risk(x, n, 0.1), want, rtol=1e-12)
    # by hand: N = 2, X = 1 is 2 mu (1 - mu)(1 - rho) at mu = 1/2
    assert plug_in_risk([1], [2], 0.1)[0] == pytest.approx(0.5 * 0.9)


@pytest.mark.parametrize("a,b", [(0.7, 0.4), (3.0, 1.0), (20.0, 5.0)])
def test_fit_recovers_the_success_rate_distribution(a, b):
    groups = _groups(8, 500, 10, lambda rng, size: rng.beta(a, b, size), seed=3)
    fit = fit_rates(groups["n"], groups["x"])
    assert fit.mean == pytest.approx(a / (a + b), abs=0.02)
    assert 1 / (1 + fit.a + fit.b) == pytest.approx(1 / (1 + a + b), abs=0.03)  # the intra-class correlation
    assert not fit.at_bound


def test_fit_of_a_run_with_no_spread_sits_at_the_bound_and_mixed_sizes_fit():
    assert fit_rates(np.full(50, 8), np.full(50, 8)).at_bound  # every group all-correct
    fit = fit_rates([4, 8, 16, 8], [1, 4, 12, 8])
    assert 0 < fit.mean < 1
    with pytest.raises(ValueError, match="one rollout"):
        fit_rates([1, 1, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="within"):
        fit_rates([4], [5])


# ---------------------------------------------------------------------------
# verdict and advice: known from Lemma 3.1 by hand
# ---------------------------------------------------------------------------
# Every prompt at mu = 0.8 and a rare set of rho = 0.01 of it (tau = 0.008): Lemma 3.1 peaks at N* = 15 (0.856),
# is 0.317 at N = 2 and 0.016 at N = 512. By hand, at N = 2 only X = 1 is active, with plug-in risk
# 2 (1/2)(1/2)(0.99) = 0.495 >= 0.25, and Pr(X = 1 | X >= 1) = 0.32 / 0.96 = 1/3 < 1/2: out of the regime; at
# N = 16 almost every solved group has 9 <= X <= 15, each with plug-in risk above 0.6: in it; at N = 512 every
# solved group has X ~ 410 and risk (0.99)^410 ~ 0.016: out of it, by coverage.


def test_lemma_by_hand_matches_the_reference_table():
    for n, want in ((2, 0.3168), (15, 0.8562), (512, 0.0163)):
        assert float(analytic.tail_miss_probability(0.8, 0.008, n)) == pytest.approx(want, abs=2e-4)


def test_a_run_far_below_n_star_is_kept():
    groups = _groups(2, 32, 30, 0.8)
    run = judge(groups, 0.01)
    assert run.in_regime is False and run.protected_by == "inactivity" and run.n_star >= 8
    assert run.share_at_risk == pytest.approx(1 / 3, abs=0.05)
    advice = advise(groups, 0.01)
    assert advice.rule == 1 and advice.best is advice.current and advice.caveat is None


def test_a_run_at_n_star_is_moved_to_the_least_drift_per_signal():
    groups = _groups(16, 4, 150, 0.8)  # 200 late-phase groups: the fitted mean within ~0.01 of 0.8
    run = judge(groups, 0.01)
    assert run.in_regime is True and run.share_at_risk > 0.9 and 12 <= run.n_star <= 20
    advice = advise(groups, 0.01)
    assert advice.budget == 64 and advice.current.group_size == 16 and advice.current.outcome.in_regime
    # by hand: at N = 2 the only active outcome is X = 1, missing the rare set with probability 0.99, with drift
    # X/N = 1/2: 0.495 per unit of signal, against ~0.69 at N = 16 (X ~ 13, 0.99^13 x 13/16); N = 64 drifts less
    # (0.48) but keeps one active group per step, below half the run's 3.9. N = 2 is also out of the regime.
    assert advice.rule == 2 and (advice.best.group_size, advice.best.prompts, advice.best.gamma) == (2, 32, 0.0)
    assert advice.best.drift_per_signal == pytest.approx(0.495, abs=1e-3)
    assert advice.best.outcome.share_at_risk == pytest.approx(1 / 3, abs=0.03)
    assert advice.best.outcome.risk == pytest.approx(0.3168, abs=0.015)  # Lemma 3.1 at N = 2
    assert advice.best.signal_per_step > advice.current.signal_per_step
    assert advice.caveat is not None and "shared-parameter" in advice.caveat


def test_a_run_far_above_n_star_is_kept_by_coverage():
    groups = _groups(512, 2, 10, 0.8)
    run = judge(groups, 0.01)
    assert run.in_regime is False and run.protected_by == "coverage" and run.share_at_risk == 0.0
    advice = advise(groups, 0.01)
    assert advice.rule == 1 and advice.best.group_size == 512
    assert advice.current.missed_per_step == pytest.approx(2 * 0.0163, abs=0.01)


def test_in_the_regime_the_least_drift_per_signal_is_advised_or_the_run_kept():
    # every prompt at mu = 0.5, rho = 0.01, N = 8 x 2 prompts: in the regime; the advice is the spend with the
    # least drift per unit of signal among those keeping half the signal, or the run itself without a 10% gain
    groups = _groups(8, 2, 60, 0.5)
    advice = advise(groups, 0.01)
    assert advice.current.outcome.in_regime
    floor = 0.5 * advice.current.signal_per_step
    keeping = [s for s in advice.spends if s.signal_per_step >= floor - 1e-12]
    least = min(s.drift_per_signal for s in keeping)
    if advice.rule == 2:
        assert advice.best.drift_per_signal == least <= 0.9 * advice.current.drift_per_signal
    else:
        assert advice.rule == 3 and advice.best is advice.current and least > 0.9 * advice.current.drift_per_signal
    # a focal weight that only rescales every group alike never wins: at N = 2 every active group has X = 1
    two = {s.gamma: s for s in advice.spends if s.group_size == 2}
    assert two[0.5].drift_per_signal == pytest.approx(two[0.0].drift_per_signal)


def test_phases_cut_the_steps_in_thirds_and_the_last_step_is_late():
    assert list(phase_of_steps([0, 1, 2, 3, 4, 5])) == ["early"] * 2 + ["middle"] * 2 + ["late"] * 2
    assert list(phase_of_steps([7, 7, 9])) == ["early", "early", "late"]
    groups = pd.concat([_groups(16, 4, 10, 0.8), _groups(16, 4, 20, 0.999).assign(step=lambda f: f["step"] + 10)])
    found = {v.phase: v for v in verdicts(groups, 0.01)}
    assert found["early"].in_regime and not found["late"].in_regime


def test_spends_compare_at_least_five_ways_to_spend_one_budget():
    spends = spends_for_budget(64, run_n=8)
    assert {n for n, _, _ in spends} == {2, 4, 8, 16, 32, 64}
    assert all(n * p <= 64 for n, p, _ in spends) and {g for _, _, g in spends} == {0.0, 0.5, 1.0}
    assert {n for n, _, _ in spends_for_budget(24, run_n=6)} == {2, 4, 6, 8, 16}
    with pytest.raises(ValueError, match="budget"):
        spends_for_budget(1, run_n=1)


# ---------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------


def test_cli_prints_a_verdict_and_one_sentence_of_advice(runner, tmp_path):
    log = tmp_path / "run.csv"
    _write_log(log, _groups(16, 4, 12, 0.8))
    res = runner.invoke(app, ["diagnose", str(log), "--out", str(tmp_path / "d"), "--advice-rho", "0.01"])
    assert res.exit_code == 0, res.output
    assert "run: in the tail-miss regime" in res.output and "at risk when Lemma 3.1" in res.output
    advice = [line for line in res.output.splitlines() if line.startswith("Advice: ")]
    assert len(advice) == 1 and "Spend the 64 rollouts as N = 2 x 32 prompts: drift" in advice[0]
    assert "Caveat:" in res.output
    table = pd.read_csv(tmp_path / "d" / "diagnose_advice.csv")
    assert table["group_size"].nunique() >= 5 and table["advised"].sum() == 1 and table["current"].sum() == 1
    summary = json.loads((tmp_path / "d" / "diagnose.json").read_text())
    assert summary["advice"]["rule"] == 2 and summary["verdicts"][0]["in_regime"] is True


def test_cli_budget_compares_the_spends_of_the_budget_asked(runner, tmp_path):
    log = tmp_path / "run.csv"
    _write_log(log, _groups(8, 4, 6, 0.6))
    res = runner.invoke(app, ["diagnose", str(log), "--out", str(tmp_path / "d"), "--budget", "256", "--json"])
    assert res.exit_code == 0, res.output
    advice = json.loads(res.stdout)["advice"]
    assert advice["budget"] == 256
    assert sorted({s["group_size"] for s in advice["spends"]}) == [2, 4, 8, 16, 32, 64, 128, 256]
    assert all(s["prompts"] * s["group_size"] == 256 for s in advice["spends"])


@pytest.mark.parametrize(
    "option,message",
    [
        (["--rho", "1.5"], "rho must lie in (0, 1)"),
        (["--gamma", "-1"], "gamma must be finite and >= 0"),
        (["--advice-rho", "0"], "advice_rho must lie"),
        (["--budget", "1"], "budget must be >= 2"),
        (["--run-gamma", "-0.5"], "run_gamma"),
        (["--out", "/proc/tailmiss-diagnose"], "not writable"),
    ],
)
def test_bad_settings_and_destinations_are_refused_before_the_log_is_read(
    runner, tmp_path, monkeypatch, option, message
):
    log = tmp_path / "run.csv"
    _write_log(log, _groups(8, 4, 3, 0.6))

    def never(*args, **kwargs):
        raise AssertionError("the log was read before the settings were checked")

    monkeypatch.setattr("tailmiss.diagnose.read_rollouts", never)
    one_error_line(runner.invoke(app, ["diagnose", str(log), *option]), message)


def test_mixed_sizes_say_the_peak_is_at_one_common_n(runner, tmp_path):
    groups = pd.concat([_groups(2, 8, 5, 0.5), _groups(64, 1, 5, 0.5, seed=1)])
    log = tmp_path / "mixed.csv"
    _write_log(log, groups)
    res = runner.invoke(app, ["diagnose", str(log), "--out", str(tmp_path / "d")])
    assert res.exit_code == 0, res.output
    assert "N* (one common N)" in res.output and "the peak can lie below the risk" in res.output


def test_steps_table_writes_whole_group_sizes_and_peaks(tmp_path):
    groups = pd.concat([_groups(3, 2, 4, 0.5), _groups(8, 2, 4, 0.5, seed=1)])
    log = tmp_path / "mixed.csv"
    _write_log(log, groups)
    result = diagnose(read_rollouts(log))
    from tailmiss.diagnose import write_diagnosis

    write_diagnosis(result, tmp_path)
    text = (tmp_path / "diagnose_steps.csv").read_text()
    steps = pd.read_csv(tmp_path / "diagnose_steps.csv")
    assert steps["group_size"].tolist() == [3, 3, 3, 3]  # the most common size (ties: the smaller), not 5.5
    assert (steps["group_size_max"] == 8).all() and "5.5" not in text
    header, first = text.splitlines()[:2]
    n_star = dict(zip(header.split(","), first.split(",")))["n_star_rho0.05"]
    assert n_star == "" or n_star.isdigit()


def test_groups_short_by_dropped_rows_keep_the_runs_n(runner, tmp_path):
    log = tmp_path / "run.jsonl"
    lines = [
        json.dumps({"step": s, "prompt_id": f"p{p}", "rollout": k, "reward": float(k % 2)})
        for s in range(3)
        for p in range(4)
        for k in range(8)
    ]
    lines[5] = json.dumps({"step": 0, "prompt_id": "p0", "rollout": 5, "reward": None})  # an unscored rollout
    log.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])  # and a cut-off last line
    res = runner.invoke(app, ["diagnose", str(log), "--out", str(tmp_path / "d")])
    assert res.exit_code == 0, res.output
    assert "(N = 8)" in res.output and "Groups differ in size" not in res.output
    assert "rows dropped: 1 unscored; 1 cut-off lines" in res.output
    assert "2 groups are short of their step's N by the dropped rows" in res.output


def test_a_log_name_in_a_script_the_font_lacks_draws_without_warnings(runner, tmp_path, recwarn):
    log = tmp_path / "ரோல்அவுட்.csv"
    _write_log(log, _groups(8, 4, 3, 0.6))
    res = runner.invoke(app, ["diagnose", str(log), "--out", str(tmp_path / "d")])
    assert res.exit_code == 0, res.output
    assert "Glyph" not in res.output and not [w for w in recwarn if "Glyph" in str(w.message)]


def test_json_is_a_flag_and_the_version_is_printed(runner):
    help_text = runner.invoke(app, ["diagnose", "--help"]).output
    assert "--json" in help_text and "<bool>" not in help_text.split("--json", 1)[1].splitlines()[0]
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip().startswith("tailmiss ")


def test_a_device_as_the_log_is_one_error_line(runner):
    line = one_error_line(runner.invoke(app, ["diagnose", "/dev/null"]), "not a log file or folder")
    assert "Errno" not in line


def test_verdict_threshold_is_the_documented_one():
    assert SHARE_LEVEL == 0.5 and math.isclose(judge(_groups(2, 32, 3, 0.8), 0.01).rho, 0.01)


@pytest.mark.parametrize("hits,total", [(0, 10), (3, 10), (129, 238), (80, 80), (1, 1)])
def test_wilson_interval_is_scipys(hits, total):
    from tailmiss.diagnose.rates import wilson_interval

    want = stats.binomtest(hits, total).proportion_ci(confidence_level=0.95, method="wilson")
    np.testing.assert_allclose(wilson_interval(hits, total), (want.low, want.high), atol=1e-12)


def test_a_verdict_whose_interval_holds_the_line_is_at_the_edge():
    # 100 solved groups of N = 2 at X = 1 (risk 0.495, at risk) and 100 all-correct (risk 0): a share of exactly 1/2
    edge = judge(pd.DataFrame({"step": 0, "n": 2, "x": [1] * 100 + [2] * 100}), 0.01)
    assert edge.in_regime and edge.edge and edge.interval[0] < 0.5 < edge.interval[1]
    clear = judge(_groups(16, 4, 30, 0.8), 0.01)
    assert clear.in_regime and not clear.edge
    from tailmiss.diagnose import verdict_text

    assert "at its edge" in verdict_text(edge) and "at its edge" not in verdict_text(clear)


def test_the_runs_gamma_is_read_from_the_logs_focal_weights(tmp_path):
    from tailmiss.diagnose.rates import infer_gamma

    groups = _groups(8, 4, 5, 0.6)
    rows = []
    for i, g in enumerate(groups.itertuples()):
        weight = (1 - g.x / g.n) ** 0.5
        rows += [(g.step, f"p{i}", k, float(k < g.x), weight) for k in range(g.n)]
    frame = pd.DataFrame(rows, columns=["step", "prompt_id", "rollout", "reward", "focal_weight"])
    frame.to_csv(tmp_path / "f.csv", index=False)
    result = diagnose(read_rollouts(tmp_path / "f.csv"))
    assert result.summary.run_gamma == 0.5 and result.summary.run_gamma_source == "the log's focal weights"
    assert result.advice.current.gamma == 0.5
    assert diagnose(read_rollouts(tmp_path / "f.csv"), run_gamma=1.0).summary.run_gamma_source == "given"
    frame.assign(focal_weight=1.0).to_csv(tmp_path / "grpo.csv", index=False)
    assert diagnose(read_rollouts(tmp_path / "grpo.csv")).summary.run_gamma == 0.0
    frame.drop(columns="focal_weight").to_csv(tmp_path / "none.csv", index=False)
    log = read_rollouts(tmp_path / "none.csv")
    assert infer_gamma(log.frame, groups) is None and diagnose(log).summary.run_gamma_source == "assumed (GRPO)"
