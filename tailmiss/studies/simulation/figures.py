"""Simulation figures: F-GRPO Fig. 2 (both surrogate readings) and BroRL Fig. 3.

Their data are :class:`~tailmiss.studies.simulation.data.SimulatedMeans` from
:func:`tailmiss.studies.simulation.data.simulated_means`; zone II is the result's own
:attr:`~tailmiss.studies.simulation.data.SimulatedMeans.zone`.
"""

from __future__ import annotations

import numpy as np

from tailmiss.analytic.regimes import ZONE_THRESHOLD
from tailmiss.studies.figure import FigureSpec
from tailmiss.studies.simulation.data import SimulatedMeans, simulated_means
from tailmiss.studies.style import GAMMA_STYLE, honest_panels, palette

FIGURES: list[FigureSpec] = []
"""This study's figures, in the order `tailmiss figures list` shows them."""

FIG2_CURVE_NS = (2, 256, 8192, 131072)


def _step_panels(axes, sim: SimulatedMeans) -> None:
    """(a) Q_pos and (b) M_ret against the step for the curve group sizes, γ = 0 solid and γ = 1 dashed."""
    frame, final_step = sim.means, sim.final_step
    ns = [n for n in FIG2_CURVE_NS if n in set(frame["group_size"])]
    colors = dict(zip(ns, palette(len(ns))))
    for ax, metric, label in ((axes[0], "q_pos", r"$Q_{pos}$"), (axes[1], "retained_mass", r"$M_{ret}$")):
        for n in ns:
            for gamma, sub in frame[frame["group_size"] == n].groupby("gamma"):
                ax.plot(
                    sub["step"],
                    sub[metric],
                    GAMMA_STYLE.get(gamma, "-."),
                    color=colors[n],
                    label=f"N = {n}" if gamma == 0 else None,
                )
        ax.set_xlabel("step")
        ax.set_ylabel(label)
        ax.set_xlim(0, final_step)
    axes[0].set_title("(a) correct mass")
    axes[1].set_title("(b) retained correct mass")
    axes[1].set_ylim(-0.02, 1.02)
    honest_panels(axes[:2])
    handles, labels = axes[0].get_legend_handles_labels()
    axes[0].figure.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.36, 0.0),
        ncol=len(ns) + 1,
        title="solid γ = 0, dashed γ = 1",
    )


def _final_panel(ax, sim: SimulatedMeans) -> None:
    """(c) the final Q_pos and M_ret against N, with the regimes of the final γ = 0 M_ret (zone II shaded)."""
    final, final_step = sim.final, sim.final_step
    for metric, color, label in (("q_pos", "C0", r"$Q_{pos}$"), ("retained_mass", "C3", r"$M_{ret}$")):
        for gamma, sub in final.groupby("gamma"):
            ax.plot(
                sub["group_size"],
                sub[metric],
                GAMMA_STYLE.get(gamma, "-."),
                marker="o",
                ms=3,
                color=color,
                label=f"{label}, γ = {gamma:g}",
            )
    zone = sim.zone
    ns_all = np.sort(final["group_size"].unique())
    ax.set_xscale("log")
    ax.set_xlim(ns_all[0] / 1.3, ns_all[-1] * 1.3)
    if zone is not None:
        lo, hi = zone
        ax.axvspan(lo, hi, color="0.85", zorder=0)
        labels = [("II", np.sqrt(lo * hi))]
        if lo > ns_all[0]:
            labels.append(("I", np.sqrt(ns_all[0] * lo)))
        if hi < ns_all[-1]:
            labels.append(("III", np.sqrt(hi * ns_all[-1])))
        for text, x in labels:
            ax.text(x, 1.04, text, ha="center", va="bottom", fontsize=11, fontweight="bold")
    ax.set_ylim(-0.02, 1.12)
    ax.set_xlabel("group size N")
    ax.set_title(f"(c) step {final_step}", pad=16)
    honest_panels(ax)
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5))


def _fig2_plot(sim: SimulatedMeans, title: str):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    _step_panels(axes, sim)
    _final_panel(axes[2], sim)
    seeds = sim.num_seeds
    fig.suptitle(f"{title} — preset {sim.preset}, mean of {seeds} seed{'s' * (seeds > 1)}", y=1.03)
    fig.tight_layout()
    return fig


FIGURES.append(
    FigureSpec(
        "fig2",
        "F-GRPO Fig. 2",
        "categorical simulation, log-prob surrogate + Adam (reproduces the paper); zone II shaded where final "
        f"M_ret < {ZONE_THRESHOLD:g}",
        lambda ctx: simulated_means("fgrpo-fig2", ctx),
        lambda sim: _fig2_plot(sim, "F-GRPO Fig. 2, log-prob surrogate + Adam"),
        simulated=True,
    )
)
FIGURES.append(
    FigureSpec(
        "fig2-prob",
        "F-GRPO Fig. 2 (literal reading)",
        "same sweep with App. J's probability surrogate + AdamW (does not reproduce the paper)",
        lambda ctx: simulated_means("fgrpo-fig2-prob", ctx),
        lambda sim: _fig2_plot(sim, "F-GRPO Fig. 2, probability surrogate + AdamW"),
        simulated=True,
    )
)


def _brorl_plot(sim: SimulatedMeans):
    import matplotlib.pyplot as plt

    frame = sim.means
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    ns = sorted(frame["group_size"].unique())
    panels = (
        ("q_pos", 1.0, r"$Q_{pos}$", "(a) correct mass"),
        ("frac_correct_improved", 100.0, "% correct actions improved", "(b) improved correct actions"),
        ("worst_drop", 1.0, r"min$_{i\in\mathcal{P}}$ $(p_i(t) - p_i(0))$", "(c) worst drop"),
    )
    for ax, (metric, scale, ylabel, title) in zip(axes, panels):
        for color, n in zip(palette(len(ns)), ns):
            sub = frame[(frame["group_size"] == n) & (frame["gamma"] == 0)]
            ax.plot(sub["step"], sub[metric] * scale, color=color, label=f"N = {n}")
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
    honest_panels(axes)
    axes[0].legend(loc="lower left")
    axes[2].ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    seeds = sim.num_seeds
    fig.suptitle(
        f"BroRL Fig. 3 — preset {sim.preset} (probability surrogate + AdamW, lr 1e-3), "
        f"mean of {seeds} seed{'s' * (seeds != 1)}",
        y=1.03,
    )
    fig.tight_layout()
    return fig


FIGURES.append(
    FigureSpec(
        "brorl-fig3",
        "BroRL Fig. 3",
        "BroRL preset: Q_pos, % improved and worst drop vs step",
        lambda ctx: simulated_means("brorl-fig3", ctx),
        _brorl_plot,
        simulated=True,
    )
)
