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
from tailmiss.studies.rule import Outcome, Verdict, compare, compare_values, holm, identical_runs

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
    "count_verdict",
    "gamma_usual_verdict",
    "gamma_two_verdict",
    "lead_growth",
    "lead_verdict",
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
"""Samples per prompt of the finite-sample pass@k (F-GRPO App. L.4: n = 1024)."""
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


def count_verdict(states: list) -> Verdict:
    """A "most methods" claim from per-method ``"yes"`` / ``"no"`` / ``"open"``: reproduced when more than half say
    yes, refuted when more than half say no, else not resolved (no methods: cannot tell)."""
    if not states:
        return Verdict.CANNOT_TELL
    if 2 * states.count("yes") > len(states):
        return Verdict.REPRODUCED
    if 2 * states.count("no") > len(states):
        return Verdict.REFUTED
    return Verdict.NOT_RESOLVED


def gamma_usual_verdict(choices, identical=()) -> Verdict:
    """F-GRPO Table 7's "γ = 0.5 is the usual choice", over the methods not identical to GRPO: a method says yes
    when the App. L.3 rule selects 0.5 and its pass@1 beats every other focal γ by the noise rule, no when another γ
    is selected and beats 0.5 by it, open otherwise (:func:`count_verdict`)."""
    states = []
    for c in choices:
        if c.method in identical:
            continue
        wins = all(d.outcome == Outcome.HIGHER for d in c.selected_beats.values())
        if c.selected == 0.5:
            states.append("yes" if wins else "open")
        else:
            beats_half = c.selected_beats.get(0.5)
            states.append("no" if beats_half is not None and beats_half.outcome == Outcome.HIGHER else "open")
    return count_verdict(states)


def gamma_two_verdict(gamma_two: dict, identical=()) -> Verdict:
    """ "γ = 2 sometimes adds pass@256 but more often costs pass@1" (F-GRPO App. L.3), over the methods not identical
    to GRPO, each γ = 2 − γ = 0.5 by the noise rule. Part one holds when some method's pass@256 is higher and fails
    when every one is lower or a tie below δ; part two holds when more than half the methods' pass@1 is lower and
    fails when at least half are higher or a tie below δ. Both hold: reproduced; one fails: refuted; one holds and
    the other is open: partly; else not resolved."""
    rows = {k: v for k, v in gamma_two.items() if k not in identical}
    if not rows:
        return Verdict.CANNOT_TELL
    adds = [d["pass256"].outcome for d in rows.values()]
    costs = [d["pass1"].outcome for d in rows.values()]
    if Outcome.CANNOT_TELL in adds + costs:
        return Verdict.CANNOT_TELL
    if Outcome.HIGHER in adds:
        one = "yes"
    else:
        one = "no" if all(o in (Outcome.LOWER, Outcome.BELOW_DELTA) for o in adds) else "open"
    lower = sum(o == Outcome.LOWER for o in costs)
    kept = sum(o in (Outcome.HIGHER, Outcome.BELOW_DELTA) for o in costs)
    two = "yes" if 2 * lower > len(costs) else ("no" if 2 * kept >= len(costs) else "open")
    if "no" in (one, two):
        return Verdict.REFUTED
    if one == two == "yes":
        return Verdict.REPRODUCED
    return Verdict.PARTLY if "yes" in (one, two) else Verdict.NOT_RESOLVED


def lead_growth(curves: pd.DataFrame, scoring: str = "exact") -> dict:
    """Per method: does F-GRPO's pass@k lead over its base method grow with k (F-GRPO Tables 12-14)? The per-seed
    lead at k = 256 against the lead at k = 1, paired by seed, by the noise rule on pass@k's δ: higher means it
    grows; a constant lead is a tie, not growth."""
    out = {}
    frame = curves[(curves["scoring"] == scoring) & curves["k"].isin([1, KS[-1]])]
    for method, name in METHODS.items():
        base, focal = focal_label(0.0, method), focal_label(FOCAL_GAMMA, method)
        if not {base, focal} <= set(frame["label"]):
            continue
        wide = frame.pivot_table(index=["seed", "k"], columns="label", values="value")
        lead = (wide[focal] - wide[base]).unstack("k").dropna()
        out[name] = compare_values(
            lead[KS[-1]].to_numpy(), lead[1].to_numpy(), "pass@k", paired=True, labels=("lead, k=256", "lead, k=1")
        )
    return out


def lead_verdict(growth: dict, identical=()) -> Verdict:
    """Tables 12-14's "the lead grows with k" from :func:`lead_growth`, over the methods not identical to GRPO: a
    method says yes when its lead grows, no when it shrinks, open otherwise (:func:`count_verdict`)."""
    return count_verdict(
        [
            "yes" if d.outcome == Outcome.HIGHER else "no" if d.outcome == Outcome.LOWER else "open"
            for name, d in growth.items()
            if name not in identical
        ]
    )


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
        Method → :class:`~tailmiss.studies.rule.Difference` of its focal lead at k = 256 against k = 1
        (:func:`lead_growth` of the curves).
    usual, two_verdict, lead : Verdict
        F-GRPO Table 7's "γ = 0.5 is the usual choice", "γ = 2 sometimes adds pass@256 but more often costs pass@1"
        and Tables 12-14's "the lead grows with k", over the methods not identical to GRPO
        (:func:`gamma_usual_verdict`, :func:`gamma_two_verdict` and :func:`lead_verdict`).
    """

    gamma: pd.DataFrame
    choices: tuple
    identical: tuple
    two: dict
    curves: pd.DataFrame
    growth: dict
    usual: Verdict
    two_verdict: Verdict
    lead: Verdict


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
        usual=gamma_usual_verdict(choices, identical),
        two_verdict=gamma_two_verdict(two, identical),
        lead=lead_verdict(growth, identical),
    )
