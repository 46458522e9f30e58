"""The small transformer's claims (F-GRPO Tables 1, 2 and 4 in miniature), from cached sweeps, as typed values.

Every comparison is made on seed means; a difference smaller than the larger
seed standard deviation of the two sides (or than :data:`TIE` with one seed)
is called a tie, because the runs cannot resolve it. A verdict is ``True``
(yes), ``False`` (no) or ``None`` (partly); the report turns them into words.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss.analytic.regimes import spearman
from tailmiss.experiments.sweep import SweepResult

__all__ = [
    "TIE",
    "SATURATED",
    "METRICS",
    "Stat",
    "Comparison",
    "seed_means",
    "run_row",
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

TIE = 0.005
"""Smallest difference called a difference when the seeds give no spread (one seed)."""
SATURATED = 1e-3
"""pass@256 within this of 1 for every run is reported as saturated."""
METRICS = ["exact_pass_at_1", "exact_pass_at_256", "rare_pass_at_256", "retained_mass", "dnll_rare"]
"""The exact metrics of the task-(a) tables: pass@1, pass@256, rare hit@256, M_ret, ΔNLL_rare."""


@dataclass(frozen=True)
class Stat:
    """A metric's seed mean and standard deviation (NaN or 0 with one seed)."""

    mean: float
    sd: float


@dataclass(frozen=True)
class Comparison:
    """``a`` against ``b`` on one metric: the difference (signed so that positive is better) and the tie margin."""

    diff: float
    tie: float

    @property
    def verdict(self) -> bool | None:
        """``True`` if ``a`` is better beyond the margin, ``False`` if worse, ``None`` for a tie."""
        return None if abs(self.diff) < self.tie else bool(self.diff > 0)


def seed_means(result: SweepResult) -> pd.DataFrame:
    """The sweep's seed means (and ``<metric>_sd`` columns), one row per variant label."""
    return result.seed_mean().set_index("label")


def run_row(m: pd.DataFrame, method: str, gamma: float, n: int) -> pd.Series:
    """The seed-mean row of one variant (``ValueError`` if the sweep has none)."""
    sel = m[(m["method"] == method) & (m["gamma"] == gamma) & (m["group_size"] == n)]
    if sel.empty:
        raise ValueError(f"the sweep has no run {method} γ={gamma:g} N={n}")
    return sel.iloc[0]


def _stat(row: pd.Series, metric: str) -> Stat:
    return Stat(float(row[metric]), float(row.get(f"{metric}_sd", np.nan)))


def _tie(a: pd.Series, b: pd.Series, metric: str) -> float:
    sd = [s.get(f"{metric}_sd", 0.0) for s in (a, b)]
    sd = [0.0 if not np.isfinite(x) else x for x in sd]
    return max(TIE, *sd)


def _compare(a: pd.Series, b: pd.Series, metric: str) -> Comparison:
    return Comparison(float(a[metric] - b[metric]), _tie(a, b, metric))


# ---- Table 2: the group-size sweep ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FocalReach:
    """F-GRPO at N = 8 against GRPO at N = 32 on rare hit@256 (Table 2's third claim)."""

    focal: Stat
    grpo32: Stat
    focal_rollouts: float
    grpo32_rollouts: float
    """Rollouts of each run (seed means)."""
    comparison: Comparison
    vacuous: bool = False
    """GRPO's rare hit@256 is worst at N = 32 here: reaching it is no sign of a kept tail (in the paper N = 32 had
    partly recovered), so the claim cannot be judged."""


@dataclass(frozen=True)
class DnllOrder:
    """ΔNLL_rare of GRPO at N = 2, 8, 32 (and F-GRPO N = 8): Table 2's fourth claim."""

    n2: Stat
    n8: Stat
    n32: Stat
    focal: Stat | None
    ordered: bool
    """N=2 < N=32 < N=8."""
    between: bool | None
    """F-GRPO N=8 lies between GRPO N=2 and N=8 (``None`` without focal runs)."""


