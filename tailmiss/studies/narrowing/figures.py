"""The narrowing regime's figures: held-out pass@256 over training by prompt type (``narrowing``), every run's
path in the pass@1-pass@256 plane (``focal-frontier``), and where the focal weight is more than a slower GRPO, by
setting and γ (``focal-map``).

Data: :func:`tailmiss.studies.narrowing.data.narrowing_data` (the study's sweeps, quick or full). Bands and
error bars are seed sds; thin lines are single seeds.
"""

from __future__ import annotations

import pandas as pd

from tailmiss.studies.figure import FigureSpec
from tailmiss.studies.narrowing.data import (
    END_POINT,
    NARROWING_FAMILIES,
    PLATEAU,
    SETTINGS_READ,
    NarrowingData,
    narrowing_data,
)
from tailmiss.studies.style import honest_panels, seeds_note

__all__ = ["FIGURES", "ARMS"]

FIGURES: list[FigureSpec] = []
"""This study's figures, in the order `tailmiss figures list` shows them."""

_N_COLORS = {2: "#9ecae1", 4: "#6baed6", 8: "#2171b5", 16: "#08519c", 32: "#08306b"}
ARMS = {
    "GRPO N=8": "#2171b5",
    "F-GRPO γ=0.5 N=8": "#e6550d",
    "F-GRPO γ=1 N=8": "#a63603",
    "F-GRPO γ=2 N=8": "#7f2704",
    "GRPO N=8 low-LR": "#31a354",
    "GRPO N=8 entropy": "#756bb1",
    "GRPO N=8 entropy-1e-2": "#54278f",
    "GRPO N=8 KL": "#bdbdbd",
    "GRPO N=8 KL-1e-2": "#636363",
    "GRPO N=8 DS": "#de77ae",
    "GRPO N=8 DS-2e-1": "#c51b7d",
    "CISPO N=8": "#8c6d31",
}
"""The frontier plot's arms (all at N = 8) and their colours."""


def _over_steps_labels(data: NarrowingData) -> dict:
    labels = {f"GRPO N={n}": c for n, c in _N_COLORS.items()}
    labels.update({k: ARMS[k] for k in ("F-GRPO γ=0.5 N=8", "F-GRPO γ=1 N=8", "GRPO N=8 low-LR")})
    have = set().union(*(set(t["label"]) for f, t in data.typed.items() if f in ("narrowing", "narrowing-controls")))
    return {k: v for k, v in labels.items() if k in have}


def _narrowing_plot(data: NarrowingData):
    import matplotlib.pyplot as plt

    typed = pd.concat([t for f, t in data.typed.items() if f in ("narrowing", "narrowing-controls")])
    kinds = [("all", "all held-out prompts"), ("minority", "minority (the conflict's)"), ("rest", "rest")]
    fig, axes = plt.subplots(2, 3, figsize=(14.0, 7.6), gridspec_kw={"height_ratios": [3, 2]})
    labels = _over_steps_labels(data)
    for j, (kind, title) in enumerate(kinds):
        ax, low = axes[0, j], axes[1, j]
        part = typed[typed["type"] == kind]
        sft = float(part[part["step"] == 0]["pass256"].mean())
        for a in (ax, low):
            a.axhline(sft, color="k", lw=1.0, ls="--", label="SFT model")
        for i, (label, color) in enumerate(labels.items()):
            runs = part[part["label"] == label]
            g = runs.groupby("step")["pass256"]
            mean, sd = g.mean(), g.std(ddof=1).fillna(0.0)
            dashed = "low-LR" in label
            ax.plot(mean.index, mean.values, color=color, lw=1.6, ls=":" if dashed else "-", label=label)
            ax.fill_between(mean.index, mean - sd, mean + sd, color=color, alpha=0.12, lw=0)
            # the last evaluation on its own axis: the gaps the verdicts rest on (0.01-0.03) are seen here
            last = runs[runs["step"] == runs.groupby("seed")["step"].transform("max")]["pass256"]
            err = float(last.std(ddof=1)) if len(last) > 1 else 0.0
            low.errorbar([i], [last.mean()], yerr=[err], fmt="o", ms=5, capsize=3, color=color, label=label)
        ax.set_title(title)
        ax.set_xlabel("RL step")
        low.set_xticks(range(len(labels)))
        low.set_xticklabels([k.replace(" N=8", "") for k in labels], rotation=35, ha="right", fontsize=7)
        low.ticklabel_format(axis="y", useOffset=False)
        low.set_title(f"{kind}: the last evaluation (mean ± seed sd)", fontsize=9)
    honest_panels(axes)
    axes[0, 0].set_ylabel("held-out pass@256 (exact)")
    axes[1, 0].set_ylabel("final pass@256")
    axes[0, -1].legend(fontsize=7, loc="lower left", ncol=2)
    counts = {k: int(typed.loc[typed["label"] == k, "seed"].nunique()) for k in labels}
    spread = seeds_note(counts) + (", mean ± sd" if max(counts.values()) > 1 else "")
    fig.suptitle(
        f"The narrowing regime: GRPO loses coverage the SFT model had ({'quick, ' if data.quick else ''}{spread}; "
        "each panel its own y axis)",
        fontsize=11,
    )
    fig.tight_layout()
    return fig


