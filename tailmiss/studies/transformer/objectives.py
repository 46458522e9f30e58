"""The small transformer's per-seed runs, F-GRPO Table 1 (the objectives, DAPO) and Table 4 (the maze) in miniature.

Every comparison is judged by the report's one noise rule (:mod:`tailmiss.studies.rule`) on the per-seed
values of a sweep's final evaluation (:func:`runs_frame`); Table 2's claims are in
:mod:`tailmiss.studies.transformer.claims`, which re-exports this module's names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from tailmiss.studies.rule import (
    IDENTICAL_TOL,
    MIN_SEEDS,
    Difference,
    Outcome,
    Sentence,
    Verdict,
    compare,
    holm,
    identical_runs,
    judge,
    practical_threshold,
)

__all__ = [
    "METRICS",
    "METRIC_NAMES",
    "Stat",
    "label_of",
    "runs_frame",
    "stat",
    "seed_means",
    "run_row",
    "combine",
    "MethodFocal",
    "ObjectivesClaims",
    "objectives_claims",
    "DapoClaim",
    "dapo_claims",
    "MazeClaim",
    "maze_claims",
]

METRICS = ["exact_pass_at_1", "exact_pass_at_256", "rare_pass_at_256", "retained_mass", "dnll_rare"]
"""The exact metrics of the task-(a) tables: pass@1, pass@256, rare hit@256, M_ret, ΔNLL_rare."""
METRIC_NAMES = dict(zip(METRICS, ["pass@1", "pass@256", "rare hit@256", "M_ret", "ΔNLL_rare"]))
"""The report's name of each of :data:`METRICS`."""


@dataclass(frozen=True)
class Stat:
    """A metric's seed mean and standard deviation (NaN with one seed)."""

    mean: float
    sd: float


def label_of(method: str, gamma: float, n: int) -> str:
    """The label of one variant in :func:`runs_frame` (``grpo γ=0.5 N=8``)."""
    return f"{method} γ={float(gamma):g} N={int(n)}"


def runs_frame(result) -> pd.DataFrame:
    """The sweep's RL runs (``result.final`` without the SFT row), one row per run and seed, with a ``label`` per
    variant (:func:`label_of`): the rows :func:`~tailmiss.studies.rule.compare` takes."""
    final = result.final
    runs = final[final["method"] != "sft"]
    labels = [label_of(m, g, n) for m, g, n in zip(runs["method"], runs["gamma"], runs["group_size"])]
    return runs.assign(label=labels)


def stat(runs: pd.DataFrame, label: str, metric: str) -> Stat:
    """Seed mean and sd of ``metric`` over the runs of ``label`` (``ValueError`` if there are none)."""
    values = runs.loc[runs["label"] == label, metric].astype(float)
    if values.empty:
        raise ValueError(f"the sweep has no run {label}")
    return Stat(float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else math.nan)


def seed_means(result) -> pd.DataFrame:
    """The sweep's seed means (and ``<metric>_sd`` columns), one row per variant label (for the tables)."""
    return result.seed_mean().set_index("label")


def run_row(m: pd.DataFrame, method: str, gamma: float, n: int) -> pd.Series:
    """The seed-mean row of one variant (``ValueError`` if the sweep has none)."""
    sel = m[(m["method"] == method) & (m["gamma"] == gamma) & (m["group_size"] == n)]
    if sel.empty:
        raise ValueError(f"the sweep has no run {method} γ={gamma:g} N={n}")
    return sel.iloc[0]


def combine(verdicts) -> Verdict:
    """One verdict from per-method verdicts on the same sentence: any *refuted* → refuted; all *reproduced* →
    reproduced; some → partly; else any *cannot tell* → cannot tell; else not resolved (none: not testable)."""
    vs = list(verdicts)
    if not vs:
        return Verdict.NOT_TESTABLE
    if Verdict.REFUTED in vs:
        return Verdict.REFUTED
    if all(v == Verdict.REPRODUCED for v in vs):
        return Verdict.REPRODUCED
    if Verdict.REPRODUCED in vs:
        return Verdict.PARTLY
    return Verdict.CANNOT_TELL if Verdict.CANNOT_TELL in vs else Verdict.NOT_RESOLVED


# ---- Table 1: the objectives --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodFocal:
    """One method's base run (γ = 0) against its focal run: rare hit@256 and pass@1."""

    method: str
    base_rare: Stat
    focal_rare: Stat
    covers: Difference
    """Focal − base on rare hit@256, wanted *higher*."""
    base_pass1: Stat
    focal_pass1: Stat
    keeps: Difference
    """Focal − base on pass@1, wanted *not lower* (a drop resolved by the test and at least δ fails)."""

    @property
    def at_floor(self) -> bool:
        """Both runs' rare hit@256 below its δ (:func:`~tailmiss.studies.rule.practical_threshold`): no room to show
        a raise, so the method tests nothing of "raises" (DAPO with dynamic sampling here: 0.001 → 0.000)."""
        delta = practical_threshold("rare_pass_at_256")
        return self.base_rare.mean < delta and self.focal_rare.mean < delta


