r"""The paper's protocol in miniature (F-GRPO Table 2, Table 5, App. Q): the protocol ladder and its noise.

Two questions about F-GRPO Table 2 (GRPO's pass@256 75.0 / 71.1 / 64.1 / 67.5
/ 70.1 at N = 2 … 32, one training run per N):

1. **The protocol ladder.** From one on-policy update per rollout batch to the
   paper's protocol, one ingredient per rung (:data:`RUNGS`); per rung, the
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

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss.analytic.regimes import NShape, n_shape
from tailmiss.analytic.significance import benchmark_pass_at_k, paired_subsampling_test, sample_outcomes

__all__ = [
    "RungSpec",
    "RUNGS",
    "PAPER_PASS256",
    "PAPER_DIP",
    "PAPER_RECOVERY",
    "SMALL_BENCHMARK",
    "benchmarks",
    "ProtocolClaims",
    "protocol_claims",
    "select_checkpoints",
    "rung_table",
    "RungVerdicts",
    "rung_verdicts",
    "IngredientEffect",
    "ingredient_effects",
    "NoiseClaims",
    "noise_claims",
]

PAPER_PASS256 = {2: 75.0, 4: 71.1, 8: 64.1, 16: 67.5, 32: 70.1}
"""F-GRPO Table 2, GRPO math pass@256 (%) by N (Qwen2.5-7B)."""
PAPER_DIP = 0.109
"""Table 2's drop of pass@256 from N = 2 to its minimum (75.0 → 64.1), as a fraction."""
PAPER_RECOVERY = 0.060
"""Table 2's rise of pass@256 from its minimum to N = 32 (64.1 → 70.1), as a fraction."""
SMALL_BENCHMARK = 30
"""The first this many evaluation prompts form the AIME-sized benchmark; the rest (500 in the full presets) the
MATH500-sized one."""


def benchmarks(prompts: int) -> dict[str, slice]:
    """The two benchmark-sized sets inside ``prompts`` evaluation prompts, named by their sizes."""
    if prompts <= SMALL_BENCHMARK:
        raise ValueError(f"the evaluation set must hold more than {SMALL_BENCHMARK} prompts, got {prompts}")
    return {
        str(SMALL_BENCHMARK): slice(0, SMALL_BENCHMARK),
        str(prompts - SMALL_BENCHMARK): slice(SMALL_BENCHMARK, None),
    }


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
    """One rung: the sweep its runs come from, the ingredient it adds, how checkpoints are chosen and scored."""

    name: str
    ingredient: str
    sweep: str
    """The sweep family (:data:`tailmiss.results.llm.SWEEPS`)."""
    selection: str = "final"
    """``"final"``: the last checkpoint; ``"best"``: the paper's selection (module docstring)."""
    scoring: str = "held-out"
    """``"held-out"``: the evaluation prompts; ``"trained-on"``: the training pool."""


