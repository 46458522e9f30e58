r"""The paper's LLM claims judged in the narrowing regime (F-GRPO Tables 2, 3, 6-7, 12-14, Fig. 1(b,c), App. N).

Every run starts from one SFT model of the narrowing task (:class:`~tailmiss.llm.tasks.narrowing.NarrowingTask`,
at the strength the search's rule picked, :mod:`tailmiss.studies.narrowing.search`) and trains 400 steps; the
seeds pair every row with every other. Each claim is read three ways where it can be:

* **at equal steps** with the paper's checkpoint selection (F-GRPO App. L.4, as in
  :func:`tailmiss.studies.protocol.claims.select_checkpoints`: the best held-out pass@1; a focal run no later than
  its γ = 0 baseline's choice), the paper's protocol;
* **at matched held-out pass@1**, along each run's trajectory (:mod:`tailmiss.studies.narrowing.frontier`);
* **at equal rollouts** (step × N).

Every verdict comes from the report's one noise rule (:mod:`tailmiss.studies.rule`), over seeds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from tailmiss.studies.controls.claims import fig1bc_sentence, identical_to_grpo
from tailmiss.studies.controls.gamma import GammaClaims, focal_label, gamma_claims, seed_table
from tailmiss.studies.narrowing.counterfactual import counterfactual_rows, counterfactual_table
from tailmiss.studies.narrowing.end_point import StudyAnswer, end_point_claims, study_answers
from tailmiss.studies.narrowing.end_point_seeds import SeedCount, end_point_seeds
from tailmiss.studies.narrowing.frontier import FrontierVerdict, equal_rollouts, frontier_verdict
from tailmiss.studies.narrowing.plateau_claims import PlateauClaims, plateau_claims
from tailmiss.studies.narrowing.regime import regime_table, task_controls, training_effects, typed_table
from tailmiss.studies.narrowing.search import SearchResult, search_result
from tailmiss.studies.narrowing.settings import SettingRow, setting_rows
from tailmiss.studies.narrowing.sharing import SharingClaims, narrowing, sharing_claims, simulator_by_type
from tailmiss.studies.protocol.claims import RungVerdicts, rung_table, rung_verdicts, select_checkpoints
from tailmiss.studies.protocol.noise import PAPER_DIP, PAPER_RECOVERY
from tailmiss.studies.rule import Difference, Sentence, Verdict, compare, judge, judge_family

__all__ = [
    "NarrowingClaims",
    "narrowing_claims",
    "answer",
    "frontier_word",
    "CONTROL_ROWS",
    "GRPO",
    "FOCAL",
    "LOW_LR",
]

GRPO, FOCAL, LOW_LR = "GRPO N=8", "F-GRPO γ=0.5 N=8", "GRPO N=8 low-LR"
"""The run labels of the three arms Table 3's sentences compare: GRPO at N = 8, F-GRPO at N = 8 with the controls'
γ (:data:`~tailmiss.studies.controls.gamma.FOCAL_GAMMA`) and GRPO at N = 8 with a lower learning rate."""
CONTROL_ROWS = (
    "F-GRPO γ=0.5 N=8",
    "F-GRPO γ=1 N=8",
    "GRPO N=8 low-LR",
    "GRPO N=8 entropy",
    "GRPO N=8 entropy-1e-2",
    "GRPO N=8 KL",
    "GRPO N=8 KL-1e-2",
    "GRPO N=8 DS",
    "GRPO N=8 DS-2e-1",
    "CISPO N=8",
)
"""Table 3's rows in this regime (each against GRPO N = 8), the grids' second values included."""


@dataclass(frozen=True)
class NarrowingClaims:
    """Everything the section prints and the ledger judges (module docstring); ``None`` where the quick version has
    no runs."""

    quick: bool
    steps: int
    """The study's RL steps (its sweep's last evaluation)."""
    search: SearchResult | None
    regime: pd.DataFrame
    """GRPO at each N and F-GRPO at N = 8: SFT and final held-out pass@1 / pass@256 by prompt type (seed mean, sd)."""
    narrows: Verdict
    """Does GRPO N = 8 narrow? :func:`~tailmiss.studies.narrowing.sharing.narrowing` of :attr:`change`: *reproduced*
    when its final held-out pass@256 (all prompts) is *lower* than the SFT model's, *refuted* when shown not lower,
    else *cannot tell*."""
    change: Difference | None
    """GRPO N = 8's final − SFT held-out pass@256 on all prompts, paired by seed (None without GRPO N = 8)."""
    typed: pd.DataFrame
    """Every arm's held-out metrics by prompt type at the final step (seed mean, sd)."""
    finals: pd.DataFrame | None
    """The re-scored final models by type (``mu_pos``, ``mret``, ``dnll``, ``pass256``: seed mean, sd)."""
    chosen: pd.DataFrame
    """Every run's selected checkpoint (the N sweep, F-GRPO and the controls)."""
    nsweep: pd.DataFrame
    """The N sweep and F-GRPO at their selected checkpoints (:func:`~tailmiss.studies.protocol.claims.rung_table`)."""
    rungs: RungVerdicts
    one_seed: dict | None
    """Could one seed show Table 2's dip? Over every sweep of one seed per N (``one_seed_dip``)."""
    pass1_sentence: Sentence | None
    tradeoff: Sentence | None
    """Table 2's "reaches GRPO N = 32 at a modest pass@1 trade-off" (``_tradeoff``)."""
    rollouts: dict
    """Equal-rollout comparisons: name -> Difference."""
    frontier: dict
    """``(a, b)`` -> :class:`FrontierVerdict`."""
    controls: pd.DataFrame | None
    sentences: tuple
    copies: dict
    effects: pd.DataFrame | None
    """Per arm: mean entropy, KL to the reference and clipped share of tokens over training, against GRPO's."""
    sensitivity: GammaClaims
    """GRPO's γ sensitivity and the pass@k curves of the selected checkpoints, with the verdicts on Tables 6-7 and
    12-14's sentences (:func:`~tailmiss.studies.controls.gamma.gamma_claims`)."""
    fig1bc: Sentence | None
    task_controls: pd.DataFrame | None
    sharing: SharingClaims
    simulator: pd.DataFrame | None
    """The categorical simulator from the SFT model's per-prompt distributions beside the transformer, by type (None
    in the quick version, which runs no bridge)."""
    names: dict
    plateau: PlateauClaims | None = None
    """The frontier carried to the plateau on fresh seeds (:mod:`.plateau_claims`; None in the first look)."""
    endpoint: PlateauClaims | None = None
    """The end point on enough fresh seeds (:mod:`.end_point`; None in the first look)."""
    seed_count: SeedCount | None = None
    """The rule that set the end point's seeds, from the plateau runs (:mod:`.end_point_seeds`)."""
    settings: tuple[SettingRow, ...] = ()
    """The study's setting and the others the report reads (:mod:`.settings`; empty without the end point)."""
    attribution: pd.DataFrame | None = None
    """One step's groups attributed, per checkpoint, arm and seed (``data.attribution_table``; None in the first
    look)."""
    counterfactual: pd.DataFrame | None = None
    """The counterfactual pool's table by arm (:func:`.counterfactual.counterfactual_table`; None in the first look)."""

    @property
    def answers(self) -> list[StudyAnswer]:
        """The study's answer pair by pair (:func:`~tailmiss.studies.narrowing.end_point.study_answers`; empty in
        the first look)."""
        return study_answers(self.plateau, self.endpoint)


