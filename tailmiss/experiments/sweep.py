r"""Sweeps of RL runs from one SFT model: group size, objective and focal weight, several seeds.

A sweep is one SFT config, one base RL config and a list of variants (method,
focal :math:`\gamma`, group size :math:`N`), each run for every seed. Every run
keeps the base config's prompts per step and steps (F-GRPO Table 2 compares
group sizes at equal prompts and steps, so a larger :math:`N` spends more
rollouts; the rollouts are logged).

Store layout under ``root`` (the same cache the report uses):

* ``root/<sft.name>/``: the SFT run (shared by every sweep of that config);
* ``root/<rl.name>-<method>-n<N>-g<gamma>-s<seed>/``: one RL run folder per
  variant and seed, reused by any sweep that asks for the same config;
* ``root/<sweep.name>/``: the tidy result, written atomically as one folder:
  ``config.toml`` (the sweep), ``history.csv`` (one row per run and evaluation
  step), ``final.csv`` (one row per run, plus the SFT model as ``method =
  "sft"``) and ``meta.json`` (compute of every run).

A finished run is never redone: :func:`run_sweep` reuses it and says so, and a
run killed part-way resumes from its last checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tailmiss import _dist
from tailmiss.experiments.cached import cached_rl, cached_sft, run_state
from tailmiss.experiments.pool import STATE_WORDS, train_all
from tailmiss.experiments.sweep_config import LLMSweep, Variant, load_sweep
from tailmiss.experiments.sweep_result import _FILES, SweepResult
from tailmiss.experiments.sweep_result import SCOPE as SWEEP_SCOPE
from tailmiss.io import check_result_dest
from tailmiss.llm.checkpoint import LoadedRun, RunFolder, read_run_config
from tailmiss.llm.config import RLConfig
from tailmiss.llm.evaluate import PASS_KS, answer_distribution, exact_metrics
from tailmiss.llm.rl_eval import exact_row, score
from tailmiss.options import RunOptions
from tailmiss.store import UnitKind, lookup, own_scope_of, unit_clock

__all__ = ["Variant", "LLMSweep", "SweepResult", "SWEEP_UNIT", "run_sweep", "load_sweep", "per_prompt_evals"]

SWEEP_UNIT = UnitKind(_FILES, "sweep result", SWEEP_SCOPE, SweepResult.load)
"""A saved :class:`SweepResult` as a unit of the store: its files, its name, its scope and its loader."""

_FINAL = ("mu_pos", "off_format", "retained_mass", "dnll_rare", "tau_ratio") + tuple(
    f"{kind}_pass_at_{k}" for kind in ("exact", "rare") for k in PASS_KS
)
"""The columns of a run's row of ``final.csv`` (enumerable tasks)."""


def _final_row(run_dir: Path, prompts_seed: int, reference_cache: dict) -> dict:
    """Exact metrics of a finished run on the sweep's fixed prompts (enumerable tasks).

    A run whose own evaluation prompts are the sweep's (same seed) scored its
    final model on them at its last step: that row is read back. Other runs
    are scored here against the SFT model.
    """
    cfg = read_run_config(run_dir / "config.toml")
    if cfg.eval_prompt_seed == prompts_seed:
        last = pd.read_csv(run_dir / "history.csv").iloc[-1]
        if all(c in last for c in _FINAL) and not pd.isna(last["mu_pos"]):  # dnll, tau_ratio may be NaN
            return {c: float(last[c]) for c in _FINAL}
    return _score_final_row(run_dir, prompts_seed, reference_cache)


def _score_final_row(run_dir: Path, prompts_seed: int, reference_cache: dict) -> dict:
    run = LoadedRun(run_dir)
    cfg = run.config
    task = run.task
    prompts = task.prompts(cfg.eval_split, cfg.eval_prompts, seed=prompts_seed, distinct=True)
    key = (cfg.eval_split, cfg.eval_prompts)
    if key not in reference_cache:
        reference_cache[key] = answer_distribution(run.reference, task, prompts)
    current = score(run.model, task, prompts, reference_cache[key])
    row = exact_row(current, reference_cache[key], cfg.rare_share)  # what the run logs
    return {c: row[c] for c in _FINAL}


