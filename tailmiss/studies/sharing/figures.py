"""The shared rung's figure: each prompt type's pass@256 over training for every rung of the narrowing ladder, and
the focal weight's paired effect per rung.

Data: :func:`tailmiss.studies.sharing.data.shared_rung_data`, with the shared simulator from the shared rung's start
(dotted; its own seeds). Bands are seed sds; the focal effect's bars are the rule's 95% intervals
(:func:`tailmiss.studies.narrowing.sharing.sharing_claims`).
"""

from __future__ import annotations

import numpy as np

from tailmiss.studies.figure import FigureSpec
from tailmiss.studies.narrowing.sharing import sharing_claims
from tailmiss.studies.rule import practical_threshold
from tailmiss.studies.sharing.data import NARROWING_LADDER, SHARED_LADDER, SharedRungData, rung_kind, shared_rung_data
from tailmiss.studies.style import honest_panels, seeds_note

__all__ = ["FIGURES", "RUNG_COLORS"]

RUNG_COLORS = {"table": "#969696", "factorized": "#6baed6", "shared": "#e6550d", "transformer": "#08306b"}
"""One colour per rung, the same in every panel."""
_ARMS = (("GRPO N=8", "GRPO, N = 8"), ("F-GRPO γ=1 N=8", "F-GRPO γ = 1, N = 8"))
_KINDS = (("minority", "minority"), ("rest", "rest"))


def _curve(ax, part, color: str, label: str, ls: str = "-", alpha: float = 0.15) -> float | None:
    """One policy's seed mean ± sd over steps on ``ax``; its start (step 0), or None without runs."""
    if part.empty:
        return None
    g = part.groupby("step")["pass256"]
    mean, sd = g.mean(), g.std(ddof=1).fillna(0.0)
    ax.plot(mean.index, mean.values, color=color, lw=1.6 if ls == "-" else 1.4, ls=ls, label=label)
    ax.fill_between(mean.index, mean - sd, mean + sd, color=color, alpha=alpha, lw=0)
    return float(mean.iloc[0])


def _focal_panel(ax, data: SharedRungData, kind: str) -> None:
    """F-GRPO γ = 1 − GRPO final pass@256 per rung, paired by seed: the mean and the rule's 95% interval."""
    focal = sharing_claims(data.ladder).focal
    rungs = [r for r in data.ladder if (r, kind) in focal]
    for i, rung in enumerate(rungs):
        d = focal[(rung, kind)]
        lo, hi = d.ci if np.isfinite(d.threshold) else (d.mean, d.mean)
        ax.errorbar([d.mean], [i], xerr=[[d.mean - lo], [hi - d.mean]], fmt="o", ms=6, capsize=3,
                    color=RUNG_COLORS[rung_kind(rung)], label=rung_kind(rung))  # fmt: skip
    delta = practical_threshold("pass@k")
    ax.axvspan(-delta, delta, color="0.85", lw=0, zorder=0, label=f"±δ = {delta:g}: below the practical threshold")
    ax.axvline(0, color="0.3", lw=0.8)
    ax.set_yticks(range(len(rungs)))
    ax.set_yticklabels([rung_kind(r) for r in rungs])
    ax.set_ylim(-0.6, len(rungs) - 0.4)
    ax.set_xlabel("F-GRPO − GRPO, final pass@256")
    ax.set_title(f"{kind}: the focal weight, paired by seed (95% interval)", fontsize=9)


def _rungs_plot(data: SharedRungData):
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(2, 3, figsize=(14.0, 7.4), gridspec_kw={"width_ratios": [1, 1, 0.8]})
    for row, (kind, name) in enumerate(_KINDS):
        for col, (label, title) in enumerate(_ARMS):
            ax = axes[row, col]
            for rung, typed in data.ladder.items():
                part = typed[(typed["type"] == kind) & (typed["label"] == label)]
                start = _curve(ax, part, RUNG_COLORS[rung_kind(rung)], rung_kind(rung))
                if start is not None:  # each rung's own start: the factorized fit starts below the SFT law
                    ax.axhline(start, color=RUNG_COLORS[rung_kind(rung)], lw=0.9, ls="--", zorder=0)
            if data.simulator is not None:
                part = data.simulator[(data.simulator["type"] == kind) & (data.simulator["label"] == label)]
                _curve(ax, part, RUNG_COLORS["shared"], "shared (the simulator)", ls=":", alpha=0.08)
            ax.set_title(f"{name}: {title}", fontsize=10)
            ax.set_xlabel("RL step")
            ax.set_ylabel(f"{name} pass@256 on the pool (exact)" if col == 0 else "")
        _focal_panel(axes[row, 2], data, kind)
    honest_panels(axes)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    handles.append(Line2D([], [], color="0.3", lw=0.9, ls="--"))
    labels.append("a rung's start (dashed, its colour)")
    axes[0, 0].legend(handles, labels, fontsize=7, loc="lower left")
    axes[0, 2].legend(fontsize=7, loc="best")
    counts = {kind: int(t["seed"].nunique()) for kind, t in ((rung_kind(r), t) for r, t in data.ladder.items())}
    if data.simulator is not None:
        counts["the shared simulator"] = int(data.simulator["seed"].nunique())
    spread = seeds_note(counts) + (", mean ± sd" if max(counts.values()) > 1 else "")
    fig.suptitle(f"The narrowing ladder with the shared rung ({'quick, ' * data.quick}{spread})", fontsize=11)
    fig.tight_layout()
    return fig


FIGURES: list[FigureSpec] = [
    FigureSpec(
        "shared-rung",
        "F-GRPO Fig. 1(b) premise (analog): which policies narrow",
        "the conflict's minority's and the rest's pass@256 on the ladder's pool over RL steps for the table, "
        "factorized, shared and transformer rungs and the shared simulator from the shared rung's start, GRPO and "
        "F-GRPO (γ = 1) at N = 8, each rung's start dashed; and F-GRPO − GRPO's final pass@256 per rung, paired by "
        "seed, with the rule's 95% interval",
        shared_rung_data,
        _rungs_plot,
        llm=(NARROWING_LADDER, SHARED_LADDER),
    ),
]
"""This study's figures, in the order `tailmiss figures list` shows them."""