@dataclass(frozen=True)
class NsweepClaims:
    """F-GRPO Table 2's four qualitative claims on the group-size sweep (GRPO γ = 0 by N unless said otherwise)."""

    group_sizes: tuple[int, ...]
    pass1: tuple[float, ...]
    pass1_spearman: float
    pass1_rises: bool | None
    """Rises at every step (True), rises in rank only (None), or not (False)."""
    pass256: tuple[float, ...]
    pass256_range: tuple[float, float]
    """Smallest and largest exact pass@256 over every run of the sweep."""
    saturated: bool
    rare: tuple[float, ...]
    """Rare-set hit@256 by N."""
    rare_best_n: int
    rare_worst_n: int
    dip: bool | None
    """Best at the smallest N, worst at N = 8 or 16 and recovered at the largest (True); a dip with recovery
    elsewhere (None); neither (False)."""
    focal_reach: FocalReach | None
    dnll: DnllOrder | None


def nsweep_claims(result: SweepResult) -> NsweepClaims:
    """F-GRPO Table 2's claims (pass@1 rises with N; pass@256 dips; F-GRPO N = 8 reaches GRPO N = 32; the ΔNLL_rare
    order) on a group-size sweep."""
    m = seed_means(result)
    grpo = m[(m["method"] == "grpo") & (m["gamma"] == 0)].sort_values("group_size")
    ns = tuple(int(n) for n in grpo["group_size"])
    focal = m[(m["gamma"] == 0.5) & (m["method"] == "grpo")]
    f8 = focal.iloc[0] if not focal.empty else None
    p1 = grpo["exact_pass_at_1"].to_numpy()
    rank = spearman(np.asarray(ns, dtype=float), p1)
    p256 = m["exact_pass_at_256"].to_numpy()
    rare = grpo["rare_pass_at_256"].to_numpy()
    recovered = rare[-1] > rare.min()
    best, worst = ns[int(np.argmax(rare))], ns[int(np.argmin(rare))]
    shape = best == ns[0] and worst in (8, 16) and recovered
    partly = (rare[0] > rare.min()) and recovered
    return NsweepClaims(
        group_sizes=ns,
        pass1=tuple(float(v) for v in p1),
        pass1_spearman=rank,
        pass1_rises=True if bool(np.all(np.diff(p1) > 0)) else (None if rank > 0 else False),
        pass256=tuple(float(v) for v in grpo["exact_pass_at_256"]),
        pass256_range=(float(p256.min()), float(p256.max())),
        saturated=bool(np.all(p256 > 1 - SATURATED)),
        rare=tuple(float(v) for v in rare),
        rare_best_n=best,
        rare_worst_n=worst,
        dip=True if shape else (None if partly else False),
        focal_reach=_focal_reach(m, f8, vacuous=worst == 32) if f8 is not None and 32 in ns else None,
        dnll=_dnll_order(m, f8) if {2, 8, 32} <= set(ns) else None,
    )


def _focal_reach(m: pd.DataFrame, f8: pd.Series, vacuous: bool = False) -> FocalReach:
    g32 = run_row(m, "grpo", 0.0, 32)
    return FocalReach(
        focal=_stat(f8, "rare_pass_at_256"),
        grpo32=_stat(g32, "rare_pass_at_256"),
        focal_rollouts=float(f8["rollouts"]),
        grpo32_rollouts=float(g32["rollouts"]),
        comparison=_compare(f8, g32, "rare_pass_at_256"),
        vacuous=vacuous,
    )


