"""Tests of the figure registry (:mod:`tailmiss.report.registry`) and the simulation cache.

Every registered figure is rendered once in quick mode. The quick simulations
are cached in one folder per test session (the ``quick_ctx`` fixture of ``conftest.py``, shared with
``test_figures_honest.py`` and ``test_repro.py`` through ``tmp_path_factory.getbasetemp()``), so each quick
preset runs once.
"""

from __future__ import annotations

import os
import stat

import numpy as np
import pandas as pd
import pytest

from tailmiss import analytic
from tailmiss.analytic.regimes import concentration_zone
from tailmiss.options import RunOptions
from tailmiss.report.registry import FIGURES, figure_data, make
from tailmiss.sim import SimConfig, SimResult, preset
from tailmiss.sim import runner as sim_runner
from tailmiss.studies.context import Context
from tailmiss.studies.simulation.data import SimulatedMeans
from tailmiss.studies.theory.figures import FIG3_MUS, FIG3_NMAX, FIG3_RHOS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EXPECTED_FIGURES = {
    "fig1a",
    "fig2",
    "fig2-prob",
    "fig3",
    "fig4",
    "fig5",
    "brorl-fig3",
    "llm-nsweep",
    "llm-objectives",
    "maze",
    "bridge",
    "ladder",
    "frontier",
    "protocol",
    "noise",
    "controls",
    "gamma",
    "passk",
    "tradeoff",
    "narrowing",
    "focal-frontier",
    "focal-map",
    "shared-rung",
}


# --- registry ----------------------------------------------------------------------------


def test_registry_names():
    assert set(FIGURES) == EXPECTED_FIGURES
    for name, spec in FIGURES.items():
        assert spec.name == name
        assert spec.paper_ref and spec.description


def test_every_figure_has_source_files_for_its_stamp():
    """The report stamps a figure with the code of its data and plot functions' modules: both must be plain
    functions with a source file (a ``functools.partial`` has none)."""
    import inspect

    for name, spec in FIGURES.items():
        for f in (spec.data, spec.plot):
            assert inspect.isfunction(f), (name, f)
            assert inspect.getsourcefile(f), name


def test_simulated_flags():
    assert {n for n, s in FIGURES.items() if s.simulated} == {"fig2", "fig2-prob", "brorl-fig3", "fig5"}


def test_unknown_figure_raises_value_error(tmp_path):
    with pytest.raises(ValueError, match="nope"):
        make(["fig1a", "nope"], tmp_path)
    assert not any(tmp_path.iterdir()), "nothing is written when a name is unknown"
    with pytest.raises(ValueError, match="nope"):
        figure_data("nope")


@pytest.mark.parametrize("name", sorted(EXPECTED_FIGURES))
def test_every_figure_renders_in_quick_mode(name, quick_ctx, tmp_path):
    written = make([name], out_dir=tmp_path, ctx=quick_ctx)
    png, pdf = tmp_path / f"{name}.png", tmp_path / f"{name}.pdf"
    assert written == [png, pdf]
    assert png.stat().st_size > 5_000
    assert pdf.stat().st_size > 5_000
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert pdf.read_bytes()[:5] == b"%PDF-"
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name not in {png.name, pdf.name})
    assert leftovers == [], "atomic writes leave no temporary files"


def test_figure_files_honour_umask(tmp_path):
    old = os.umask(0o022)
    try:
        make(["fig1a"], out_dir=tmp_path)
    finally:
        os.umask(old)
    for ext in ("png", "pdf"):
        assert stat.S_IMODE((tmp_path / f"fig1a.{ext}").stat().st_mode) == 0o644, ext


# --- data checks --------------------------------------------------------------------------