_STUDY = ("narrowing", "narrowing-controls")
"""The sweeps of the study's own SFT model (the others start from the search's and the task controls' models)."""


def _pass1_rises(chosen: pd.DataFrame) -> Sentence | None:
    """F-GRPO Table 2's "pass@1 rises with N": each N against the next (not lower) and N = 32 against N = 2 (higher),
    one Holm family (None with fewer than two N)."""
    g = chosen[(chosen["method"] == "grpo") & (chosen["gamma"] == 0) & chosen["label"].str.fullmatch(r"GRPO N=\d+")]
    ns = sorted(set(g["group_size"].astype(int)))
    if len(ns) < 2:
        return None
    labels = {n: f"GRPO N={n}" for n in ns}
    diffs = [compare(chosen, labels[b], labels[a], "pass1") for a, b in zip(ns, ns[1:])]
    diffs.append(compare(chosen, labels[ns[-1]], labels[ns[0]], "pass1"))
    wanted = ["not lower"] * (len(diffs) - 1) + ["higher"]
    return judge("pass@1 rises with N", list(zip(diffs, wanted)))


def _tradeoff(chosen: pd.DataFrame) -> Sentence | None:
    """Table 2's "F-GRPO N = 8 reaches GRPO N = 32's pass@256 at a modest pass@1 trade-off": F-GRPO γ = 0.5 N = 8 −
    GRPO N = 32 *not lower* on pass@256 and on pass@1 (a trade-off within the margin), one Holm family."""
    if not {FOCAL, "GRPO N=32"} <= set(chosen["label"]):
        return None
    parts = [(compare(chosen, FOCAL, "GRPO N=32", m), "not lower") for m in ("pass256", "pass1")]
    return judge("F-GRPO N = 8 reaches GRPO N = 32's pass@256 at a modest pass@1 trade-off", parts)


