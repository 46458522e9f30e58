"""The shared rung's figure: the minority's pass@256 over training for every rung of the narrowing ladder.

Data: :func:`tailmiss.studies.sharing.data.shared_rung_data`, with the shared simulator from the shared rung's start
(dotted; its own seeds). Bands are seed sds.
"""

from __future__ import annotations

from tailmiss.studies.figure import FigureSpec
from tailmiss.studies.sharing.data import SharedRungData, rung_kind, shared_rung_data
from tailmiss.studies.style import honest_panels

__all__ = ["FIGURES", "RUNG_COLORS"]

RUNG_COLORS = {"table": "#969696", "factorized": "#6baed6", "shared": "#e6550d", "transformer": "#08306b"}
"""One colour per rung, the same in both panels."""
_ARMS = (("GRPO N=8", "GRPO, N = 8"), ("F-GRPO γ=1 N=8", "F-GRPO γ = 1, N = 8"))


def _rungs_plot(data: SharedRungData):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10.0, 4.0), sharey=True)
    for ax, (label, title) in zip(axes, _ARMS):
        sft = None
        for rung, typed in data.ladder.items():
            kind = rung_kind(rung)
            part = typed[(typed["type"] == "minority") & (typed["label"] == label)]
            if part.empty:
                continue
            g = part.groupby("step")["pass256"]
            mean, sd = g.mean(), g.std(ddof=1).fillna(0.0)
            sft = float(mean.iloc[0]) if sft is None else sft
            ax.plot(mean.index, mean.values, color=RUNG_COLORS[kind], lw=1.6, label=kind)
            ax.fill_between(mean.index, mean - sd, mean + sd, color=RUNG_COLORS[kind], alpha=0.15, lw=0)
        if data.simulator is not None:
            part = data.simulator[(data.simulator["type"] == "minority") & (data.simulator["label"] == label)]
            g = part.groupby("step")["pass256"]
            mean, sd = g.mean(), g.std(ddof=1).fillna(0.0)
            ax.plot(mean.index, mean.values, color=RUNG_COLORS["shared"], lw=1.4, ls=":", label="shared simulator")
            ax.fill_between(mean.index, mean - sd, mean + sd, color=RUNG_COLORS["shared"], alpha=0.08, lw=0)
        if sft is not None:
            ax.axhline(sft, color="k", lw=1.0, ls="--", label="SFT model")
        ax.set_title(title)
        ax.set_xlabel("RL step")
    honest_panels(axes)
    axes[0].set_ylabel("minority pass@256 on the pool (exact)")
    axes[-1].legend(fontsize=8, loc="lower left")
    seeds = max(int(t["seed"].nunique()) for t in data.ladder.values())
    spread = f"{seeds} seeds, mean ± sd" if seeds > 1 else "1 seed"
    if data.simulator is not None:
        spread += f"; the shared simulator: {int(data.simulator['seed'].nunique())} seeds"
    fig.suptitle(f"The narrowing ladder with the shared rung ({'quick, ' * data.quick}{spread})", fontsize=11)
    fig.tight_layout()
    return fig


FIGURES: list[FigureSpec] = [
    FigureSpec(
        "shared-rung",
        "F-GRPO Fig. 1(b) premise (analog): which policies narrow",
        "the conflict's minority's pass@256 on the ladder's pool over RL steps for the table, factorized, shared and "
        "transformer rungs and the shared simulator from the shared rung's start, GRPO and F-GRPO (γ = 1) at N = 8, "
        "with the SFT model's line",
        shared_rung_data,
        _rungs_plot,
        llm=("narrowing-ladder",),
    ),
]
"""This study's figures, in the order `tailmiss figures list` shows them."""
