"""Theory figures of F-GRPO: Fig. 1(a), 3, 4 and 5 (closed forms; Fig. 5 adds the sampler's frequencies, from
:func:`tailmiss.studies.simulation.data.tail_miss_at_init`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tailmiss import analytic
from tailmiss.studies.context import Context
from tailmiss.studies.figure import FigureSpec
from tailmiss.studies.simulation.data import FIG5_MAX_EXP, FIG5_MU, FIG5_TAU, tail_miss_at_init
from tailmiss.studies.style import honest_panels, log2_axis, palette

FIGURES: list[FigureSpec] = []
"""This study's figures, in the order `tailmiss figures list` shows them."""

FIG1A_MU, FIG1A_RHOS, FIG1A_MARKERS = 0.3, (0.05, 0.1, 0.2), (2, 8, 32)
FIG3_MUS, FIG3_RHOS, FIG3_NMAX = (0.8, 0.5, 0.2), (0.01, 0.05, 0.1, 0.2), 512
FIG4_GAMMAS = (0.0, 0.5, 1.0)


def _curves(mus, rhos, n_max: int) -> pd.DataFrame:
    n = np.arange(1, n_max + 1)
    rows = []
    for mu in mus:
        for rho in rhos:
            rows.append(
                pd.DataFrame(
                    {
                        "mu_pos": mu,
                        "rho": rho,
                        "group_size": n,
                        "tail_miss": analytic.tail_miss_probability(mu, rho * mu, n),
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


# --- Fig. 1(a) ------------------------------------------------------------------


def fig1a_data(ctx: Context) -> pd.DataFrame:
    return _curves([FIG1A_MU], FIG1A_RHOS, 128)


def fig1a_plot(frame: pd.DataFrame):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.2, 3.0))
    for color, (rho, sub) in zip(palette(len(FIG1A_RHOS)), frame.groupby("rho")):
        ax.plot(sub["group_size"], sub["tail_miss"], color=color, label=f"ρ = {rho:g}")
        marks = sub[sub["group_size"].isin(FIG1A_MARKERS)]
        ax.plot(marks["group_size"], marks["tail_miss"], "o", color=color, ms=5)
    log2_axis(ax, 0, 7)
    ax.set_ylim(0, max(0.8, 1.05 * float(frame["tail_miss"].max())))  # the ρ = 0.05 curve peaks at 0.83
    ax.set_xlabel("group size N")
    ax.set_ylabel(r"Pr(active, miss $E$)")
    ax.set_title(rf"Tail-miss probability, $\mu_{{pos}}$ = {FIG1A_MU}")
    honest_panels(ax)
    ax.legend(loc="upper right")
    return fig


FIGURES.append(
    FigureSpec(
        "fig1a", "F-GRPO Fig. 1(a)", "Lemma 3.1 vs N for mu_pos=0.3, rho in {0.05, 0.1, 0.2}", fig1a_data, fig1a_plot
    )
)


# --- Fig. 3 ---------------------------------------------------------------------


def fig3_data(ctx: Context) -> pd.DataFrame:
    return _curves(FIG3_MUS, FIG3_RHOS, FIG3_NMAX)


def fig3_plot(frame: pd.DataFrame):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(FIG3_MUS), figsize=(11, 3.2), sharey=True)
    colors = palette(len(FIG3_RHOS))
    for ax, mu in zip(axes, FIG3_MUS):
        for color, rho in zip(colors, FIG3_RHOS):
            sub = frame[(frame["mu_pos"] == mu) & (frame["rho"] == rho)]
            ax.plot(sub["group_size"], sub["tail_miss"], color=color, label=f"ρ = {rho:g}")
            n_star, peak = analytic.tail_miss_peak(mu, rho * mu, n_max=FIG3_NMAX)
            ax.plot([n_star], [peak], marker="*", ms=11, color=color, mec="black", mew=0.5)
        log2_axis(ax, 0, 9)
        ax.set_ylim(0, 1)
        ax.set_title(rf"$\mu_{{pos}}$ = {mu}")
        ax.set_xlabel("group size N")
    axes[0].set_ylabel(r"Pr(active, miss $E$)")
    honest_panels(axes)
    axes[0].legend(loc="upper right", title="★ = integer argmax")
    fig.tight_layout()
    return fig


