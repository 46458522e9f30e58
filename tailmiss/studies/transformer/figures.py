"""Small-transformer figures: the group-size sweep, the objective table and the maze (the bridge:
:mod:`tailmiss.studies.bridge`).

Each figure's data is a cached sweep (:func:`tailmiss.studies.runs.sweep_result`)
under ``ctx.llm_cache``: the quick sweeps in quick mode, otherwise the full
ones (for the maze, ``maze-nsweep-cpu``, the largest sweep two CPU cores afford;
the paper-scale ``maze-nsweep`` is a GPU job).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tailmiss.studies.context import Context
from tailmiss.studies.figure import FigureSpec
from tailmiss.studies.runs import sweep_result
from tailmiss.studies.style import GAMMA_STYLE, honest_panels, mark_identical, n_axis, note_flat, sweep_title

FIGURES: list[FigureSpec] = []
"""This study's figures, in the order `tailmiss figures list` shows them."""


def _sweep_figure(name: str, source: str, caption: str, family: str):
    """Registers the decorated plot as the figure ``name`` of the LLM sweep ``family`` (its data:
    :func:`tailmiss.studies.runs.sweep_result`)."""

    def data(ctx: Context):
        return sweep_result(family, ctx)

    def register(plot):
        FIGURES.append(FigureSpec(name, source, caption, data, plot, llm=(family,)))
        return plot

    return register


MAZE_KS = (1, 128, 256)
_METHOD_COLORS = {"grpo": "C0", "dapo": "C1", "dapo+ds": "C3", "cispo": "C2", "drgrpo": "C4"}


# --- llm-nsweep: F-GRPO Table 2 analog ----------------------------------------------------------


def _mean_sd(frame: pd.DataFrame, metric: str):
    g = frame.groupby("group_size")[metric]
    return g.mean(), g.std(ddof=1).fillna(0.0)


@_sweep_figure(
    "llm-nsweep",
    "F-GRPO Table 2 (analog)",
    "small transformer, task (a): pass@1, rare-set coverage, pass@256, ΔNLL_rare, M_ret vs N; F-GRPO at N = 8",
    "nsweep",
)
def _nsweep_plot(result):
    import matplotlib.pyplot as plt

    frame = result.final
    panels = (
        ("exact_pass_at_1", "pass@1 (exact)", "(a) pass@1"),
        ("rare_pass_at_256", "rare-set hit@256", "(b) coverage of rare-correct answers"),
        ("exact_pass_at_256", "pass@256 (exact)", "(c) pass@256"),
        ("dnll_rare", r"$\Delta$NLL$_{rare}$ (lower is better)", r"(d) $\Delta$NLL$_{rare}$"),
        ("retained_mass", r"$M_{ret}$", "(e) retained correct mass"),
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(17, 3.4))
    grpo = frame[(frame["method"] == "grpo") & (frame["gamma"] == 0)]
    focal = frame[(frame["method"] != "sft") & (frame["gamma"] > 0)]
    sft = frame[frame["method"] == "sft"].iloc[0]
    ns = np.sort(grpo["group_size"].unique())
    for ax, (metric, ylabel, title) in zip(axes, panels):
        mean, sd = _mean_sd(grpo, metric)
        ax.errorbar(mean.index, mean, yerr=sd, color="C0", marker="o", ms=4, capsize=3, label="GRPO (mean ± sd)")
        for (gamma, n), sub in focal.groupby(["gamma", "group_size"]):
            m, s = sub[metric].mean(), sub[metric].std(ddof=1) if len(sub) > 1 else 0.0
            marker = "*" if gamma == 0.5 else "D"
            ax.errorbar(
                [n],
                [m],
                yerr=[s],
                color="C3",
                marker=marker,
                ms=9 if marker == "*" else 5,
                capsize=3,
                ls="none",
                label=f"F-GRPO γ={gamma:g}",
            )
        ax.axhline(sft[metric], color="0.5", lw=0.8, ls=":", label="SFT")
        n_axis(ax, ns)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        mark_identical(ax)
        flat = note_flat(ax)
        if flat is None and metric == "exact_pass_at_256" and frame[metric].min() > 0.999:
            ax.set_ylim(0.95, 1.005)
            ax.text(0.5, 0.5, "saturated at 1 for every run", transform=ax.transAxes, ha="center", fontsize=8)
    axes[0].legend(loc="best")
    fig.suptitle(sweep_title(result, "F-GRPO Table 2 analog (task (a), exact metrics on held-out prompts)"), y=1.04)
    fig.tight_layout()
    return fig


