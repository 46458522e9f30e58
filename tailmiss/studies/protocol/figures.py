"""The paper's protocol in miniature: the protocol ladder (``protocol``) and a one-seed Table 2's noise (``noise``).

Data: :func:`tailmiss.studies.protocol.data.protocol_data` (the four protocol sweeps, quick or
full) turned into claims by :func:`tailmiss.studies.protocol.claims.protocol_claims`.
"""

from __future__ import annotations

import numpy as np

from tailmiss.studies.context import Context
from tailmiss.studies.figure import FigureSpec
from tailmiss.studies.protocol import claims as pc
from tailmiss.studies.protocol import noise as nc
from tailmiss.studies.protocol.data import PROTOCOL_FAMILIES, protocol_data
from tailmiss.studies.style import honest_panels, label_bars, n_axis

FIGURES: list[FigureSpec] = []
"""This study's figures, in the order `tailmiss figures list` shows them."""

_GAMMA_MARKERS = {0.5: ("s", "C1"), 1.0: ("D", "C3")}


def protocol_claims_data(ctx: Context) -> pc.ProtocolClaims:
    """The protocol ladder's claims (:func:`~tailmiss.studies.protocol.claims.protocol_claims`)."""
    return pc.protocol_claims(protocol_data(ctx))


def _rung_panel(ax, claims: pc.ProtocolClaims, rung: pc.RungSpec, metric: str, ylabel: str) -> None:
    t = claims.tables[rung.name]
    g = t[(t["method"] == "grpo") & (t["gamma"] == 0)].sort_values("group_size")
    ns = g["group_size"].to_numpy()
    ax.errorbar(ns, g[metric], yerr=np.nan_to_num(g[f"{metric}_sd"]), marker="o", color="C0", capsize=3, label="GRPO")
    for _, r in t[t["gamma"] > 0].iterrows():
        marker, color = _GAMMA_MARKERS.get(float(r["gamma"]), ("^", "C4"))
        x = r["group_size"] * (1.08 if r["gamma"] == 0.5 else 1.16)
        sd = np.nan_to_num(r[f"{metric}_sd"])
        ax.errorbar([x], [r[metric]], yerr=[sd], marker=marker, color=color, capsize=3, ls="", label=r["label"])
    n_axis(ax, ns)
    ax.ticklabel_format(axis="y", useOffset=False)
    ax.set_ylabel(ylabel)


def _protocol_plot(claims: pc.ProtocolClaims):
    import matplotlib.pyplot as plt

    rungs = pc.RUNGS
    fig, axes = plt.subplots(2, len(rungs), figsize=(3.1 * len(rungs), 6.2), sharex=True, squeeze=False)
    for j, rung in enumerate(rungs):
        _rung_panel(axes[0, j], claims, rung, "pass256", "pass@256 (exact)" if j == 0 else "")
        _rung_panel(axes[1, j], claims, rung, "dnll", r"$\Delta$NLL$_{rare}$" if j == 0 else "")
        # the rung's verdicts (dip, order, reach) are the report's, with their tests: not the panels'
        axes[0, j].set_title(rung.name)
        axes[1, j].set_title("ΔNLL_rare (the paper: 2 < 32 < 8)", fontsize=9)
    honest_panels(axes)
    axes[0, 0].legend(fontsize=7, loc="lower left")
    seeds = int(claims.tables["selection"]["seeds"].max())
    fig.suptitle(
        f"F-GRPO Table 2 under its own protocol, one ingredient per rung (left to right; "
        f"{'quick presets' if claims.quick else f'up to {seeds} seeds'}; mean ± seed sd)"
    )
    fig.tight_layout()
    return fig


FIGURES.append(
    FigureSpec(
        "protocol",
        "F-GRPO Table 2 under Table 5's protocol (analog)",
        "GRPO pass@256 and ΔNLL_rare vs N, F-GRPO at N = 8, on each rung of the protocol ladder",
        protocol_claims_data,
        _protocol_plot,
        llm=PROTOCOL_FAMILIES,
    )
)


def _seed_panel(ax, noise: nc.NoiseClaims, scoring: str) -> None:
    frame = noise.scores[noise.scores["scoring"] == scoring]
    wide = frame.pivot(index="group_size", columns="seed", values="pass256").sort_index()
    ns = wide.index.to_numpy()
    for seed in wide.columns:
        ax.plot(ns, wide[seed], color="0.6", lw=0.8, alpha=0.8)
    ax.plot(ns, wide.mean(axis=1), color="C0", lw=2.2, marker="o", label="seed mean")
    paper = [pc.PAPER_PASS256[n] / 100 for n in ns if n in pc.PAPER_PASS256]
    if len(paper) == len(ns):
        ax.plot(ns, paper, color="k", ls="--", lw=1.2, label="Table 2 (math)")
    n_axis(ax, ns)
    ax.set_title(f"{scoring}: {wide.shape[1]} seeds (grey: one each)")
    ax.set_ylabel("pass@256")


def _noise_plot(claims: pc.ProtocolClaims):
    import matplotlib.pyplot as plt

    noise = claims.noise
    scorings = sorted(noise.scores["scoring"].unique())
    fig, axes = plt.subplots(1, len(scorings) + 1, figsize=(3.6 * (len(scorings) + 1), 3.8), squeeze=False)
    for ax, scoring in zip(axes[0], scorings):
        _seed_panel(ax, noise, scoring)
    honest_panels(axes[0, :-1])
    axes[0, 0].legend(fontsize=7)
    ax = axes[0, -1]
    single = noise.single_seed.set_index("scoring").loc[scorings]
    x = np.arange(len(scorings))
    for shift, column, label in (
        (-0.2, "p_table2", "Table-2-like (paper's margins)"),
        (0.2, "p_interior", "interior min. + recovery"),
    ):
        label_bars(ax, ax.bar(x + shift, single[column], width=0.4, label=label))  # a 0 bar reads "0"
    ax.set_xticks(x)
    ax.set_xticklabels(scorings, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.12)
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.set_ylabel("probability over one-seed sweeps")
    ax.set_title("could one seed show the dip?")
    ax.legend(fontsize=7)
    fig.suptitle("GRPO pass@256 vs N on the paper's protocol: seed noise, exact and from 1024 samples per prompt")
    fig.tight_layout()
    return fig


FIGURES.append(
    FigureSpec(
        "noise",
        "F-GRPO Table 2 / App. Q (seed noise)",
        "GRPO pass@256 vs N per seed (exact and sampled on 30- and 500-prompt sets); P(one seed shows the dip)",
        protocol_claims_data,
        _noise_plot,
        llm=("paper-protocol",),
    )
)