@dataclass(frozen=True)
class ObjectivesClaims:
    """F-GRPO Table 1's claims per method at one N and γ: focal raises pass@256 and keeps pass@1."""

    group_size: int
    gamma: float
    methods: tuple[MethodFocal, ...]
    same_as_grpo: tuple[str, ...]
    """Methods whose runs are GRPO's to within the rule's tolerance on every seed and metric, at γ = 0 and the
    focal γ (:func:`~tailmiss.studies.rule.identical_runs`)."""

    @property
    def counted(self) -> tuple[MethodFocal, ...]:
        """The methods the verdicts count: those not identical to GRPO (a copy of GRPO is no second method)."""
        return tuple(p for p in self.methods if p.method not in self.same_as_grpo)

    @property
    def at_floor(self) -> tuple[str, ...]:
        """Counted methods whose rare hit@256 sits at the floor with and without the focal weight
        (:attr:`MethodFocal.at_floor`): left out of "raises", which they cannot show."""
        return tuple(p.method for p in self.counted if p.at_floor)

    @property
    def raises_sentence(self) -> Sentence | None:
        """Table 1's "the focal weight raises pass@256 for every method": focal − base rare hit@256 *higher* for
        every counted method off the floor, one Holm family (None without one)."""
        parts = [(p.covers, "higher") for p in self.counted if not p.at_floor]
        return judge("the focal weight raises pass@256 for every method", parts) if parts else None

    @property
    def keeps_sentence(self) -> Sentence | None:
        """Table 1's "the focal weight keeps pass@1": focal − base pass@1 *not lower* (one-sided at the margin) for
        every counted method, one Holm family (None without one)."""
        parts = [(p.keeps, "not lower") for p in self.counted]
        return judge("the focal weight keeps pass@1", parts) if parts else None

    @property
    def raises(self) -> Verdict:
        s = self.raises_sentence
        return Verdict.NOT_TESTABLE if s is None else s.verdict

    @property
    def keeps(self) -> Verdict:
        s = self.keeps_sentence
        return Verdict.NOT_TESTABLE if s is None else s.verdict


def objectives_claims(result) -> ObjectivesClaims:
    """F-GRPO Table 1's claims (focal raises pass@256, keeps pass@1) per method of an objective sweep."""
    runs = runs_frame(result)
    methods = list(dict.fromkeys(runs["method"]))
    n = int(runs["group_size"].iloc[0])
    gamma = float(runs.loc[runs["gamma"] > 0, "gamma"].iloc[0])
    pairs = []
    for method in methods:
        base, focal = label_of(method, 0.0, n), label_of(method, gamma, n)
        pairs.append(
            MethodFocal(
                method=method,
                base_rare=stat(runs, base, "rare_pass_at_256"),
                focal_rare=stat(runs, focal, "rare_pass_at_256"),
                covers=compare(runs, focal, base, "rare_pass_at_256"),
                base_pass1=stat(runs, base, "exact_pass_at_1"),
                focal_pass1=stat(runs, focal, "exact_pass_at_1"),
                keeps=compare(runs, focal, base, "exact_pass_at_1"),
            )
        )
    cols = [c for c in METRICS if c in runs]
    same = tuple(
        method
        for method in methods
        if method != "grpo"
        and "grpo" in methods
        and all(identical_runs(runs, label_of(method, g, n), label_of("grpo", g, n), cols) for g in (0.0, gamma))
    )
    return ObjectivesClaims(n, gamma, tuple(pairs), same)


