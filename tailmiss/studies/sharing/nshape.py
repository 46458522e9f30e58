"""The N shape on the narrowing task: the shared rung, its simulator and the transformer under GRPO at N = 2 … 32.

Runs: ``narrowing-ladder-shared-n`` (the narrowing ladder's SFT model, pool and update; the shared rung and the
transformer, GRPO at N = 2, 4, 8, 16, 32, seeds 0-4) and the shared simulator from the shared rung's start at the
same N on its own 20 seeds. The rules (:data:`RULES`) were written before any of these runs (2026-12-03).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss.analytic.regimes import n_shape
from tailmiss.studies.dip import dip_sentence
from tailmiss.studies.rule import Difference, Outcome, Verdict, compare_values

__all__ = ["RULES", "TYPES", "NShapeRow", "n_shape_rows", "reproduces"]

TYPES = ("minority", "rest")
"""The prompt types the N shape is read on."""
RULES = (
    "**Rules for the N shape** (written before its runs): the shared rung and the transformer train GRPO at N = 2, "
    "4, 8, 16 and 32 on the ladder's pool (preset `narrowing-ladder-shared-n`, seeds 0-4), and the shared simulator "
    "runs the same N from the shared rung's start on its 20 seeds. Per policy and prompt type, read at the last "
    "step: the *N effect* is pass@256 at N = 32 − at N = 2, paired by seed, by the noise rule (higher, lower or a "
    "tie); the *worst N* is the N of the lowest seed-mean pass@256, and the *dip* is Table 2's "
    "(`tailmiss.studies.dip`: N = 2 not lower than each N, some N of 8 and 16 below N = 2 and N = 32, one Holm "
    "family): a dip when reproduced, "
    "none when refuted, cannot tell otherwise. A policy *reproduces the transformer's N shape* on a type when the "
    "transformer's N effect is resolved (higher or lower), its own is the same word, and its dip word is the "
    "transformer's; *no* when a judged word differs; *cannot tell* when the transformer's N effect is a tie, a dip "
    "cannot be told, or either side has fewer seeds than the rule needs. (Amended 2026-12-06, after the runs: the dip "
    "was a recovery of more than twice the two points' seed sd, a second noise rule.)"
)
"""The rules, in the report's words."""


@dataclass(frozen=True)
class NShapeRow:
    """One policy's N shape on one prompt type."""

    policy: str
    type: str
    ns: tuple[int, ...]
    means: tuple[float, ...]
    """Seed-mean final pass@256 at each N."""
    sds: tuple[float, ...]
    seeds: int
    effect: Difference | None
    """pass@256 at the largest N − at the smallest (paired by seed); None with one N."""
    worst_n: int
    dip: Verdict
    """Table 2's dip by the rule (:func:`tailmiss.studies.dip.dip_sentence`): reproduced, refuted or cannot tell."""


def _finals(typed: pd.DataFrame, kind: str) -> pd.DataFrame:
    part = typed[(typed["type"] == kind) & typed["label"].str.fullmatch(r"GRPO N=\d+")]
    last = part.groupby(["label", "seed"])["step"].transform("max")
    part = part[part["step"] == last]
    return part.assign(n=part["label"].str.extract(r"N=(\d+)", expand=False).astype(int))


def n_shape_rows(policies: dict) -> list[NShapeRow]:
    """Each policy's N shape per type from ``policies`` (name → a by-type frame,
    :func:`tailmiss.studies.narrowing.data.by_type`, of its GRPO runs at several N)."""
    rows = []
    for name, typed in policies.items():
        for kind in TYPES:
            final = _finals(typed, kind)
            if final.empty:
                continue
            wide = final.pivot_table(index="seed", columns="n", values="pass256").sort_index(axis=1)
            ns = tuple(int(n) for n in wide.columns)
            means = wide.mean().to_numpy()
            sds = wide.std(ddof=1).to_numpy() if len(wide) > 1 else np.full(len(ns), np.nan)
            effect = None
            if len(ns) > 1:
                both = wide[[ns[0], ns[-1]]].dropna()
                effect = compare_values(
                    both[ns[-1]].to_numpy(), both[ns[0]].to_numpy(), "pass256", paired=True,
                    labels=(f"N={ns[-1]}", f"N={ns[0]}"),
                )  # fmt: skip
            shape = n_shape(ns, means, sd=sds)
            long = final.assign(label=final["n"].map(lambda n: f"GRPO N={n}"))
            s = dip_sentence(long, {n: f"GRPO N={n}" for n in ns}, "pass256", f"{name}: Table 2's dip on {kind}")
            dip = Verdict.CANNOT_TELL if s is None else s.verdict
            if dip not in (Verdict.REPRODUCED, Verdict.REFUTED):
                dip = Verdict.CANNOT_TELL
            rows.append(NShapeRow(name, kind, ns, tuple(means), tuple(sds), len(wide), effect, shape.worst_n, dip))
    return rows


def reproduces(mine: NShapeRow, theirs: NShapeRow) -> bool | None:
    """Whether ``mine`` reproduces ``theirs`` (the transformer's) N shape by :data:`RULES` (None: cannot tell)."""
    resolved = (Outcome.HIGHER, Outcome.LOWER)
    if theirs.effect is None or mine.effect is None or theirs.effect.outcome not in resolved:
        return None
    if Outcome.CANNOT_TELL in (mine.effect.outcome, theirs.effect.outcome):
        return None
    if mine.effect.outcome in resolved and mine.effect.outcome != theirs.effect.outcome:
        return False
    judged = Verdict.CANNOT_TELL not in (mine.dip, theirs.dip)
    if judged and mine.dip != theirs.dip:
        return False
    if not judged or mine.effect.outcome not in resolved:
        return None
    return True