def _frontier_plot(data: NarrowingData):
    import matplotlib.pyplot as plt

    hist = pd.concat([h for f, h in data.histories.items() if f in ("narrowing", "narrowing-controls")])
    hist = hist.dropna(subset=["mu_pos"])
    arms = {k: v for k, v in ARMS.items() if k in set(hist["label"])}
    main = ("GRPO N=8", "F-GRPO γ=0.5 N=8", "F-GRPO γ=1 N=8", "GRPO N=8 low-LR")
    panels = [main] + ([tuple(arms)] if set(arms) - set(main) else [])  # the second only with more arms to draw
    plateau = data.plateau is not None
    fig = plt.figure(figsize=(max(6.5 * len(panels) - 0.5, 16.0 if plateau else 0.0), 10.4 if plateau else 5.0))
    top, bottom = fig.subfigures(2, 1) if plateau else (fig, None)
    axes = top.subplots(1, len(panels), squeeze=False)[0]
    for ax, chosen in zip(axes, panels):
        for label in chosen:
            if label not in arms:
                continue
            color = arms[label]
            runs = hist[hist["label"] == label]
            for _, run in runs.groupby("seed"):
                run = run.sort_values("step")
                ax.plot(run["mu_pos"], run["exact_pass_at_256"], color=color, lw=0.6, alpha=0.45)
            mean = runs.groupby("step")[["mu_pos", "exact_pass_at_256"]].mean()
            ax.plot(mean["mu_pos"], mean["exact_pass_at_256"], color=color, lw=2.0, label=label)
            ax.plot(mean["mu_pos"].iloc[-1], mean["exact_pass_at_256"].iloc[-1], "o", color=color, ms=5)
        start = hist[hist["step"] == 0][["mu_pos", "exact_pass_at_256"]].mean()
        ax.plot([start["mu_pos"]], [start["exact_pass_at_256"]], "k*", ms=11, label="SFT model")
        ax.set_xlabel("held-out pass@1 (exact)")
        ax.set_ylabel("held-out pass@256 (exact)")
        ax.legend(fontsize=7, loc="lower left")
    axes[0].set_title("GRPO, F-GRPO and GRPO at the matched lower rate")
    if len(panels) > 1:
        axes[1].set_title("every arm at N = 8 (thin: seeds; thick: seed mean; dot: last step)")
    top.suptitle(
        "Along the frontier: pass@256 against pass@1 over training"
        + (" (quick presets)" if data.quick else "")
        + (" — the study's runs, 400 steps" if plateau else ""),
        fontsize=11,
    )
    if plateau:
        _plateau_row(bottom, data.plateau)
    else:
        fig.tight_layout()
    return fig


_SLOWER_COLORS = {
    "GRPO N=8 low-LR": "#31a354",
    "GRPO N=8 low-LR-m1": "#238b45",
    "GRPO N=8 low-LR-m2": "#005a32",
    "GRPO N=8 speed-LR": "#74c476",
}


def _interval(values) -> tuple[float, float]:
    """Seed mean and the half-width of its 95 % t interval (0 with one seed)."""
    from scipy import stats

    x = pd.Series(values, dtype=float).dropna().to_numpy()
    if x.size < 2:
        return (float(x.mean()) if x.size else float("nan")), 0.0
    return float(x.mean()), float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / x.size**0.5)


