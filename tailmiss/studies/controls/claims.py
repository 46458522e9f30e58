r"""F-GRPO's controls, γ sensitivity and pass@k curves in miniature (Tables 3, 6-7, 12-14; Fig. 1(b,c)).

Every run trains on the paper's protocol at N = 8 (``paper-protocol``,
``paper-protocol-controls``, ``paper-protocol-gamma``: one SFT model, the same
seeds for every row) and is read at its selected checkpoint (F-GRPO App. L.4, as in
:func:`tailmiss.studies.protocol.claims.select_checkpoints`: the best held-out
pass@1; a focal run no later than its γ = 0 baseline's choice, same method, N
and seed).

**The rule behind every verdict** is the report's one noise rule
(:mod:`tailmiss.studies.rule`): rows compared paired by seed (a two-sided
paired t-test at α = 0.05), each family of comparisons Holm-corrected, a
practical threshold δ per metric; a paper's sentence is judged from its parts.
A method or control whose runs equal GRPO's on every seed is *identical to
GRPO*: shown as such and counted in no "k of m methods".
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from tailmiss.studies.controls.gamma import (
    FOCAL_GAMMA,
    GAMMAS,
    KS,
    METHODS,
    RUN_METRICS,
    SAMPLES,
    Crossing,
    GammaChoice,
    GammaClaims,
    crossings,
    focal_label,
    gamma_claims,
    passk_curves,
    seed_table,
)
from tailmiss.studies.protocol.claims import select_checkpoints
from tailmiss.studies.rule import Difference, Sentence, Verdict, compare, holm, identical_runs, judge, judge_family

__all__ = [
    "KS",
    "FOCAL_GAMMA",
    "CONTROL_TAGS",
    "GAMMAS",
    "METHODS",
    "SAMPLES",
    "Difference",
    "compare",
    "Sentence",
    "Verdict",
    "focal_label",
    "GammaChoice",
    "Crossing",
    "ControlsClaims",
    "chosen_checkpoints",
    "controls_claims",
    "passk_curves",
]

CONTROL_TAGS = {"low-LR": "GRPO low-LR", "entropy": "entropy bonus", "KL": "KL penalty", "DS": "DS-GRPO"}
"""The controls (variant tag → the paper's name for the row)."""


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
    sensitivity : GammaClaims
        Tables 6-7's γ sensitivity and Tables 12-14's pass@k curves, with their verdicts (:func:`.gamma.gamma_claims`).
    crossings : tuple of Crossing
        Where each focal pass@k curve crosses its base method's (:func:`.gamma.crossings` of the curves).
    tradeoff : DataFrame
        Fig. 1(b,c) analog: label, pass1, pass256 (means and sds).
    tradeoff_diffs : dict
        ``"vs GRPO N=8"`` / ``"vs GRPO N=32"`` → (pass@1, pass@256) :class:`Difference` of F-GRPO N = 8.
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
        F-GRPO (γ = 0.5) and each control → ``{metric: Difference}`` against GRPO N = 8 (pass256, pass1, mret).
    copies : dict
        Controls whose runs equal GRPO N = 8's → ``"GRPO N=8"``.
    tradeoff_sentence : Sentence
        Fig. 1(b,c)'s caption, every part (``fig1bc_sentence``).
    last_epoch : tuple of int
        (GRPO N = 8 runs whose selected checkpoint is the last one, its runs).
    low_lr_undertrains : bool
        The low-LR control's pass@1 is lower than GRPO's while GRPO's pass@256 rose over training (False without the
        control).
    tail_kept : Sentence or None
        "GRPO N = 8 keeps the SFT model's pass@256": its selected checkpoint against its own start, per seed, *not
        lower*. Where it holds, GRPO loses no tail in this regime, and Table 3's low-LR control (does a gentler step
        keep the tail GRPO loses?) has nothing to answer here.
    """

    chosen: pd.DataFrame
    controls: pd.DataFrame
    sentences: tuple
    sensitivity: GammaClaims
    crossings: tuple
    tradeoff: pd.DataFrame
    tradeoff_diffs: dict
    names: dict
    prompts: int
    overrides: dict
    start: dict
    quick: bool
    against_grpo: dict
    copies: dict
    tradeoff_sentence: Sentence
    last_epoch: tuple
    low_lr_undertrains: bool
    tail_kept: Sentence | None = None


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


def _control_rows(chosen: pd.DataFrame) -> list[str]:
    """The Table 3 rows the runs have (the quick presets have no F-GRPO γ = 1)."""
    rows = [focal_label(0.0), focal_label(0.5), focal_label(1.0), *(f"GRPO N=8 {tag}" for tag in CONTROL_TAGS)]
    have = set(chosen["label"])
    return [r for r in rows if r in have]


def identical_to_grpo(chosen: pd.DataFrame, rows) -> dict:
    """Each of ``rows`` whose runs equal GRPO N = 8's on every seed and metric → ``"GRPO N=8"``
    (:func:`~tailmiss.studies.rule.identical_runs`): the same runs, no evidence of their own."""
    grpo = focal_label(0.0)
    return {r: grpo for r in rows if r != grpo and identical_runs(chosen, r, grpo, RUN_METRICS)}


def _sentences(chosen: pd.DataFrame) -> tuple:
    grpo, focal = focal_label(0.0), focal_label(FOCAL_GAMMA)
    low, ds = "GRPO N=8 low-LR", "GRPO N=8 DS"
    copies = identical_to_grpo(chosen, _control_rows(chosen))
    others = [r for r in _control_rows(chosen) if r not in (focal, focal_label(1.0)) and r not in copies]
    return (
        judge_family(
            "GRPO low-LR improves pass@256 over GRPO but stays below F-GRPO",
            [
                (compare(chosen, low, grpo, "pass256"), "higher"),
                (compare(chosen, low, focal, "pass256"), "lower"),
            ],
        ),
        judge_family(
            "DS-GRPO has a higher pass@256 and a lower pass@1 than F-GRPO",
            [(compare(chosen, ds, focal, "pass256"), "higher"), (compare(chosen, ds, focal, "pass1"), "lower")],
        ),
        judge_family(
            "F-GRPO has the highest pass@1 (against GRPO and every control not identical to GRPO)",
            [(compare(chosen, focal, other, "pass1"), "higher") for other in others],
        ),
    )


def _start(history: pd.DataFrame) -> dict:
    rows = history[(history["label"] == focal_label(0.0)) & (history["step"] == 0)]
    return {"pass1": float(rows["mu_pos"].mean()), "pass256": float(rows["exact_pass_at_256"].mean())}


FIG1BC_CAPTION = (
    "F-GRPO N = 8 recovers the pass@256 GRPO N = 8 loses against N = 2 while maintaining pass@1, and reaches GRPO "
    "N = 32's with a quarter of the rollouts; GRPO N = 8 improves pass@1 over N = 2"
)
"""F-GRPO Fig. 1(b,c)'s caption (v2: F-GRPO "recovers" pass@256 "while maintaining pass@1", "4× less compute vs
n=32") and the claim its points make (GRPO N = 8's pass@1 above N = 2's), as parts."""


