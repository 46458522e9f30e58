r"""The paper's protocol in miniature (F-GRPO Table 2, Table 5, App. Q): the protocol ladder and its noise.

Two questions about F-GRPO Table 2 (GRPO's pass@256 75.0 / 71.1 / 64.1 / 67.5
/ 70.1 at N = 2 … 32; v2 gives no seed count):

1. **The protocol ladder.** From the multi-solution N sweep's protocol to the paper's, one ingredient per rung
   (:data:`RUNGS`); per rung, the seed mean and spread of pass@1, pass@256, ΔNLL_rare and M_ret by N, and three
   verdicts (:class:`RungVerdicts`), each by the report's noise rule (:mod:`tailmiss.studies.rule`) on the
   selected checkpoints' per-seed values, paired by seed (every N shares the seeds and the SFT model): (a) pass@256
   best at N = 2, worst strictly inside, higher at N = 32 than at the worst N; (b) ΔNLL_rare ordered
   N=2 < N=32 < N=8; (c) F-GRPO N = 8 not lower than GRPO N = 32 on pass@256.
2. **Could one seed show it?** On the paper-protocol rung, many seeds, pass@256 scored exactly and the paper's way
   (n = 1024 samples per prompt drawn from the selected checkpoint's exact correct masses, the unbiased estimator,
   on benchmark-sized sets of 30 and 500 held-out prompts): the seed-to-seed sd per N, the probability that a
   single-seed sweep shows a Table-2-like pattern, and how often the App. Q test calls a same-config,
   different-seed pair significant (:class:`NoiseClaims`), against the test's own size (:func:`appq_verdict`).

Checkpoint selection (F-GRPO's evaluation protocol, App. L.4): per run, the epoch-end checkpoint with the best
held-out pass@1; for a focal run, the best among its checkpoints that used no more compute than its baseline's
selected one (GRPO at the same N and seed, so no later step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd

from tailmiss.analytic.regimes import NShape, n_shape
from tailmiss.studies.dip import dip_sentence
from tailmiss.studies.protocol.noise import NoiseClaims, noise_claims
from tailmiss.studies.rule import (
    ALPHA,
    Difference,
    Outcome,
    Sentence,
    Verdict,
    compare,
    holm,
    judge,
    practical_threshold,
)

__all__ = [
    "RungSpec",
    "RUNGS",
    "PAPER_PASS256",
    "ProtocolClaims",
    "protocol_claims",
    "select_checkpoints",
    "rung_table",
    "RungVerdicts",
    "rung_verdicts",
    "IngredientEffect",
    "ingredient_effects",
    "RateDifference",
    "rate_difference",
    "AppQVerdict",
    "appq_verdict",
]

PAPER_PASS256 = {2: 75.0, 4: 71.1, 8: 64.1, 16: 67.5, 32: 70.1}
"""F-GRPO Table 2, GRPO math pass@256 (%) by N (Qwen2.5-7B)."""
_METRICS = {
    "pass1": "mu_pos",
    "pass256": "exact_pass_at_256",
    "rare256": "rare_pass_at_256",
    "mret": "retained_mass",
    "dnll": "dnll_rare",
}
"""The generic metric names of the rung tables and the history columns they come from (held-out scoring)."""


@dataclass(frozen=True)
class RungSpec:
    """One rung: the sweep its runs come from, the ingredient it changes against ``against`` (the rung it is
    compared with), how checkpoints are chosen and scored."""

    name: str
    ingredient: str
    sweep: str
    """The sweep family (:data:`tailmiss.studies.runs.SWEEPS`)."""
    against: str | None = None
    selection: str = "final"
    """``"final"``: the last checkpoint; ``"best"``: the paper's selection (module docstring)."""
    scoring: str = "held-out"
    """``"held-out"``: the evaluation prompts; ``"trained-on"``: the training pool."""


