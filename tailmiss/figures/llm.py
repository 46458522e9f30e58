"""Small-transformer figures: the group-size sweep, the objective table, the maze and the bridge.

Each figure's data comes from a cached sweep (:func:`tailmiss.llm.sweep.run_sweep`)
under ``ctx.llm_cache``: the quick sweeps in quick mode, otherwise the full
ones (for the maze, ``maze-nsweep-cpu``, the largest sweep two CPU cores afford;
the paper-scale ``maze-nsweep`` is a GPU job).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tailmiss.figures import Context, FigureSpec, register
from tailmiss.figures.style import GAMMA_STYLE, palette

SWEEPS = {
    "nsweep": ("multisolution-nsweep", "multisolution-nsweep-quick"),
    "objectives": ("multisolution-objectives", "multisolution-objectives-quick"),
    "maze": ("maze-nsweep-cpu", "maze-nsweep-quick"),
}
"""Figure data source per figure family: (full sweep, quick sweep)."""
MAZE_KS = (1, 128, 256)
_METHOD_COLORS = {"grpo": "C0", "dapo": "C1", "dapo+ds": "C3", "cispo": "C2", "drgrpo": "C4"}


def resolve_sweep(family: str, ctx: Context):
    """The sweep of ``family`` (``"nsweep"``, ``"objectives"``, ``"maze"``): ``ctx.llm_sweeps``' or the preset."""
    from tailmiss.llm.presets import llm_sweep

    if ctx.llm_sweeps is not None and family in ctx.llm_sweeps:
        return ctx.llm_sweeps[family]
    full, quick = SWEEPS[family]
    return llm_sweep(quick if ctx.quick else full)


def sweep_result(family: str, ctx: Context):
    """The finished sweep of ``family``, run or loaded."""
    from tailmiss.llm.sweep import run_sweep

    return run_sweep(resolve_sweep(family, ctx), ctx.llm_cache, **ctx.llm_options())


def _tag(frame: pd.DataFrame, result) -> pd.DataFrame:
    return frame.assign(sweep=result.config.name, num_seeds=len(result.config.seeds), steps=result.config.rl.steps)


def _title(frame: pd.DataFrame, what: str) -> str:
    seeds = int(frame["num_seeds"].iloc[0])
    return (
        f"{what} — sweep {frame['sweep'].iloc[0]}, {int(frame['steps'].iloc[0])} steps, {seeds} seed{'s' * (seeds > 1)}"
    )


# --- llm-nsweep: F-GRPO Table 2 analog ----------------------------------------------------------


def nsweep_data(ctx: Context) -> pd.DataFrame:
    result = sweep_result("nsweep", ctx)
    return _tag(result.final, result)