RUNGS = (
    RungSpec("on-policy", "start: one on-policy update per rollout batch, fresh prompts", "protocol-on-policy"),
    RungSpec("mini-batches", "4 mini-batch updates per batch (ratio and clip act)", "protocol-minibatch"),
    RungSpec("epochs", "a finite set of 256 prompts in 10 epochs, warmup", "protocol-epochs"),
    RungSpec("difficulty", "a difficulty mixture (3 of 10 levels below 1/256)", "paper-protocol"),
    RungSpec("selection", "checkpoint selection (best held-out pass@1)", "paper-protocol", "best"),
    RungSpec("trained-on", "scored on the training set instead", "paper-protocol", "best", "trained-on"),
)
"""The protocol ladder: each rung adds one ingredient to the one before; "selection" is the paper's protocol, and
"trained-on" scores the same checkpoints on the prompts they were trained on."""


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
    among steps up to its baseline's selected step (GRPO at the same N and
    seed, when the sweep has it). The metrics (``pass1``, ``pass256``,
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
            limit = [s for (lb, me, g, nn, sd), s in picks.items() if g == 0 and nn == n and sd == seed]
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
        inversion of a gap beyond it (False), else None.
    focal_reach : dict
        (c) per focal γ: True (F-GRPO N = 8 not below GRPO N = 32 by more than
        twice the combined sd), False, or None when N = 32 is GRPO's worst N
        (vacuous).
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
    diff = g.loc[hi, "dnll"] - g.loc[lo, "dnll"]
    margin = 2 * math.hypot(np.nan_to_num(g.loc[hi, "dnll_sd"]), np.nan_to_num(g.loc[lo, "dnll_sd"]))
    return None if abs(diff) <= margin else bool(diff > 0)


def rung_verdicts(table: pd.DataFrame) -> RungVerdicts:
    """The rules of the module docstring applied to one :func:`rung_table` (GRPO at N = 2 … 32, F-GRPO at 8)."""
    g = _grpo(table)
    shape = n_shape(g.index.to_numpy(), g["pass256"].to_numpy(), g["pass256_sd"].to_numpy())
    gaps = [_gap(table, 2, 32), _gap(table, 32, 8)]
    order = True if all(x is True for x in gaps) else (False if any(x is False for x in gaps) else None)
    reach, margin = {}, {}
    for _, row in table[(table["gamma"] > 0) & (table["group_size"] == 8)].iterrows():
        diff = float(row["pass256"] - g.loc[32, "pass256"])
        tie = 2 * math.hypot(np.nan_to_num(row["pass256_sd"]), np.nan_to_num(g.loc[32, "pass256_sd"]))
        margin[float(row["gamma"])] = diff
        reach[float(row["gamma"])] = None if shape.worst_n == 32 else bool(diff >= -tie)
    return RungVerdicts(shape, bool(shape.recovers), order, reach, margin)


@dataclass(frozen=True)
class IngredientEffect:
    """What one ingredient does to a property: ``"creates"``, ``"removes"`` or ``"none"`` (unchanged)."""

    rung: str
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
    """Each rung against the one before it (in :data:`RUNGS` order), on (a), (b) and (c) at γ = 0.5."""
    names = [r for r in RUNGS if r.name in verdicts]
    out = []
    for prev, cur in zip(names, names[1:]):
        a, b = verdicts[prev.name], verdicts[cur.name]
        out.append(
            IngredientEffect(
                cur.name,
                cur.ingredient,
                _effect(a.dip, b.dip),
                _effect(a.dnll_order, b.dnll_order),
                _effect(a.focal_reach.get(0.5), b.focal_reach.get(0.5)),
            )
        )
    return out


# ---- could one seed show it? -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseClaims:
    """Seed noise of pass@256 on the paper-protocol rung, scored exactly and the paper's way.

    Attributes
    ----------
    scores : DataFrame
        One row per (scoring, group_size, seed): GRPO's pass@256 of the
        selected checkpoint. Scorings: ``"exact-500"``, ``"exact-30"`` (the
        exact mass on each benchmark), ``"sampled-500"``, ``"sampled-30"`` (n
        samples per prompt, the unbiased estimator).
    spread : DataFrame
        Per scoring and N: mean, sd over seeds, seeds.
    single_seed : DataFrame
        Per scoring: whether the seed-mean curve is monotone (its worst N at an
        end), the probability over all one-seed-per-N sweeps of a Table-2-like
        pattern (``p_table2``: interior minimum, a dip from N = 2 of at least
        :data:`PAPER_DIP` and a recovery at N = 32 of at least
        :data:`PAPER_RECOVERY`) and of any interior minimum that recovers
        (``p_interior``), the pooled seed sd, and the seeds per N that a
        two-sided 5 % test with 80 % power needs to resolve the paper's
        recovery margin at that sd.
    same_config : DataFrame
        The App. Q test on every pair of seeds of one GRPO config (same N),
        per benchmark: pairs, share called significant at α = 0.05.
    problems_needed : dict
        Per benchmark size: the problems needed for the problem-sampling
        standard error of a GRPO N = 8 vs N = 32 difference to resolve the
        paper's recovery margin (two-sided 5 %, 80 % power).
    n_samples, iterations : int
        Samples per prompt, subsampling iterations of each test.
    """

    scores: pd.DataFrame
    spread: pd.DataFrame
    single_seed: pd.DataFrame
    same_config: pd.DataFrame
    problems_needed: dict
    n_samples: int
    iterations: int


_Z = 1.959964 + 0.841621
"""z quantiles of a two-sided 5 % test with 80 % power."""


def _pass256(mu: np.ndarray) -> float:
    return float(np.mean(1.0 - (1.0 - np.clip(mu, 0.0, 1.0)) ** 256))


def _pattern_probabilities(values: np.ndarray, ns: list[int]) -> tuple[float, float]:
    """Over every choice of one seed per N (``values``: (N, seeds)): P(Table-2-like), P(interior min + recovery)."""
    seeds = values.shape[1]
    combos = np.array(list(itertools.product(range(seeds), repeat=len(ns))))  # (seeds^len(ns), len(ns))
    curves = values[np.arange(len(ns)), combos]  # (combos, N)
    worst = curves.argmin(1)
    low = curves.min(1)
    interior = (worst > 0) & (worst < len(ns) - 1)
    dip, rec = curves[:, 0] - low, curves[:, -1] - low
    table2 = interior & (dip >= PAPER_DIP) & (rec >= PAPER_RECOVERY)
    return float(table2.mean()), float((interior & (rec > 0)).mean())


def noise_claims(
    chosen: pd.DataFrame,
    per_prompt: dict,
    n_samples: int = 1024,
    iterations: int = 2_000,
    m: int = 256,
) -> NoiseClaims:
    """:class:`NoiseClaims` of GRPO's selected checkpoints (``chosen``, from :func:`select_checkpoints`).

    ``per_prompt[(label, seed)] = (steps, mu)``: each run's per-prompt correct
    masses at every evaluation (``mu``: (evaluations, prompts); :func:`benchmarks` splits the prompts). Outcomes
    are drawn once per run and benchmark from a seed of (N, seed), so the numbers repeat.
    """
    grpo = chosen[(chosen["method"] == "grpo") & (chosen["gamma"] == 0)].sort_values(["group_size", "seed"])
    width = next(iter(per_prompt.values()))[1].shape[1]
    sets = benchmarks(width)
    rows, outcomes, masses = [], {}, {}
    for r in grpo.itertuples():
        steps, mu = per_prompt[(r.label, int(r.seed))]
        at = mu[int(np.flatnonzero(np.asarray(steps) == r.step)[0])]
        for bench, sl in sets.items():
            rng = np.random.default_rng([int(r.group_size), int(r.seed), len(bench)])
            out = sample_outcomes(at[sl], n_samples, rng)
            outcomes[(bench, r.group_size, r.seed)] = out
            masses[(bench, r.group_size, r.seed)] = at[sl]
            ident = dict(group_size=int(r.group_size), seed=int(r.seed))
            rows.append(dict(scoring=f"exact-{bench}", **ident, pass256=_pass256(at[sl])))
            rows.append(dict(scoring=f"sampled-{bench}", **ident, pass256=benchmark_pass_at_k(out, 256)))
    scores = pd.DataFrame(rows)
    grouped = scores.groupby(["scoring", "group_size"])["pass256"]
    parts = [grouped.mean().rename("mean"), grouped.std(ddof=1).rename("sd"), grouped.size().rename("seeds")]
    spread = pd.concat(parts, axis=1).reset_index()
    single = []
    for scoring, frame in scores.groupby("scoring", sort=False):
        wide = frame.pivot(index="group_size", columns="seed", values="pass256").sort_index()
        ns = wide.index.tolist()
        p_t2, p_int = _pattern_probabilities(wide.to_numpy(), ns)
        mean = wide.mean(axis=1).to_numpy()
        sd = float(np.sqrt(np.mean(wide.var(axis=1, ddof=1))))
        worst = int(np.argmin(mean))
        single.append(
            dict(
                scoring=scoring,
                seeds=wide.shape[1],
                monotone=worst in (0, len(ns) - 1),
                worst_n=int(ns[worst]),
                p_table2=p_t2,
                p_interior=p_int,
                pooled_sd=sd,
                seeds_needed=int(math.ceil(2 * (_Z * sd / PAPER_RECOVERY) ** 2)),
            )
        )
    same = []
    for bench in sets:
        calls = []
        for n in sorted(grpo["group_size"].unique()):
            seeds = sorted(grpo.loc[grpo["group_size"] == n, "seed"])
            for s, t in itertools.combinations(seeds, 2):
                a, b = outcomes[(bench, n, s)], outcomes[(bench, n, t)]
                test = paired_subsampling_test(a, b, 256, m=m, iterations=iterations, seed=int(n * 1000 + s * 31 + t))
                calls.append(test.significant)
        same.append(dict(benchmark=bench, pairs=len(calls), significant=float(np.mean(calls)) if calls else np.nan))
    needed = {}
    seeds8 = sorted(grpo.loc[grpo["group_size"] == 8, "seed"])
    for bench in sets:
        diffs = [
            (1 - (1 - masses[(bench, 8, s)]) ** 256) - (1 - (1 - masses[(bench, 32, s)]) ** 256)
            for s in seeds8
            if (bench, 32, s) in masses
        ]
        sd_x = float(np.std(np.mean(diffs, 0), ddof=1)) if diffs else float("nan")
        needed[bench] = int(math.ceil((_Z * sd_x / PAPER_RECOVERY) ** 2)) if np.isfinite(sd_x) else None
    return NoiseClaims(scores, spread, pd.DataFrame(single), pd.DataFrame(same), needed, n_samples, iterations)


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
