"""The small transformer's claims (F-GRPO Tables 1, 2 and 4 in miniature), from cached sweeps, as typed values.

Every comparison is judged by the report's one noise rule (:mod:`tailmiss.studies.rule`) on the per-seed
values of the sweep's final evaluation (:func:`runs_frame`): paired by seed where two variants share seeds, Welch
otherwise; Holm within a family; a practical threshold δ per metric; fewer than
:data:`~tailmiss.studies.rule.MIN_SEEDS` seeds *cannot tell*. Each claim's verdict is a
:class:`~tailmiss.studies.rule.Verdict`; the report only writes them. Table 1 (the objectives, DAPO) and
Table 4 (the maze) live in :mod:`tailmiss.studies.transformer.objectives` and are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tailmiss.analytic.regimes import spearman
from tailmiss.studies.dip import dip_sentence
from tailmiss.studies.rule import Difference, Sentence, Verdict, compare, judge
from tailmiss.studies.transformer.objectives import (
    METRIC_NAMES,
    METRICS,
    DapoClaim,
    MazeClaim,
    MethodFocal,
    ObjectivesClaims,
    Stat,
    combine,
    dapo_claims,
    label_of,
    maze_claims,
    objectives_claims,
    run_row,
    runs_frame,
    seed_means,
    stat,
)

if TYPE_CHECKING:  # a type only: the claims import without the trainer (and torch)
    from tailmiss.experiments.sweep_result import SweepResult

__all__ = [
    "SATURATED",
    "METRICS",
    "METRIC_NAMES",
    "Stat",
    "seed_means",
    "run_row",
    "runs_frame",
    "label_of",
    "stat",
    "combine",
    "NsweepClaims",
    "FocalReach",
    "DnllOrder",
    "nsweep_claims",
    "MethodFocal",
    "ObjectivesClaims",
    "objectives_claims",
    "MazeClaim",
    "maze_claims",
    "DapoClaim",
    "dapo_claims",
]

SATURATED = 1e-3
"""pass@256 within this of 1 for every run is reported as saturated."""
VACUOUS = (
    "N = 32 is GRPO's worst N here (seed means), so reaching it says nothing of a kept tail (the paper's N = 32 had "
    "partly recovered)"
)
"""Why F-GRPO N = 8 reaching GRPO N = 32 cannot be judged where N = 32 is GRPO's worst N."""


# ---- Table 2: the group-size sweep ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FocalReach:
    """F-GRPO at N = 8 against GRPO at N = 32 on rare hit@256 (Table 2's third claim), wanted *not lower*."""

    focal: Stat
    grpo32: Stat
    focal_rollouts: float
    grpo32_rollouts: float
    """Rollouts of each run (seed means)."""
    comparison: Difference
    """F-GRPO N = 8 − GRPO N = 32 on rare hit@256."""
    sentence: Sentence
    """The comparison wanted *not lower* (:func:`~tailmiss.studies.rule.judge`)."""
    verdict: Verdict
    vacuous: bool = False
    """GRPO's rare hit@256 is worst at N = 32 here (seed means): reaching it is no sign of a kept tail, so a verdict
    other than *refuted* is *not resolved* (``VACUOUS``)."""
    reason: str = ""


@dataclass(frozen=True)
class DnllOrder:
    """ΔNLL_rare of GRPO at N = 2, 8, 32 (and F-GRPO N = 8): Table 2's fourth claim."""

    n2: Stat
    n8: Stat
    n32: Stat
    focal: Stat | None
    order: Sentence
    """N=2 < N=32 < N=8: the gaps N=2 − N=32 and N=32 − N=8 (one Holm family), each wanted *lower*."""
    between: Sentence | None
    """F-GRPO N=8 between GRPO N=2 and N=8: N=2 − F-GRPO and F-GRPO − N=8 (one Holm family), each wanted *lower*
    (``None`` without focal runs)."""

    @property
    def ordered(self) -> Verdict:
        return self.order.verdict


