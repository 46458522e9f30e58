"""The bridge figure: the categorical simulation started from the SFT model's answer distributions beside the
transformer's RL runs (F-GRPO Fig. 2's regimes, Lemma 3.1 per prompt, Fig. 1(b,c)).

Its data is a :class:`~tailmiss.studies.bridge.data.BridgeData`
(:func:`tailmiss.studies.bridge.data.bridge_data`), whose
verdict this module only prints.
"""

from __future__ import annotations

import numpy as np

from tailmiss.studies.bridge.data import BridgeData, bridge_data
from tailmiss.studies.figure import FigureSpec
from tailmiss.studies.style import GAMMA_STYLE, honest_panels, n_axis, palette, sweep_title

FIGURES: list[FigureSpec] = []
"""This study's figures, in the order `tailmiss figures list` shows them."""


def _regime_panels(axes, data: BridgeData) -> None:
    """(a) M_ret and (b) Q_pos against N: the transformer (seed spread as error bars) beside the simulation."""
    summary, v = data.main.summary, data.verdict  # the verdict is judged once, by the results layer
    for ax, metric, label in ((axes[0], "retained_mass", r"$M_{ret}$"), (axes[1], "q_pos", r"$Q_{pos}$ ($\mu_{pos}$)")):
        llm = summary[summary["source"] == "llm"]
        g0 = llm[llm["gamma"] == 0].sort_values("group_size")
        ax.errorbar(
            g0["group_size"],
            g0[metric],
            yerr=g0[f"{metric}_sd"],
            color="C0",
            marker="o",
            capsize=3,
            label="transformer, GRPO",
        )
        for gamma, sub in llm[llm["gamma"] > 0].groupby("gamma"):
            ax.errorbar(
                sub["group_size"],
                sub[metric],
                yerr=sub[f"{metric}_sd"],
                color="C0",
                marker="*" if gamma == 0.5 else "D",
                ms=8,
                ls="none",
                capsize=3,
                label=f"transformer, F-GRPO γ={gamma:g}",
            )
        sim = summary[summary["source"] == "sim"]
        for gamma, sub in sim.groupby("gamma"):
            sub = sub.sort_values("group_size")
            ax.plot(
                sub["group_size"],
                sub[metric],
                GAMMA_STYLE.get(gamma, "-."),
                color="C3",
                marker=".",
                label=f"simulation (lr {data.main.sim_lr:g}), γ={gamma:g}",
            )
        n_axis(ax, np.sort(sim["group_size"].unique()))
        # the other learning rates in the legend, not as labels at the curves' ends (those pile up where the
        # curves meet)
        others = sorted(data.others, key=lambda b: b.sim_lr)
        for shade, other in zip(np.linspace(0.3, 0.75, max(1, len(others))), others):
            sub = other.summary
            sub = sub[(sub["source"] == "sim") & (sub["gamma"] == 0)].sort_values("group_size")
            ax.plot(
                sub["group_size"],
                sub[metric],
                "-",
                color=f"{shade:.2f}",
                lw=0.9,
                alpha=0.9,
                marker=".",
                label=f"simulation (lr {other.sim_lr:g}), γ=0",
            )
        ax.set_ylabel(label)
    axes[0].set_title(f"(a) M_ret: Spearman {v.spearman_retained_mass:+.2f}, zones agree {v.zone_agreement:.0%}")
    axes[1].set_title(f"(b) Q_pos: Spearman {v.spearman_q_pos:+.2f}")
    honest_panels(axes[:2])


def _lemma_panel(ax, data: BridgeData) -> None:
    """(c) Lemma 3.1 per prompt against the observed change of its rare-set mass."""
    prompts = data.per_prompt
    base = prompts[(prompts["gamma"] == 0) & prompts["tail_miss"].notna() & (prompts["tau0"] > 0)]
    ns = np.sort(base["group_size"].unique())
    for color, n in zip(palette(len(ns)), ns):
        sub = base[base["group_size"] == n]
        ax.scatter(sub["tail_miss"], np.log(sub["tau"] / sub["tau0"]), s=8, color=color, label=f"N = {int(n)}")
    if len(base) > 2:
        ax.set_title(f"(c) per prompt: Spearman {data.per_prompt_spearman:+.2f}")
    ax.axhline(0, color="0.5", lw=0.8)
    ax.set_xlabel("Lemma 3.1: P(active group misses the rare set)")
    ax.set_ylabel(r"observed $\log(\tau_{end}/\tau_{SFT})$")
    honest_panels(ax)


def _tradeoff_panel(ax, data: BridgeData) -> None:
    """(d) Fig. 1(b,c) analog: rare-set hit@256 against pass@1, one point per run configuration."""
    runs = data.sweep.final
    rl = runs[runs["method"] != "sft"]
    for (n, gamma), sub in rl.groupby(["group_size", "gamma"]):
        marker, color = ("*", "C3") if gamma > 0 else ("o", None)
        label = f"F-GRPO γ={gamma:g} N={int(n)}" if gamma > 0 else f"GRPO N={int(n)}"
        ax.scatter(
            sub["exact_pass_at_1"].mean(), sub["rare_pass_at_256"].mean(), marker=marker, s=50, color=color, label=label
        )
    sft = runs[runs["method"] == "sft"].iloc[0]
    ax.scatter(sft["exact_pass_at_1"], sft["rare_pass_at_256"], marker="s", color="0.4", label="SFT")
    ax.set_xlabel("pass@1 (exact)")
    ax.set_ylabel("rare-set hit@256 (exact)")
    p256 = rl["exact_pass_at_256"]
    ax.set_title(f"(d) Fig. 1(b,c) analog; pass@256 ∈ [{p256.min():.4f}, {p256.max():.4f}]")
    honest_panels(ax)


def _bridge_plot(data: BridgeData):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    _regime_panels(axes, data)
    _lemma_panel(axes[2], data)
    _tradeoff_panel(axes[3], data)
    fig.suptitle(
        sweep_title(data.sweep, "Bridge: categorical simulation from the SFT answer distributions vs transformer RL"),
        y=1.04,
    )
    fig.tight_layout()
    # legends under the panels, where they cover no data (after the layout, which they would squeeze)
    below = {"loc": "upper center", "fontsize": 6, "frameon": False}
    if axes[0].get_legend_handles_labels()[1] == axes[1].get_legend_handles_labels()[1]:
        axes[0].legend(bbox_to_anchor=(1.1, -0.2), ncol=2, **below)  # the lines of (a) and (b)
    else:  # a series is marked identical on one panel only
        for ax in axes[:2]:
            ax.legend(bbox_to_anchor=(0.5, -0.2), ncol=1, **below)
    axes[2].legend(bbox_to_anchor=(0.5, -0.2), ncol=4, markerscale=1.5, **below)
    axes[3].legend(bbox_to_anchor=(0.5, -0.2), ncol=3, **below)
    return fig


FIGURES.append(
    FigureSpec(
        "bridge",
        "F-GRPO Fig. 2 / Lemma 3.1 / Fig. 1(b,c) vs transformer",
        "simulation started from the SFT model's exact answer distributions vs the transformer's RL runs",
        bridge_data,
        _bridge_plot,
        llm=("nsweep",),
    )
)
