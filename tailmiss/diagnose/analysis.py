r"""Does a real run sit in the tail-miss regime? Group statistics and Lemma 3.1 over a per-rollout log.

From a per-rollout log (schema and adapters: :mod:`tailmiss.diagnose.rollout_log`) every
(step, prompt) group gives its size :math:`N`, correct count :math:`X` and
:math:`\hat\mu = X/N` (F-GRPO Eq. 11). Per step this module reports

* the group success distribution: mean and quartiles of :math:`\hat\mu`, and the shares of
  all-incorrect, all-correct and so inactive groups (zero reward variance, no gradient;
  F-GRPO Eq. 7);
* the tail-miss risk: Lemma 3.1,
  :math:`\Pr(B_{E,N}) = (1-\tau)^N - (\mu-\tau)^N - (1-\mu)^N`, evaluated at each group's
  :math:`\hat\mu` (a plug-in estimate of :math:`\mu_{pos}`) and its own :math:`N`, averaged
  over the groups with :math:`X > 0`, and the group size :math:`N^*` at which that risk would
  peak (below);
* the focal weight :math:`g = (1-\hat\mu)^\gamma` (F-GRPO Eq. 12) that F-GRPO would give,
  averaged over the active groups (the only ones whose advantages are not zero anyway).

**Rare mass.** The rare-correct set :math:`E` is given *relative* to the correct mass,
:math:`\tau = \rho\,\hat\mu` per group, for a grid of :math:`\rho` (default the paper's Fig. 3
grid 0.01, 0.05, 0.1, 0.2). Lemma 3.1 needs :math:`0 < \tau < \mu`: an absolute
:math:`\tau` would leave the hardest prompts (:math:`\hat\mu \le \tau`) undefined and mean a
different thing on easy and hard prompts, while :math:`\rho` asks the same question of every
prompt ("a solution holding a share :math:`\rho` of the model's correct mass") and is defined
for every group that solved the prompt at least once. Groups with :math:`X = 0` carry no
estimate of the correct mass and are left out of the average (their share is reported).

**Peak.** Over one step's groups or the whole run, the risk as a function of a common group
size is the mixture :math:`\bar P(N) = \mathrm{mean}_g \Pr(B_{E,N} \mid \hat\mu_g, \rho\hat\mu_g)`
over the solved groups. Each term is unimodal in :math:`N` with its exact argmax from
:func:`tailmiss.analytic.tail_miss_peak`, so the mixture's argmax :math:`N^*` lies at or below
the largest of them and is found exactly on the integers up to it. The run's (median) group size
is then below, at or above :math:`N^*`: below, rare solutions are protected mostly by
inactivity; above, by coverage (F-GRPO §3.1).

The analysis is numpy / pandas plus :mod:`tailmiss.analytic`; plotting lives in
:mod:`tailmiss.studies.diagnose_figure`.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tailmiss._checks import check_interval, check_nonnegative
from tailmiss.diagnose.advice import (
    AT_RISK,
    DEFAULT_ADVICE_RHO,
    Advice,
    advise,
    check_advice_settings,
    modal_size,
    share_at_risk_by_step,
    short_groups,
    verdicts,
)
from tailmiss.diagnose.mixture import analytic, mixture, mixture_peaks, pooled_risk, support
from tailmiss.diagnose.rates import infer_gamma
from tailmiss.diagnose.rollout_log import RolloutLog, group_counts
from tailmiss.diagnose.summary import DiagnoseSummary, FocalRow, RiskRow, sides_of, summary_json
from tailmiss.io import atomic_write

__all__ = [
    "DEFAULT_RHOS",
    "DEFAULT_GAMMAS",
    "RESULT_FILES",
    "Diagnosis",
    "rho_key",
    "rho_grid",
    "gamma_key",
    "n_star_key",
    "group_columns",
    "per_step",
    "step_metrics",
    "pooled_risk",
    "diagnose",
    "default_folder",
    "check_same_log",
    "write_diagnosis",
    "check_grids",
]

DEFAULT_RHOS = (0.01, 0.05, 0.1, 0.2)
"""Rare shares ρ = τ/μ of F-GRPO Fig. 3."""
DEFAULT_GAMMAS = (0.5, 1.0, 2.0)
"""The γ values F-GRPO swept (Table 6; 0.5 was selected in most runs, Table 7)."""
RESULT_FILES = (
    "diagnose.json",
    "diagnose_steps.csv",
    "diagnose_advice.csv",
    "diagnose_simcheck.csv",
    "diagnose.png",
    "diagnose.pdf",
)
"""What a diagnosis folder may hold (``diagnose_advice.csv`` when a group solved its prompt,
``diagnose_simcheck.csv`` with ``--simulate``)."""


def rho_key(rho: float) -> str:
    """Column / metric name of the tail-miss risk for rare share ``rho``."""
    return f"tail_miss_rho{rho:g}"


def n_star_key(rho: float) -> str:
    """Column / metric name of the peak group size N* for rare share ``rho``."""
    return f"n_star_rho{rho:g}"


def gamma_key(gamma: float) -> str:
    """Column / metric name of the mean focal weight for ``gamma``."""
    return f"focal_weight_gamma{gamma:g}"


def rho_grid(rhos) -> tuple[float, ...]:
    """Sorted distinct rare shares from a number or a 1-d sequence in (0, 1); ``ValueError`` naming a bad one."""
    rhos = rhos.item() if isinstance(rhos, np.generic) else rhos  # named in messages as a plain number
    rho = check_interval("rho", rhos, 0.0, 1.0, lo_open=True, hi_open=True)
    if rho.ndim > 1 or rho.size == 0:
        raise ValueError(f"rho must be a number or a non-empty 1-d sequence of numbers, got shape {rho.shape}")
    return tuple(np.unique(rho).tolist())


def check_grids(rhos, gammas) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Sorted distinct ``rhos`` in (0, 1) and ``gammas`` >= 0 (``ValueError`` naming a bad value)."""
    gamma = check_nonnegative("gamma", list(gammas))
    if gamma.size == 0:
        raise ValueError("give at least one gamma")
    return rho_grid(list(rhos)), tuple(np.unique(gamma).tolist())