def test_fig3_data():
    frame = figure_data("fig3", Context(quick=True))
    curves = frame.groupby(["mu_pos", "rho"])
    assert set(curves.groups) == {(mu, rho) for mu in FIG3_MUS for rho in FIG3_RHOS}
    for (mu, rho), sub in curves:
        assert sub["group_size"].tolist() == list(range(1, FIG3_NMAX + 1)), (mu, rho)
        values = sub["tail_miss"].to_numpy()
        assert np.all((values >= 0) & (values <= 1)), (mu, rho)
        assert values[0] == 0  # a group of one is never active
        np.testing.assert_allclose(values, analytic.tail_miss_probability(mu, rho * mu, sub["group_size"].to_numpy()))


def test_fig1a_data():
    frame = figure_data("fig1a", Context(quick=True))
    assert set(frame["mu_pos"]) == {0.3}
    assert set(frame["rho"]) == {0.05, 0.1, 0.2}
    assert frame["tail_miss"].between(0, 1).all()


def test_fig4_data_focal_bounds():
    """Spec §2.10: g|A−| ≤ 1 at γ = 0.5 and ≤ 0.5 at γ = 1; at γ = 0 it is |A−| itself."""
    frame = figure_data("fig4", Context(quick=True))
    assert set(frame["gamma"]) == {0.0, 0.5, 1.0}
    assert set(frame["sign"]) == {"correct", "incorrect"}
    incorrect = frame[frame["sign"] == "incorrect"]
    half = incorrect[incorrect["gamma"] == 0.5]["magnitude"]
    one = incorrect[incorrect["gamma"] == 1.0]["magnitude"]
    assert half.max() <= 1 + 1e-12
    assert one.max() <= 0.5 + 1e-12
    assert incorrect[incorrect["gamma"] == 0.0]["magnitude"].max() > 1  # unbounded without focal weighting
    assert (frame["magnitude"] >= 0).all()
    # focal weighting never increases a magnitude
    for sign in ("correct", "incorrect"):
        by_gamma = frame[frame["sign"] == sign].pivot(index="mu_pos", columns="gamma", values="magnitude")
        assert (by_gamma[0.5] <= by_gamma[0.0] + 1e-12).all()
        assert (by_gamma[1.0] <= by_gamma[0.5] + 1e-12).all()


def test_fig5_sampler_matches_analytic_init(quick_ctx):
    frame = figure_data("fig5", quick_ctx)
    assert set(frame["kind"]) == {"analytic", "analytic-init", "sampler"}
    init = frame[frame["kind"] == "analytic-init"]
    emp = frame[frame["kind"] == "sampler"]
    assert emp["group_size"].tolist() == [2**k for k in range(18)]
    # the sampler rows and the analytic-init curve describe the same initial policy
    assert emp["mu_pos"].nunique() == 1 and emp["tau"].nunique() == 1
    assert emp["mu_pos"].iloc[0] == init["mu_pos"].iloc[0]
    assert emp["tau"].iloc[0] == init["tau"].iloc[0]
    # the analytic-init curve at the sampler's N (interpolated on its dense grid, log N)
    curve = np.interp(np.log(emp["group_size"]), np.log(init["group_size"]), init["value"])
    exact = analytic.tail_miss_probability(emp["mu_pos"].iloc[0], emp["tau"].iloc[0], emp["group_size"].to_numpy())
    on_grid = emp["group_size"].isin(init["group_size"]).to_numpy()
    np.testing.assert_allclose(curve[on_grid], exact[on_grid], rtol=1e-12)
    err = np.abs(emp["value"].to_numpy() - exact)
    tol = 5 * emp["stderr"].to_numpy() + 2e-3
    assert np.all(err <= tol), pd.DataFrame({"N": emp["group_size"], "err": err, "tol": tol})
    assert emp["value"].between(0, 1).all()


def test_fig2_quick_concentration_zone(quick_ctx):
    sim = figure_data("fig2", quick_ctx)
    assert isinstance(sim, SimulatedMeans)
    assert sim.preset == "fgrpo-fig2-quick"
    final = sim.means[(sim.means["step"] == sim.final_step) & (sim.means["gamma"] == 0)]
    zone = concentration_zone(final["group_size"], final["retained_mass"])
    assert zone is not None
    assert sim.zone == zone  # the result's own zone is the one the figure shades and the report states
    lo, hi = zone
    assert lo < 256 < hi
    assert 2 < lo
    assert hi < 131072