FIGURES.append(
    FigureSpec(
        "fig3", "F-GRPO Fig. 3", "Lemma 3.1 panels for mu_pos in {0.8, 0.5, 0.2}, peaks starred", fig3_data, fig3_plot
    )
)


# --- Fig. 4 ---------------------------------------------------------------------


def fig4_data(ctx: Context) -> pd.DataFrame:
    mu = np.linspace(0.002, 0.998, 499)
    mags = analytic.advantage_magnitudes(mu)
    rows = []
    for gamma in FIG4_GAMMAS:
        g = analytic.focal_weight(mu, gamma)
        rows.append(pd.DataFrame({"mu_pos": mu, "gamma": gamma, "sign": "correct", "magnitude": g * mags.positive}))
        rows.append(pd.DataFrame({"mu_pos": mu, "gamma": gamma, "sign": "incorrect", "magnitude": g * mags.negative}))
    return pd.concat(rows, ignore_index=True)


def fig4_plot(frame: pd.DataFrame):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.6, 3.2))
    for color, gamma in zip(palette(len(FIG4_GAMMAS)), FIG4_GAMMAS):
        for sign, ls in (("correct", "-"), ("incorrect", "--")):
            sub = frame[(frame["gamma"] == gamma) & (frame["sign"] == sign)]
            label = f"γ = {gamma:g}, |A{'+' if sign == 'correct' else '−'}|"
            ax.plot(sub["mu_pos"], sub["magnitude"], ls, color=color, label=label)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.4)
    ax.set_xlabel(r"group success rate $\hat\mu_{pos}$")
    ax.set_ylabel(r"$g \cdot |A^{GRPO}|$")
    ax.set_title("Focal-weighted advantage magnitudes")
    honest_panels(ax)
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5))
    return fig


FIGURES.append(
    FigureSpec(
        "fig4",
        "F-GRPO Fig. 4",
        "g|A| vs mu_pos for gamma in {0, 0.5, 1}; solid correct, dashed incorrect",
        fig4_data,
        fig4_plot,
    )
)


# --- Fig. 5 ---------------------------------------------------------------------


def fig5_plot(frame: pd.DataFrame):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 3.3))
    paper = frame[frame["kind"] == "analytic"]
    init = frame[frame["kind"] == "analytic-init"]
    emp = frame[frame["kind"] == "sampler"]
    ax.plot(
        paper["group_size"], paper["value"], color="C0", label=rf"Lemma 3.1, $\mu$ = {FIG5_MU}, $\tau$ = {FIG5_TAU:g}"
    )
    ax.plot(
        init["group_size"],
        init["value"],
        ":",
        color="C1",
        label=rf"Lemma 3.1 at exact init ($\mu$ = {init['mu_pos'].iloc[0]:.5f})",
    )
    ax.errorbar(
        emp["group_size"],
        emp["value"],
        yerr=2 * emp["stderr"],
        fmt="o",
        ms=4,
        color="C3",
        label="simulator sampler (±2 s.e.)",
    )
    log2_axis(ax, 0, FIG5_MAX_EXP, step=2)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("group size N")
    ax.set_ylabel("Pr(active, leaf unsampled)")
    ax.set_title("Tail miss at the simulation's initial policy")
    honest_panels(ax)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1)  # below the axes: it covers no curve
    return fig


FIGURES.append(
    FigureSpec(
        "fig5",
        "F-GRPO Fig. 5",
        "Lemma 3.1 at the simulation init (mu=0.64, tau=6.3e-5) with the simulator's empirical frequencies",
        tail_miss_at_init,
        fig5_plot,
        simulated=True,
    )
)
