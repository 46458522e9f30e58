"""Could one seed show F-GRPO Table 2's dip? The noise of pass@256 on the paper-protocol rung.

GRPO's selected checkpoints (:func:`tailmiss.studies.protocol.claims.select_checkpoints`),
pass@256 scored exactly and the paper's way (F-GRPO App. Q: n = 1024 samples per
problem and the unbiased estimator, here drawn from each checkpoint's exact
correct masses, :func:`tailmiss.analytic.significance.sample_outcomes`) on benchmark-sized
sets of held-out prompts; the seed-to-seed spread, the probability that a
one-seed-per-N sweep shows a Table-2-like pattern, and the App. Q test
(:func:`tailmiss.analytic.significance.paired_subsampling_test`) on pairs of seeds of one
config, whose differences are seed noise by construction, beside the same test's rejection rate under its own
null at the same masses (two independent outcome sets from one run's masses), so a share of significant seed
pairs can be read against the share the test calls significant when nothing differs.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss.analytic.significance import (
    DegenerateSubsampling,
    benchmark_pass_at_k,
    check_form,
    paired_subsampling_test,
    sample_outcomes,
)

__all__ = ["PAPER_DIP", "PAPER_RECOVERY", "SMALL_BENCHMARK", "benchmarks", "NoiseClaims", "noise_claims"]

PAPER_DIP = 0.109
"""F-GRPO Table 2's drop of GRPO's math pass@256 from N = 2 to its minimum (75.0 → 64.1), as a fraction."""
PAPER_RECOVERY = 0.060
"""F-GRPO Table 2's rise of GRPO's math pass@256 from its minimum to N = 32 (64.1 → 70.1), as a fraction."""
SMALL_BENCHMARK = 30
"""The first this many evaluation prompts form the AIME-sized benchmark; the rest (500 in the full presets) the
MATH500-sized one."""


def benchmarks(prompts: int) -> dict[str, slice]:
    """The two benchmark-sized sets inside ``prompts`` evaluation prompts, named by their sizes."""
    if prompts <= SMALL_BENCHMARK:
        raise ValueError(f"the evaluation set must hold more than {SMALL_BENCHMARK} prompts, got {prompts}")
    if prompts == 2 * SMALL_BENCHMARK:
        raise ValueError(f"the two benchmarks would both hold {SMALL_BENCHMARK} prompts: use other than {prompts}")
    return {
        str(SMALL_BENCHMARK): slice(0, SMALL_BENCHMARK),
        str(prompts - SMALL_BENCHMARK): slice(SMALL_BENCHMARK, None),
    }


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
        The App. Q test (pass@256, m of n, α = 0.05) on every pair of seeds of
        one GRPO config (same N), per benchmark: ``pairs``, the share called
        significant (``significant``), and beside it the test's own size at
        the same masses: for each pair, two independent outcome sets drawn
        from the first seed's correct masses (a true null) and tested the same
        way, ``null_tests`` of them, ``null_significant`` the share called
        significant; ``form`` is the test's form
        (:data:`tailmiss.analytic.significance.FORMS`).
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


def _draw(grpo: pd.DataFrame, per_prompt: dict, sets: dict, n_samples: int) -> tuple[pd.DataFrame, dict, dict]:
    """Each run's pass@256 per scoring, and its drawn outcomes and exact masses per (benchmark, N, seed)."""
    rows, outcomes, masses = [], {}, {}
    for r in grpo.itertuples():
        steps, mu = per_prompt[(r.label, int(r.seed))]
        at = mu[int(np.flatnonzero(np.asarray(steps) == r.step)[0])]
        for bench, sl in sets.items():
            rng = np.random.default_rng([int(r.group_size), int(r.seed), sl.start])
            out = sample_outcomes(at[sl], n_samples, rng)
            outcomes[(bench, r.group_size, r.seed)] = out
            masses[(bench, r.group_size, r.seed)] = at[sl]
            ident = dict(group_size=int(r.group_size), seed=int(r.seed))
            rows.append(dict(scoring=f"exact-{bench}", **ident, pass256=_pass256(at[sl])))
            rows.append(dict(scoring=f"sampled-{bench}", **ident, pass256=benchmark_pass_at_k(out, 256)))
    return pd.DataFrame(rows), outcomes, masses


def _single_seed(scores: pd.DataFrame) -> pd.DataFrame:
    """Per scoring: the seed-mean curve's shape, the one-seed-per-N pattern probabilities and the seeds needed."""
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
    return pd.DataFrame(single)


