"""The figure of ``tailmiss diagnose``: one run's groups, tail-miss risk and focal weights (plot only)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from tailmiss.diagnose import Diagnosis, gamma_key, rho_key
from tailmiss.figures.style import palette, paper_style
from tailmiss.io import atomic_write

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
    ax.legend(loc="best")


def _lines_by_step(ax, steps, keys, labels, ylabel: str, title: str) -> None:
    for color, key, label in zip(palette(len(keys)), keys, labels):
        ax.plot(steps["step"], steps[key], color=color, marker=_marker(steps), label=label)
    ax.set_ylim(0, 1.02)
    _step_axis(ax)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
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


def _mu_histogram(ax, groups) -> None:
    values, counts = np.unique(groups["mu_hat"], return_counts=True)
    width = 0.8 / max(1, int(groups["n"].max()))
    ax.bar(values, counts / counts.sum(), width=width, color=palette(3)[2])
    ax.set_xlim(-0.05, 1.05)
    ax.set_xlabel(r"$\hat\mu$")
    ax.set_ylabel("share of groups")
    ax.set_title(r"(f) $\hat\mu$ over the run")


def plot_diagnosis(diagnosis: Diagnosis):
    """Six panels: group outcomes, μ̂ quartiles, mean focal weight and tail-miss risk per step; the run's
    tail-miss risk against N with its peak; the μ̂ histogram."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13.5, 7.2))
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
    _mu_histogram(axes[1, 2], diagnosis.groups)
    source = Path(diagnosis.summary.source).name
    fig.suptitle(f"tailmiss diagnose: {source} ({diagnosis.summary.groups} groups, {diagnosis.summary.steps} steps)")
    fig.tight_layout()
    return fig


def save_diagnosis_figure(diagnosis: Diagnosis, folder: str | os.PathLike) -> list[Path]:
    """Render :func:`plot_diagnosis` to ``diagnose.png`` and ``diagnose.pdf`` in ``folder`` (atomically)."""
    import matplotlib.pyplot as plt

    folder = Path(folder)
    written = []
    with paper_style():
        fig = plot_diagnosis(diagnosis)
        for ext in ("png", "pdf"):
            path = folder / f"diagnose.{ext}"
            with atomic_write(path, "wb") as fh:
                fig.savefig(fh, format=ext, metadata={"CreationDate": None} if ext == "pdf" else None)
            written.append(path)
        plt.close(fig)
    return written