@dataclass(frozen=True)
class DapoClaim:
    """Does a DAPO variant differ from GRPO? Run by run (same seed and γ), on the final exact metrics, and by the
    noise rule: every variant − GRPO comparison (each metric at each γ, paired by seed) is one Holm family."""

    method: str
    name: str
    runs: int
    """Runs with a GRPO twin."""
    differ: int
    """Of those, runs whose final metrics differ from their twin's in any digit."""
    gap: pd.Series
    """Largest ``|Δ|`` over the twins, per metric."""
    diffs: tuple = ()
    """``(γ, Difference)``: the variant − GRPO difference per γ and metric, Holm-adjusted over the variant's family."""

    @property
    def resolved(self) -> tuple:
        """The ``(γ, Difference)`` beyond noise and δ (``higher`` or ``lower``)."""
        return tuple((g, d) for g, d in self.diffs if d.outcome.resolved)

    @property
    def seeds(self) -> int:
        """Seeds of the smallest comparison."""
        return min((d.seeds for _, d in self.diffs), default=0)

    @property
    def identical(self) -> bool:
        """Every run equals its GRPO twin on every metric (within the rule's tolerance): one run twice."""
        return bool(self.diffs) and all(d.outcome == Outcome.IDENTICAL for _, d in self.diffs)

    @property
    def differs(self) -> Verdict:
        """Table 1's "DAPO differs from GRPO": *refuted* only when the runs are identical (a fact, not a test);
        *cannot tell* with fewer than :data:`~tailmiss.studies.rule.MIN_SEEDS` seeds; *reproduced* when a
        comparison is resolved; else *not resolved*."""
        if self.identical:
            return Verdict.REFUTED
        if self.seeds < MIN_SEEDS:
            return Verdict.CANNOT_TELL
        return Verdict.REPRODUCED if self.resolved else Verdict.NOT_RESOLVED

    @property
    def reason(self) -> str:
        """Why :attr:`differs` says what it says."""
        return {
            Verdict.REFUTED: f"every run equals its GRPO twin on every metric (to {IDENTICAL_TOL:g}): the same runs, "
            "not a test",
            Verdict.CANNOT_TELL: f"{self.seeds} seed(s), fewer than the rule's {MIN_SEEDS}",
            Verdict.REPRODUCED: f"{len(self.resolved)} of {len(self.diffs)} comparisons beyond noise and δ",
            Verdict.NOT_RESOLVED: f"none of {len(self.diffs)} comparisons beyond noise and δ",
        }[self.differs]


def dapo_claims(objectives) -> list[DapoClaim]:
    """One :class:`DapoClaim` per DAPO variant of an objective sweep (F-GRPO Table 1) that has GRPO twins."""
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
        tests = [
            (float(gamma), compare(sub, method, "grpo", metric))
            for (gamma, _), sub in pairs.groupby(["gamma", "group_size"])
            for metric in cols
        ]
        diffs = tuple(zip([g for g, _ in tests], holm(d for _, d in tests)))
        claims.append(DapoClaim(method, name, len(equal), len(equal) - sum(equal), gap, diffs))
    return claims


# ---- Table 4: the maze --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MazeClaim:
    """F-GRPO γ = 0.5 against GRPO at every N on sampled pass@k (Table 4): γ = 0.5 − GRPO at each N by the noise
    rule (paired by seed; the N one Holm family), each wanted *higher*."""

    k: int
    diffs: tuple
    """``(N, Difference)``: pass@k(γ = 0.5) − pass@k(GRPO) by N (*cannot tell* with one seed)."""

    @property
    def deltas(self) -> tuple[tuple[int, float], ...]:
        """``(N, mean difference over seeds)`` by N."""
        return tuple((n, d.mean) for n, d in self.diffs)

    @property
    def seeds(self) -> int:
        return min((d.seeds for _, d in self.diffs), default=0)

    @property
    def wins(self) -> int:
        """The N where γ = 0.5 is higher beyond noise and δ."""
        return sum(d.outcome == Outcome.HIGHER for _, d in self.diffs)

    @property
    def sentence(self) -> Sentence | None:
        if not self.diffs:
            return None
        return judge(f"F-GRPO γ = 0.5 beats GRPO at every N on pass@{self.k}", [(d, "higher") for _, d in self.diffs])

    @property
    def verdict(self) -> Verdict:
        """:func:`judge` over the N (one seed: *cannot tell*; the sampled pass@k of one run also carries the noise of
        its held-out mazes); *not testable* without an N that has both runs."""
        s = self.sentence
        return Verdict.NOT_TESTABLE if s is None else s.verdict


def maze_claims(result) -> list[MazeClaim]:
    """Table 4's claim, F-GRPO γ = 0.5 beats GRPO at every N, on pass@1 and pass@256 (those the sweep sampled)."""
    final = result.final
    runs = final[(final["method"] == "grpo") & final["gamma"].isin([0.0, 0.5])]
    runs = runs.assign(label=runs["gamma"].map({0.0: "grpo", 0.5: "focal"}))
    ns = sorted(int(n) for n in runs["group_size"].unique())
    ns = [n for n in ns if set(runs.loc[runs["group_size"] == n, "label"]) == {"grpo", "focal"}]
    claims = []
    for k in (1, 256):
        if f"pass_at_{k}" not in final:
            continue
        tests = holm(compare(runs[runs["group_size"] == n], "focal", "grpo", f"pass_at_{k}") for n in ns)
        claims.append(MazeClaim(k, tuple(zip(ns, tests))))
    return claims