def group_columns(groups: pd.DataFrame, rhos=DEFAULT_RHOS, gammas=DEFAULT_GAMMAS) -> pd.DataFrame:
    r"""``groups`` (columns ``n``, ``x``) with the per-group risk and focal-weight columns added.

    ``inactive`` is :math:`X \in \{0, N\}`; :func:`rho_key` columns hold Lemma 3.1 at
    :math:`(\hat\mu, \rho\hat\mu, N)` (NaN where :math:`X = 0`); :func:`gamma_key` columns hold
    :math:`(1-\hat\mu)^\gamma` (NaN for inactive groups).

    References
    ----------
    F-GRPO Lemma 3.1 (Eq. 8), Eqs. 7, 11 and 12.
    """
    rhos, gammas = check_grids(rhos, gammas)
    x = groups["x"].to_numpy(np.int64)
    n = groups["n"].to_numpy(np.int64)
    mu = x / n
    out = groups.copy()
    out["mu_hat"] = mu
    out["inactive"] = (x == 0) | (x == n)
    solved = x > 0
    for rho in rhos:
        risk = np.full(mu.shape, np.nan)
        if solved.any():
            risk[solved] = analytic().tail_miss_probability(mu[solved], rho * mu[solved], n[solved])
        out[rho_key(rho)] = risk
    for gamma in gammas:
        out[gamma_key(gamma)] = np.where(out["inactive"], np.nan, analytic().focal_weight(mu, gamma))
    return out


