r"""The paper's protocol in miniature (F-GRPO Table 2, Table 5, App. Q): the protocol ladder and its noise.

Two questions about F-GRPO Table 2 (GRPO's pass@256 75.0 / 71.1 / 64.1 / 67.5
/ 70.1 at N = 2 … 32, one training run per N):

1. **The protocol ladder.** From the multi-solution N sweep's protocol to the
   paper's, one ingredient per rung (:data:`RUNGS`); per rung, the
   seed mean and spread of pass@1, pass@256, ΔNLL_rare and M_ret by N, and
   three verdicts (:class:`RungVerdicts`) from stated rules:
   (a) an interior minimum of pass@256 that recovers at N = 32 beyond the seed
   noise (:func:`tailmiss.analytic.regimes.n_shape`: the worst N strictly
   inside the sweep, N = 32 above it by more than 0.05 and more than twice the
   two points' combined seed sd); (b) ΔNLL_rare ordered N=2 < N=32 < N=8 with
   each gap beyond twice the combined seed sd; (c) F-GRPO N = 8 reaches GRPO
   N = 32 on pass@256 (not below it by more than twice the combined seed sd)
   while N = 32 is not GRPO's worst N (otherwise the comparison is vacuous).
2. **Could one seed show it?** On the paper-protocol rung, many seeds, pass@256
   scored exactly and the paper's way (n = 1024 samples per prompt drawn from
   the selected checkpoint's exact correct masses, the unbiased estimator, on
   benchmark-sized sets of 30 and 500 held-out prompts): the seed-to-seed sd
   per N, the probability that a single-seed sweep shows a Table-2-like
   pattern, and how often the App. Q test calls a same-config, different-seed
   pair significant (:class:`NoiseClaims`).

Checkpoint selection (F-GRPO §7.1): per run, the epoch-end checkpoint with the
best held-out pass@1; for a focal run, the best among its checkpoints that used
no more compute than its baseline's selected one (GRPO at the same N and seed,
so no later step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss.analytic.regimes import NShape, n_shape
from tailmiss.results.claims.noise import NoiseClaims, noise_claims

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
    """The sweep family (:data:`tailmiss.results.llm.SWEEPS`)."""
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
    """The three Table 2 properties on one rung (``None``: the seeds cannot tell).

    Attributes
    ----------
    pass256_shape : NShape
        GRPO's pass@256 over N (lower is worse).
    dip : bool
        (a) interior minimum with recovery at N = 32 beyond the margin.
    dnll_order : bool or None
        (b) N=2 < N=32 < N=8 beyond twice the combined seed sd per gap (True), an
        inversion of a gap beyond it (False), else None (also with one seed).
    focal_reach : dict
        (c) per focal γ: True (F-GRPO N = 8 not below GRPO N = 32 by more than
        twice the combined sd), False, or None when N = 32 is GRPO's worst N
        (vacuous) or there is one seed.
    focal_margin : dict
        Per focal γ: F-GRPO N = 8 minus GRPO N = 32 pass@256.
    """

    pass256_shape: NShape
    dip: bool
    dnll_order: bool | None
    focal_reach: dict
    focal_margin: dict


def _grpo(table: pd.DataFrame) -> pd.DataFrame:
    return table[(table["method"] == "grpo") & (table["gamma"] == 0)].set_index("group_size").sort_index()


def _gap(table: pd.DataFrame, lo: int, hi: int) -> bool | None:
    """Whether ΔNLL_rare(lo) < ΔNLL_rare(hi) beyond twice the combined seed sd (None within it)."""
    g = _grpo(table)
    sds = (g.loc[hi, "dnll_sd"], g.loc[lo, "dnll_sd"])
    if not all(np.isfinite(sds)):  # one seed: no spread to judge a gap against
        return None
    diff = g.loc[hi, "dnll"] - g.loc[lo, "dnll"]
    return None if abs(diff) <= 2 * math.hypot(*sds) else bool(diff > 0)


def rung_verdicts(table: pd.DataFrame) -> RungVerdicts:
    """The rules of the module docstring applied to one :func:`rung_table` (GRPO at N = 2 … 32, F-GRPO at 8)."""
    g = _grpo(table)
    shape = n_shape(g.index.to_numpy(), g["pass256"].to_numpy(), g["pass256_sd"].to_numpy())
    gaps = [_gap(table, 2, 32), _gap(table, 32, 8)]
    order = True if all(x is True for x in gaps) else (False if any(x is False for x in gaps) else None)
    reach, margin = {}, {}
    for _, row in table[(table["gamma"] > 0) & (table["group_size"] == 8)].iterrows():
        diff = float(row["pass256"] - g.loc[32, "pass256"])
        sds = (row["pass256_sd"], g.loc[32, "pass256_sd"])
        margin[float(row["gamma"])] = diff
        judged = shape.worst_n != 32 and all(np.isfinite(sds))  # vacuous at GRPO's worst N; no spread: one seed
        reach[float(row["gamma"])] = bool(diff >= -2 * math.hypot(*sds)) if judged else None
    return RungVerdicts(shape, bool(shape.recovers), order, reach, margin)


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
    if (after is True) and (before is not True):
        return "creates"
    if (before is True) and (after is not True):
        return "removes"
    return "none"


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
    names : dict
        Sweep family -> the preset that ran.
    quick : bool
    """

    tables: dict
    chosen: dict
    verdicts: dict
    effects: list
    noise: NoiseClaims
    names: dict
    quick: bool


def protocol_claims(data, iterations: int | None = None) -> ProtocolClaims:
    """The claims of :data:`RUNGS` and the noise part from a :class:`tailmiss.results.ProtocolData`.

    ``iterations``: the App. Q test's subsamples per pair (default 2,000; 200 in quick mode).
    """
    chosen, tables, verdicts = {}, {}, {}
    for rung in RUNGS:
        history = data.histories[rung.sweep]
        chosen[rung.name] = select_checkpoints(history, rung.selection, rung.scoring)
        tables[rung.name] = rung_table(chosen[rung.name])
        verdicts[rung.name] = rung_verdicts(tables[rung.name])
    iterations = iterations or (200 if data.quick else 2_000)
    noise = noise_claims(chosen["selection"], data.per_prompt, iterations=iterations)
    return ProtocolClaims(tables, chosen, verdicts, ingredient_effects(verdicts), noise, dict(data.names), data.quick)