def _dnll_order(m: pd.DataFrame, f8: pd.Series | None) -> DnllOrder:
    rows = {n: run_row(m, "grpo", 0.0, n) for n in (2, 8, 32)}
    d = {n: row["dnll_rare"] for n, row in rows.items()}
    return DnllOrder(
        n2=_stat(rows[2], "dnll_rare"),
        n8=_stat(rows[8], "dnll_rare"),
        n32=_stat(rows[32], "dnll_rare"),
        focal=None if f8 is None else _stat(f8, "dnll_rare"),
        ordered=bool(d[2] < d[32] < d[8]),
        between=None if f8 is None else bool(d[2] < f8["dnll_rare"] < d[8]),
    )


# ---- Table 1: the objectives --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodFocal:
    """One method's base run (γ = 0) against its focal run: rare hit@256 and pass@1."""

    method: str
    base_rare: Stat
    focal_rare: Stat
    covers: Comparison
    """Focal against base on rare hit@256."""
    base_pass1: Stat
    focal_pass1: Stat
    keeps: bool
    """pass@1 drops by less than max(0.01, the seed sd)."""


@dataclass(frozen=True)
class ObjectivesClaims:
    """F-GRPO Table 1's claims per method at one N and γ: focal raises pass@256 and keeps pass@1."""

    group_size: int
    gamma: float
    methods: tuple[MethodFocal, ...]
    same_as_grpo: tuple[str, ...]
    """Methods whose every run equals its GRPO twin to the last digit (at γ = 0 and the focal γ)."""


def objectives_claims(result: SweepResult) -> ObjectivesClaims:
    """F-GRPO Table 1's claims (focal raises pass@256, keeps pass@1) per method of an objective sweep."""
    m = seed_means(result)
    runs = m[m["method"] != "sft"]
    methods = list(dict.fromkeys(runs["method"]))
    n = int(runs["group_size"].iloc[0])
    gamma = float(runs.loc[runs["gamma"] > 0, "gamma"].iloc[0])
    pairs = []
    for method in methods:
        base, focal = run_row(m, method, 0.0, n), run_row(m, method, gamma, n)
        drop = base["exact_pass_at_1"] - focal["exact_pass_at_1"]
        pairs.append(
            MethodFocal(
                method=method,
                base_rare=_stat(base, "rare_pass_at_256"),
                focal_rare=_stat(focal, "rare_pass_at_256"),
                covers=_compare(focal, base, "rare_pass_at_256"),
                base_pass1=_stat(base, "exact_pass_at_1"),
                focal_pass1=_stat(focal, "exact_pass_at_1"),
                keeps=bool(drop < max(0.01, _tie(base, focal, "exact_pass_at_1"))),
            )
        )
    same = tuple(
        method
        for method in methods
        if method != "grpo"
        and "grpo" in methods
        and all(
            np.array_equal(
                run_row(m, method, g, n)[METRICS].to_numpy(float), run_row(m, "grpo", g, n)[METRICS].to_numpy(float)
            )
            for g in (0.0, gamma)
        )
    )
    return ObjectivesClaims(n, gamma, tuple(pairs), same)


@dataclass(frozen=True)
class DapoClaim:
    """Does a DAPO variant differ from GRPO? Run by run (same seed and γ), on the final exact metrics, and paired by
    seed (:func:`tailmiss.results.claims.paired.paired_diff`: two-sided t-test at α = 0.05) at each γ."""

    method: str
    name: str
    runs: int
    """Runs with a GRPO twin."""
    differ: int
    """Of those, runs whose final metrics differ from their twin's in any digit."""
    gap: pd.Series
    """Largest |Δ| over the twins, per metric."""
    diffs: tuple = ()
    """``(γ, PairedDiff)``: the variant − GRPO difference (:class:`~tailmiss.results.claims.paired.PairedDiff`) per γ
    and metric."""

    @property
    def resolved(self) -> tuple:
        """The ``(γ, PairedDiff)`` beyond the seed spread (``higher`` or ``lower``)."""
        return tuple((g, d) for g, d in self.diffs if d.outcome in ("higher", "lower"))

    @property
    def differs(self) -> bool | None:
        """Yes when a paired difference is resolved; no when every run equals its twin or every difference is within
        the seed spread; None (cannot tell) with one seed."""
        if self.differ == 0:
            return False
        if self.resolved:
            return True
        return None if all(d.outcome is None for _, d in self.diffs) else False