RUNGS = (
    RungSpec("today", "the N sweep's protocol: fresh prompts, 4 mini-batch updates, last checkpoint", "protocol-today"),
    RungSpec("difficulty", "+ a difficulty mixture (3 of 10 levels below 1/256)", "protocol-difficulty", "today"),
    RungSpec("on-policy", "1 on-policy update per batch instead of 4 mini-batches", "protocol-on-policy", "difficulty"),
    RungSpec("epochs", "+ a finite training set cycled in epochs, warmup", "paper-protocol", "difficulty"),
    RungSpec("selection", "+ checkpoint selection (best held-out pass@1)", "paper-protocol", "epochs", "best"),
    RungSpec("trained-on", "scored on the training set instead", "paper-protocol", "selection", "best", "trained-on"),
)
"""The protocol ladder. The main path today → difficulty → epochs → selection adds one ingredient per rung and ends
at the paper's protocol (F-GRPO Table 5: "selection"); "on-policy" removes the mini-batch updates at the difficulty
rung (the N sweep's protocol already had them), and "trained-on" scores the paper-protocol checkpoints on the
prompts they were trained on."""


def _evals(history: pd.DataFrame, scoring: str) -> pd.DataFrame:
    prefix = "pool_" if scoring == "trained-on" else ""
    need = prefix + "mu_pos"
    if need not in history:
        raise ValueError(f"the sweep's history has no {need!r} column: scoring {scoring!r} needs a training pool")
    rows = history.dropna(subset=[need])
    return rows.assign(**{k: rows[prefix + col] for k, col in _METRICS.items()})


def select_checkpoints(history: pd.DataFrame, selection: str = "final", scoring: str = "held-out") -> pd.DataFrame:
    """One row per run (label, method, gamma, group_size, seed): its chosen checkpoint's ``step`` and metrics.

    ``selection = "best"`` picks, among the evaluations after step 0, the one
    with the best held-out pass@1 (the earliest on a tie); a focal run only
    among steps up to its baseline's selected step (the same method with
    γ = 0 at the same N and seed, when the sweep has it). The metrics (``pass1``, ``pass256``,
    ``rare256``, ``mret``, ``dnll``) are then read on ``scoring``'s prompts.
    """
    if selection not in ("final", "best"):
        raise ValueError(f"selection must be one of 'final', 'best', got {selection!r}")
    held = _evals(history, "held-out")
    scored = _evals(history, scoring)
    keys = ["label", "method", "gamma", "group_size", "seed"]
    picks = {}
    if selection == "final":
        for key, rows in held.groupby(keys, sort=False):
            picks[key] = int(rows["step"].max())
    else:
        trained = held[held["step"] > 0]
        base = trained[trained["gamma"] == 0]
        for key, rows in base.groupby(keys, sort=False):
            picks[key] = int(rows.loc[rows["pass1"].idxmax(), "step"])
        for key, rows in trained[trained["gamma"] > 0].groupby(keys, sort=False):
            label, method, _, n, seed = key
            limit = [s for (_, me, g, nn, sd), s in picks.items() if me == method and g == 0 and nn == n and sd == seed]
            allowed = rows[rows["step"] <= limit[0]] if limit else rows
            picks[key] = int(allowed.loc[allowed["pass1"].idxmax(), "step"])
    out = []
    for key, rows in scored.groupby(keys, sort=False):
        row = rows[rows["step"] == picks[key]].iloc[0]
        out.append({**dict(zip(keys, key)), "step": picks[key], **{k: float(row[k]) for k in _METRICS}})
    return pd.DataFrame(out)


def rung_table(chosen: pd.DataFrame) -> pd.DataFrame:
    """Seed mean and sd (``<metric>_sd``) of each metric and of the chosen step, one row per variant, N ascending
    within GRPO then the focal rows; column ``seeds`` counts the runs."""
    keys = ["label", "method", "gamma", "group_size"]
    values = [*_METRICS, "step"]
    grouped = chosen.groupby(keys, sort=False)
    table = grouped[values].mean().join(grouped[values].std(ddof=1).add_suffix("_sd"))
    table = table.join(grouped.size().rename("seeds")).reset_index()
    return table.sort_values(["gamma", "group_size"], kind="stable").reset_index(drop=True)


