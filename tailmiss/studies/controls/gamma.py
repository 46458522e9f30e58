r"""F-GRPO's γ sensitivity and pass@k curves in miniature (Tables 6-7, 12-14), on the paper's protocol at N = 8.

The runs' labels (:func:`focal_label`), the seed table of a set of rows, the γ table and the paper's selection rule
(F-GRPO App. L.3: the γ among {0.5, 1, 2} with the highest mean pass@1), the pass@k curves (exact and F-GRPO App.
L.4's finite-sample estimator), where a focal curve crosses its base, and the verdicts on Tables 6-7 and 12-14's
sentences; every comparison by the report's noise rule (:mod:`tailmiss.studies.rule`). A method whose runs
equal GRPO's on every seed is *identical to GRPO* and counted in no "k of m methods".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss.analytic import pass_at_k
from tailmiss.studies.rule import (
    Outcome,
    Sentence,
    Verdict,
    compare,
    compare_values,
    holm,
    identical_runs,
    judge_clauses,
)

__all__ = [
    "KS",
    "FOCAL_GAMMA",
    "GAMMAS",
    "METHODS",
    "SAMPLES",
    "RUN_METRICS",
    "GammaChoice",
    "Crossing",
    "focal_label",
    "seed_table",
    "gamma_table",
    "passk_curves",
    "crossings",
    "gamma_two",
    "identical_methods",
    "usual_sentence",
    "gamma_two_sentence",
    "lead_growth",
    "lead_sentence",
    "GammaClaims",
    "gamma_claims",
]

KS = tuple(2**i for i in range(9))
"""k = 1, 2, 4, …, 256: the pass@k grid of F-GRPO Tables 12-14."""
FOCAL_GAMMA = 0.5
"""The γ of F-GRPO in the controls and the trade-off plane (F-GRPO App. L.3: 0.5 in the controls)."""
GAMMAS = (0.0, 0.5, 1.0, 2.0)
"""The focal γ of the sensitivity sweep (F-GRPO Tables 6-7): the base method (γ = 0) and the focal γ among which
App. L.3 selects."""
METHODS = {"grpo": "GRPO", "dapo+ds": "DAPO", "cispo": "CISPO"}
"""The γ-sensitivity methods (``method`` column → name); DAPO runs with its dynamic sampling."""
SAMPLES = 1024
"""Samples per prompt of the finite-sample pass@k (F-GRPO App. Q: n = 1024; the estimator is App. L.4, Eq. 27)."""
RUN_METRICS = ("pass1", "pass256", "mret", "dnll", "rare256")
"""The metrics of each run's chosen checkpoint in the seed and γ tables (pass@1, pass@256, M_ret, ΔNLL_rare and
rare hit@256); runs equal on all of them on every seed are the same runs in effect (:func:`identical_methods`)."""


@dataclass(frozen=True)
class GammaChoice:
    """One method's γ sensitivity: the table's best γ per metric and the paper's selection rule."""

    method: str
    best: dict
    """Metric (``pass1``, ``pass256``) → the γ with the highest seed mean."""
    resolved: dict
    """Metric → whether that γ beats every other γ by the paired rule."""
    selected: float
    """F-GRPO App. L.3's choice: the γ among {0.5, 1, 2} with the highest mean pass@1."""
    selected_beats: dict
    """Other focal γ → the paired pass@1 comparison of the selected γ against it
    (:class:`~tailmiss.studies.rule.Difference`)."""


@dataclass(frozen=True)
class Crossing:
    """Where a focal method's pass@k curve crosses its base method's (difference focal − base over k)."""

    base: str
    focal: str
    scoring: str
    """``"exact"`` (the exact correct masses) or ``"sampled"`` (n = 1024 samples per prompt, unbiased pass@k)."""
    diffs: tuple
    """Paired difference at each k of :data:`KS` (:class:`~tailmiss.studies.rule.Difference`)."""
    cross_k: int | None
    """The smallest k at which the mean difference's sign differs from its sign at k = 1 (None: no crossing)."""
    resolved_k: int | None
    """The smallest k from which on every difference is resolved the same way (None: not at k = 256)."""
    resolved: str | None
    """That way: ``"higher"`` or ``"lower"`` (None with ``resolved_k``)."""