def test_fig2_quick_data_shape(quick_ctx):
    sim = figure_data("fig2", quick_ctx)
    frame = sim.means
    config = preset("fgrpo-fig2-quick")
    final_step = sim.final_step
    assert final_step == config.steps
    assert sim.num_seeds == len(config.seeds)
    pd.testing.assert_frame_equal(sim.final, frame[frame["step"] == final_step])
    assert sorted(frame["group_size"].unique()) == sorted(config.group_sizes)
    assert sorted(frame["gamma"].unique()) == [0.0, 1.0]
    final = frame[frame["step"] == final_step].set_index(["group_size", "gamma"])
    start = frame[frame["step"] == 0].set_index(["group_size", "gamma"])
    assert (final["q_pos"] > start["q_pos"]).all()
    assert final["retained_mass"].between(0, 1).all()
    # regime III: coverage keeps the correct mass
    assert final.loc[(max(config.group_sizes), 0.0), "retained_mass"] > 0.98


# --- concentration_zone on hand-made curves ------------------------------------------------


def _final(ns, mret) -> tuple:
    return ns, mret


NS = [2, 8, 32, 128, 512]


def test_zone_none_without_low_points():
    assert concentration_zone(*_final(NS, [1.0, 0.9, 0.8, 0.9, 1.0])) is None


def test_zone_threshold_is_strict():
    assert concentration_zone(*_final(NS, [1.0, 0.5, 0.5, 0.9, 1.0])) is None
    assert concentration_zone(*_final(NS, [1.0, 0.5, 0.5, 0.9, 1.0]), threshold=0.6) == pytest.approx((4.0, 64.0))


def test_zone_one_low_point_in_the_middle():
    lo, hi = concentration_zone(*_final(NS, [1.0, 0.9, 0.2, 0.9, 1.0]))
    assert lo == pytest.approx(np.sqrt(8 * 32)) == pytest.approx(16.0)
    assert hi == pytest.approx(np.sqrt(32 * 128)) == pytest.approx(64.0)


def test_zone_several_low_points():
    lo, hi = concentration_zone(*_final(NS, [1.0, 0.4, 0.2, 0.3, 1.0]))
    assert (lo, hi) == pytest.approx((4.0, 256.0))


def test_zone_low_at_the_ends():
    assert concentration_zone(*_final(NS, [0.1, 0.2, 0.9, 0.9, 1.0])) == pytest.approx((2.0, 16.0))
    assert concentration_zone(*_final(NS, [1.0, 0.9, 0.9, 0.2, 0.1])) == pytest.approx((64.0, 512.0))
    assert concentration_zone(*_final(NS, [0.1] * 5)) == pytest.approx((2.0, 512.0))
    assert concentration_zone(*_final([64], [0.1])) == pytest.approx((64.0, 64.0))


def test_zone_sorts_by_group_size():
    shuffled = _final([128, 2, 512, 32, 8], [0.9, 1.0, 1.0, 0.2, 0.9])
    assert concentration_zone(*shuffled) == pytest.approx((16.0, 64.0))


def test_zone_returns_floats():
    zone = concentration_zone(*_final(NS, [1.0, 0.9, 0.2, 0.9, 1.0]))
    assert all(type(b) is float for b in zone)


# --- run_cached ------------------------------------------------------------------------------


def _tiny(**changes) -> SimConfig:
    base = SimConfig(
        name="tiny-cache",
        num_actions=300,
        num_correct=30,
        group_sizes=(2, 8),
        gammas=(0.0, 1.0),
        seeds=(0,),
        steps=4,
        log_every=2,
    )
    return base.replace(**changes)


def _no_simulate(*args, **kwargs):
    raise AssertionError("run_cached re-simulated a cached config")


