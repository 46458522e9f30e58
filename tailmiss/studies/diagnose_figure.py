"""The figure of ``tailmiss diagnose``: one run's groups, tail-miss risk and focal weights (plot only)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from tailmiss.diagnose import RISK_LEVEL, SHARE_LEVEL, Diagnosis, gamma_key, rho_key
from tailmiss.diagnose.advice import AT_RISK, phase_of_steps
from tailmiss.diagnose.rates import outcome_pmf
from tailmiss.io import atomic_write
from tailmiss.studies.style import mark_identical, palette, paper_style

__all__ = ["plot_diagnosis", "save_diagnosis_figure"]


def _marker(steps) -> str | None:
    return "o" if len(steps) <= 30 else None


def _step_axis(ax) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")


def _group_shares(ax, steps) -> None:
    s = steps["step"]
    active = 1.0 - steps["share_inactive"]
    colors = palette(3)
    ax.stackplot(
        s,
        steps["share_all_incorrect"],
        active,
        steps["share_all_correct"],
        labels=["all incorrect", "mixed (active)", "all correct"],
        colors=[colors[1], colors[2], colors[0]],
        alpha=0.8,
        step=None,
    )
    ax.set_ylim(0, 1)
    _step_axis(ax)
    ax.set_ylabel("share of groups")
    ax.set_title("(a) Group outcomes")
    ax.legend(loc="lower left", frameon=True, framealpha=0.85)


def _mu_hat(ax, steps) -> None:
    s = steps["step"]
    ax.fill_between(s, steps["mu_hat_q25"], steps["mu_hat_q75"], alpha=0.25, label="25-75%")
    ax.plot(s, steps["mu_hat_median"], marker=_marker(s), label="median")
    ax.plot(s, steps["mu_hat_mean"], ls="--", color="0.3", label="mean")
    ax.set_ylim(0, 1)
    _step_axis(ax)
    ax.set_ylabel(r"$\hat\mu = X/N$")
    ax.set_title(r"(b) Group success $\hat\mu$")
    mark_identical(ax)
    ax.legend(loc="best")


def _lines_by_step(ax, steps, keys, labels, ylabel: str, title: str) -> None:
    for color, key, label in zip(palette(len(keys)), keys, labels):
        ax.plot(steps["step"], steps[key], color=color, marker=_marker(steps), label=label)
    ax.set_ylim(0, 1.02)
    _step_axis(ax)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    mark_identical(ax)
    ax.legend(loc="best")


def _risk_by_n(ax, diagnosis: Diagnosis) -> None:
    rows = {r.rho: r for r in diagnosis.summary.tail_miss}
    for color, rho in zip(palette(len(diagnosis.rhos)), diagnosis.rhos):
        sub = diagnosis.curve[diagnosis.curve["rho"] == rho]
        if sub.empty:
            continue
        ax.plot(sub["n"], sub["tail_miss"], color=color, label=f"ρ = {rho:g}")
        n_star = rows[rho].n_star
        if n_star is not None:
            ax.plot([n_star], [rows[rho].peak], "*", color=color, ms=9)
    sizes = diagnosis.summary.group_sizes
    for i, n in enumerate(sizes):
        ax.axvline(n, color="0.4", ls="--", lw=1, label=f"run's N = {', '.join(map(str, sizes))}" if i == 0 else None)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1)
    ax.set_xlabel("group size N")
    ax.set_ylabel(r"Pr(active, miss $E$)")
    ax.set_title(r"(e) Whole run vs N ($\star$ = peak)")
    ax.legend(loc="best")


def _outcomes_vs_fit(ax, diagnosis: Diagnosis) -> None:
    """The late phase's X/N at the run's N beside the beta-binomial the advice is fitted to."""
    groups, advice = diagnosis.groups, diagnosis.advice
    n = diagnosis.summary.group_sizes[0] if diagnosis.summary.group_sizes else int(groups["n"].max())
    late = groups[phase_of_steps(groups["step"].to_numpy()) == "late"]
    same = late[late["n"] == n]
    values, counts = np.unique(same["x"], return_counts=True)
    width = 0.8 / max(1, n)
    ax.bar(values / n, counts / max(1, counts.sum()), width=width, color=palette(3)[2], label=f"late phase, N = {n}")
    if advice is not None:
        fit = advice.fit
        pmf = outcome_pmf(fit, n)
        label = f"fitted: Beta({fit.a:.3g}, {fit.b:.3g})"
        ax.plot(np.arange(n + 1) / n, pmf, "o-", color="0.2", ms=3, lw=1, label=label)
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(r"$\hat\mu = X/N$")
    ax.set_ylabel("share of groups")
    ax.set_title("(f) Late-phase outcomes and the fitted success rates")
    ax.legend(loc="best")


def _verdict_by_step(ax, diagnosis: Diagnosis) -> None:
    steps = diagnosis.steps
    rho = diagnosis.summary.verdicts[0].rho if diagnosis.summary.verdicts else None
    ax.plot(steps["step"], steps[AT_RISK], color=palette(3)[1], marker=_marker(steps), label="share at risk")
    ax.axhline(SHARE_LEVEL, color="0.3", ls="--", lw=1, label=f"regime line ({SHARE_LEVEL:.0%})")
    for v in diagnosis.summary.verdicts[1:]:
        if v.in_regime:
            ax.axvspan(v.first_step - 0.5, v.last_step + 0.5, color=palette(3)[1], alpha=0.12, lw=0)
    ax.set_ylim(0, 1.02)
    _step_axis(ax)
    ax.set_ylabel(f"solved groups with risk ≥ {RISK_LEVEL:g}")
    ax.set_title(f"(g) Verdict per step, ρ = {rho:g} (shaded: phase in regime)" if rho else "(g) Verdict per step")
    ax.legend(loc="best")


def _advice_by_n(ax, diagnosis: Diagnosis) -> None:
    a = diagnosis.advice
    if a is None:
        ax.text(0.5, 0.5, "no solved group: no advice", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    table = a.table()
    base = table[table["gamma"] == a.current.gamma].sort_values("group_size")
    colors = palette(3)
    ax.plot(base["group_size"], base["risk"], "o-", color=colors[0], label="risk (Lemma 3.1)")
    ax.plot(base["group_size"], base["share_at_risk"], "s--", color=colors[1], label="share at risk")
    ax.axhline(SHARE_LEVEL, color="0.6", ls=":", lw=1)
    same = a.best.group_size == a.current.group_size
    ax.axvline(a.best.group_size, color=colors[2], lw=3, alpha=0.5, label=f"advised N = {a.best.group_size}")
    label = f"run's N = {a.current.group_size}" + (" (advised too)" if same else "")
    ax.axvline(a.current.group_size, color="0.3", ls="--", lw=1, label=label)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(f"group size N (budget {a.budget} rollouts per step)")
    ax.set_ylabel("predicted, per group")
    twin = ax.twinx()
    twin.plot(base["group_size"], base["signal_per_step"], "^-", color="0.35", ms=4, label="signal per step")
    twin.set_ylim(bottom=0)
    twin.set_ylabel("active groups per step at the budget")
    ax.set_title(f"(h) Spending the budget, ρ = {a.rho:g}")
    handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="best", fontsize="small")


def _focal_by_n(ax, diagnosis: Diagnosis) -> None:
    a = diagnosis.advice
    if a is None:
        ax.set_axis_off()
        return
    table = a.table()
    base = table[table["gamma"] == 0.0].set_index("group_size")
    gammas = [g for g in sorted(table["gamma"].unique()) if g > 0]
    alike = True
    for color, g in zip(palette(len(gammas)), gammas):
        sub = table[table["gamma"] == g].set_index("group_size")
        drift = sub["drift_per_step"] / base["drift_per_step"]
        signal = sub["signal_per_step"] / base["signal_per_step"]
        alike &= bool(np.nanmax(np.abs(drift - signal)) < 0.01)
        ax.plot(sub.index, drift, "o-", color=color, label=f"γ = {g:g}: drift")
        ax.plot(sub.index, signal, "s--", color=color, mfc="none", ms=9, label=f"γ = {g:g}: signal")
    if alike:
        ax.text(
            0.03,
            0.03,
            "drift and signal coincide (within 0.01):\nthe focal weight shrinks missed and other\nupdates alike",
            transform=ax.transAxes,
            fontsize="small",
            va="bottom",
        )
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("group size N")
    ax.set_ylabel("against γ = 0 at the same N")
    ax.set_title("(i) Focal weight: drift from missed rare sets vs signal")
    mark_identical(ax)
    ax.legend(loc="upper right", fontsize="small", ncol=2)


def _simulated(ax, check, advice) -> None:
    marks = {}
    if advice is not None:
        marks[(advice.best.group_size, advice.best.gamma)] = "advised"
        marks[(advice.current.group_size, advice.current.gamma)] = (
            "current" if advice.best is not advice.current else "current, advised"
        )
    spends = check.groupby(["group_size", "gamma"])
    for color, ((n, g), sub) in zip(palette(spends.ngroups), spends):
        curve = sub.groupby("rollouts")["retained_mass"].agg(["mean", "std", "count"]).reset_index()
        sd = curve["std"].fillna(0.0)
        mark = f", {marks[(n, g)]}" if (n, g) in marks else ""
        label = f"N = {n}, γ = {g:g}{mark} ({int(curve['count'].max())} seeds)"
        ax.plot(curve["rollouts"], curve["mean"], color=color, marker="o", ms=3, label=label)
        ax.fill_between(curve["rollouts"], curve["mean"] - sd, curve["mean"] + sd, color=color, alpha=0.2, lw=0)
    ax.axhline(1.0, color="0.5", ls=":", lw=1)
    ax.set_xlabel("rollouts spent per prompt")
    ax.set_ylabel("rare mass / its start")
    ax.set_title("(j) Simulated check: the run's fitted prompts in the categorical simulator (mean ± sd over seeds)")
    ax.legend(loc="best")


def plot_diagnosis(diagnosis: Diagnosis, check=None):
    """Nine panels: group outcomes, μ̂ quartiles, mean focal weight and tail-miss risk per step; the run's tail-miss
    risk against N with its peak; μ̂ over the run with the fitted success rates; the verdict per step; the budget's
    spends against N (risk, share at risk, signal; the run's and the advised N); the focal weight's effect. With a
    simulated check (``check``, :func:`tailmiss.diagnose.simcheck.simulate_spends`'s frame), a tenth panel: retained
    rare mass against rollouts per prompt at the current and advised spends."""
    import matplotlib.pyplot as plt

    rows = 4 if check is not None else 3
    fig = plt.figure(figsize=(13.5, 3.6 * rows))
    grid = fig.add_gridspec(rows, 3)
    axes = np.array([[fig.add_subplot(grid[r, c]) for c in range(3)] for r in range(3)])
    steps = diagnosis.steps
    _group_shares(axes[0, 0], steps)
    _mu_hat(axes[0, 1], steps)
    gammas, rhos = diagnosis.gammas, diagnosis.rhos
    focal_label = r"mean $g = (1-\hat\mu)^\gamma$"
    _lines_by_step(
        axes[0, 2],
        steps,
        [gamma_key(g) for g in gammas],
        [f"γ = {g:g}" for g in gammas],
        focal_label,
        "(c) Focal weight, active groups",
    )
    _lines_by_step(
        axes[1, 0],
        steps,
        [rho_key(r) for r in rhos],
        [f"ρ = {r:g}" for r in rhos],
        r"Pr(active, miss $E$)",
        "(d) Tail-miss risk at the run's N",
    )
    _risk_by_n(axes[1, 1], diagnosis)
    _outcomes_vs_fit(axes[1, 2], diagnosis)
    _verdict_by_step(axes[2, 0], diagnosis)
    _advice_by_n(axes[2, 1], diagnosis)
    _focal_by_n(axes[2, 2], diagnosis)
    if check is not None:
        _simulated(fig.add_subplot(grid[3, :]), check, diagnosis.advice)
    source = Path(diagnosis.summary.source).name
    fig.suptitle(f"tailmiss diagnose: {source} ({diagnosis.summary.groups} groups, {diagnosis.summary.steps} steps)")
    fig.tight_layout()
    return fig


def save_diagnosis_figure(diagnosis: Diagnosis, folder: str | os.PathLike, check=None) -> list[Path]:
    """Render :func:`plot_diagnosis` to ``diagnose.png`` and ``diagnose.pdf`` in ``folder`` (atomically).

    A log name in a script the font lacks is drawn with empty boxes, without a warning per missing glyph.
    """
    import warnings

    import matplotlib.pyplot as plt

    folder = Path(folder)
    written = []
    with paper_style(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
        warnings.filterwarnings("ignore", message=r"Matplotlib currently does not support", category=UserWarning)
        fig = plot_diagnosis(diagnosis, check)
        for ext in ("png", "pdf"):
            path = folder / f"diagnose.{ext}"
            with atomic_write(path, "wb") as fh:
                fig.savefig(fh, format=ext, metadata={"CreationDate": None} if ext == "pdf" else None)
            written.append(path)
        plt.close(fig)
    return written