def _sft_row(sft_dir: Path, rl: RLConfig) -> dict:
    run = LoadedRun(sft_dir)
    prompts = run.task.prompts(rl.eval_split, rl.eval_prompts, seed=rl.eval_prompt_seed, distinct=True)
    m = exact_metrics(answer_distribution(run.model, run.task, prompts), None, PASS_KS, rl.rare_share)
    row = {"mu_pos": m["mu_pos_mean"], "off_format": m["off_format_mean"], "retained_mass": 1.0, "dnll_rare": 0.0}
    row["tau_ratio"] = 1.0
    row.update({f"exact_pass_at_{k}": v for k, v in m["exact_pass_at_k"].items()})
    row.update({f"rare_pass_at_{k}": v for k, v in m["rare_pass_at_k"].items()})
    return row


def _train_ranked(sweep: LLMSweep, root: Path, options: RunOptions) -> None:
    """Under torchrun: the SFT run on rank 0, then rank k trains runs k, k + K, ... each on its own."""
    words, log, reuse_stale = STATE_WORDS, options.say, options.reuse_stale
    main, ranks, me = _dist.is_main(), _dist.world(), _dist.rank()
    sft_dir = root / sweep.sft.name
    if main:  # the other ranks wait for it
        log(f"SFT {sweep.sft.name}: {words.get(run_state(sft_dir, sweep.sft, None, reuse_stale), 'training')}")
        with _dist.local():
            cached_sft(sweep.sft, root, options)
    _dist.barrier()
    runs = sweep.runs()
    for i, (variant, seed, cfg) in enumerate(runs, 1):
        if (i - 1) % ranks != me:
            continue
        state = run_state(root / cfg.name, cfg, sft_dir, reuse_stale)
        log(f"[{i}/{len(runs)}] {variant.label} seed {seed}: {words.get(state, 'training')} (rank {me})")
        with _dist.local():
            cached_rl(cfg, sft_dir, root, options)


def collect(sweep: LLMSweep, root: str | Path) -> SweepResult:
    """Build the tidy result of ``sweep`` from its finished run folders under ``root``."""
    root = Path(root)
    histories, finals, compute = [], [], []
    reference_cache: dict = {}
    enumerable = sweep.sft.task.enumerable  # every run's task is its SFT run's
    for variant, seed, cfg in sweep.runs():
        path = root / cfg.name
        meta = json.loads((path / "meta.json").read_text())
        # DAPO with dynamic sampling is its own row of the tables: method "dapo+ds"
        method = variant.method + ("+ds" if variant.dynamic_sampling else "")
        ident = {"label": variant.label, "method": method, "gamma": variant.gamma}
        ident.update(group_size=variant.group_size, seed=seed)
        if variant.tag:  # a control arm (a sweep of plain variants keeps its columns)
            ident["tag"] = variant.tag
        history = pd.read_csv(path / "history.csv")
        eval_cols = [c for c in history if c in ("mu_pos", "pass_at_1") or c.startswith("reward")]
        evals = history.dropna(subset=[c for c in ("mu_pos", "pass_at_1") if c in history], how="all")
        if not eval_cols or evals.empty:
            evals = history
        histories.append(evals.assign(**ident))
        last = history.iloc[-1]
        row = {**ident, "rollouts": int(meta["rollouts"]), "tokens": int(meta["tokens"])}
        if enumerable:
            row.update(_final_row(path, sweep.rl.eval_prompt_seed, reference_cache))
        else:
            row.update({c: last[c] for c in history if c.startswith("pass_at_")})
        finals.append(row)
        compute.append(
            {
                "run": cfg.name,
                **ident,
                **{k: meta[k] for k in ("rollouts", "tokens", "elapsed_s", "device", "threads", "torch") if k in meta},
            }
        )
    sft_dir = root / sweep.sft.name
    base = {"label": "SFT", "method": "sft", "gamma": 0.0, "group_size": 0, "seed": sweep.rl.seed, "rollouts": 0}
    base["tokens"] = 0
    if enumerable:
        base.update(_sft_row(sft_dir, sweep.rl))
    else:  # every run's step-0 evaluation scores the SFT model; average them
        first = pd.concat([h[h["step"] == 0] for h in histories])
        base.update({c: float(first[c].mean()) for c in first if c.startswith("pass_at_")})
    final = pd.DataFrame([base, *finals])
    sft_meta = json.loads((sft_dir / "meta.json").read_text())
    meta = {
        "sft": {k: sft_meta.get(k) for k in ("params", "steps", "elapsed_s", "device", "threads", "torch")},
        "runs": compute,
        "total_rollouts": int(sum(r["rollouts"] for r in compute)),
        "total_tokens": int(sum(r["tokens"] for r in compute)),
        "total_elapsed_s": round(sum(r.get("elapsed_s", 0.0) for r in compute), 3),
    }
    return SweepResult(config=sweep, history=pd.concat(histories, ignore_index=True), final=final, meta=meta)