@dataclass(frozen=True)
class RungVerdicts:
    """The three Table 2 properties on one rung, each judged by the report's noise rule
    (:mod:`tailmiss.studies.rule`) on the selected checkpoints' per-seed values, paired by seed.

    Attributes
    ----------
    pass256_shape : NShape
        GRPO's seed-mean pass@256 over N (lower is worse): its worst N, for printing.
    dip_sentence : Sentence or None
        (a) Table 2's dip on pass@256 tested without picking the trough (:func:`tailmiss.studies.dip.dip_sentence`).
    dip : Verdict
        Its verdict (*not testable* without an N near 8 inside the sweep).
    dnll : Sentence
        (b) ΔNLL_rare N=2 < N=32 < N=8: the gaps N=32 − N=2 and N=8 − N=32 (one Holm family), each wanted *higher*.
    reach : dict
        (c) per focal γ: F-GRPO N = 8 minus GRPO N = 32 on pass@256, wanted *not lower*; a reproduced reach is
        *not resolved* when N = 32 is GRPO's seed-mean worst N (vacuous).
    """

    pass256_shape: NShape
    dip_sentence: Sentence | None
    dip: Verdict
    dnll: Sentence
    reach: dict

    @property
    def dnll_order(self) -> Verdict:
        """(b)'s verdict."""
        return self.dnll.verdict

    @property
    def focal_reach(self) -> dict:
        """(c)'s verdict per focal γ."""
        return {g: s.verdict for g, s in self.reach.items()}


def _grpo(table: pd.DataFrame) -> pd.DataFrame:
    return table[(table["method"] == "grpo") & (table["gamma"] == 0)].set_index("group_size").sort_index()


def _labels(chosen: pd.DataFrame) -> dict:
    """GRPO's label per N (γ = 0)."""
    g = chosen[(chosen["method"] == "grpo") & (chosen["gamma"] == 0)]
    return dict(sorted(zip(g["group_size"].astype(int), g["label"])))


def rung_verdicts(chosen: pd.DataFrame) -> RungVerdicts:
    """The rules of :class:`RungVerdicts` on one rung's :func:`select_checkpoints` (GRPO at N = 2 … 32, F-GRPO at
    N = 8): the runs of every N share the seeds and the SFT model, so each comparison is paired by seed."""
    lab = _labels(chosen)
    if not {2, 8, 32} <= set(lab):
        raise ValueError(f"the rung needs GRPO at N = 2, 8 and 32, got N = {sorted(lab)}")
    g = _grpo(rung_table(chosen))
    shape = n_shape(g.index.to_numpy(), g["pass256"].to_numpy(), g["pass256_sd"].to_numpy())
    ns = list(lab)
    text = f"GRPO pass@256 best at N = {ns[0]}, worst near N = 8, partly recovered at N = {ns[-1]}"
    dip = dip_sentence(chosen, lab, "pass256", text)
    gaps = [compare(chosen, lab[32], lab[2], "dnll"), compare(chosen, lab[8], lab[32], "dnll")]
    dnll = judge("ΔNLL_rare N=2 < N=32 < N=8", [(d, "higher") for d in gaps])
    reach = {}
    focal = chosen[(chosen["method"] == "grpo") & (chosen["gamma"] > 0) & (chosen["group_size"] == 8)]
    for _, row in focal.drop_duplicates("label").iterrows():
        d = compare(chosen, row["label"], lab[32], "pass256")
        s = judge(f"F-GRPO γ = {row['gamma']:g} at N = 8 reaches GRPO N = 32 on pass@256", [(d, "not lower")])
        vacuous = shape.worst_n == 32 and s.verdict == Verdict.REPRODUCED
        reach[float(row["gamma"])] = replace(s, verdict=Verdict.NOT_RESOLVED) if vacuous else s
    return RungVerdicts(shape, dip, Verdict.NOT_TESTABLE if dip is None else dip.verdict, dnll, reach)


@dataclass(frozen=True)
class IngredientEffect:
    """What one ingredient does to a property: ``"creates"``, ``"removes"`` or ``"none"`` (unchanged)."""

    rung: str
    against: str
    ingredient: str
    dip: str
    dnll_order: str
    focal_reach: str


