"""The narrowing section's part "Where the minority's loss comes from": the first-order attribution of one RL step to
the groups of its batch (:mod:`tailmiss.studies.narrowing.attribution`), read by prompt type and success."""

from __future__ import annotations

import pandas as pd

from tailmiss.studies.narrowing.attribution import ARMS, FINAL_BATCHES, SFT_BATCHES
from tailmiss.studies.text import table

__all__ = ["HEADING", "attribution_lines"]

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
    """The part's markdown lines from :func:`~tailmiss.studies.narrowing.attribution.attribution_table`'s rows
    (none without them: the first look computes none)."""
    if t is None or t.empty:
        return []
    rows = []
    for checkpoint in _order(t["checkpoint"]):
        for label in ARMS:
            part = t[(t["checkpoint"] == checkpoint) & (t["label"] == label)]
            if part.empty:
                continue
            rows.append([checkpoint, label, *(_ms(part[k]) for k, _ in _PARTS), str(part["seed"].nunique())])
    where = "; ".join(
        f"{c}: seeds {', '.join(str(int(s)) for s in sorted(t.loc[t['checkpoint'] == c, 'seed'].unique()))}"
        for c in _order(t["checkpoint"])
    )
    out = [
        HEADING,
        "",
        "Each group of a step's batch (one training prompt and its N = 8 rollouts) changes the held-out minority's log "
        "correct mass, to first order in a gradient step, by c = −⟨∇ log M_minority, ∇ L_group⟩ (the group's share "
        "of the step's loss; exact correct masses, on-policy). Summed by the group's prompt type and by how often its "
        "rollouts succeed, per batch of 32 prompts, seed mean ± sd "
        f"({SFT_BATCHES} batches at the SFT model, {FINAL_BATCHES} per run at a final checkpoint; {where}). "
        "Positive: the groups lift the minority; negative: they push it down (interference between prompts through "
        "shared parameters). The trainer steps with AdamW, which rescales each coordinate: the signs and relative "
        "sizes carry over, not the magnitudes.",
        "",
        table(["checkpoint", "arm", *(name for _, name in _PARTS), "seeds"], rows),
        "",
    ]
    sentence = _sft_sentence(t)
    if sentence:
        out += [sentence, ""]
    return out