def _plateau_row(sub, history: pd.DataFrame) -> None:
    """The plateau runs, one panel per γ: F-GRPO, GRPO and the slower GRPO runs of that γ; seed-mean paths, pass@256
    at the pair F-GRPO − GRPO's levels and at the end points, with 95 % intervals over seeds."""
    from tailmiss.studies.narrowing.frontier import at_levels
    from tailmiss.studies.narrowing.plateau import end_points, plateau_levels
    from tailmiss.studies.narrowing.plateau_claims import PLATEAU_GRPO, SLOWER, SPEED, focal

    hist = history.dropna(subset=["mu_pos"])
    have = set(hist["label"])
    colors = {**ARMS, **_SLOWER_COLORS}
    axes = sub.subplots(1, 3, sharey=True)
    for ax, gamma in zip(axes, (0.5, 1.0, 2.0)):
        arms = [x for x in (focal(gamma), PLATEAU_GRPO, SLOWER[gamma], SPEED if gamma == 1 else None) if x in have]
        if focal(gamma) not in have or PLATEAU_GRPO not in have:
            ax.set_visible(False)
            continue
        try:
            levels = plateau_levels(hist, focal(gamma), PLATEAU_GRPO)
        except ValueError:
            levels = []
        points = at_levels(hist, arms, levels) if len(levels) else pd.DataFrame(columns=["label", "level", "pass256"])
        ends = end_points(hist, arms)
        for label in arms:
            color = colors.get(label, "#636363")
            mean = hist[hist["label"] == label].groupby("step")[["mu_pos", "exact_pass_at_256"]].mean()
            ax.plot(mean["mu_pos"], mean["exact_pass_at_256"], color=color, lw=1.2, alpha=0.8, label=label)
            at = points[points["label"] == label].groupby("level")["pass256"]
            cells = [(lv, *_interval(v)) for lv, v in at]
            if cells:
                lv, m, h = zip(*cells)
                ax.errorbar(lv, m, yerr=h, fmt="o", ms=3, color=color, capsize=2, lw=0.9)
            e = ends[ends["label"] == label]
            (x, hx), (y, hy) = _interval(e["pass1"]), _interval(e["pass256"])
            ax.errorbar([x], [y], xerr=[hx], yerr=[hy], fmt="s", ms=6, color=color, mec="k", capsize=3, lw=1.2)
        for lv in levels:
            ax.axvline(lv, color="0.85", lw=0.6, zorder=0)
        ax.set_title(f"γ = {gamma:g}: levels of F-GRPO − GRPO (grey); squares: end points", fontsize=9)
        ax.set_xlabel("held-out pass@1 (exact)")
        ax.legend(fontsize=7, loc="lower left")
    axes[0].set_ylabel("held-out pass@256 (exact)")
    seeds = hist["seed"].nunique()
    sub.suptitle(
        f"To the plateau on fresh seeds ({seeds} seeds, {int(hist['step'].max())} steps): seed-mean paths, pass@256 at "
        "the matched pass@1 levels and at the end points, 95 % intervals over seeds",
        fontsize=11,
    )


def _figure_data(ctx) -> NarrowingData:
    """The study's data without the re-scored final models (the figures draw none) nor the plateau runs."""
    return narrowing_data(ctx, finals=False, plateau=False)


def _frontier_data(ctx) -> NarrowingData:
    """The study's data with the plateau runs (the frontier figure's second row), without the re-scored models nor
    the end point's runs."""
    return narrowing_data(ctx, finals=False, endpoint=False)


_WORD_COLORS = {"yes": "#1a9850", "no": "#d73027", "partly": "#fdae61", "cannot tell": "#969696"}
"""The answer's colour in ``focal-map``."""


def _map_data(ctx) -> list:
    """``focal-map``'s panels: ``(title, answers, note)`` per setting, each γ against GRPO at lr × m_γ
    (:mod:`tailmiss.studies.narrowing.settings`). The first look has none of these runs: it reads the study's setting
    from the committed evidence archive (:mod:`tailmiss.studies.narrowing.archived`), and says so."""
    from tailmiss.studies.narrowing.end_point import end_point_claims, study_answers
    from tailmiss.studies.narrowing.plateau_claims import plateau_claims
    from tailmiss.studies.narrowing.settings import setting_rows
    from tailmiss.studies.rule import Verdict

    if ctx.quick:
        from tailmiss.studies.narrowing.archived import archived_study_answers

        answers = list(archived_study_answers())
        note = "read from the committed evidence archive, not the first look's runs"
        return [("the study's setting (strength 0.5, share 0.25)", answers, note)] if answers else []
    data = narrowing_data(ctx, finals=False)
    p = plateau_claims(data.plateau)
    e = end_point_claims(data.endpoint, data.endpoint_typed)
    panels = []
    for row in setting_rows(study_answers(p, e), e, data):
        note = {Verdict.REPRODUCED: ""}.get(row.narrows, "GRPO does not lose coverage here: no γ judged")
        if row.narrows == Verdict.CANNOT_TELL:
            note = "the noise rule cannot tell whether GRPO loses coverage here: no γ judged"
        panels.append((row.name, list(row.cells.values()), note))
    return panels