def one_seed_dip(chosen: pd.DataFrame) -> dict | None:
    """Over every sweep made of one seed per N (GRPO, selected checkpoints, held-out pass@256): the share whose
    minimum lies strictly inside N and whose dip from N = 2 and recovery at the largest N reach the paper's
    (Table 2: :data:`~tailmiss.studies.protocol.noise.PAPER_DIP`, ``PAPER_RECOVERY``), the share with any interior
    minimum that recovers, and whether the seed means show the pattern; beside them the same shares when N does
    nothing (``null_interior``: :math:`(K - 2)/K` for K exchangeable values, the chance that the least is one of the
    K - 2 inside; ``null_table2``: sweeps drawn from the pooled values). None with fewer than three N."""
    g = chosen[(chosen["method"] == "grpo") & (chosen["gamma"] == 0) & chosen["label"].str.fullmatch(r"GRPO N=\d+")]
    wide = g.pivot_table(index="group_size", columns="seed", values="pass256").sort_index().dropna(axis=1)
    if len(wide) < 3 or wide.shape[1] == 0:
        return None
    values = wide.to_numpy()  # (N, seeds)
    grids = np.meshgrid(*[np.arange(values.shape[1])] * len(values), indexing="ij")
    curves = np.stack([values[i][grid.ravel()] for i, grid in enumerate(grids)])  # (N, sweeps)
    worst = curves.argmin(axis=0)
    inside = (worst > 0) & (worst < len(values) - 1)
    low = curves.min(axis=0)
    table2 = inside & (curves[0] - low >= PAPER_DIP) & (curves[-1] - low >= PAPER_RECOVERY)
    recovers = inside & (curves[-1] > low)
    mean = values.mean(axis=1)
    return {
        "sweeps": int(curves.shape[1]),
        "p_table2": float(table2.mean()),
        "p_interior": float(recovers.mean()),
        "mean_worst_n": int(wide.index[int(mean.argmin())]),
        "ns": [int(n) for n in wide.index],
        "null_interior": (len(values) - 2) / len(values),
        "null_table2": _null_table2(values),
    }


def _null_table2(values: np.ndarray, draws: int = 100_000) -> float:
    """The share of one-seed sweeps that show Table 2's pattern when N does nothing: ``draws`` sweeps whose values are
    drawn without replacement from all the N sweep's values pooled (exchangeable across N), a fixed generator."""
    pooled = values.ravel()
    rng = np.random.default_rng(0)
    picks = pooled[np.argsort(rng.random((draws, pooled.size)), axis=1)[:, : len(values)]].T  # (N, draws)
    worst = picks.argmin(axis=0)
    low = picks.min(axis=0)
    inside = (worst > 0) & (worst < len(values) - 1)
    return float((inside & (picks[0] - low >= PAPER_DIP) & (picks[-1] - low >= PAPER_RECOVERY)).mean())


def _frontiers(history: pd.DataFrame) -> dict:
    have = set(history["label"])
    pairs = [
        (focal_label(0.5), GRPO),
        (focal_label(1.0), GRPO),
        (LOW_LR, GRPO),
        (focal_label(0.5), LOW_LR),
        (focal_label(1.0), LOW_LR),
        (focal_label(2.0), GRPO),
    ]
    return {(a, b): frontier_verdict(history, a, b) for a, b in pairs if {a, b} <= have}