def _same_config(grpo: pd.DataFrame, sets: dict, draws: tuple, n_samples: int, test: dict) -> pd.DataFrame:
    """The App. Q test (``test``: m, iterations, form) on same-config seed pairs and on null pairs, per benchmark."""
    outcomes, masses = draws
    same = []
    for bench, sl in sets.items():
        calls, nulls = [], []
        for n in sorted(grpo["group_size"].unique()):
            seeds = sorted(grpo.loc[grpo["group_size"] == n, "seed"])
            for s, t in itertools.combinations(seeds, 2):
                test_seed = int(n * 1000 + s * 31 + t)
                pair = outcomes[(bench, n, s)], outcomes[(bench, n, t)]
                rng = np.random.default_rng([int(n), int(s), int(t), sl.start, 1])
                null = [sample_outcomes(masses[(bench, n, s)], n_samples, rng) for _ in range(2)]
                for a, b, into in ((*pair, calls), (*null, nulls)):
                    with warnings.catch_warnings():  # the paper's k = m: the section sets the test's size beside it
                        warnings.simplefilter("ignore", DegenerateSubsampling)
                        result = paired_subsampling_test(a, b, 256, seed=test_seed, **test)
                    into.append(result.significant)
        same.append(
            dict(
                benchmark=bench,
                pairs=len(calls),
                significant=float(np.mean(calls)) if calls else np.nan,
                null_tests=len(nulls),
                null_significant=float(np.mean(nulls)) if nulls else np.nan,
                form=test["form"],
            )
        )
    return pd.DataFrame(same)


def _problems_needed(grpo: pd.DataFrame, sets: dict, masses: dict) -> dict:
    """Per benchmark: the problems that resolve the paper's recovery margin between GRPO N = 8 and N = 32."""
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
    return needed


def noise_claims(
    chosen: pd.DataFrame,
    per_prompt: dict,
    n_samples: int = 1024,
    iterations: int = 2_000,
    m: int = 256,
    form: str = "corrected",
) -> NoiseClaims:
    """:class:`NoiseClaims` of GRPO's selected checkpoints (``chosen``, from
    :func:`~tailmiss.studies.protocol.claims.select_checkpoints`).

    ``per_prompt[(label, seed)] = (steps, mu)``: each run's per-prompt correct
    masses at every evaluation (``mu``: (evaluations, prompts); :func:`benchmarks` splits the prompts). Outcomes
    are drawn once per run and benchmark from a seed of (N, seed), so the numbers repeat; the null pair of seeds
    (s, t) of N draws its two outcome sets from run (N, s)'s masses with a seed of (N, s, t, benchmark). ``form``
    is the form of every App. Q test (:func:`tailmiss.analytic.significance.paired_subsampling_test`).

    Its App. Q tests take minutes and the section and its figures ask for the same claims: the last claims made in
    this process are kept, keyed by a digest of every input, and a copy is returned when the inputs repeat.
    """
    check_form(form)
    key = _digest(chosen, per_prompt, (n_samples, iterations, m, form))
    if key not in _LAST:
        made = _noise_claims(chosen, per_prompt, n_samples, iterations, m, form)
        _LAST.clear()
        _LAST[key] = made
    return copy.deepcopy(_LAST[key])


_LAST: dict[str, NoiseClaims] = {}


def _digest(chosen: pd.DataFrame, per_prompt: dict, params: tuple) -> str:
    """A SHA-256 of :func:`noise_claims`' inputs: the chosen rows (values, index and columns), every run's steps and
    per-prompt masses, and the test's settings."""
    h = hashlib.sha256(repr((list(chosen.columns), params)).encode())
    h.update(pd.util.hash_pandas_object(chosen, index=True).to_numpy().tobytes())
    for run in sorted(per_prompt, key=repr):
        steps, mu = (np.asarray(a) for a in per_prompt[run])
        h.update(repr((run, steps.shape, steps.dtype.str, mu.shape, mu.dtype.str)).encode())
        h.update(np.ascontiguousarray(steps).tobytes())
        h.update(np.ascontiguousarray(mu).tobytes())
    return h.hexdigest()


def _noise_claims(chosen, per_prompt, n_samples, iterations, m, form) -> NoiseClaims:
    grpo = chosen[(chosen["method"] == "grpo") & (chosen["gamma"] == 0)].sort_values(["group_size", "seed"])
    width = next(iter(per_prompt.values()))[1].shape[1]
    sets = benchmarks(width)
    scores, outcomes, masses = _draw(grpo, per_prompt, sets, n_samples)
    grouped = scores.groupby(["scoring", "group_size"])["pass256"]
    parts = [grouped.mean().rename("mean"), grouped.std(ddof=1).rename("sd"), grouped.size().rename("seeds")]
    spread = pd.concat(parts, axis=1).reset_index()
    single = _single_seed(scores)
    same = _same_config(grpo, sets, (outcomes, masses), n_samples, dict(m=m, iterations=iterations, form=form))
    needed = _problems_needed(grpo, sets, masses)
    return NoiseClaims(scores, spread, single, same, needed, n_samples, iterations)
