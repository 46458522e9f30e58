"""The narrowing section's part "Where the minority's loss comes from": the first-order attribution of one RL step to
the groups of its batch (:mod:`tailmiss.experiments.attribution`), read by prompt type and success."""

from __future__ import annotations

import pandas as pd

from tailmiss.studies.text import table

__all__ = ["HEADING", "ARMS", "attribution_lines"]

ARMS = ("GRPO N=8", "F-GRPO γ=1 N=8")
"""The arms attributed: GRPO and F-GRPO (γ = 1) at N = 8."""

HEADING = "### Where the minority's loss comes from: one step's groups, attributed"
"""The part's heading."""
_PARTS = (
    ("minority_groups", "minority's groups"),
    ("rest_groups", "rest's groups"),
    ("rest_rare", "of which rare successes"),
    ("rest_frequent", "of which frequent successes"),
    ("total", "all groups"),
)


def _ms(x: pd.Series) -> str:
    x = x.to_numpy(float)
    return f"{x.mean():+.3f}" if x.size < 2 else f"{x.mean():+.3f}±{x.std(ddof=1):.3f}"


def _order(checkpoints) -> list[str]:
    return sorted(set(checkpoints), key=lambda c: -1 if c == "SFT model" else int(c.split()[-1]))


def _sft_sentence(t: pd.DataFrame) -> str:
    """What the focal weight changes at the SFT model (the same model and batches for both arms)."""
    at = t[t["checkpoint"] == "SFT model"].set_index(["label", "seed"])
    if not set(ARMS) <= set(at.index.get_level_values("label")):
        return ""
    grpo, focal = at.loc[ARMS[0]], at.loc[ARMS[1]]
    change = {k: (focal[k] - grpo[k]) for k in ("minority_groups", "rest_groups")}
    bigger = max(change, key=lambda k: abs(change[k].mean()))
    name = {"minority_groups": "the minority's own groups", "rest_groups": "the rest's groups"}
    return (
        f"At the SFT model both arms read the same {len(grpo)} batches, so the difference is the focal weight alone: "
        f"it changes the rest's groups' part by {_ms(change['rest_groups'])} (GRPO {_ms(grpo['rest_groups'])}) and "
        f"the minority's groups' part by {_ms(change['minority_groups'])} (GRPO {_ms(grpo['minority_groups'])}); "
        f"by size the larger change is in {name[bigger]}."
    )


def attribution_lines(t: pd.DataFrame | None) -> list[str]:
    """The part's markdown lines from ``tailmiss.studies.narrowing.data.attribution_table``'s rows
    (none without them: the first look computes none)."""
    if t is None or t.empty:
        return []
    rows = []
    for checkpoint in _order(t["checkpoint"]):
        for label in ARMS:
            part = t[(t["checkpoint"] == checkpoint) & (t["label"] == label)]
            if part.empty:
                continue
            active = f"{part['active'].mean():.1f}"
            rows.append([checkpoint, label, active, *(_ms(part[k]) for k, _ in _PARTS), str(part["seed"].nunique())])
    sft = t[t["checkpoint"] == "SFT model"]
    final = t[t["checkpoint"] != "SFT model"]
    counts = [f"{sft['seed'].nunique()} batches at the SFT model"] if len(sft) else []
    counts += [f"{int(final['batches'].iloc[0])} per run at a final checkpoint"] if len(final) else []
    where = "; ".join(
        f"{c}: seeds {', '.join(str(int(s)) for s in sorted(t.loc[t['checkpoint'] == c, 'seed'].unique()))}"
        for c in _order(t["checkpoint"])
        if c != "SFT model"
    )
    out = [
        HEADING,
        "",
        "Each group of a step's batch (one training prompt and its N = 8 rollouts) changes the held-out minority's log "
        "correct mass, to first order in a gradient step, by c = −⟨∇ log M_minority, ∇ L_group⟩ (the group's share "
        "of the step's loss; exact correct masses, on-policy). Summed by the group's prompt type and by how often its "
        f"rollouts succeed, per batch of {int(t['groups'].iloc[0])} prompts: mean ± sd over runs "
        f"({'; '.join([', '.join(counts), where] if where else counts)}). *Active groups*: those with some but not "
        "all rollouts correct, per batch (the others carry no advantage, so no gradient). "
        "Positive: the groups lift the minority; negative: they push it down (interference between prompts through "
        "shared parameters). The trainer steps with AdamW, which rescales each coordinate: the signs and relative "
        "sizes carry over, not the magnitudes.",
        "",
        table(["checkpoint", "arm", "active groups", *(name for _, name in _PARTS), "seeds"], rows),
        "",
    ]
    for sentence in (_sft_sentence(t), _final_sentence(t), _weights_sentence(final)):
        if sentence:
            out += [sentence, ""]
    return out


def _final_sentence(t: pd.DataFrame) -> str:
    """How few groups move the final models: the fewest active groups per batch of an arm at a final checkpoint."""
    final = t[t["checkpoint"] != "SFT model"]
    if final.empty:
        return ""
    active = final.groupby(["checkpoint", "label"], sort=False)["active"].mean()
    (checkpoint, label), fewest = active.idxmin(), active.min()
    return (
        f"The final models' parts rest on few active groups (as few as {fewest:.1f} of {int(t['groups'].iloc[0])} per "
        f"batch, {label} at {checkpoint}): where none is active the step moves nothing."
    )


def _weights_sentence(final: pd.DataFrame) -> str:
    """Which final models are the archived runs themselves: the archive keeps no RL run's weights, so the attribution
    reads runs trained again for them."""
    if final.empty or "as_archived" not in final:
        return ""
    same = int((final["as_archived"] == True).sum())  # noqa: E712 (a nullable column)
    known = int(final["as_archived"].notna().sum())
    if known == 0:
        return ""
    return (
        "The archive keeps no RL run's weights, so the final models were trained again for them, with the archived "
        f"runs' configs and seeds: {same} of {known} came out bit for bit as the archived runs. Where one did not, it "
        "was trained again on a CPU that can round differently from the one that trained the archived run, and the "
        "sampled rollouts carry any difference: a run of the same arm and seed, not the run of the tables above "
        "(`tailmiss repro --spot-check` measures how far such a run's numbers move)."
    )