def per_step(columns: pd.DataFrame, rhos=()) -> pd.DataFrame:
    """Per-step summary of :func:`group_columns` output (NaN-skipping means), with each step's peak N* per ``rho``.

    :func:`n_star_key` columns hold :func:`pooled_risk`'s argmax over the step's solved groups (NaN when the
    step has none, or only all-correct ones).
    """
    by = columns.groupby("step", sort=True)
    mu = by["mu_hat"]
    table = pd.DataFrame(
        {
            "groups": by.size(),
            "rollouts": by["n"].sum(),
            "group_size": by["n"].agg(modal_size),
            "group_size_min": by["n"].min(),
            "group_size_max": by["n"].max(),
            "mu_hat_mean": mu.mean(),
            "mu_hat_q25": mu.quantile(0.25),
            "mu_hat_median": mu.median(),
            "mu_hat_q75": mu.quantile(0.75),
            "share_all_incorrect": (columns["x"] == 0).groupby(columns["step"]).mean(),
            "share_all_correct": (columns["x"] == columns["n"]).groupby(columns["step"]).mean(),
            "share_inactive": by["inactive"].mean(),
        }
    )
    for col in columns.columns:
        if col.startswith(("tail_miss_rho", "focal_weight_gamma")):
            table[col] = by[col].mean()
    solved = columns[columns["x"] > 0]
    steps, step_index = np.unique(solved["step"].to_numpy(), return_inverse=True)
    for rho in rhos:
        n_star, _ = mixture_peaks(*support(solved["mu_hat"].to_numpy(), step_index.reshape(-1), steps.size), rho)
        table[n_star_key(rho)] = pd.Series(n_star, index=steps).reindex(table.index).round().astype("Int64")
    return table.reset_index()


def step_metrics(x, n, rhos=DEFAULT_RHOS, gammas=DEFAULT_GAMMAS) -> dict[str, float]:
    """The :func:`per_step` row of one step's groups (correct counts ``x``, sizes ``n``) as a dict."""
    rhos, gammas = check_grids(rhos, gammas)
    groups = pd.DataFrame({"step": 0, "n": np.asarray(n, np.int64), "x": np.asarray(x, np.int64)})
    row = per_step(group_columns(groups, rhos, gammas), rhos).iloc[0]
    return {k: float("nan") if pd.isna(v) else float(v) for k, v in row.items() if k != "step"}


@dataclass(frozen=True)
class Diagnosis:
    """Result of :func:`diagnose`: tables for plotting and the typed summary."""

    groups: pd.DataFrame
    """One row per (step, prompt) group: ``n``, ``x``, ``mu_hat``, ``inactive``, risk and weight columns."""
    steps: pd.DataFrame
    """One row per step (:func:`per_step`)."""
    curve: pd.DataFrame
    """The run's mixture risk against a common group size: ``rho``, ``n``, ``tail_miss``."""
    summary: DiagnoseSummary
    rhos: tuple[float, ...]
    gammas: tuple[float, ...]

    @property
    def advice(self) -> Advice | None:
        """The budget advice (:func:`tailmiss.diagnose.advice.advise`); None when no group solved its prompt or every
        group holds one rollout."""
        return self.summary.advice


def _curve_grid(sizes: list[int], n_stars: list[int]) -> np.ndarray:
    top = max([*sizes, *n_stars, 8]) * 4
    grid = np.unique(np.round(np.geomspace(1, top, 160)).astype(np.int64))
    return np.union1d(grid, np.array([*sizes, *n_stars], dtype=np.int64))


def _tail_miss_summary(columns: pd.DataFrame, rhos, sizes: list[int]) -> tuple[list[RiskRow], pd.DataFrame]:
    """Per rho: the risk of the run's groups, each at its own N, and the peak of their mixture over a common N."""
    solved = columns[columns["x"] > 0]
    rows, curves = [], []
    for rho in rhos:
        pooled = pooled_risk(solved["mu_hat"], rho) if len(solved) else None
        n_star = None if pooled is None else pooled["n_star"]
        rows.append(
            RiskRow(
                rho=float(rho),
                risk_at_observed_n=float(solved[rho_key(rho)].mean()) if len(solved) else None,
                group_sizes=tuple(sizes),
                n_star=None if n_star is None else int(n_star),
                peak=None if pooled is None or pooled["peak"] is None else float(pooled["peak"]),
                sides=sides_of(sizes, n_star),
                solved=pooled is not None,
            )
        )
        if pooled is not None:
            curves.append((rho, pooled["support"]))
    if not curves:
        return rows, pd.DataFrame(columns=["rho", "n", "tail_miss"])
    ns = _curve_grid(sizes, [r.n_star for r in rows if r.n_star is not None])
    frames = [pd.DataFrame({"rho": r, "n": ns, "tail_miss": mixture(*support, r, ns)[0]}) for r, support in curves]
    return rows, pd.concat(frames, ignore_index=True)