@dataclass(frozen=True)
class NsweepClaims:
    """F-GRPO Table 2's four qualitative claims on the group-size sweep (GRPO γ = 0 by N unless said otherwise).

    ``pass1_rises``: :func:`judge` over the largest − smallest N (wanted *higher*) and every consecutive step
    (each wanted *not lower*), one Holm family.
    ``dip``: :func:`~tailmiss.studies.rule.judge_any` of "best at the smallest N, worst near N = 8, partly recovered
    at the largest N" tested without picking the trough: the smallest N − every other N (*not lower*), and for some
    N of 8 and 16 both the smallest and the largest N above it (*higher*), one Holm family; *not testable* with fewer
    than three N or without N = 8 or 16.
    ``tradeoff``: F-GRPO N = 8 − GRPO N = 32 *not lower* on rare hit@256 and on pass@1 (Table 2's "reaches ... at a
    modest pass@1 trade-off"), one Holm family.
    """

    group_sizes: tuple[int, ...]
    pass1: tuple[float, ...]
    pass1_spearman: float
    pass1_rise: Difference
    """pass@1 of the largest N − the smallest N."""
    pass1_steps: tuple[Difference, ...]
    """pass@1 of each N − the N before it (one Holm family)."""
    pass1_rises: Verdict
    pass256: tuple[float, ...]
    pass256_range: tuple[float, float]
    """Smallest and largest exact pass@256 over every run of the sweep."""
    saturated: bool
    rare: tuple[float, ...]
    """Rare-set hit@256 by N (seed means)."""
    rare_best_n: int
    rare_worst_n: int
    rare_best: tuple[Difference, ...]
    """Rare hit@256 of the smallest N − each other N (one Holm family)."""
    recovery: Difference | None
    """Rare hit@256 of the largest N − the worst interior N (``None`` with fewer than three N)."""
    dip: Verdict
    focal_reach: FocalReach | None
    dnll: DnllOrder | None
    pass1_sentence: Sentence | None = None
    dip_sentence: Sentence | None = None
    tradeoff: Sentence | None = None
    """Table 2's "reaches GRPO N = 32's pass@256 at a modest pass@1 trade-off" (None without F-GRPO N = 8)."""


def _grpo_labels(runs) -> dict[int, str]:
    g = runs[(runs["method"] == "grpo") & (runs["gamma"] == 0)]
    return {int(n): label_of("grpo", 0.0, n) for n in sorted(g["group_size"].unique())}


def _rises(runs, lab: dict[int, str]) -> Sentence:
    ns = list(lab)
    rise = compare(runs, lab[ns[-1]], lab[ns[0]], "exact_pass_at_1")
    steps = [compare(runs, lab[b], lab[a], "exact_pass_at_1") for a, b in zip(ns, ns[1:])]
    return judge(f"pass@1 rises with N ({ns[0]} → {ns[-1]})", [(rise, "higher"), *((d, "not lower") for d in steps)])


def _dip(runs, lab: dict[int, str]) -> tuple[tuple, Difference | None, Sentence | None]:
    ns = list(lab)
    best = tuple(compare(runs, lab[ns[0]], lab[n], "rare_pass_at_256") for n in ns[1:])
    text = f"GRPO rare hit@256 best at N = {ns[0]}, worst near N = 8, partly recovered at N = {ns[-1]}"
    s = dip_sentence(runs, lab, "rare_pass_at_256", text)
    recovery = None
    if s is not None:
        recovery = next(p.difference for p in s.parts if p.difference.a == lab[ns[-1]])
    return best, recovery, s