def dapo_claims(objectives: SweepResult) -> list[DapoClaim]:
    """One :class:`DapoClaim` per DAPO variant of an objective sweep (F-GRPO Table 1) that has GRPO twins."""
    from tailmiss.results.claims.paired import paired_diff

    final = objectives.final
    cols = [c for c in METRICS if c in final]
    keys = ["gamma", "group_size", "seed"]
    grpo = final[final["method"] == "grpo"].set_index(keys)[cols]
    claims = []
    for method, name in (("dapo", "DAPO (clip-higher only)"), ("dapo+ds", "DAPO with dynamic sampling")):
        runs = final[final["method"] == method].set_index(keys)[cols]
        twins = runs.index.intersection(grpo.index)
        if not len(twins):
            continue
        equal = [bool((runs.loc[k] == grpo.loc[k]).all()) for k in twins]
        gap = (runs.loc[twins] - grpo.loc[twins]).abs().max()
        pairs = pd.concat([runs.loc[twins].assign(label=method), grpo.loc[twins].assign(label="grpo")]).reset_index()
        diffs = tuple(
            (float(gamma), paired_diff(sub, method, "grpo", metric))
            for (gamma, _), sub in pairs.groupby(["gamma", "group_size"])
            for metric in cols
        )
        claims.append(DapoClaim(method, name, len(equal), len(equal) - sum(equal), gap, diffs))
    return claims


# ---- Table 4: the maze --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MazeClaim:
    """F-GRPO γ = 0.5 against GRPO at every N on sampled pass@k (Table 4), paired by seed at each N
    (:func:`tailmiss.results.claims.paired.paired_diff`: two-sided t-test at α = 0.05)."""

    k: int
    diffs: tuple
    """``(N, PairedDiff)``: pass@k(γ = 0.5) − pass@k(GRPO) by N, judged by the paired rule (outcome ``None`` with one
    seed)."""

    @property
    def deltas(self) -> tuple[tuple[int, float], ...]:
        """``(N, mean difference over seeds)`` by N."""
        return tuple((n, d.mean) for n, d in self.diffs)

    @property
    def seeds(self) -> int:
        return min((d.seeds for _, d in self.diffs), default=0)

    @property
    def wins(self) -> int:
        """The N where γ = 0.5 is higher beyond the seed spread."""
        return sum(d.outcome == "higher" for _, d in self.diffs)

    @property
    def verdict(self) -> bool | None:
        """Higher at every N (True); lower beyond the spread at some N (False); else None: a tie somewhere, or one
        seed (no spread to judge a difference by: the sampled pass@k of one run also carries the noise of its
        held-out mazes)."""
        outcomes = [d.outcome for _, d in self.diffs]
        if not outcomes or any(o is None for o in outcomes):
            return None
        if any(o == "lower" for o in outcomes):
            return False
        return True if all(o == "higher" for o in outcomes) else None


def maze_claims(result: SweepResult) -> list[MazeClaim]:
    """Table 4's claim, F-GRPO γ = 0.5 beats GRPO at every N, on pass@1 and pass@256 (those the sweep sampled)."""
    from tailmiss.results.claims.paired import paired_diff

    final = result.final
    runs = final[(final["method"] == "grpo") & final["gamma"].isin([0.0, 0.5])]
    runs = runs.assign(label=runs["gamma"].map({0.0: "grpo", 0.5: "focal"}))
    ns = sorted(int(n) for n in runs["group_size"].unique())
    return [
        MazeClaim(
            k, tuple((n, paired_diff(runs[runs["group_size"] == n], "focal", "grpo", f"pass_at_{k}")) for n in ns)
        )
        for k in (1, 256)
        if f"pass_at_{k}" in final
    ]
