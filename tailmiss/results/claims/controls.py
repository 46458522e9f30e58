r"""F-GRPO's controls, γ sensitivity and pass@k curves in miniature (Tables 3, 6-7, 12-14; Fig. 1(b,c)).

Every run trains on the paper's protocol at N = 8 (``paper-protocol``,
``paper-protocol-controls``, ``paper-protocol-gamma``: one SFT model, the same
seeds for every row) and is read at its selected checkpoint (F-GRPO §7.1, as in
:func:`tailmiss.results.claims.protocol.select_checkpoints`: the best held-out
pass@1; a focal run no later than its γ = 0 baseline's choice, same method, N
and seed).

**The rule behind every verdict**: rows are compared paired by seed with a two-sided
paired t-test at α = 0.05, and a paper's sentence is judged from its parts
(:mod:`tailmiss.results.claims.paired`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss.analytic import pass_at_k
from tailmiss.results.claims.paired import PairedDiff, Sentence, judge_sentence, paired_diff
from tailmiss.results.claims.protocol import select_checkpoints

__all__ = [
    "KS",
    "FOCAL_GAMMA",
    "CONTROL_TAGS",
    "GAMMAS",
    "METHODS",
    "PairedDiff",
    "paired_diff",
    "Sentence",
    "GammaChoice",
    "Crossing",
    "ControlsClaims",
    "chosen_checkpoints",
    "controls_claims",
    "passk_curves",
]

KS = tuple(2**i for i in range(9))
"""k = 1, 2, 4, …, 256: the pass@k grid of F-GRPO Tables 12-14."""
FOCAL_GAMMA = 0.5
"""The γ of F-GRPO in the controls and the trade-off plane (F-GRPO §7.1: 0.5 in the controls)."""
CONTROL_TAGS = {"low-LR": "GRPO low-LR", "entropy": "entropy bonus", "KL": "KL penalty", "DS": "DS-GRPO"}
"""The controls (variant tag → the paper's name for the row)."""
GAMMAS = (0.0, 0.5, 1.0, 2.0)
METHODS = {"grpo": "GRPO", "dapo+ds": "DAPO", "cispo": "CISPO"}
"""The γ-sensitivity methods (``method`` column → name); DAPO runs with its dynamic sampling."""
SAMPLES = 1024
"""Samples per prompt of the finite-sample pass@k (F-GRPO §7.1: n = 1024)."""
_METRICS = ("pass1", "pass256", "mret", "dnll", "rare256")


@dataclass(frozen=True)
class GammaChoice:
    """One method's γ sensitivity: the table's best γ per metric and the paper's selection rule."""

    method: str
    best: dict
    """Metric (``pass1``, ``pass256``) → the γ with the highest seed mean."""
    resolved: dict
    """Metric → whether that γ beats every other γ by the paired rule."""
    selected: float
    """F-GRPO §7.1's choice: the γ among {0.5, 1, 2} with the highest mean pass@1."""
    selected_beats: dict
    """Other focal γ → the paired pass@1 comparison of the selected γ against it (:class:`PairedDiff`)."""


@dataclass(frozen=True)
class Crossing:
    """Where a focal method's pass@k curve crosses its base method's (difference focal − base over k)."""

    base: str
    focal: str
    scoring: str
    """``"exact"`` (the exact correct masses) or ``"sampled"`` (n = 1024 samples per prompt, unbiased pass@k)."""
    diffs: tuple
    """Paired difference at each k of :data:`KS` (:class:`PairedDiff`)."""
    cross_k: int | None
    """The smallest k at which the mean difference's sign differs from its sign at k = 1 (None: no crossing)."""
    resolved_k: int | None
    """The smallest k from which on every difference is resolved the same way (None: not at k = 256)."""
    resolved: str | None
    """That way: ``"higher"`` or ``"lower"`` (None with ``resolved_k``)."""


@dataclass(frozen=True)
class ControlsClaims:
    """The claims of the controls, γ sensitivity, pass@k and trade-off analyses (module docstring).

    Attributes
    ----------
    chosen : DataFrame
        One row per run at its selected checkpoint: label, method, gamma, group_size, seed, step and metrics.
    controls : DataFrame
        Table 3 analog: one row per method (mean and ``_sd`` of each metric, ``seeds``), same seeds.
    sentences : tuple of Sentence
    gamma : DataFrame
        Tables 6-7 analog: method, gamma, metric means and sds.
    choices : tuple of GammaChoice
    curves : DataFrame
        pass@k per run: label, seed, scoring, k, value.
    crossings : tuple of Crossing
    tradeoff : DataFrame
        Fig. 1(b,c) analog: label, pass1, pass256 (means and sds).
    tradeoff_diffs : dict
        ``"vs GRPO N=8"`` / ``"vs GRPO N=32"`` → (pass@1, pass@256) :class:`PairedDiff` of F-GRPO N = 8.
    names : dict
        Sweep family → the preset that ran.
    prompts : int
        Evaluation prompts every metric averages over.
    overrides : dict
        Each control's tag → the RL settings it changes (its learning rate, coefficients).
    start : dict
        ``pass1``, ``pass256`` of the SFT model (step 0, mean over GRPO N = 8's runs).
    quick : bool
    against_grpo : dict
        F-GRPO (γ = 0.5) and each control → ``{metric: PairedDiff}`` against GRPO N = 8 (pass256, pass1, mret).
    gamma_two : dict
        Method name → ``{metric: PairedDiff}`` of γ = 2 against γ = 0.5 (pass256, pass1).
    gamma_usual : bool
        F-GRPO Table 7's "γ = 0.5 is the usual choice": the §7.1 rule picks 0.5 for most methods.
    identical : tuple of str
        Methods whose runs coincide with GRPO's at every γ they share (|Δ pass@256| < 1e-6).
    tradeoff_sentence : Sentence
        Fig. 1(b,c)'s "F-GRPO N = 8 improves both pass@1 and pass@256 over GRPO N = 8".
    last_epoch : tuple of int
        (GRPO N = 8 runs whose selected checkpoint is the last one, its runs).
    low_lr_undertrains : bool
        The low-LR control's pass@1 is lower than GRPO's while GRPO's pass@256 rose over training (False without the
        control).
    """

    chosen: pd.DataFrame
    controls: pd.DataFrame
    sentences: tuple
    gamma: pd.DataFrame
    choices: tuple
    curves: pd.DataFrame
    crossings: tuple
    tradeoff: pd.DataFrame
    tradeoff_diffs: dict
    names: dict
    prompts: int
    overrides: dict
    start: dict
    quick: bool
    against_grpo: dict
    gamma_two: dict
    gamma_usual: bool
    identical: tuple
    tradeoff_sentence: Sentence
    last_epoch: tuple
    low_lr_undertrains: bool


def focal_label(gamma: float, method: str = "grpo", n: int = 8) -> str:
    """The sweep label of ``method`` (a ``method`` column value: ``"dapo+ds"`` is DAPO with dynamic sampling) at
    ``gamma`` and N: :attr:`tailmiss.experiments.sweep.Variant.label` (``"F-GRPO γ=0.5 N=8"``, ``"DAPO+DS N=8"`` …)."""
    from tailmiss.experiments.sweep import Variant  # imports torch: not at import time (figures load this module)

    name, _, ds = method.partition("+")
    return Variant(name, gamma, n, dynamic_sampling=ds == "ds").label


def chosen_checkpoints(histories: dict) -> pd.DataFrame:
    """Every run's selected checkpoint: the paper-protocol and γ runs selected together (so each focal run has its
    γ = 0 baseline), the controls on their own (each is its own baseline); only the seeds every row has."""
    base = pd.concat([histories["paper-protocol"], histories["paper-protocol-gamma"]], ignore_index=True)
    chosen = pd.concat(
        [select_checkpoints(base, "best"), select_checkpoints(histories["paper-protocol-controls"], "best")],
        ignore_index=True,
    )
    shared = set.intersection(*(set(rows["seed"]) for _, rows in chosen.groupby("label")))
    return chosen[chosen["seed"].isin(shared)].reset_index(drop=True)


def _table(chosen: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    rows = chosen[chosen["label"].isin(labels)]
    grouped = rows.groupby("label", sort=False)
    values = [*_METRICS, "step"]
    table = grouped[values].mean().join(grouped[values].std(ddof=1).add_suffix("_sd"))
    table = table.join(grouped.size().rename("seeds")).reindex(labels).reset_index()
    return table


def _control_rows(chosen: pd.DataFrame) -> list[str]:
    """The Table 3 rows the runs have (the quick presets have no F-GRPO γ = 1)."""
    rows = [focal_label(0.0), focal_label(0.5), focal_label(1.0), *(f"GRPO N=8 {tag}" for tag in CONTROL_TAGS)]
    have = set(chosen["label"])
    return [r for r in rows if r in have]


def _sentences(chosen: pd.DataFrame) -> tuple:
    grpo, focal = focal_label(0.0), focal_label(FOCAL_GAMMA)
    low, ds = "GRPO N=8 low-LR", "GRPO N=8 DS"
    others = [r for r in _control_rows(chosen) if r not in (focal, focal_label(1.0))]
    return (
        judge_sentence(
            "GRPO low-LR improves pass@256 over GRPO but stays below F-GRPO",
            [
                (paired_diff(chosen, low, grpo, "pass256"), "higher"),
                (paired_diff(chosen, low, focal, "pass256"), "lower"),
            ],
        ),
        judge_sentence(
            "DS-GRPO has a higher pass@256 and a lower pass@1 than F-GRPO",
            [(paired_diff(chosen, ds, focal, "pass256"), "higher"), (paired_diff(chosen, ds, focal, "pass1"), "lower")],
        ),
        judge_sentence(
            "F-GRPO has the highest pass@1 (against GRPO and every control)",
            [(paired_diff(chosen, focal, other, "pass1"), "higher") for other in others],
        ),
    )


def _gamma(chosen: pd.DataFrame) -> tuple[pd.DataFrame, tuple]:
    rows, choices = [], []
    have = set(chosen["label"])
    for method, name in METHODS.items():
        gammas = [g for g in GAMMAS if focal_label(g, method) in have]
        if 0.0 not in gammas or len(gammas) < 2:  # a method without its base run or a focal one: no row
            continue
        labels = [focal_label(g, method) for g in gammas]
        table = _table(chosen, labels).assign(method=name, gamma=gammas)
        rows.append(table)
        best, resolved = {}, {}
        for metric in ("pass1", "pass256"):
            top = table.loc[table[metric].idxmax()]
            best[metric] = float(top["gamma"])
            wins = [paired_diff(chosen, top["label"], lab, metric).outcome for lab in labels if lab != top["label"]]
            resolved[metric] = all(w == "higher" for w in wins)
        focal = table[table["gamma"] > 0]
        selected = float(focal.loc[focal["pass1"].idxmax(), "gamma"])
        beats = {
            float(g): paired_diff(chosen, focal_label(selected, method), focal_label(g, method), "pass1")
            for g in gammas
            if g > 0 and g != selected
        }
        choices.append(GammaChoice(name, best, resolved, selected, beats))
    return (pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()), tuple(choices)


def passk_curves(chosen: pd.DataFrame, histories: pd.DataFrame, per_prompt: dict, seed: int = 0) -> pd.DataFrame:
    """pass@k at k in :data:`KS` of every chosen checkpoint: exact (the history's mean over the evaluation prompts
    of :math:`1-(1-\\mu_{pos}(x))^k`) and sampled (F-GRPO §7.1's estimator: per prompt
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
    frame = curves[curves["scoring"] == scoring].rename(columns={"value": "v"})
    diffs = tuple(paired_diff(frame[frame["k"] == k], focal, base, "v") for k in KS)
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


def _crossings(curves: pd.DataFrame) -> tuple:
    have = set(curves["label"])
    return tuple(
        _crossings_for(curves, method, scoring)
        for method in METHODS
        if focal_label(0.0, method) in have and focal_label(FOCAL_GAMMA, method) in have
        for scoring in ("exact", "sampled")
    )


def _gamma_two(chosen: pd.DataFrame) -> dict:
    """γ = 2 against γ = 0.5 per method (F-GRPO §7.1: "γ = 2 sometimes adds pass@256 but more often costs pass@1")."""
    have = set(chosen["label"])
    out = {}
    for method, name in METHODS.items():
        a, b = focal_label(2.0, method), focal_label(0.5, method)
        if a in have and b in have:
            out[name] = {m: paired_diff(chosen, a, b, m) for m in ("pass256", "pass1")}
    return out


def _identical(gamma: pd.DataFrame) -> tuple:
    """Methods whose γ rows equal GRPO's (|Δ pass@256| < 1e-6 at every γ both have): the same runs in effect."""
    if gamma.empty:
        return ()
    t = gamma.set_index(["method", "gamma"])
    out = []
    for name in ("DAPO", "CISPO"):
        gs = [g for g in GAMMAS if (name, g) in t.index and ("GRPO", g) in t.index]
        if gs and all(abs(t.loc[(name, g), "pass256"] - t.loc[("GRPO", g), "pass256"]) < 1e-6 for g in gs):
            out.append(name)
    return tuple(out)


def _start(history: pd.DataFrame) -> dict:
    rows = history[(history["label"] == focal_label(0.0)) & (history["step"] == 0)]
    return {"pass1": float(rows["mu_pos"].mean()), "pass256": float(rows["exact_pass_at_256"].mean())}


def controls_claims(data) -> ControlsClaims:
    """The claims of the controls, γ sensitivity, pass@k curves and trade-off from a
    :class:`tailmiss.results.ControlsData`."""
    chosen = chosen_checkpoints(data.histories)
    rows = _control_rows(chosen)
    controls = _table(chosen, rows)
    gamma, choices = _gamma(chosen)
    history = pd.concat(list(data.histories.values()), ignore_index=True)
    curves = passk_curves(chosen, history, data.per_prompt)
    plane = ["GRPO N=2", "GRPO N=8", "GRPO N=32", focal_label(FOCAL_GAMMA)]
    plane += [r for r in rows if r.startswith("GRPO N=8 ")]
    tradeoff = _table(chosen, [p for p in plane if p in set(chosen["label"])])
    focal = focal_label(FOCAL_GAMMA)
    tradeoff_diffs = {
        f"vs {other}": tuple(paired_diff(chosen, focal, other, m) for m in ("pass1", "pass256"))
        for other in ("GRPO N=8", "GRPO N=32")
    }
    d1, d256 = tradeoff_diffs["vs GRPO N=8"]
    sentence = judge_sentence(
        "F-GRPO N = 8 improves both pass@1 and pass@256 over GRPO N = 8", [(d1, "higher"), (d256, "higher")]
    )
    grpo = focal_label(0.0)
    against = {
        row: {m: paired_diff(chosen, row, grpo, m) for m in ("pass256", "pass1", "mret")}
        for row in rows
        if row == focal or row.startswith("GRPO N=8 ")
    }
    runs = chosen[chosen["label"] == grpo]
    start = _start(history)
    low = against.get("GRPO N=8 low-LR")
    grpo_256 = float(controls.set_index("label").loc[grpo, "pass256"])
    return ControlsClaims(
        chosen=chosen,
        controls=controls,
        sentences=_sentences(chosen),
        gamma=gamma,
        choices=choices,
        curves=curves,
        crossings=_crossings(curves),
        tradeoff=tradeoff,
        tradeoff_diffs=tradeoff_diffs,
        names=dict(data.names),
        prompts=int(next(iter(data.per_prompt.values()))[1].shape[1]),
        overrides=dict(data.overrides or {}),
        start=start,
        quick=data.quick,
        against_grpo=against,
        gamma_two=_gamma_two(chosen),
        gamma_usual=sum(c.selected == 0.5 for c in choices) * 2 > len(choices),
        identical=_identical(gamma),
        tradeoff_sentence=sentence,
        last_epoch=(int((runs["step"] == chosen["step"].max()).sum()), len(runs)),
        low_lr_undertrains=low is not None and low["pass1"].outcome == "lower" and grpo_256 > start["pass256"],
    )