def _n_axis(ax, ns) -> None:
    """Log-2 x axis with one labelled tick per group size."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns)
    ax.set_xticklabels([str(int(n)) for n in ns])
    ax.set_xlabel("group size N")


def _mean_sd(frame: pd.DataFrame, metric: str):
    g = frame.groupby("group_size")[metric]
    return g.mean(), g.std(ddof=1).fillna(0.0)


def _nsweep_plot(frame: pd.DataFrame):
    import matplotlib.pyplot as plt

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
        if metric == "exact_pass_at_256" and frame[metric].min() > 0.999:
            ax.set_ylim(0.95, 1.005)
            ax.text(0.5, 0.5, "saturated at 1 for every run", transform=ax.transAxes, ha="center", fontsize=8)
        _n_axis(ax, ns)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
    axes[0].legend(loc="best")
    fig.suptitle(_title(frame, "F-GRPO Table 2 analog (task (a), exact metrics on held-out prompts)"), y=1.04)
    fig.tight_layout()
    return fig


register(
    FigureSpec(
        "llm-nsweep",
        "F-GRPO Table 2 (analog)",
        "small transformer, task (a): pass@1, rare-set coverage, pass@256, ΔNLL_rare, M_ret vs N; F-GRPO at N = 8",
        nsweep_data,
        _nsweep_plot,
        llm=("nsweep",),
    )
)


# --- llm-objectives: F-GRPO Table 1 analog --------------------------------------------------------


def objectives_data(ctx: Context) -> pd.DataFrame:
    result = sweep_result("objectives", ctx)
    return _tag(result.final, result)


def _objectives_plot(frame: pd.DataFrame):
    import matplotlib.pyplot as plt

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
    width = 0.8 / len(gammas)
    for ax, (metric, ylabel) in zip(axes, panels):
        for j, gamma in enumerate(gammas):
            sub = runs[runs["gamma"] == gamma].groupby("method", sort=False)[metric]
            mean = sub.mean().reindex(methods)
            sd = sub.std(ddof=1).reindex(methods).fillna(0.0)
            x = np.arange(len(methods)) + (j - (len(gammas) - 1) / 2) * width
            ax.bar(
                x,
                mean,
                width,
                yerr=sd,
                capsize=3,
                color=[_METHOD_COLORS.get(m, "C7") for m in methods],
                alpha=1.0 if gamma == 0 else 0.55,
                hatch=None if gamma == 0 else "//",
                edgecolor="k",
                lw=0.5,
                label="base" if gamma == 0 else f"focal γ={gamma:g}",
            )
            for xi, m in zip(x, mean):
                ax.text(xi, m, f"{m:.3f}", ha="center", va="bottom", fontsize=6)
        ax.axhline(sft[metric], color="0.5", lw=0.8, ls=":")
        ax.set_xticks(np.arange(len(methods)))
        ax.set_xticklabels([m.upper() for m in methods])
        ax.set_ylabel(ylabel)
        lo = min(runs[metric].min(), sft[metric])
        hi = max(runs[metric].max(), sft[metric])
        pad = 0.15 * (hi - lo) + 1e-3
        ax.set_ylim(lo - pad, hi + 2 * pad)
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    n = int(runs["group_size"].iloc[0])
    fig.suptitle(_title(frame, f"F-GRPO Table 1 analog (task (a), N = {n}; hatched: focal; dotted: SFT)"), y=1.04)
    fig.tight_layout()
    return fig


register(
    FigureSpec(
        "llm-objectives",
        "F-GRPO Table 1 (analog)",
        "small transformer, task (a): GRPO / DAPO / CISPO with and without the focal weight at N = 8",
        objectives_data,
        _objectives_plot,
        llm=("objectives",),
    )
)


# --- maze: F-GRPO Fig. 6 / Fig. 7 / Table 4 analog ----------------------------------------------------


def maze_data(ctx: Context) -> pd.DataFrame:
    result = sweep_result("maze", ctx)
    hist = result.history[result.history["pass_at_1"].notna()].assign(part="history")
    return _tag(pd.concat([result.final.assign(part="final"), hist], ignore_index=True), result)


def _maze_plot(frame: pd.DataFrame):
    import matplotlib.pyplot as plt

    final = frame[frame["part"] == "final"]
    hist = frame[frame["part"] == "history"]
    runs = final[final["method"] != "sft"]
    base = final[final["method"] == "sft"].iloc[0]
    ns = np.sort(runs["group_size"].unique())
    gammas = sorted(runs["gamma"].unique())
    ks = [k for k in MAZE_KS if f"pass_at_{k}" in final]
    fig, axes = plt.subplots(2, max(len(ks), len(ns)), figsize=(3.6 * max(len(ks), len(ns)), 6.6), squeeze=False)
    colors = {0.0: "C0", 0.5: "C3", 1.0: "C1"}
    for ax, k in zip(axes[0], ks):
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
        _n_axis(ax, ns)
        ax.set_ylabel(f"−log pass@{k} (lower is better)")
        ax.set_title(f"pass@{k} on held-out mazes")
    axes[0][0].legend(loc="best")
    for ax in axes[0][len(ks) :]:
        ax.axis("off")
    for ax, n in zip(axes[1], ns):
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
    for ax in axes[1][len(ns) :]:
        ax.axis("off")
    fig.suptitle(_title(frame, "F-GRPO Fig. 6 / Table 4 analog (maze)"), y=1.01)
    fig.tight_layout()
    return fig


register(
    FigureSpec(
        "maze",
        "F-GRPO Fig. 6 / Table 4 (analog)",
        "small transformer, mazes: −log pass@k vs N (GRPO, F-GRPO γ = 0.5, 1) and pass@k vs step",
        maze_data,
        _maze_plot,
        llm=("maze",),
    )
)


# --- bridge: simulation vs transformer ---------------------------------------------------------------


def bridge_data(ctx: Context) -> pd.DataFrame:
    from tailmiss.bridge import DEFAULT_SIM_LR, SENSITIVITY_LRS, run_bridge

    result = sweep_result("nsweep", ctx)
    bridges = {
        lr: run_bridge(
            result, ctx.llm_cache, sim_lr=lr, progress=ctx.progress, reuse_stale=ctx.reuse_stale, log=ctx.log
        )
        for lr in SENSITIVITY_LRS
    }
    bridge = bridges[DEFAULT_SIM_LR]
    prompts = bridge.prompts[bridge.prompts["source"] == "llm"]
    per_prompt = prompts.groupby(["prompt", "group_size", "gamma"], as_index=False)[["tail_miss", "tau", "tau0"]].mean()
    parts = [
        bridge.summary.assign(part="summary", sim_lr=DEFAULT_SIM_LR),
        *(
            b.summary[(b.summary["source"] == "sim") & (b.summary["gamma"] == 0)].assign(part="sensitivity", sim_lr=lr)
            for lr, b in bridges.items()
            if lr != DEFAULT_SIM_LR
        ),
        per_prompt.assign(part="prompts"),
        result.final.assign(part="runs"),
    ]
    return _tag(pd.concat(parts, ignore_index=True), result)


def _bridge_plot(frame: pd.DataFrame):
    import matplotlib.pyplot as plt

    from tailmiss.bridge import verdict

    summary = frame[frame["part"] == "summary"]
    prompts = frame[frame["part"] == "prompts"]
    runs = frame[frame["part"] == "runs"]
    v = verdict(summary)
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
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
                label=f"simulation (lr {summary['sim_lr'].iloc[0]:g}), γ={gamma:g}",
            )
        _n_axis(ax, np.sort(sim["group_size"].unique()))
        for lr, sub in frame[frame["part"] == "sensitivity"].groupby("sim_lr"):
            sub = sub.sort_values("group_size")
            ax.plot(sub["group_size"], sub[metric], "-", color="0.55", lw=0.9, alpha=0.9, marker=".")
            ax.annotate(
                f"sim lr {lr:g}",
                (sub["group_size"].iloc[-1], sub[metric].iloc[-1]),
                fontsize=6,
                color="0.4",
                xytext=(3, 0),
                textcoords="offset points",
                va="center",
            )
        ax.set_ylabel(label)
    axes[0].set_title(f"(a) M_ret: Spearman {v['spearman_retained_mass']:+.2f}, zones agree {v['zone_agreement']:.0%}")
    axes[1].set_title(f"(b) Q_pos: Spearman {v['spearman_q_pos']:+.2f}")
    axes[0].legend(loc="best", fontsize=6)

    ax = axes[2]
    base = prompts[(prompts["gamma"] == 0) & prompts["tail_miss"].notna() & (prompts["tau0"] > 0)]
    ns = np.sort(base["group_size"].unique())
    for color, n in zip(palette(len(ns)), ns):
        sub = base[base["group_size"] == n]
        ax.scatter(sub["tail_miss"], np.log(sub["tau"] / sub["tau0"]), s=8, color=color, label=f"N = {int(n)}")
    if len(base) > 2:
        rho = pd.Series(base["tail_miss"]).corr(np.log(base["tau"] / base["tau0"]), method="spearman")
        ax.set_title(f"(c) per prompt: Spearman {rho:+.2f}")
    ax.axhline(0, color="0.5", lw=0.8)
    ax.set_xlabel("Lemma 3.1: P(active group misses the rare set)")
    ax.set_ylabel(r"observed $\log(\tau_{end}/\tau_{SFT})$")
    ax.legend(loc="best", fontsize=6, markerscale=1.5)

    ax = axes[3]
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
    ax.legend(loc="best", fontsize=6)
    fig.suptitle(
        _title(frame, "Bridge: categorical simulation from the SFT answer distributions vs transformer RL"), y=1.04
    )
    fig.tight_layout()
    return fig


register(
    FigureSpec(
        "bridge",
        "F-GRPO Fig. 2 / Lemma 3.1 / Fig. 1(b,c) vs transformer",
        "simulation started from the SFT model's exact answer distributions vs the transformer's RL runs",
        bridge_data,
        _bridge_plot,
        llm=("nsweep",),
    )
)