# --- llm-objectives: F-GRPO Table 1 analog --------------------------------------------------------


def _objective_dots(ax, runs: pd.DataFrame, metric: str, gammas: list, markers: dict) -> None:
    """One panel's dots: each method's seed mean ± sd of ``metric`` per γ, its value written above the error bar."""
    methods = list(dict.fromkeys(runs["method"]))
    width = 0.8 / len(gammas)
    # dots with seed sds on a free axis, not bars: the objectives differ by far less than their distance from 0
    for j, gamma in enumerate(gammas):
        sub = runs[runs["gamma"] == gamma].groupby("method", sort=False)[metric]
        mean = sub.mean().reindex(methods)
        sd = sub.std(ddof=1).reindex(methods).fillna(0.0)
        x = np.arange(len(methods)) + (j - (len(gammas) - 1) / 2) * width
        for xi, m, s, method in zip(x, mean, sd, methods):
            color = _METHOD_COLORS.get(method, "C7")
            ax.errorbar(
                [xi],
                [m],
                yerr=[s],
                fmt=markers[gamma],
                ms=5,
                color=color,
                mfc=color if gamma == 0 else "white",
                capsize=3,
            )
            # the value above the error bar's top, upright text one glyph wide: it meets no error bar
            ax.annotate(
                f"{m:.3f}",
                (xi, m + s),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                va="bottom",
                rotation=90,
                fontsize=6,
            )


def _objective_handles(gammas: list, markers: dict) -> list:
    """The legend's handles: one marker per γ (filled: base, open: focal) and the dotted SFT line."""
    from matplotlib.lines import Line2D

    handles = [
        Line2D(
            [],
            [],
            ls="none",
            marker=markers[g],
            color="0.3",
            mfc="0.3" if g == 0 else "white",
            label="base" if g == 0 else f"focal γ={g:g}",
        )
        for g in gammas
    ]
    handles.append(Line2D([], [], color="0.5", lw=0.8, ls=":", label="SFT"))
    return handles