def _rollouts(history: pd.DataFrame) -> dict:
    """F-GRPO N = 8 against GRPO N = 32 at N = 8's budget, and every N against N = 2 at N = 2's budget."""
    have = set(history["label"])
    last = int(history["step"].max())
    out = {}
    for g in (0.5, 1.0):
        if {focal_label(g), "GRPO N=32"} <= have:
            out[f"F-GRPO γ={g:g} N=8 − GRPO N=32, pass@256 at {8 * last} rollouts/slot"] = equal_rollouts(
                history, focal_label(g), "GRPO N=32", 8 * last, "exact_pass_at_256"
            )
    for n in (8, 32):
        if {f"GRPO N={n}", "GRPO N=2"} <= have:
            out[f"GRPO N={n} − GRPO N=2, pass@256 at {2 * last} rollouts/slot"] = equal_rollouts(
                history, f"GRPO N={n}", "GRPO N=2", 2 * last, "exact_pass_at_256"
            )
    return out


def _never_clips(history: pd.DataFrame) -> dict:
    """CISPO when it clips no token in any of its runs: its update is then GRPO's (the two differ only where a
    clip bound is reached), so it is marked as GRPO's and counts as no evidence."""
    rows = history[(history["label"] == "CISPO N=8") & (history["step"] >= 1)]
    if "clip_frac" not in rows or rows.empty or rows["clip_frac"].fillna(0).max() > 0:
        return {}
    return {"CISPO N=8": "GRPO's update: it never clips here"}


def _table3(chosen: pd.DataFrame, history: pd.DataFrame) -> tuple:
    """F-GRPO Table 3's sentences in this regime (each one Holm family)."""
    have = set(chosen["label"])
    copies = {**identical_to_grpo(chosen, [r for r in CONTROL_ROWS if r in have]), **_never_clips(history)}
    out = []
    if {LOW_LR, GRPO, FOCAL} <= have:
        parts = [
            (compare(chosen, LOW_LR, GRPO, "pass256"), "higher"),
            (compare(chosen, LOW_LR, FOCAL, "pass256"), "lower"),
        ]
        out.append(("t3-lowlr", judge_family("GRPO low-LR improves pass@256 over GRPO but stays below F-GRPO", parts)))
    if {"GRPO N=8 DS", FOCAL} <= have:
        ds = "GRPO N=8 DS"
        parts = [(compare(chosen, ds, FOCAL, "pass256"), "higher"), (compare(chosen, ds, FOCAL, "pass1"), "lower")]
        out.append(("t3-ds", judge_family("DS-GRPO has a higher pass@256 and a lower pass@1 than F-GRPO", parts)))
    others = [r for r in (GRPO, *CONTROL_ROWS) if r in have and r not in copies and not r.startswith("F-GRPO")]
    if FOCAL in have and others:
        parts = [(compare(chosen, FOCAL, other, "pass1"), "higher") for other in others]
        out.append(("t3-best", judge_family("F-GRPO has the highest pass@1 against GRPO and every control", parts)))
    return tuple(out), copies


def _finals_table(finals: pd.DataFrame | None) -> pd.DataFrame | None:
    """Seed mean and sd (``<metric>_sd``) of the re-scored final models, per label and prompt type."""
    if finals is None or finals.empty:
        return None
    values = ["mu_pos", "mret", "dnll", "pass256"]
    grouped = finals.groupby(["label", "type"], sort=False)
    table = grouped[values].mean().join(grouped[values].std(ddof=1).add_suffix("_sd"))
    return table.join(grouped.size().rename("seeds")).reset_index()


def _chosen(histories: dict) -> pd.DataFrame:
    """The N sweep with F-GRPO and γ = 2 selected together (each focal run with its GRPO baseline), the controls
    each their own baseline; only the seeds every row has."""
    main = histories["narrowing"]
    ctl = histories.get("narrowing-controls")
    if ctl is None:
        return select_checkpoints(main, "best")
    focal = ctl[(ctl["method"] == "grpo") & (ctl["gamma"] > 0)]
    rest = ctl[~ctl.index.isin(focal.index)]
    chosen = pd.concat(
        [select_checkpoints(pd.concat([main, focal], ignore_index=True), "best"), select_checkpoints(rest, "best")],
        ignore_index=True,
    )
    return chosen