def per_prompt_evals(sweep: LLMSweep, root: str | Path) -> dict:
    """Each finished run's per-prompt evaluations (its config sets ``eval_per_prompt``), keyed by ``(label, seed)``:
    ``(steps (E,), mu_pos (E, P))`` on the sweep's evaluation prompts.

    Each run is judged first (:func:`tailmiss.experiments.cached.run_state`), so that a run the evidence archive holds
    and the cache lacks is restored into it."""
    out = {}
    root = Path(root)
    run_state(root / sweep.sft.name, sweep.sft, None)  # the start first: a run is judged by its start's checkpoint
    for variant, seed, cfg in sweep.runs():
        run_state(root / cfg.name, cfg, root / sweep.sft.name)
        data = RunFolder(root / cfg.name).prompt_evals()
        out[(variant.label, seed)] = (data["step"], data["mu_pos"])
    return out


def run_sweep(sweep: LLMSweep, root: str | Path, options: RunOptions = RunOptions()) -> SweepResult:
    """Train (or reuse) every run of ``sweep`` under ``root`` and return its tidy result.

    Finished runs of the same config made by the same code are reused (``options.log``
    says so), partial ones resume from their last checkpoint, damaged or stale
    ones are redone (``options.reuse_stale`` reuses stale ones with a warning); the
    result folder ``root/<sweep.name>`` is rewritten atomically only when
    something changed. The runs are trained on ``options.jobs`` processes of
    ``options.threads`` intra-op threads each (:func:`tailmiss.experiments.pool.train_all`;
    ``jobs=None``: one per usable CPU core; the default 1 trains them here).

    Under ``torchrun`` (a process group of K ranks) the SFT run is trained on
    rank 0, then rank k trains runs k, k + K, ... each on its own, and rank 0
    collects and saves the result; the other ranks return None. Every run is
    the one a single process would train.
    """
    if not isinstance(sweep, LLMSweep):
        raise ValueError(f"sweep must be an LLMSweep, got {type(sweep).__name__}")
    root, log = Path(root), options.say
    out_dir = root / sweep.name
    main, ranks = _dist.is_main(), _dist.world()
    found = None
    if main:
        check_result_dest(out_dir, SWEEP_UNIT.files, SWEEP_UNIT.what)
        modules = own_scope_of(sweep.sft.task)
        found = lookup(out_dir, SWEEP_UNIT, lambda r: r.config == sweep, options.reuse_stale, log, modules)
        if found.usable and found.state == "fresh":
            log(f"{sweep.name}: every run done by this code, reusing {out_dir}")
    if _dist.broadcast_object(found is not None and found.usable):  # every rank takes rank 0's decision
        return found.value if main else None
    if ranks == 1:
        train_all([sweep], root, options)
    else:
        _train_ranked(sweep, root, options)
    _dist.barrier()
    if not main:
        return None
    with unit_clock():  # the CPU seconds of the collection, recorded in the result
        collect(sweep, root).save(out_dir)
    return SweepResult.load(out_dir)  # as saved: the numbers a later reuse reads, to the last digit