def focal_label(gamma: float, method: str = "grpo", n: int = 8) -> str:
    """The sweep label of ``method`` (a ``method`` column value: ``"dapo+ds"`` is DAPO with dynamic sampling) at
    ``gamma`` and N: :attr:`tailmiss.experiments.sweep.Variant.label` (``"F-GRPO γ=0.5 N=8"``, ``"DAPO+DS N=8"`` …)."""
    from tailmiss.experiments.sweep_config import (
        Variant,  # imports torch: not at import time (figures load this module)
    )

    name, _, ds = method.partition("+")
    return Variant(name, gamma, n, dynamic_sampling=ds == "ds").label


def seed_table(chosen: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    """Seed mean and sd (``<metric>_sd``) of every run metric and the chosen step, and the seeds, one row per label
    of ``labels`` (in that order)."""
    rows = chosen[chosen["label"].isin(labels)]
    grouped = rows.groupby("label", sort=False)
    values = [*RUN_METRICS, "step"]
    table = grouped[values].mean().join(grouped[values].std(ddof=1).add_suffix("_sd"))
    table = table.join(grouped.size().rename("seeds")).reindex(labels).reset_index()
    return table


def gamma_table(chosen: pd.DataFrame) -> tuple[pd.DataFrame, tuple]:
    rows, choices = [], []
    have = set(chosen["label"])
    for method, name in METHODS.items():
        gammas = [g for g in GAMMAS if focal_label(g, method) in have]
        if 0.0 not in gammas or len(gammas) < 2:  # a method without its base run or a focal one: no row
            continue
        labels = [focal_label(g, method) for g in gammas]
        table = seed_table(chosen, labels).assign(method=name, gamma=gammas)
        rows.append(table)
        best, resolved = {}, {}
        for metric in ("pass1", "pass256"):
            top = table.loc[table[metric].idxmax()]
            best[metric] = float(top["gamma"])
            wins = holm(compare(chosen, top["label"], lab, metric) for lab in labels if lab != top["label"])
            resolved[metric] = all(w.outcome == Outcome.HIGHER for w in wins)
        focal = table[table["gamma"] > 0]
        selected = float(focal.loc[focal["pass1"].idxmax(), "gamma"])
        others = [float(g) for g in gammas if g > 0 and g != selected]
        tests = holm(compare(chosen, focal_label(selected, method), focal_label(g, method), "pass1") for g in others)
        beats = dict(zip(others, tests))
        choices.append(GammaChoice(name, best, resolved, selected, beats))
    return (pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()), tuple(choices)


def passk_curves(chosen: pd.DataFrame, histories: pd.DataFrame, per_prompt: dict, seed: int = 0) -> pd.DataFrame:
    """pass@k at k in :data:`KS` of every chosen checkpoint: exact (the history's mean over the evaluation prompts
    of :math:`1-(1-\\mu_{pos}(x))^k`) and sampled (F-GRPO App. L.4's estimator: per prompt
    :math:`c \\sim \\mathrm{Binomial}(1024, \\mu_{pos}(x))` correct of n = 1024 samples, the unbiased pass@k,
    averaged over prompts; one draw per run from ``seed``)."""
    rng = np.random.default_rng(seed)
    out = []
    for r in chosen.itertuples():
        hist = histories[
            (histories["label"] == r.label) & (histories["seed"] == r.seed) & (histories["step"] == r.step)
        ]
        exact = hist.iloc[0]
        steps, mu = per_prompt[(r.label, r.seed)]
        masses = np.clip(mu[int(np.flatnonzero(np.asarray(steps) == r.step)[0])], 0.0, 1.0)
        counts = rng.binomial(SAMPLES, masses)
        for k in KS:
            out.append((r.label, r.seed, "exact", k, float(exact[f"exact_pass_at_{k}"])))
            out.append((r.label, r.seed, "sampled", k, float(np.mean(pass_at_k(SAMPLES, counts, k)))))
    return pd.DataFrame(out, columns=["label", "seed", "scoring", "k", "value"])


def _crossings_for(curves: pd.DataFrame, method: str, scoring: str) -> Crossing:
    """F-GRPO (γ = :data:`FOCAL_GAMMA`) against ``method`` at γ = 0 on ``scoring``'s pass@k curves."""
    base, focal = focal_label(0.0, method), focal_label(FOCAL_GAMMA, method)
    frame = curves[curves["scoring"] == scoring]
    diffs = holm(
        compare(frame[frame["k"] == k].rename(columns={"value": f"pass_at_{k}"}), focal, base, f"pass_at_{k}")
        for k in KS
    )
    signs = [np.sign(d.mean) for d in diffs]
    cross = next((k for k, s in zip(KS, signs) if s != 0 and s != signs[0]), None)
    last = diffs[-1].outcome
    resolved_k = None
    if last in ("higher", "lower"):
        start = len(KS) - 1
        while start > 0 and diffs[start - 1].outcome == last:
            start -= 1
        resolved_k = KS[start]
    return Crossing(base, focal, scoring, diffs, cross, resolved_k, last if resolved_k else None)


def crossings(curves: pd.DataFrame) -> tuple:
    have = set(curves["label"])
    return tuple(
        _crossings_for(curves, method, scoring)
        for method in METHODS
        if focal_label(0.0, method) in have and focal_label(FOCAL_GAMMA, method) in have
        for scoring in ("exact", "sampled")
    )


def gamma_two(chosen: pd.DataFrame) -> dict:
    """γ = 2 against γ = 0.5 per method (F-GRPO App. L.3: "γ = 2 sometimes adds pass@256 but more often costs
    pass@1")."""
    have = set(chosen["label"])
    out = {}
    for method, name in METHODS.items():
        a, b = focal_label(2.0, method), focal_label(0.5, method)
        if a in have and b in have:
            out[name] = {m: compare(chosen, a, b, m) for m in ("pass256", "pass1")}
    return out


def identical_methods(chosen: pd.DataFrame) -> tuple:
    """Methods whose runs equal GRPO's on every seed and metric at every γ both have
    (:func:`~tailmiss.studies.rule.identical_runs`): the same runs in effect."""
    have = set(chosen["label"])
    out = []
    for method, name in METHODS.items():
        if method == "grpo":
            continue
        pairs = [(focal_label(g, method), focal_label(g)) for g in GAMMAS]
        pairs = [(a, b) for a, b in pairs if a in have and b in have]
        if pairs and all(identical_runs(chosen, a, b, RUN_METRICS) for a, b in pairs):
            out.append(name)
    return tuple(out)


def usual_sentence(chosen: pd.DataFrame, identical=()) -> Sentence | None:
    """F-GRPO Table 7's "γ = 0.5 is the usual choice (best pass@1 among 0.5, 1, 2)", over the methods not identical
    to GRPO, without picking a γ from the data: per method, γ = 0.5's pass@1 *higher* than every other focal γ's;
    *most* methods so, one Holm family (:func:`~tailmiss.studies.rule.judge_clauses`). None without a method that
    has γ = 0.5 and another focal γ."""
    have = set(chosen["label"])
    groups = []
    for method, name in METHODS.items():
        half = focal_label(0.5, method)
        others = [focal_label(g, method) for g in GAMMAS if g > 0 and g != 0.5 and focal_label(g, method) in have]
        if name in identical or half not in have or not others:
            continue
        groups.append([(compare(chosen, half, other, "pass1"), "higher") for other in others])
    return (
        judge_clauses("γ = 0.5 is the usual choice (best pass@1 among 0.5, 1, 2)", [("most", groups)])
        if groups
        else None
    )


def gamma_two_sentence(gamma_two: dict, identical=()) -> Sentence | None:
    """ "γ = 2 sometimes adds pass@256 but more often costs pass@1" (F-GRPO App. L.3), over the methods not identical
    to GRPO, each γ = 2 − γ = 0.5: *any* method's pass@256 *higher* and *most* methods' pass@1 *lower*, one Holm
    family (:func:`~tailmiss.studies.rule.judge_clauses`). None without a method that has both."""
    rows = {k: v for k, v in gamma_two.items() if k not in identical}
    if not rows:
        return None
    adds = [[(d["pass256"], "higher")] for d in rows.values()]
    costs = [[(d["pass1"], "lower")] for d in rows.values()]
    return judge_clauses("γ = 2 sometimes adds pass@256 but more often costs pass@1", [("any", adds), ("most", costs)])


def lead_growth(curves: pd.DataFrame, scoring: str = "exact") -> dict:
    """Per method: F-GRPO's pass@k lead over its base method at k = 256 (focal − base), and its growth from k = 1
    (the per-seed lead at k = 256 against the lead at k = 1, paired by seed, on pass@k's δ: a constant lead is a
    tie, not growth): ``name -> (lead, growth)`` (F-GRPO Tables 12-14)."""
    out = {}
    frame = curves[(curves["scoring"] == scoring) & curves["k"].isin([1, KS[-1]])]
    for method, name in METHODS.items():
        base, focal = focal_label(0.0, method), focal_label(FOCAL_GAMMA, method)
        if not {base, focal} <= set(frame["label"]):
            continue
        wide = frame.pivot_table(index=["seed", "k"], columns="label", values="value")
        lead = (wide[focal] - wide[base]).unstack("k").dropna()
        at = wide.xs(KS[-1], level="k")[[focal, base]].dropna()
        labels = (f"{focal} pass@{KS[-1]}", f"{base} pass@{KS[-1]}")
        top = compare_values(at[focal].to_numpy(), at[base].to_numpy(), "pass@k", paired=True, labels=labels)
        growth = compare_values(
            lead[KS[-1]].to_numpy(), lead[1].to_numpy(), "pass@k", paired=True, labels=("lead, k=256", "lead, k=1")
        )
        out[name] = (top, growth)
    return out


def lead_sentence(growth: dict, identical=()) -> Sentence | None:
    """Tables 12-14's "F-GRPO's pass@k lead over its base method grows with k" (our reading of the curves), over the
    methods not identical to GRPO: per method the lead at k = 256 *higher* (there is a lead) and its growth from
    k = 1 *higher*; every method so, one Holm family. None without a method."""
    groups = [[(top, "higher"), (grow, "higher")] for name, (top, grow) in growth.items() if name not in identical]
    if not groups:
        return None
    return judge_clauses("F-GRPO's pass@k lead over its base method grows with k", [("all", groups)])


@dataclass(frozen=True)
class GammaClaims:
    """Tables 6-7's γ sensitivity and Tables 12-14's pass@k curves from one set of selected checkpoints
    (:func:`gamma_claims`).

    Attributes
    ----------
    gamma : DataFrame
        Tables 6-7 analog, :func:`gamma_table`'s table: method, gamma, metric means and sds.
    choices : tuple of GammaChoice
        Each method's best γ per metric and the paper's selection (:func:`gamma_table`).
    identical : tuple of str
        Methods whose runs equal GRPO's on every seed at every γ they share (:func:`identical_methods`): no evidence
        of their own.
    two : dict
        Method name → ``{metric: Difference}`` of γ = 2 against γ = 0.5, pass256 and pass1 (:func:`gamma_two`).
    curves : DataFrame
        pass@k per run: label, seed, scoring, k, value (:func:`passk_curves`).
    growth : dict
        Method → ``(lead at k = 256, its growth from k = 1)`` (:func:`lead_growth` of the curves).
    usual_sentence, two_sentence, lead_sentence : Sentence or None
        F-GRPO Table 7's "γ = 0.5 is the usual choice", "γ = 2 sometimes adds pass@256 but more often costs pass@1"
        and Tables 12-14's "the lead grows with k", over the methods not identical to GRPO (:func:`usual_sentence`,
        :func:`gamma_two_sentence`, :func:`lead_sentence`); their verdicts :attr:`usual`, :attr:`two_verdict`,
        :attr:`lead` (*cannot tell* without a sentence).
    """

    gamma: pd.DataFrame
    choices: tuple
    identical: tuple
    two: dict
    curves: pd.DataFrame
    growth: dict
    usual_sentence: Sentence | None
    two_sentence: Sentence | None
    lead_sentence: Sentence | None

    @property
    def usual(self) -> Verdict:
        return Verdict.CANNOT_TELL if self.usual_sentence is None else self.usual_sentence.verdict

    @property
    def two_verdict(self) -> Verdict:
        return Verdict.CANNOT_TELL if self.two_sentence is None else self.two_sentence.verdict

    @property
    def lead(self) -> Verdict:
        return Verdict.CANNOT_TELL if self.lead_sentence is None else self.lead_sentence.verdict


def gamma_claims(chosen: pd.DataFrame, history: pd.DataFrame, per_prompt: dict) -> GammaClaims:
    """The γ-sensitivity and pass@k claims of the runs at their selected checkpoints ``chosen``, their training
    ``history`` and the selected checkpoints' ``per_prompt`` masses (as :func:`passk_curves` reads them)."""
    gamma, choices = gamma_table(chosen)
    identical = identical_methods(chosen)
    two = gamma_two(chosen)
    curves = passk_curves(chosen, history, per_prompt)
    growth = lead_growth(curves)
    return GammaClaims(
        gamma=gamma,
        choices=choices,
        identical=identical,
        two=two,
        curves=curves,
        growth=growth,
        usual_sentence=usual_sentence(chosen, identical),
        two_sentence=gamma_two_sentence(two, identical),
        lead_sentence=lead_sentence(growth, identical),
    )