def _focal_summary(columns: pd.DataFrame, gammas) -> list[FocalRow]:
    active = np.sort(columns.loc[~columns["inactive"], "mu_hat"].unique())
    return [
        FocalRow(
            gamma=float(gamma),
            mean_over_active=float(columns[gamma_key(gamma)].mean()),
            mu_hat=tuple(active.tolist()),
            weight=tuple(analytic().focal_weight(active, gamma).tolist()),
        )
        for gamma in gammas
    ]


def _success_rule(log: RolloutLog, threshold: float | None) -> str:
    if "correct" in log.frame.columns:
        return "the log's correct flags"
    if threshold is not None:
        return f"reward >= {threshold:g}"
    return "binary reward, 1 = correct"


def diagnose(
    log: RolloutLog,
    threshold: float | None = None,
    rhos=DEFAULT_RHOS,
    gammas=DEFAULT_GAMMAS,
    threshold_name: str = "threshold",
    advice_rho: float = DEFAULT_ADVICE_RHO,
    budget: int | None = None,
    run_gamma: float | None = None,
) -> Diagnosis:
    """Group success distribution, inactive share, tail-miss risk, its peak N, focal weights, verdict and advice.

    Parameters
    ----------
    log : RolloutLog
        From :func:`tailmiss.diagnose.read_rollouts`.
    threshold : float, optional
        Success threshold for non-binary rewards (``reward >= threshold`` is correct).
    rhos : sequence of float
        Rare shares :math:`\\rho \\in (0, 1)`; :math:`\\tau = \\rho\\hat\\mu` per group.
    gammas : sequence of float
        Focal exponents :math:`\\gamma \\ge 0`.
    threshold_name : str
        How the user sets the threshold, for the error on non-binary rewards.
    advice_rho : float
        Rare share of the verdict and the advice (:mod:`tailmiss.diagnose.advice`).
    budget : int, optional
        Rollouts per step to advise on; default the run's own.
    run_gamma : float, optional
        The run's focal :math:`\\gamma` (0: GRPO), which marks its current spend; default the one the log's
        ``focal_weight`` column gives (:func:`tailmiss.diagnose.rates.infer_gamma`), else 0.

    Returns
    -------
    Diagnosis

    References
    ----------
    F-GRPO Lemma 3.1 (Eq. 8), Eqs. 7, 11-13, Prop. 3.2, Cor. H.2.
    """
    rhos, gammas = check_grids(rhos, gammas)
    check_advice_settings(advice_rho, budget, run_gamma)
    columns = group_columns(group_counts(log, threshold, threshold_name), rhos, gammas)
    run_gamma, gamma_source = _run_gamma(log, columns, run_gamma)
    steps = per_step(columns, rhos)
    steps[AT_RISK] = share_at_risk_by_step(columns, advice_rho, steps["step"])
    dropped = (("unscored", int(log.rows_without_reward)), ("cut-off lines", int(log.cut_lines)))
    short = short_groups(columns, sum(count for _, count in dropped))
    sizes = sorted(int(v) for v in columns.loc[~short, "n"].unique())
    tail_miss, curve = _tail_miss_summary(columns, rhos, sizes)
    summary = DiagnoseSummary(
        **_described(log, threshold, columns, steps, sizes),
        tail_miss=tuple(tail_miss),
        focal_weights=tuple(_focal_summary(columns, gammas)),
        **_advised(columns, advice_rho, budget, run_gamma, gamma_source),
        dropped=tuple((why, count) for why, count in dropped if count),
        short_groups=int(short.sum()),
    )
    return Diagnosis(columns, steps, curve, summary, rhos, gammas)


