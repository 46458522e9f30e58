"""F-GRPO's controls (``controls``), γ sensitivity (``gamma``), pass@k curves (``passk``) and the pass@1-pass@256
plane (``tradeoff``) in miniature, on the paper's protocol at N = 8.

Data: :func:`tailmiss.studies.controls.data.controls_data` (the paper-protocol, controls and γ
sweeps, quick or full) turned into claims by
:func:`tailmiss.studies.controls.claims.controls_claims`. Error bars are seed sds.
"""

from __future__ import annotations

import numpy as np

from tailmiss.studies.context import Context
from tailmiss.studies.controls import claims as cc
from tailmiss.studies.controls.data import CONTROL_FAMILIES, controls_data
from tailmiss.studies.figure import FigureSpec
from tailmiss.studies.style import honest_panels, mark_coincident

FIGURES: list[FigureSpec] = []
"""This study's figures, in the order `tailmiss figures list` shows them."""


def controls_claims_data(ctx: Context) -> cc.ControlsClaims:
    """The controls, γ, pass@k and trade-off claims (:func:`tailmiss.studies.controls.claims.controls_claims`)."""
    return cc.controls_claims(controls_data(ctx))


def _seeds_note(claims: cc.ControlsClaims) -> str:
    seeds = int(claims.controls["seeds"].min())
    return ("quick presets, " if claims.quick else "") + f"{seeds} seed{'s' if seeds != 1 else ''}, mean ± seed sd"


def _short(label: str) -> str:
    return cc.CONTROL_TAGS.get(label.removeprefix("GRPO N=8 "), label)


def _controls_plot(claims: cc.ControlsClaims):
    import matplotlib.pyplot as plt

    t = claims.controls
    metrics = [("pass1", "pass@1"), ("pass256", "pass@256"), ("dnll", r"$\Delta$NLL$_{rare}$ (lower: rare kept)")]
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 4.0), squeeze=False)
    x = np.arange(len(t))
    colors = [
        "C0" if lab.startswith("GRPO N=8") and lab == "GRPO N=8" else "C1" if lab.startswith("F-") else "0.55"
        for lab in t["label"]
    ]
    base = t.index[t["label"] == "GRPO N=8"]
    for ax, (metric, name) in zip(axes[0], metrics):
        # dots on a free axis, not bars: the runs differ by far less than their values' distance from 0
        sd = np.nan_to_num(t[f"{metric}_sd"])
        for xi, mean, err, color in zip(x, t[metric], sd, colors):
            ax.errorbar([xi], [mean], yerr=[err], fmt="o", ms=6, color=color, capsize=3)
        if len(base):
            ax.axhline(float(t.loc[base[0], metric]), color="C0", lw=0.8, ls=":", zorder=0)
        ax.set_xlim(-0.6, len(t) - 0.4)
        ax.set_xticks(x)
        ax.set_xticklabels([_short(lab) for lab in t["label"]], rotation=35, ha="right", fontsize=8)
        ax.set_title(name)
        ax.ticklabel_format(axis="y", useOffset=False)
    honest_panels(axes)
    # the verdicts are the report's (its ledger and section, with their tests), not a subtitle's
    fig.suptitle(
        f"F-GRPO Table 3 analog: GRPO, F-GRPO and the controls at N = 8 ({_seeds_note(claims)}; dotted: GRPO N=8)",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


FIGURES.append(
    FigureSpec(
        "controls",
        "F-GRPO Table 3 (analog)",
        "pass@1, pass@256 and ΔNLL_rare of GRPO, F-GRPO (γ = 0.5, 1) and the controls (low-LR, entropy, KL, DS-GRPO)",
        controls_claims_data,
        _controls_plot,
        llm=CONTROL_FAMILIES,
    )
)


def _gamma_plot(claims: cc.ControlsClaims):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.8), squeeze=False)
    gamma = claims.sensitivity.gamma
    picks = {c.method: c.selected for c in claims.sensitivity.choices}
    same = claims.sensitivity.identical  # methods whose runs are GRPO's: one series, not a method of their own
    drawn = [m for m in cc.METHODS.values() if m in picks and m not in same]
    for j, (metric, name) in enumerate((("pass1", "pass@1"), ("pass256", "pass@256"))):
        ax = axes[0, j]
        for i, method in enumerate(drawn):
            t = gamma[gamma["method"] == method].sort_values("gamma")
            shift = (i - (len(drawn) - 1) / 2) * 0.03  # dodged apart, so that the error bars stay readable
            copies = [m for m in same if method == "GRPO"]
            ax.errorbar(
                t["gamma"] + shift,
                t[metric],
                yerr=np.nan_to_num(t[f"{metric}_sd"]),
                marker="o",
                capsize=3,
                color=f"C{i}",
                label=f"{method} (selected γ = {picks[method]:g})"
                + (f"; {', '.join(copies)}: the same runs" if copies else ""),
            )
        ax.set_xticks(cc.GAMMAS)
        ax.set_xlabel("γ")
        ax.set_title(name)
        ax.ticklabel_format(axis="y", useOffset=False)
    honest_panels(axes)
    axes[0, 0].legend(fontsize=7)
    copies = f"; {', '.join(same)} not drawn apart: its runs equal GRPO's on every seed" if same else ""
    fig.suptitle(
        f"F-GRPO Tables 6-7 analog: γ sensitivity at N = 8, DAPO with dynamic sampling ({_seeds_note(claims)}{copies})",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


FIGURES.append(
    FigureSpec(
        "gamma",
        "F-GRPO Tables 6-7 (analog)",
        "pass@1 and pass@256 against γ ∈ {0, 0.5, 1, 2} for GRPO, DAPO (dynamic sampling) and CISPO at N = 8",
        controls_claims_data,
        _gamma_plot,
        llm=CONTROL_FAMILIES,
    )
)


def _k_axis(ax) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(cc.KS)
    ax.set_xticklabels([str(k) for k in cc.KS])
    ax.set_xlabel("k")


_DIFF_COLORS = ("C8", "C9")
"""Colours of the differences whose focal run the left panel does not draw (F-GRPO's is its colour there)."""


def _method_of(label: str) -> str:
    """``"F-DAPO+DS γ=0.5 N=8"`` → ``"DAPO"``: the γ-sensitivity method name of a focal run's label."""
    return label.split(" ")[0].removeprefix("F-").split("+")[0]


def _passk_plot(claims: cc.ControlsClaims):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.9), squeeze=False)
    ax = axes[0, 0]
    curves = claims.sensitivity.curves
    exact = curves[curves["scoring"] == "exact"]
    colors = {}
    for i, label in enumerate(claims.tradeoff["label"]):
        rows = exact[exact["label"] == label].groupby("k")["value"]
        ls = "-" if not label.startswith("GRPO N=8 ") else ":"
        colors[label] = f"C{i % 8}"
        ax.plot(cc.KS, rows.mean().reindex(cc.KS), marker="o", ms=3, ls=ls, color=colors[label], label=_short(label))
    _k_axis(ax)
    ax.set_ylabel("pass@k (exact)")
    ax.set_title("pass@k curves")
    honest_panels(ax)
    ax = axes[0, 1]
    same = claims.sensitivity.identical  # their differences are GRPO's: one curve, named in the title
    crossings = [c for c in claims.crossings if _method_of(c.focal) not in same]
    spare = iter(_DIFF_COLORS)
    for c in crossings:
        if c.focal not in colors:
            colors[c.focal] = next(spare)
        mean = np.array([d.mean for d in c.diffs])
        thr = np.nan_to_num(np.array([max(d.threshold, d.delta) for d in c.diffs]))  # NaN: untested, no band
        ls = "-" if c.scoring == "exact" else "--"
        ax.plot(
            cc.KS, mean, ls=ls, marker="o", ms=3, color=colors[c.focal], label=f"{c.focal} − {c.base} ({c.scoring})"
        )
        if c.scoring == "exact":
            ax.fill_between(
                cc.KS, -thr, thr, color=colors[c.focal], alpha=0.12, lw=0, label=f"{c.focal}: tie band (exact)"
            )
    ax.axhline(0, color="k", lw=0.8)
    _k_axis(ax)
    ax.set_ylabel("focal − base pass@k")
    left = f"; {', '.join(same)}: GRPO's runs, not drawn apart" if same else ""
    ax.set_title(f"focal − base, paired by seed{left}", fontsize=9)
    honest_panels(ax)
    fig.suptitle(
        f"F-GRPO Tables 12-14 analog: pass@k, k = 1 … 256, exact and from 1024 samples ({_seeds_note(claims)}; "
        "band: the smallest difference the rule resolves, the larger of δ and the 95% interval's half-width)",
        fontsize=9,
    )
    fig.tight_layout()
    for ax in axes[0]:  # under the panels, where they cover no curve (after the layout, which they would squeeze)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=7, ncol=2, frameon=False)
    return fig