def _effect(before, after) -> str:
    """A property holds when its verdict is *reproduced*."""
    was, now = before == Verdict.REPRODUCED, after == Verdict.REPRODUCED
    return "creates" if now and not was else ("removes" if was and not now else "none")


def ingredient_effects(verdicts: dict[str, RungVerdicts]) -> list[IngredientEffect]:
    """Each rung of :data:`RUNGS` against the rung it names in ``against``, on (a), (b) and (c) at γ = 0.5."""
    out = []
    for cur in RUNGS:
        if cur.against is None or cur.name not in verdicts or cur.against not in verdicts:
            continue
        a, b = verdicts[cur.against], verdicts[cur.name]
        out.append(
            IngredientEffect(
                cur.name,
                cur.against,
                cur.ingredient,
                _effect(a.dip, b.dip),
                _effect(a.dnll_order, b.dnll_order),
                _effect(a.focal_reach.get(0.5), b.focal_reach.get(0.5)),
            )
        )
    return out


@dataclass(frozen=True)
class RateDifference(Difference):
    """``a − b`` between two shares (of tests called significant), judged by :func:`rate_difference`."""

    rate_a: float = math.nan
    n_a: int = 0
    rate_b: float = math.nan
    n_b: int = 0
    low: float = math.nan
    high: float = math.nan
    """Newcombe's (1 − α) interval of the difference (hybrid Wilson score)."""

    @property
    def ci(self) -> tuple[float, float]:
        return self.low, self.high

    def describe(self) -> str:
        p = f"p {self.p:.2g}" if self.family == 1 else f"Holm p {self.p_adjusted:.2g} of {self.family}"
        return f"{self.mean:+.3f} [{self.low:+.3f}, {self.high:+.3f}] ({self.test}, {p})"


def _wilson(k: int, n: int, z: float) -> tuple[float, float]:
    p, den = k / n, 1 + z * z / n
    centre, half = (p + z * z / (2 * n)) / den, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return centre - half, centre + half


def rate_difference(rate_a: float, n_a: int, rate_b: float, n_b: int, labels=("a", "b")) -> RateDifference:
    """Share ``rate_a`` of ``n_a`` trials minus share ``rate_b`` of ``n_b`` by the report's rule for proportions.

    The counts are ``round(rate × n)``; the test is Fisher's exact test on the 2 × 2 table (two-sided, valid at
    any count); the outcome follows :mod:`~tailmiss.studies.rule`: *higher* / *lower* when p < α and
    the difference is at least the ``"share"`` δ (0.05), *tie (below δ)* when only the first holds, else *tie*.
    ``low`` / ``high``: Newcombe's hybrid score interval (Wilson's interval of each share, combined).
    """
    from scipy import stats

    if n_a < 1 or n_b < 1:
        raise ValueError(f"each share needs at least one trial, got {n_a} and {n_b}")
    ka, kb = round(rate_a * n_a), round(rate_b * n_b)
    p = float(stats.fisher_exact([[ka, n_a - ka], [kb, n_b - kb]])[1])
    pa, pb, z = ka / n_a, kb / n_b, float(stats.norm.ppf(1 - ALPHA / 2))
    (la, ua), (lb, ub) = _wilson(ka, n_a, z), _wilson(kb, n_b, z)
    diff, delta = pa - pb, practical_threshold("share")
    low, high = diff - math.hypot(pa - la, ub - pb), diff + math.hypot(ua - pa, pb - lb)
    if not p < ALPHA:
        outcome = Outcome.TIE
    else:
        outcome = Outcome.BELOW_DELTA if abs(diff) < delta else (Outcome.HIGHER if diff > 0 else Outcome.LOWER)
    return RateDifference(
        *labels, "share", diff, math.nan, min(n_a, n_b), "Fisher exact", math.nan, p, p, 1, delta,
        (high - low) / 2, outcome, rate_a=pa, n_a=n_a, rate_b=pb, n_b=n_b, low=low, high=high,
    )  # fmt: skip


