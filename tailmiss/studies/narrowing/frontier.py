r"""Runs compared along their trajectories: at matched held-out pass@1 (the frontier) and at equal rollouts.

A run's evaluations trace a path in the (pass@1, pass@256) plane, from the SFT
model at step 0. GRPO trades coverage for pass@1 as it trains; a slower GRPO
(a smaller learning rate) walks the same path more slowly. The question the
paper's low-LR control (F-GRPO App. N) asks, whether the focal weight keeps
coverage GRPO loses or only slows GRPO down, is whether F-GRPO's path lies
*above* GRPO's (more pass@256 at the same pass@1) or *on* it.

**Matching.** Each run's pass@256 is read where its pass@1 first reaches a
level :math:`L` (linear interpolation on the path's segment into the first
evaluation at or above :math:`L`). The levels are fixed by a rule
stated before any comparison (:func:`frontier_levels`): :data:`LEVELS` evenly
spaced values from the SFT model's pass@1 (excluded) to the lowest pass@1 that
every compared run reaches, so every run has a value at every level.

**The rule for "above / on / below".** At each level, ``a − b`` on pass@256
paired by seed (the report's noise rule, :mod:`tailmiss.studies.rule`), the
levels one Holm family: *above* when some level is resolved higher and none
lower, *below* when some level is resolved lower and none higher, *on* when no
level is resolved (ties), *crosses* otherwise; *cannot tell* with fewer than
three seeds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss.studies.rule import MIN_SEEDS, Difference, Outcome, compare, holm

__all__ = [
    "LEVELS",
    "frontier_levels",
    "at_levels",
    "FrontierVerdict",
    "frontier_verdict",
    "frontier_word",
    "at_rollouts",
    "equal_rollouts",
]

LEVELS = 5
"""Matched pass@1 levels per comparison."""


def _path(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    rows = rows.sort_values("step")
    return rows["mu_pos"].to_numpy(float), rows["exact_pass_at_256"].to_numpy(float)


def _span(history: pd.DataFrame, labels) -> tuple[float, float]:
    """The SFT model's pass@1 (step 0) and the lowest maximum pass@1 over the runs of ``labels``."""
    rows = history[history["label"].isin(labels)].dropna(subset=["mu_pos"])
    if rows.empty:
        raise ValueError(f"no evaluations of {list(labels)!r}")
    start = float(rows[rows["step"] == 0]["mu_pos"].mean())
    return start, float(rows.groupby(["label", "seed"])["mu_pos"].max().min())


def frontier_levels(history: pd.DataFrame, labels, count: int = LEVELS) -> np.ndarray:
    """``count`` pass@1 levels from the SFT model's (step 0, excluded) to the lowest maximum pass@1 of the runs of
    ``labels`` (included), evenly spaced: every run reaches every level."""
    start, reach = _span(history, labels)  # every run reaches every level
    if not reach > start:
        raise ValueError(f"the runs of {list(labels)!r} never raise pass@1 above the SFT model's {start:.4f}")
    return start + (reach - start) * np.arange(1, count + 1) / count


def _at_level(p1: np.ndarray, p256: np.ndarray, level: float) -> float:
    """pass@256 where pass@1 first reaches ``level``: on the path's segment into the first evaluation at or above it,
    linearly (NaN if it never does)."""
    hit = np.flatnonzero(p1 >= level)
    if hit.size == 0:
        return float("nan")
    i = int(hit[0])
    if i == 0:
        return float(p256[0])
    w = (level - p1[i - 1]) / (p1[i] - p1[i - 1])
    return float(p256[i - 1] + w * (p256[i] - p256[i - 1]))


def at_levels(history: pd.DataFrame, labels, levels) -> pd.DataFrame:
    """One row per run of ``labels``, level and seed: ``label, seed, level, pass256`` (pass@256 at matched pass@1)."""
    out = []
    rows = history[history["label"].isin(labels)].dropna(subset=["mu_pos"])
    for (label, seed), run in rows.groupby(["label", "seed"], sort=False):
        p1, p256 = _path(run)
        out += [
            {"label": label, "seed": int(seed), "level": float(lv), "pass256": _at_level(p1, p256, lv)} for lv in levels
        ]
    return pd.DataFrame(out)