def _run_gamma(log: RolloutLog, columns: pd.DataFrame, run_gamma: float | None) -> tuple[float, str]:
    """The run's focal gamma and its source: as given, else from the log's focal weights, else 0 (GRPO)."""
    if run_gamma is not None:
        return run_gamma, "given"
    found = infer_gamma(log.frame, columns)
    return (0.0, "assumed (GRPO)") if found is None else (found, "the log's focal weights")


def _described(log: RolloutLog, threshold, columns: pd.DataFrame, steps: pd.DataFrame, sizes: list[int]) -> dict:
    """The summary's fields that describe the log and its groups: source, rows, success rule, sizes and shares."""
    return dict(
        source=str(log.source),
        source_path=str(Path(log.source).resolve()),
        format=log.format,
        rows=int(log.rows_read),
        rows_without_reward=int(log.rows_without_reward),
        warnings=tuple(log.warnings),
        success=_success_rule(log, threshold),
        steps=int(steps.shape[0]),
        groups=int(columns.shape[0]),
        group_sizes=tuple(sizes),
        mu_hat_mean=float(columns["mu_hat"].mean()),
        share_all_incorrect=float((columns["x"] == 0).mean()),
        share_all_correct=float((columns["x"] == columns["n"]).mean()),
        share_inactive=float(columns["inactive"].mean()),
    )


def _advised(columns: pd.DataFrame, advice_rho: float, budget, run_gamma: float, gamma_source: str) -> dict:
    """The summary's verdicts and budget advice, and the run's gamma the advice takes as current, with its source."""
    # advice needs a solved group and a group of two or more (groups of one say nothing of the spread across prompts)
    advisable = bool((columns["x"] > 0).any() and (columns["n"] > 1).any())
    return dict(
        verdicts=verdicts(columns, advice_rho),
        advice=advise(columns, advice_rho, budget, run_gamma) if advisable else None,
        run_gamma=float(run_gamma),
        run_gamma_source=gamma_source,
    )


def default_folder(log_path: str | os.PathLike, root: str | os.PathLike = "runs/diagnose") -> Path:
    """``root/<log name>-<8 hex digits of its absolute path>``: two logs of one name get two folders."""
    path = Path(log_path).resolve()
    return Path(root) / f"{path.stem or 'log'}-{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"


def check_same_log(folder: str | os.PathLike, log_path: str | os.PathLike) -> None:
    """``ValueError`` when ``folder`` holds the diagnosis of a log other than ``log_path`` (replacing it is fine)."""
    try:
        earlier = json.loads((Path(folder) / "diagnose.json").read_text()).get("source_path")
    except (OSError, ValueError, AttributeError):  # no earlier diagnosis, or one that does not say its log
        return
    if earlier is not None and earlier != str(Path(log_path).resolve()):
        raise ValueError(
            f"{str(folder)!r} holds the diagnosis of another log, {earlier!r}: give another result folder "
            "(or remove that one)"
        )


def write_diagnosis(diagnosis: Diagnosis, folder: str | os.PathLike) -> list[Path]:
    """Write ``diagnose.json`` (the summary), ``diagnose_steps.csv`` (the per-step table) and, with advice,
    ``diagnose_advice.csv`` (one row per spend of the budget), each atomically."""
    folder = Path(folder)
    paths = [folder / "diagnose.json", folder / "diagnose_steps.csv"]
    with atomic_write(paths[0]) as fh:
        json.dump(summary_json(diagnosis.summary, diagnosis.steps), fh, indent=2, allow_nan=False)
        fh.write("\n")
    with atomic_write(paths[1]) as fh:
        diagnosis.steps.to_csv(fh, index=False)
    if diagnosis.advice is not None:
        paths.append(folder / "diagnose_advice.csv")
        with atomic_write(paths[-1]) as fh:
            diagnosis.advice.table().to_csv(fh, index=False)
    return paths