def fig1bc_sentence(chosen: pd.DataFrame) -> Sentence:
    """F-GRPO Fig. 1(b,c), every part one Holm family: F-GRPO N = 8 − GRPO N = 8 pass@256 *higher* (recovers) and
    pass@1 *not lower* (maintains); GRPO N = 8 − N = 2 pass@256 *lower* (what is recovered) and pass@1 *higher* (the
    points); F-GRPO N = 8 − GRPO N = 32 pass@256 *not lower* (a quarter of the rollouts)."""
    focal = focal_label(FOCAL_GAMMA)
    parts = [
        (compare(chosen, focal, "GRPO N=8", "pass256"), "higher"),
        (compare(chosen, focal, "GRPO N=8", "pass1"), "not lower"),
    ]
    have = set(chosen["label"])
    if "GRPO N=2" in have:
        parts.append((compare(chosen, "GRPO N=8", "GRPO N=2", "pass256"), "lower"))
        parts.append((compare(chosen, "GRPO N=8", "GRPO N=2", "pass1"), "higher"))
    if "GRPO N=32" in have:
        parts.append((compare(chosen, focal, "GRPO N=32", "pass256"), "not lower"))
    return judge_family(FIG1BC_CAPTION, parts)


def tail_kept(chosen: pd.DataFrame, history: pd.DataFrame) -> Sentence | None:
    """GRPO N = 8's selected pass@256 against its own start (step 0: the SFT model), per seed, wanted *not lower*:
    whether GRPO loses any tail in this regime (None without its runs' starts)."""
    grpo = focal_label(0.0)
    start = history[(history["label"] == grpo) & (history["step"] == 0)][["seed", "exact_pass_at_256"]]
    if start.empty:
        return None
    rows = pd.concat(
        [
            chosen.loc[chosen["label"] == grpo, ["seed", "pass256"]].assign(label=grpo),
            start.rename(columns={"exact_pass_at_256": "pass256"}).assign(label="SFT (step 0)"),
        ],
        ignore_index=True,
    )
    return judge(
        "GRPO N = 8 keeps the SFT model's pass@256", [(compare(rows, grpo, "SFT (step 0)", "pass256"), "not lower")]
    )