def test_run_cached_reuses_result(tmp_path, monkeypatch):
    config = _tiny()
    first = sim_runner.run_cached(config, tmp_path, RunOptions(progress=False))
    path = tmp_path / config.name
    assert SimResult.load(path).config == config
    monkeypatch.setattr(sim_runner, "simulate", _no_simulate)
    second = sim_runner.run_cached(config, tmp_path, RunOptions(progress=False))
    assert second.config == config
    pd.testing.assert_frame_equal(second.history, first.history, check_dtype=False, rtol=1e-8)


def test_run_cached_reruns_when_config_differs(tmp_path, monkeypatch):
    sim_runner.run_cached(_tiny(), tmp_path, RunOptions(progress=False))
    changed = _tiny(steps=6)  # same name, so the same cache folder
    with monkeypatch.context() as m:
        m.setattr(sim_runner, "simulate", _no_simulate)
        with pytest.raises(AssertionError, match="re-simulated"):
            sim_runner.run_cached(changed, tmp_path, RunOptions(progress=False))
    result = sim_runner.run_cached(changed, tmp_path, RunOptions(progress=False))
    assert result.config == changed
    assert result.history["step"].max() == 6
    assert SimResult.load(tmp_path / changed.name).config == changed  # the cache now holds the new config
    monkeypatch.setattr(sim_runner, "simulate", _no_simulate)
    assert sim_runner.run_cached(changed, tmp_path, RunOptions(progress=False)).config == changed


def test_run_cached_reruns_on_incomplete_cache(tmp_path):
    config = _tiny()
    sim_runner.run_cached(config, tmp_path, RunOptions(progress=False))
    (tmp_path / config.name / "history.csv").unlink()
    result = sim_runner.run_cached(config, tmp_path, RunOptions(progress=False))
    assert len(result.history) == config.num_runs * 3  # steps 0, 2, 4
    assert (tmp_path / config.name / "history.csv").is_file()


def test_run_cached_reruns_on_unreadable_config(tmp_path):
    config = _tiny()
    sim_runner.run_cached(config, tmp_path, RunOptions(progress=False))
    (tmp_path / config.name / "config.toml").write_text("[sim]\nnot_a_key = 1\n")
    result = sim_runner.run_cached(config, tmp_path, RunOptions(progress=False))
    assert result.config == config
    assert SimResult.load(tmp_path / config.name).config == config


@pytest.mark.parametrize("name", ["ladder", "frontier"])
def test_ladder_figures_title_fits_and_legend_names_every_curve(name, quick_ctx):
    """The title is a short line plus a note wrapped to the figure's width (it neither overflows nor squeezes the
    panels), and the legend holds the labels of every panel (the held-out curves live on the transformer's only)."""
    import matplotlib.pyplot as plt

    spec = FIGURES[name]
    fig = spec.plot(spec.data(quick_ctx))
    try:
        width = fig.get_size_inches()[0]
        lines = fig._suptitle.get_text().split("\n")
        assert not lines[0].startswith("Ladder ") and all(len(line) <= max(40, int(width * 15)) for line in lines[1:])
        (legend,) = fig.legends
        labels = {t.get_text() for t in legend.get_texts()}
        panel_labels = {label for ax in fig.axes for label in ax.get_legend_handles_labels()[1]}
        assert labels == panel_labels
        if name == "ladder":
            assert any(label.endswith("held-out") for label in labels)
    finally:
        plt.close(fig)


def test_figures_drawn_from_the_same_data_read_it_once(tmp_path):
    """Two panels of one study's claims compute the claims once; a figure of other data reads its own."""
    import matplotlib.pyplot as plt

    from tailmiss.studies.context import Context
    from tailmiss.studies.figure import FigureSpec, render

    calls = []

    def claims(ctx):
        calls.append("claims")
        return [1, 2]

    def other(ctx):
        calls.append("other")
        return [3]

    def plot(data):
        fig, ax = plt.subplots()
        ax.plot(data)
        return fig

    specs = [FigureSpec(n, "", "", d, plot) for n, d in (("a", claims), ("b", other), ("c", claims))]
    written = render(specs, tmp_path, Context(quick=True))
    assert calls == ["claims", "other"] and len(written) == 6