FIGURES.append(
    FigureSpec(
        "passk",
        "F-GRPO Tables 12-14 (analog)",
        "pass@k for k = 1 … 256 of each run, and F-GRPO − base method by k, exact and with the 1024-sample estimator",
        controls_claims_data,
        _passk_plot,
        llm=CONTROL_FAMILIES,
    )
)


def _tradeoff_plot(claims: cc.ControlsClaims):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    for i, (_, r) in enumerate(claims.tradeoff.iterrows()):
        label = r["label"]
        marker = "s" if label.startswith("F-") else "o" if label.count(" ") == 1 else "^"
        ax.errorbar(
            r["pass1"],
            r["pass256"],
            xerr=np.nan_to_num(r["pass1_sd"]),
            yerr=np.nan_to_num(r["pass256_sd"]),
            marker=marker,
            ms=7,
            capsize=3,
            ls="",
            color=f"C{i % 10}",
            label=_short(label),
        )
    d1, d256 = claims.tradeoff_diffs["vs GRPO N=8"]
    ax.set_xlabel("pass@1")
    ax.set_ylabel("pass@256")
    ax.ticklabel_format(useOffset=False)
    honest_panels(ax)
    ax.set_title(
        f"F-GRPO Fig. 1(b,c) analog ({_seeds_note(claims)})\nF-GRPO − GRPO at N = 8: pass@1 {d1.mean:+.3f}, "
        f"pass@256 {d256.mean:+.3f}",
        fontsize=9,
    )
    fig.tight_layout()
    mark_coincident(ax)  # a control on GRPO N=8's point is drawn as a ring around it, and says so
    ax.legend(fontsize=7)
    return fig


FIGURES.append(
    FigureSpec(
        "tradeoff",
        "F-GRPO Fig. 1(b,c) (analog)",
        "pass@256 against pass@1 for GRPO N = 2, 8, 32, F-GRPO N = 8 and the controls, with seed sds",
        controls_claims_data,
        _tradeoff_plot,
        llm=CONTROL_FAMILIES,
    )
)