def _tradeoff(chosen: pd.DataFrame, rows: list[str]) -> tuple[pd.DataFrame, dict]:
    """Fig. 1(b,c)'s plane (seed table of its runs) and F-GRPO N = 8's differences against GRPO N = 8 and N = 32."""
    plane = ["GRPO N=2", "GRPO N=8", "GRPO N=32", focal_label(FOCAL_GAMMA)]
    plane += [r for r in rows if r.startswith("GRPO N=8 ")]
    tradeoff = seed_table(chosen, [p for p in plane if p in set(chosen["label"])])
    focal = focal_label(FOCAL_GAMMA)
    tradeoff_diffs = {
        f"vs {other}": tuple(compare(chosen, focal, other, m) for m in ("pass1", "pass256"))
        for other in ("GRPO N=8", "GRPO N=32")
    }
    return tradeoff, tradeoff_diffs


def _against_grpo(chosen: pd.DataFrame, rows: list[str]) -> dict:
    """F-GRPO and each control → ``{metric: Difference}`` against GRPO N = 8, one Holm family."""
    focal, grpo = focal_label(FOCAL_GAMMA), focal_label(0.0)
    keys = [(r, m) for r in rows if r == focal or r.startswith("GRPO N=8 ") for m in ("pass256", "pass1", "mret")]
    against: dict = {}
    for (row, m), d in zip(keys, holm(compare(chosen, row, grpo, m) for row, m in keys)):
        against.setdefault(row, {})[m] = d
    return against


def _low_lr_undertrains(against: dict, controls: pd.DataFrame, start: dict) -> bool:
    """Whether the low-LR control's pass@1 is lower than GRPO's while GRPO's pass@256 rose over training."""
    low = against.get("GRPO N=8 low-LR")
    grpo_256 = float(controls.set_index("label").loc[focal_label(0.0), "pass256"])
    return low is not None and low["pass1"].outcome == "lower" and grpo_256 > start["pass256"]


def controls_claims(data) -> ControlsClaims:
    """The claims of the controls, γ sensitivity, pass@k curves and trade-off from a
    :class:`tailmiss.studies.controls.data.ControlsData`."""
    chosen = chosen_checkpoints(data.histories)
    rows = _control_rows(chosen)
    controls = seed_table(chosen, rows)
    history = pd.concat(list(data.histories.values()), ignore_index=True)
    g = gamma_claims(chosen, history, data.per_prompt)
    tradeoff, tradeoff_diffs = _tradeoff(chosen, rows)
    sentence = fig1bc_sentence(chosen)
    grpo = focal_label(0.0)
    against = _against_grpo(chosen, rows)
    runs = chosen[chosen["label"] == grpo]
    start = _start(history)
    return ControlsClaims(
        chosen=chosen,
        controls=controls,
        sentences=_sentences(chosen),
        sensitivity=g,
        crossings=crossings(g.curves),
        tradeoff=tradeoff,
        tradeoff_diffs=tradeoff_diffs,
        names=dict(data.names),
        prompts=int(next(iter(data.per_prompt.values()))[1].shape[1]),
        overrides=dict(data.overrides or {}),
        start=start,
        quick=data.quick,
        against_grpo=against,
        copies=identical_to_grpo(chosen, rows),
        tradeoff_sentence=sentence,
        last_epoch=(int((runs["step"] == chosen["step"].max()).sum()), len(runs)),
        low_lr_undertrains=_low_lr_undertrains(against, controls, start),
        tail_kept=tail_kept(chosen, history),
    )