@_sweep_figure(
    "llm-objectives",
    "F-GRPO Table 1 (analog)",
    "small transformer, task (a): GRPO / DAPO / CISPO with and without the focal weight at N = 8",
    "objectives",
)
def _objectives_plot(result):
    import matplotlib.pyplot as plt

    frame = result.final
    panels = (
        ("exact_pass_at_1", "pass@1 (exact)"),
        ("rare_pass_at_256", "rare-set hit@256"),
        ("retained_mass", r"$M_{ret}$"),
        ("dnll_rare", r"$\Delta$NLL$_{rare}$ (lower is better)"),
    )
    runs = frame[frame["method"] != "sft"]
    sft = frame[frame["method"] == "sft"].iloc[0]
    methods = list(dict.fromkeys(runs["method"]))
    gammas = sorted(runs["gamma"].unique())
    fig, axes = plt.subplots(1, len(panels), figsize=(15, 3.4))
    markers = {g: ("o", "D", "s", "^")[j % 4] for j, g in enumerate(gammas)}
    for ax, (metric, ylabel) in zip(axes, panels):
        _objective_dots(ax, runs, metric, gammas, markers)
        ax.axhline(sft[metric], color="0.5", lw=0.8, ls=":")
        ax.set_xticks(np.arange(len(methods)))
        ax.set_xticklabels([m.upper() for m in methods])
        ax.set_xlim(-0.6, len(methods) - 0.4)
        ax.set_ylabel(ylabel)
        ax.ticklabel_format(axis="y", useOffset=False)
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi + 0.25 * (hi - lo))  # room for the values above the error bars
    handles = _objective_handles(gammas, markers)
    axes[-1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    n = int(runs["group_size"].iloc[0])
    fig.suptitle(
        sweep_title(result, f"F-GRPO Table 1 analog (task (a), N = {n}; mean ± seed sd; open: focal; dotted: SFT)"),
        y=1.04,
    )
    fig.tight_layout()
    return fig


# --- maze: F-GRPO Fig. 6 / Fig. 7 / Table 4 analog ----------------------------------------------------


@_sweep_figure(
    "maze",
    "F-GRPO Fig. 6 / Table 4 (analog)",
    "small transformer, mazes: −log pass@k vs N (GRPO, F-GRPO γ = 0.5, 1) and pass@k vs step",
    "maze",
)
def _maze_plot(result):
    import matplotlib.pyplot as plt

    final = result.final
    hist = result.history[result.history["pass_at_1"].notna()]
    runs = final[final["method"] != "sft"]
    base = final[final["method"] == "sft"].iloc[0]
    ns = np.sort(runs["group_size"].unique())
    gammas = sorted(runs["gamma"].unique())
    ks = [k for k in MAZE_KS if f"pass_at_{k}" in final]
    # a row per kind of panel, each as wide as the figure: no empty slot when the rows differ in length
    cols = int(np.lcm(len(ks), len(ns)))
    fig = plt.figure(figsize=(3.6 * max(len(ks), len(ns)), 6.6))
    grid = fig.add_gridspec(2, cols)
    top = [fig.add_subplot(grid[0, i * cols // len(ks) : (i + 1) * cols // len(ks)]) for i in range(len(ks))]
    bottom = [fig.add_subplot(grid[1, i * cols // len(ns) : (i + 1) * cols // len(ns)]) for i in range(len(ns))]
    colors = {0.0: "C0", 0.5: "C3", 1.0: "C1"}
    for ax, k in zip(top, ks):
        col = f"pass_at_{k}"
        for gamma in gammas:
            sub = runs[runs["gamma"] == gamma].groupby("group_size")[col].mean()
            label = "GRPO" if gamma == 0 else f"F-GRPO γ={gamma:g}"
            ax.plot(
                sub.index,
                -np.log(sub.clip(lower=1e-6)),
                GAMMA_STYLE.get(gamma, "-."),
                marker="o",
                ms=4,
                color=colors.get(gamma, "C7"),
                label=label,
            )
        ax.axhline(-np.log(max(base[col], 1e-6)), color="0.5", ls=":", lw=0.8, label="SFT (base)")
        n_axis(ax, ns)
        ax.set_ylabel(f"−log pass@{k} (lower is better)")
        ax.set_title(f"pass@{k} on held-out mazes")
    for ax, n in zip(bottom, ns):
        for gamma in gammas:
            sub = hist[(hist["group_size"] == n) & (hist["gamma"] == gamma)].groupby("step")
            for col, alpha in (("pass_at_1", 1.0), (f"pass_at_{ks[-1]}", 0.45)):
                if col in hist:
                    ax.plot(
                        sub[col].mean().index,
                        sub[col].mean(),
                        GAMMA_STYLE.get(gamma, "-."),
                        color=colors.get(gamma, "C7"),
                        alpha=alpha,
                    )
        ax.set_title(f"N = {int(n)}: pass@1 (dark), pass@{ks[-1]} (light)")
        ax.set_xlabel("step")
        ax.set_ylabel("held-out pass@k")
    honest_panels(top + bottom)
    top[0].legend(loc="best")
    fig.suptitle(sweep_title(result, "F-GRPO Fig. 6 / Table 4 analog (maze)"), y=1.01)
    fig.tight_layout()
    return fig