def nsweep_claims(result: SweepResult) -> NsweepClaims:
    """F-GRPO Table 2's claims (pass@1 rises with N; pass@256 dips; F-GRPO N = 8 reaches GRPO N = 32; the ΔNLL_rare
    order) on a group-size sweep, by the noise rule on per-seed values (:class:`NsweepClaims`)."""
    runs = runs_frame(result)
    lab = _grpo_labels(runs)
    ns = tuple(lab)
    if len(ns) < 2:
        raise ValueError(f"the group-size sweep needs GRPO at two N at least, got N = {list(ns)}")
    p1 = np.array([stat(runs, lab[n], "exact_pass_at_1").mean for n in ns])
    rare = {n: stat(runs, lab[n], "rare_pass_at_256").mean for n in ns}
    rises = _rises(runs, lab)
    best, recovery, dip = _dip(runs, lab)
    p256 = runs["exact_pass_at_256"].to_numpy(float)
    worst = min(rare, key=rare.get)
    f8 = label_of("grpo", 0.5, 8)
    has_f8 = f8 in set(runs["label"])
    return NsweepClaims(
        group_sizes=ns,
        pass1=tuple(float(v) for v in p1),
        pass1_spearman=spearman(np.asarray(ns, dtype=float), p1),
        pass1_rise=rises.parts[0].difference,
        pass1_steps=rises.differences[1:],
        pass1_rises=rises.verdict,
        pass256=tuple(stat(runs, lab[n], "exact_pass_at_256").mean for n in ns),
        pass256_range=(float(p256.min()), float(p256.max())),
        saturated=bool(np.all(p256 > 1 - SATURATED)),
        rare=tuple(float(rare[n]) for n in ns),
        rare_best_n=max(rare, key=rare.get),
        rare_worst_n=worst,
        rare_best=best,
        recovery=recovery,
        dip=Verdict.NOT_TESTABLE if dip is None else dip.verdict,
        focal_reach=_focal_reach(runs, f8, lab[32], vacuous=worst == 32) if has_f8 and 32 in lab else None,
        dnll=_dnll_order(runs, lab, f8 if has_f8 else None) if {2, 8, 32} <= set(ns) else None,
        pass1_sentence=rises,
        dip_sentence=dip,
        tradeoff=_tradeoff(runs, f8, lab[32]) if has_f8 and 32 in lab else None,
    )


def _tradeoff(runs, f8: str, g32: str) -> Sentence:
    """Table 2's "F-GRPO N = 8 reaches GRPO N = 32's pass@256 at a modest pass@1 trade-off": F-GRPO − GRPO N = 32
    *not lower* on rare hit@256 (pass@256 saturates here) and on pass@1 (a trade-off within the margin)."""
    parts = [(compare(runs, f8, g32, m), "not lower") for m in ("rare_pass_at_256", "exact_pass_at_1")]
    return judge("F-GRPO N = 8 reaches GRPO N = 32 at a modest pass@1 trade-off", parts)


def _rollouts(runs, label: str) -> float:
    return float(runs.loc[runs["label"] == label, "rollouts"].mean())


def _focal_reach(runs, f8: str, g32: str, vacuous: bool = False) -> FocalReach:
    d = compare(runs, f8, g32, "rare_pass_at_256")
    sentence = judge("F-GRPO N = 8 reaches GRPO N = 32 on rare hit@256", [(d, "not lower")])
    verdict = sentence.verdict
    if vacuous and verdict != Verdict.REFUTED:
        verdict = Verdict.NOT_RESOLVED
    return FocalReach(
        focal=stat(runs, f8, "rare_pass_at_256"),
        grpo32=stat(runs, g32, "rare_pass_at_256"),
        focal_rollouts=_rollouts(runs, f8),
        grpo32_rollouts=_rollouts(runs, g32),
        comparison=d,
        sentence=sentence,
        verdict=verdict,
        vacuous=vacuous,
        reason=VACUOUS if vacuous else "",
    )


def _lower_chain(runs, text: str, labels: list[str]) -> Sentence:
    """``labels[0] < labels[1] < …`` on ΔNLL_rare: each gap wanted *lower*, the gaps one Holm family."""
    return judge(text, [(compare(runs, a, b, "dnll_rare"), "lower") for a, b in zip(labels, labels[1:])])


def _dnll_order(runs, lab: dict[int, str], f8: str | None) -> DnllOrder:
    order = _lower_chain(runs, "ΔNLL_rare N=2 < N=32 < N=8", [lab[2], lab[32], lab[8]])
    between = None if f8 is None else _lower_chain(runs, "F-GRPO N=8 between N=2 and N=8", [lab[2], f8, lab[8]])
    return DnllOrder(
        n2=stat(runs, lab[2], "dnll_rare"),
        n8=stat(runs, lab[8], "dnll_rare"),
        n32=stat(runs, lab[32], "dnll_rare"),
        focal=None if f8 is None else stat(runs, f8, "dnll_rare"),
        order=order,
        between=between,
    )