@dataclass(frozen=True)
class FrontierVerdict:
    """``a`` against ``b`` along the frontier: the levels, each level's :class:`Difference` (one Holm family) and
    the word of the rule (module docstring)."""

    a: str
    b: str
    levels: tuple
    diffs: tuple
    word: str

    def describe(self) -> str:
        """``above (3 of 5 levels higher, none lower; largest +0.041)``, or why there is no level."""
        if not self.levels:
            return f"{self.word} (a run never raises pass@1 above the SFT model's: no level to match at)"
        up = sum(d.outcome == Outcome.HIGHER for d in self.diffs)
        down = sum(d.outcome == Outcome.LOWER for d in self.diffs)
        big = max(self.diffs, key=lambda d: abs(d.mean)).mean if self.diffs else float("nan")
        return f"{self.word} ({up} of {len(self.diffs)} levels higher, {down} lower; largest {big:+.3f})"


def frontier_verdict(history: pd.DataFrame, a: str, b: str, levels=None) -> FrontierVerdict:
    """``a`` above, on or below ``b``'s frontier (module docstring): pass@256 at matched pass@1, paired by seed.

    With ``levels`` None they are :func:`frontier_levels`'; when some run of the pair never raises pass@1 above the
    SFT model's there is none, and the word is *cannot tell* with no levels.
    """
    if levels is None:
        start, reach = _span(history, [a, b])
        if not reach > start:
            return FrontierVerdict(a, b, (), (), "cannot tell")
        levels = frontier_levels(history, [a, b])
    levels = np.asarray(levels, float)
    points = at_levels(history, [a, b], levels)
    diffs = []
    for lv in levels:
        at = points[np.isclose(points["level"], lv)]
        diffs.append(compare(at, a, b, "pass256"))
    diffs = holm(diffs)
    seeds = min((d.seeds for d in diffs), default=0)
    word = "cannot tell" if seeds < MIN_SEEDS else frontier_word(diffs)
    return FrontierVerdict(a, b, tuple(float(x) for x in levels), tuple(diffs), word)


def frontier_word(diffs) -> str:
    """The frontier rule's word for the levels' differences ``diffs`` (one Holm family): *cannot tell* when there is
    none or some level cannot tell (or compares one run with itself), else *crosses* when some level is higher and
    some lower, *above* or *below* when only one way is resolved, *on* when none is."""
    higher = any(d.outcome == Outcome.HIGHER for d in diffs)
    lower = any(d.outcome == Outcome.LOWER for d in diffs)
    if not diffs or any(d.outcome in (Outcome.CANNOT_TELL, Outcome.IDENTICAL) for d in diffs):
        return "cannot tell"
    if higher and lower:
        return "crosses"
    if higher or lower:
        return "above" if higher else "below"
    return "on"


def at_rollouts(history: pd.DataFrame, labels, budget: float, metric: str = "exact_pass_at_256") -> pd.DataFrame:
    """``label, seed, <metric>`` of every run of ``labels`` after ``budget`` rollouts per prompt slot (step × N:
    every run draws the same prompts per step), linearly interpolated between its evaluations (NaN past its last
    one): runs of different N compared at equal sampling cost."""
    out = []
    rows = history[history["label"].isin(labels)].dropna(subset=[metric])
    for (label, seed), run in rows.groupby(["label", "seed"], sort=False):
        run = run.sort_values("step")
        x = (run["step"] * run["group_size"]).to_numpy(float)
        y = run[metric].to_numpy(float)
        value = float(np.interp(budget, x, y)) if x[0] <= budget <= x[-1] else float("nan")
        out.append({"label": label, "seed": int(seed), metric: value})
    return pd.DataFrame(out)


def equal_rollouts(history: pd.DataFrame, a: str, b: str, budget: float, metric: str) -> Difference:
    """``a − b`` on ``metric`` after ``budget`` rollouts per prompt slot, paired by seed (:func:`at_rollouts`)."""
    return compare(at_rollouts(history, [a, b], budget, metric), a, b, metric)