@dataclass(frozen=True)
class AppQVerdict:
    """App. Q's use of its test (a one-run comparison called significant is evidence of a method difference),
    judged on same-config, different-seed pairs.

    ``diffs``: per benchmark, the share of same-config pairs called significant minus the test's own size (the
    share of tests significant under its null: two independent answer draws from the same masses), one Holm
    family; ``verdict``: *refuted* when some benchmark's rate exceeds the size beyond noise and δ (the test
    calls seed noise significant), *reproduced* when none does and every interval's upper end is below δ (enough
    pairs to rule out an excess of δ), *not resolved* otherwise or without the null columns (``reason``)."""

    verdict: Verdict
    diffs: dict
    reason: str


def appq_verdict(same: pd.DataFrame) -> AppQVerdict:
    """:class:`AppQVerdict` from :attr:`~tailmiss.studies.protocol.noise.NoiseClaims.same_config` (one row per
    benchmark: ``pairs``, ``significant``, and, where measured, ``null_significant`` and ``null_tests``)."""
    if not len(same) or "null_significant" not in same or "null_tests" not in same:
        why = "no same-config pairs" if not len(same) else "the test's own size under its null was not measured"
        return AppQVerdict(Verdict.NOT_RESOLVED, {}, why)
    rows = same[(same["pairs"] > 0) & (same["null_tests"] > 0)]
    tests = [
        rate_difference(r.significant, int(r.pairs), r.null_significant, int(r.null_tests), ("seeds", "null"))
        for r in rows.itertuples()
    ]
    diffs = dict(zip(rows["benchmark"].astype(str), holm(tests)))
    delta = practical_threshold("share")
    over = [b for b, d in diffs.items() if d.outcome == Outcome.HIGHER]
    if over:
        sets = " and ".join(f"the {b}-prompt set" for b in over)
        return AppQVerdict(Verdict.REFUTED, diffs, f"on {sets} it calls seed noise significant beyond its own size")
    if diffs and len(diffs) == len(same) and all(d.high < delta for d in diffs.values()):
        return AppQVerdict(Verdict.REPRODUCED, diffs, f"seeds add less than δ = {delta:g} to its size everywhere")
    return AppQVerdict(Verdict.NOT_RESOLVED, diffs, f"too few pairs to rule out a seed excess of δ = {delta:g}")


@dataclass(frozen=True)
class ProtocolClaims:
    """Everything the report and the figures say about the protocol ladder and its noise.

    Attributes
    ----------
    tables : dict
        Rung name -> :func:`rung_table`.
    chosen : dict
        Rung name -> :func:`select_checkpoints` (one row per run).
    verdicts : dict
        Rung name -> :class:`RungVerdicts`.
    effects : list of IngredientEffect
    noise : NoiseClaims
    appq : AppQVerdict
        :func:`appq_verdict` of ``noise.same_config``.
    names : dict
        Sweep family -> the preset that ran.
    quick : bool
    """

    tables: dict
    chosen: dict
    verdicts: dict
    effects: list
    noise: NoiseClaims
    appq: AppQVerdict
    names: dict
    quick: bool


def protocol_claims(data, iterations: int | None = None) -> ProtocolClaims:
    """The claims of :data:`RUNGS` and the noise part from a :class:`tailmiss.studies.protocol.data.ProtocolData`.

    ``iterations``: the App. Q test's subsamples per pair (default 2,000; 200 in quick mode).
    """
    chosen, tables, verdicts = {}, {}, {}
    for rung in RUNGS:
        history = data.histories[rung.sweep]
        chosen[rung.name] = select_checkpoints(history, rung.selection, rung.scoring)
        tables[rung.name] = rung_table(chosen[rung.name])
        verdicts[rung.name] = rung_verdicts(chosen[rung.name])
    iterations = iterations or (200 if data.quick else 2_000)
    noise = noise_claims(chosen["selection"], data.per_prompt, iterations=iterations)
    effects, appq = ingredient_effects(verdicts), appq_verdict(noise.same_config)
    return ProtocolClaims(tables, chosen, verdicts, effects, noise, appq, dict(data.names), data.quick)