def _focal_map_plot(panels: list):
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from tailmiss.studies.rule import practical_threshold

    count = max(len(panels), 1)
    fig, axes = plt.subplots(1, count, figsize=(max(4.6 * count + 0.6, 8.0), 5.0), squeeze=False, sharey=True)
    axes = axes[0]
    delta = practical_threshold("pass256")
    top = max([a.end.pass256.ci[1] for _, answers, _ in panels for a in answers if a.end is not None] or [delta])
    for ax, (title, answers, note) in zip(axes, panels or [("no runs to the plateau", [], "")]):
        ax.axhline(0.0, color="k", lw=0.8)
        ax.axhspan(-delta, delta, color="0.9", zorder=0, label=f"within ±{delta:g} (the practical threshold)")
        for a in answers:
            color = _WORD_COLORS.get(a.word, "#969696")
            if a.end is None:
                ax.plot([a.gamma], [0.0], "x", color=color, ms=9, mew=2)
                why = f"{a.word}\nend point not judged\n({' and '.join(a.late)}\nnot plateaued)"
                ax.annotate(why, (a.gamma, 0.0), textcoords="offset points", xytext=(0, 12), ha="center", fontsize=7)
                continue
            lo, hi = a.end.pass256.ci
            mean = a.end.pass256.mean
            ax.errorbar([a.gamma], [mean], yerr=[[mean - lo], [hi - mean]], fmt="o", ms=8, color=color, capsize=4)
            label = f"{a.word}\nend point: {a.end.word}\n{len(a.seeds)} seeds"
            ax.annotate(label, (a.gamma, hi), textcoords="offset points", xytext=(0, 5), ha="center", fontsize=7)
        ax.set_xscale("log", base=2)
        ax.set_xticks([0.5, 1.0, 2.0], ["0.5", "1", "2"])
        ax.set_xlim(0.35, 2.9)
        ax.set_xlabel("focal weight γ")
        ax.set_title(f"{title}\n({note})" if note else title, fontsize=9)
    axes[0].set_ylim(top=top + 0.35 * (top + delta))  # room for the words above the intervals
    ylabel = "end point: F-GRPO − GRPO at lr × m_γ, held-out\npass@256 (95 % interval over seeds, before Holm)"
    axes[0].set_ylabel(ylabel)
    handles, _ = axes[0].get_legend_handles_labels()
    handles += [Line2D([], [], marker="o", ls="", color=c, label=f"the answer: {w}") for w, c in _WORD_COLORS.items()]
    fig.legend(handles=handles, fontsize=7, loc="lower center", ncol=len(handles))
    fig.suptitle(
        "Where is the focal weight more than a slower GRPO?\n"
        "The end point's pass@256 gain by γ, coloured by the answer",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


FIGURES += [
    FigureSpec(
        "narrowing",
        "F-GRPO Table 2 / Fig. 1(b) premise (analog)",
        "held-out pass@256 over RL steps for GRPO N = 2 … 32, F-GRPO (γ = 0.5, 1) and GRPO low-LR at N = 8, on all "
        "prompts, the conflict's minority and the rest, with the SFT model's line; below, each arm's last evaluation "
        "(mean ± seed sd) on an axis of its own",
        _figure_data,
        _narrowing_plot,
        llm=NARROWING_FAMILIES,
    ),
    FigureSpec(
        "focal-frontier",
        "F-GRPO App. N / Fig. 1(b,c) (analog)",
        "held-out pass@256 against pass@1 along every run at N = 8 (GRPO, F-GRPO γ = 0.5, 1, 2, low-LR, entropy, KL, "
        "DS-GRPO, CISPO), seeds shown; in the full report a second row carries the frontier's arms to their plateau "
        "on fresh seeds (GRPO, F-GRPO γ = 0.5, 1, 2, GRPO at lr × m_γ and at the speed-matched rate) with pass@256 at "
        "the matched pass@1 levels and at the end points, 95 % intervals",
        _frontier_data,
        _frontier_plot,
        llm=(*NARROWING_FAMILIES, PLATEAU),
    ),
    FigureSpec(
        "focal-map",
        "F-GRPO App. N (analog), across settings of the task",
        "for each setting of the narrowing task, F-GRPO γ = 0.5, 1, 2 against GRPO at the matched lower rate "
        "lr × m_γ at their end points: held-out pass@256 difference with its 95 % interval, coloured by whether the "
        "focal weight is more than that slower GRPO (yes, no, partly, cannot tell); the first look reads the study's "
        "setting from the committed evidence archive",
        _map_data,
        _focal_map_plot,
        llm=(PLATEAU, END_POINT, *SETTINGS_READ),
    ),
]