def narrowing_claims(data) -> NarrowingClaims:
    """The study's claims from a :class:`tailmiss.studies.narrowing.data.NarrowingData`."""
    h = data.histories
    main = h["narrowing"]
    history = pd.concat([main, h["narrowing-controls"]], ignore_index=True) if "narrowing-controls" in h else main
    search = None
    if not data.quick:
        strengths = {float(f.rsplit("str", 1)[1]): h[f] for f in h if f.startswith("narrowing-search-")}
        search = search_result(strengths, data.tasks["narrowing"].conflict_strength)  # what the study ran
    chosen = _chosen(h)
    regime, change = regime_table(main, data.typed["narrowing"])
    have_nsweep = {2, 8, 32} <= set(main["group_size"].astype(int))
    selected = select_checkpoints(main, "best")  # the N sweep alone: each focal run with its own GRPO baseline
    nsweep = rung_table(selected)
    rungs = rung_verdicts(selected) if have_nsweep else None
    sentences, copies = _table3(chosen, history)
    controls = seed_table(chosen, [r for r in (GRPO, *CONTROL_ROWS) if r in set(chosen["label"])])
    claims = NarrowingClaims(
        quick=data.quick,
        steps=int(main["step"].max()),
        search=search,
        regime=regime,
        narrows=Verdict.CANNOT_TELL if change is None else narrowing(change),
        change=change,
        typed=typed_table(pd.concat([data.typed[f] for f in _STUDY if f in data.typed], ignore_index=True), history),
        finals=_finals_table(data.finals_by_type),
        chosen=chosen,
        nsweep=nsweep,
        rungs=rungs,
        one_seed=one_seed_dip(selected) if not data.quick else None,
        pass1_sentence=_pass1_rises(chosen),
        tradeoff=_tradeoff(chosen),
        rollouts=_rollouts(main),
        frontier=_frontiers(history),
        controls=controls,
        sentences=sentences,
        copies=copies,
        effects=training_effects(history),
        sensitivity=gamma_claims(chosen, history, data.per_prompt),
        fig1bc=fig1bc_sentence(chosen) if {FOCAL, GRPO} <= set(chosen["label"]) else None,
        task_controls=task_controls(h, data.typed) if not data.quick else None,
        sharing=sharing_claims(data.ladder),
        simulator=simulator_by_type(data.bridge) if data.bridge is not None else None,
        names=dict(data.names),
        plateau=plateau_claims(data.plateau, data.plateau_typed, rates=data.plateau_rates)
        if data.plateau is not None
        else None,
        endpoint=end_point_claims(data.endpoint, data.endpoint_typed, rates=data.endpoint_rates)
        if data.endpoint is not None
        else None,
        seed_count=end_point_seeds(data.plateau) if data.plateau is not None and data.endpoint is not None else None,
        attribution=data.attribution,
        counterfactual=counterfactual_table(counterfactual_rows(data.typed["narrowing"], data.counterfactual))
        if data.counterfactual is not None
        else None,
    )
    if claims.endpoint is None:
        return claims
    return replace(claims, settings=setting_rows(claims.answers, claims.endpoint, data))


def answer(c: NarrowingClaims) -> tuple[str, FrontierVerdict | None]:
    """The study's answer to "is F-GRPO above GRPO's pass@1-pass@256 frontier, or on it?": the word of the
    frontier rule for F-GRPO γ = 0.5 against GRPO N = 8 (:func:`.frontier.frontier_verdict`)."""
    v = c.frontier.get((FOCAL, GRPO))
    return (v.word if v is not None else "cannot tell"), v


def frontier_word(v: FrontierVerdict) -> Verdict:
    """The ledger's verdict on "the focal weight is not a slower GRPO" from the frontier rule's word: above ->
    reproduced, below -> refuted, crosses -> partly, on -> not resolved, cannot tell -> cannot tell."""
    return {
        "above": Verdict.REPRODUCED,
        "below": Verdict.REFUTED,
        "crosses": Verdict.PARTLY,
        "on": Verdict.NOT_RESOLVED,
    }.get(v.word, Verdict.CANNOT_TELL)
