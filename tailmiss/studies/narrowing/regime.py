"""The narrowing study's tables: the regime (SFT against final, by prompt type), every arm by type, what each
control does to training (entropy, KL, clipped tokens) and the task's controls (the conflict visible, none)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tailmiss.studies.rule import Difference, compare_values

__all__ = ["regime_table", "typed_table", "training_effects", "task_controls", "TASK_CONTROLS"]

TASK_CONTROLS = {
    "narrowing": "conflict hidden (the study)",
    "narrowing-visible": "conflict visible (a marker tells the type)",
    "narrowing-none": "no conflict (task (a))",
}
"""The task's controls: family -> what its task is."""


def _sd(x) -> float:
    x = np.asarray(x, float)
    return float(x.std(ddof=1)) if x.size > 1 else float("nan")


def _ends(typed: pd.DataFrame) -> pd.DataFrame:
    """Per run and type: the SFT model's (step 0) and the final step's pass@1 and pass@256."""
    last = typed.groupby(["label", "seed"])["step"].transform("max")
    start = typed[typed["step"] == 0].set_index(["label", "seed", "type"])[["mu_pos", "pass256"]]
    end = typed[typed["step"] == last].set_index(["label", "seed", "type"])[["mu_pos", "pass256"]]
    return start.add_prefix("sft_").join(end.add_prefix("final_")).reset_index()


def _pass256(part: pd.DataFrame, change) -> dict:
    """A row's pass@256 columns from the runs ``part`` of :func:`_ends`: the SFT model's and the final mean, the
    final sd and the mean of ``change`` (final − SFT per run)."""
    return {
        "sft_pass256": float(part["sft_pass256"].mean()),
        "final_pass256": float(part["final_pass256"].mean()),
        "final_pass256_sd": _sd(part["final_pass256"]),
        "change256": float(change.mean()),
    }


def regime_table(history: pd.DataFrame, typed: pd.DataFrame) -> tuple[pd.DataFrame, Difference | None]:
    """GRPO at each N and F-GRPO at N = 8, by prompt type: the SFT model's and the final held-out pass@1 and
    pass@256 (seed means and sds) and the change of pass@256; and GRPO N = 8's change on all prompts, final − SFT
    pass@256 paired by seed (a :class:`~tailmiss.studies.rule.Difference`, judged by
    :func:`tailmiss.studies.narrowing.sharing.narrowing`; None without GRPO N = 8)."""
    ends = _ends(typed)
    order = list(dict.fromkeys(history.sort_values(["gamma", "group_size"], kind="stable")["label"]))
    rows = []
    for label in order:
        for kind in ("minority", "rest", "all"):
            part = ends[(ends["label"] == label) & (ends["type"] == kind)]
            if part.empty:
                continue
            change = part["final_pass256"] - part["sft_pass256"]
            rows.append(
                {
                    "label": label,
                    "type": kind,
                    "seeds": len(part),
                    "sft_pass1": float(part["sft_mu_pos"].mean()),
                    "final_pass1": float(part["final_mu_pos"].mean()),
                    "final_pass1_sd": _sd(part["final_mu_pos"]),
                    **_pass256(part, change),
                }
            )
    table = pd.DataFrame(rows)
    g8 = ends[(ends["label"] == "GRPO N=8") & (ends["type"] == "all")]
    if g8.empty:
        return table, None
    change = compare_values(g8["final_pass256"], g8["sft_pass256"], "pass256", paired=True,
                            labels=("GRPO N=8 final", "SFT"))  # fmt: skip
    return table, change


def typed_table(typed: pd.DataFrame, history: pd.DataFrame) -> pd.DataFrame:
    """Every arm at its final step, by prompt type: held-out pass@k (:data:`~tailmiss.experiments.prompt_types.KS`)
    and μ_pos, seed mean and sd; the SFT model first (``label = "SFT"``)."""
    last = typed.groupby(["label", "seed"])["step"].transform("max")
    final = typed[typed["step"] == last]
    sft = typed[typed["step"] == 0].drop_duplicates(["seed", "type"]).assign(label="SFT")
    sft = sft[sft["seed"] == sft["seed"].min()]
    values = [c for c in typed.columns if c.startswith("pass") or c == "mu_pos"]
    rows = pd.concat([sft, final], ignore_index=True)
    grouped = rows.groupby(["label", "type"], sort=False)
    table = grouped[values].mean().join(grouped[values].std(ddof=1).add_suffix("_sd"))
    return table.join(grouped.size().rename("seeds")).reset_index()


def training_effects(history: pd.DataFrame) -> pd.DataFrame:
    """Per arm, over its training steps (step ≥ 1) and seeds: mean policy entropy (nats per token), mean KL to the
    reference (``kl_ref``), mean clipped share of tokens (``clip_frac``), and each against GRPO N = 8's (ratio)."""
    steps = history[history["step"] >= 1]
    cols = [c for c in ("entropy", "kl_ref", "clip_frac") if c in steps]
    table = steps.groupby("label", sort=False)[cols].mean()
    if "GRPO N=8" in table.index:
        base = table.loc["GRPO N=8"]
        for c in cols:
            table[f"{c}_ratio"] = table[c] / base[c] if base[c] else np.nan
    return table.reset_index()


def task_controls(histories: dict, typed: dict) -> pd.DataFrame | None:
    """GRPO N = 8 on the hidden conflict (the study's seeds its controls share), the visible conflict and no
    conflict: each task's SFT model and the final held-out pass@256 by prompt type, the change, and the hidden
    task's change against each control's (Welch's t on the per-seed changes: different SFT models)."""
    have = [f for f in TASK_CONTROLS if f in typed]
    if len(have) < 2:
        return None
    changes, rows = {}, []
    for family in have:
        ends = _ends(typed[family])
        ends = ends[ends["label"] == "GRPO N=8"]
        if family == "narrowing":
            seeds = set(_ends(typed[have[1]])["seed"])
            ends = ends[ends["seed"].isin(seeds)]
        for kind in ("minority", "rest", "all"):
            part = ends[ends["type"] == kind]
            if part.empty:
                continue
            change = (part["final_pass256"] - part["sft_pass256"]).to_numpy()
            changes[(family, kind)] = change
            rows.append(
                {
                    "task": TASK_CONTROLS[family],
                    "family": family,
                    "type": kind,
                    "seeds": len(part),
                    **_pass256(part, change),
                }
            )
    table = pd.DataFrame(rows)
    against = []
    for r in table.itertuples():
        hidden = changes.get(("narrowing", "all"))
        if r.family == "narrowing" or r.type != "all" or hidden is None:
            against.append("")
            continue
        d = compare_values(hidden, changes[(r.family, "all")], "pass@k", paired=False, labels=("hidden", r.family))
        against.append(f"{d.mean:+.3f} ({d.outcome}; {d.describe()})")
    return table.assign(hidden_minus_this=against)
