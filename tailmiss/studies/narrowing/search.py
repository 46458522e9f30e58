"""The rule that picked the narrowing regime's setting, applied to the search's runs.

Written before any N sweep (:mod:`tailmiss.experiments.narrowing_presets`): for each conflict strength of the grid,
GRPO N = 8 over three seeds from one SFT model; a setting qualifies when (1) the SFT model's held-out pass@256 is at
most :data:`SATURATED`, (2) GRPO's final held-out pass@256 lies below the SFT model's by more than twice the seeds'
sd of the final value, and (3) held-out pass@1 rises by more than :data:`MIN_RISE` and the last third of the steps
adds at most :data:`LEVELLED` of the rise (seed means). The rule takes the qualifying setting whose pass@256 falls
furthest, the weaker strength on a tie.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["SATURATED", "MIN_RISE", "LEVELLED", "SearchResult", "search_result"]

SATURATED = 0.99
"""Rule 1: the SFT model's held-out pass@256 at most this."""
MIN_RISE = 0.05
"""Rule 3: held-out pass@1 rises by more than this over the run."""
LEVELLED = 0.25
"""Rule 3: the last third of the steps adds at most this share of pass@1's rise."""


@dataclass(frozen=True)
class SearchResult:
    """The search table (one row per strength: the rule's numbers and checks), the strength the rule picks (None
    when no setting qualifies) and whether the study's preset used it."""

    table: pd.DataFrame
    picked: float | None
    preset: float

    @property
    def agrees(self) -> bool:
        return self.picked is not None and np.isclose(self.picked, self.preset)


def _row(strength: float, history: pd.DataFrame) -> dict:
    rows = history.dropna(subset=["mu_pos"]).sort_values("step")
    steps = np.sort(rows["step"].unique())
    last = int(steps[-1])
    third = int(steps[np.searchsorted(steps, 2 * last / 3)])  # the first evaluation of the last third
    mean = rows.groupby("step")[["mu_pos", "exact_pass_at_256"]].mean()
    finals = rows[rows["step"] == last]["exact_pass_at_256"]
    sft256, sft1 = float(mean.loc[0, "exact_pass_at_256"]), float(mean.loc[0, "mu_pos"])
    rise = float(mean.loc[last, "mu_pos"]) - sft1
    late = float(mean.loc[last, "mu_pos"] - mean.loc[third, "mu_pos"])
    sd = float(finals.std(ddof=1)) if len(finals) > 1 else float("nan")
    drop = float(finals.mean()) - sft256
    out = {
        "strength": float(strength),
        "seeds": int(len(finals)),
        "sft_pass256": sft256,
        "final_pass256": float(finals.mean()),
        "final_pass256_sd": sd,
        "drop": drop,
        "sft_pass1": sft1,
        "final_pass1": float(mean.loc[last, "mu_pos"]),
        "late_share": late / rise if rise > 0 else float("nan"),
        "unsaturated": sft256 <= SATURATED,
        "narrows": bool(drop < -2 * sd),
        "levels": bool(rise > MIN_RISE and late <= LEVELLED * rise),
    }
    out["qualifies"] = out["unsaturated"] and out["narrows"] and out["levels"]
    return out


def search_result(histories: dict, preset: float) -> SearchResult:
    """The rule on the search's sweeps: ``histories`` maps each strength to its sweep's history."""
    table = pd.DataFrame([_row(s, h) for s, h in sorted(histories.items())])
    ok = table[table["qualifies"]]
    picked = None
    if len(ok):
        best = ok.sort_values(["drop", "strength"], kind="stable").iloc[0]
        picked = float(best["strength"])
    return SearchResult(table, picked, float(preset))
