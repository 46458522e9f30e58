"""Ladder figures: M_ret against N on every rung, and the retention/accuracy frontier along training.

Data come from :func:`tailmiss.studies.runs.ladder_result` (the ``ladder`` preset, or
``ladder-quick`` in quick mode; ``ctx.llm_sweeps["ladder"]`` overrides it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tailmiss.analytic.regimes import ZONE_THRESHOLD
from tailmiss.studies.context import Context
from tailmiss.studies.figure import FigureSpec
from tailmiss.studies.runs import ladder_result
from tailmiss.studies.style import GAMMA_STYLE, honest_panels, palette

FIGURES: list[FigureSpec] = []
"""This study's figures, in the order `tailmiss figures list` shows them."""

_SET_STYLE = {"pool": ("o", 1.0), "heldout": ("s", 0.45)}


def _tag(frame: pd.DataFrame, result) -> pd.DataFrame:
    lad = result.ladder
    order = {r.name: i for i, r in enumerate(lad.rungs)}
    return frame.assign(ladder=lad.name, num_seeds=len(lad.seeds), rung_order=frame["rung"].map(order))


def ladder_data(ctx: Context):
    """The main ladder (:func:`tailmiss.studies.runs.ladder_result`)."""
    return ladder_result(ctx)


def _frame_legend_title(fig, axes, title: str, note: str, ncol: int) -> None:
    """The figure's legend (every panel's labels, once: the held-out curves live on the transformer's panels only),
    a short title and its note wrapped to the figure's width, above the panels without squeezing them."""
    import textwrap

    seen: dict = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    width = fig.get_size_inches()[0]
    chars = max(40, int(width * 15))
    lines = [title, *textwrap.wrap(note, chars)]
    fig.suptitle("\n".join(lines), fontsize=9)
    fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncol=min(len(seen), max(2, ncol)))


def _grid(frame: pd.DataFrame, width: float, height: float):
    """One panel per rung: a row per model (table, factorized, transformer), its rungs side by side."""
    import matplotlib.pyplot as plt

    rungs = frame.sort_values("rung_order").drop_duplicates("rung")
    models = list(dict.fromkeys(rungs["model"]))
    per_model = {m: list(rungs.loc[rungs["model"] == m, "rung"]) for m in models}
    cols = max(len(v) for v in per_model.values())
    fig, axes = plt.subplots(
        len(models),
        cols,
        figsize=(max(width * cols, 6.0), height * len(models) + 1.2),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    cells = {}
    for i, m in enumerate(models):
        for j in range(cols):
            if j < len(per_model[m]):
                cells[per_model[m][j]] = axes[i, j]
            else:
                axes[i, j].set_visible(False)
    return fig, axes, cells


def _ladder_plot(result):
    frame = _tag(result.final, result)
    fig, axes, cells = _grid(frame, 3.6, 2.6)
    ns = sorted(frame["group_size"].unique())
    gammas = sorted(frame["gamma"].unique())
    colors = dict(zip(gammas, palette(max(len(gammas), 2))))
    for rung, ax in cells.items():
        part = frame[frame["rung"] == rung]
        model, optimizer = part["model"].iloc[0], part["optimizer"].iloc[0]
        for where, (marker, alpha) in _SET_STYLE.items():
            if where == "heldout" and model != "transformer":
                continue  # no parameter is shared across prompts: held-out prompts never move (M_ret = 1)
            for g in gammas:
                sel = part[(part["set"] == where) & (part["gamma"] == g)]
                if sel.empty:
                    continue
                stats = sel.groupby("group_size")["retained_mass"].agg(["mean", "std"]).reindex(ns)
                ax.errorbar(
                    ns,
                    stats["mean"],
                    yerr=stats["std"].fillna(0.0),
                    marker=marker,
                    ms=3,
                    capsize=2,
                    ls=GAMMA_STYLE.get(g, "-"),
                    color=colors[g],
                    alpha=alpha,
                    label=f"γ={g:g}, {'trained-on' if where == 'pool' else 'held-out'}",  # colour: γ; marker: set
                )
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns)
        ax.set_xticklabels([str(int(n)) for n in ns])
        ax.axhline(ZONE_THRESHOLD, color="0.7", lw=0.8, zorder=0)
        ax.set_title(f"{model} · {optimizer} (lr {part['lr'].iloc[0]:g})")
        ax.set_xlabel("group size N")
        ax.set_ylabel("M_ret (final)")
    honest_panels(list(cells.values()))
    seeds = int(frame["num_seeds"].iloc[0])
    _frame_legend_title(
        fig,
        axes,
        f"{frame['ladder'].iloc[0]}: final M_ret vs N per rung",
        f"{seeds} seed{'s' * (seeds > 1)}, mean ± sd; grey line = zone II threshold (M_ret {ZONE_THRESHOLD:g}); "
        "faint curves = held-out prompts (only the transformer shares parameters across prompts, so only its "
        "held-out prompts move)",
        ncol=4,
    )
    return fig


def _frontier_frame(result) -> pd.DataFrame:
    """Seed means of the GRPO runs' trained-on Q_pos and M_ret at every step, per rung and N."""
    h = result.history
    h = h[(h["set"] == "pool") & (h["gamma"] == 0)]
    mean = h.groupby(["rung", "model", "optimizer", "lr", "group_size", "step"], as_index=False)[
        ["q_pos", "retained_mass"]
    ].mean()
    return _tag(mean, result)


def _frontier_plot(result):
    frame = _frontier_frame(result)
    fig, axes, cells = _grid(frame, 3.4, 2.7)
    ns = sorted(frame["group_size"].unique())
    colors = dict(zip(ns, palette(len(ns))))
    for rung, ax in cells.items():
        part = frame[frame["rung"] == rung]
        model, optimizer = part["model"].iloc[0], part["optimizer"].iloc[0]
        for n in ns:
            run = part[part["group_size"] == n].sort_values("step")
            ax.plot(run["q_pos"], run["retained_mass"], marker="o", ms=2.5, color=colors[n], label=f"N={n}")
        q0 = part.loc[part["step"] == 0, "q_pos"]
        if len(q0):
            ax.axvline(float(np.mean(q0)), color="0.7", lw=0.8, zorder=0)
        ax.set_title(f"{model} · {optimizer} (lr {part['lr'].iloc[0]:g})")
        ax.set_xlabel("Q_pos on the training pool")
        ax.set_ylabel("M_ret on the training pool")
    honest_panels(list(cells.values()))
    _frame_legend_title(
        fig,
        axes,
        f"{frame['ladder'].iloc[0]}: retention/accuracy frontier along training",
        "GRPO, seed means on the training pool; table = the simulator's policy; grey line = the start's Q_pos",
        ncol=8,
    )
    return fig


FIGURES.append(
    FigureSpec(
        "ladder",
        "F-GRPO Fig. 2(c) across policy parameterisations",
        "final M_ret vs N on every rung of the ladder (table = simulator, factorized, transformer; Adam and SGD), "
        "trained-on and held-out prompts",
        ladder_data,
        _ladder_plot,
        llm=("ladder",),
    )
)
FIGURES.append(
    FigureSpec(
        "frontier",
        "F-GRPO Fig. 2(a,b) as a frontier",
        "M_ret against Q_pos along training per N on every rung (learning speed taken out)",
        ladder_data,
        _frontier_plot,
        llm=("ladder",),
    )
)
