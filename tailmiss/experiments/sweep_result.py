"""The tidy result of a sweep (:class:`~tailmiss.experiments.sweep_result.SweepResult`), apart from the code that
trains and collects it (:mod:`tailmiss.experiments.sweep`): what the studies read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tailmiss.experiments.sweep_config import LLMSweep
from tailmiss.store import CorruptUnit, Scope, open_unit, read_meta, save_tables

__all__ = ["SweepResult"]

_FILES = ("config.toml", "history.csv", "final.csv", "meta.json")
SCOPE = Scope("sweep", ("llm", "experiments/sweep.py"), no_numbers=("experiments/presets.py", "experiments/pool.py"))
"""A sweep result's numbers: its runs' (the trainer's) and the code that collects them; presets only name the runs (a
run's config is part of its key) and the pool runs them (a run draws the same numbers alone or in any pool)."""
# CSV drops the decimal point of whole floats (gamma 0.0 -> "0"): restore the identifying columns' types on load
_ID_DTYPES = {"gamma": "float64", "group_size": "int64", "seed": "int64"}


@dataclass
class SweepResult:
    """The tidy output of :func:`~tailmiss.experiments.sweep.run_sweep`.

    Attributes
    ----------
    config : LLMSweep
    history : DataFrame
        One row per run and evaluation step: ``label, method, gamma,
        group_size, seed, step, rollouts`` and the run's evaluation columns
        (exact ``mu_pos``, ``retained_mass``, ``dnll_rare``, ``exact_pass_at_*``
        on enumerable tasks; sampled ``pass_at_k`` when the config samples).
    final : DataFrame
        One row per run at its last step (plus the SFT model, ``method = "sft"``,
        ``group_size = 0``); on enumerable tasks every run is re-evaluated on the
        same prompts, with exact pass@k, ``retained_mass``, ``dnll_rare``,
        ``tau_ratio`` (rare-set mass over its SFT mass) and ``rare_pass_at_k``.
    meta : dict
        Per-run compute (rollouts, tokens, wall time, device, threads) and totals.
    """

    config: LLMSweep
    history: pd.DataFrame
    final: pd.DataFrame
    meta: dict

    def save(self, path: str | Path) -> Path:
        """Write ``path/`` atomically, sealed with checksums and provenance (:func:`tailmiss.store.save_unit`)."""
        tables = {"history.csv": self.history, "final.csv": self.final}
        path = save_tables(path, self.config, tables, self.meta, SCOPE, "sweep result")
        self.meta = read_meta(path)  # now with its provenance and checksums
        return path

    @classmethod
    def load(cls, path: str | Path) -> SweepResult:
        """Read a saved result after verifying its checksums and that it holds every run (``CorruptUnit``)."""
        path = Path(path)
        meta = open_unit(path, _FILES, "sweep result")
        result = cls(
            config=LLMSweep.from_toml(path / "config.toml"),
            history=pd.read_csv(path / "history.csv", dtype=_ID_DTYPES),
            final=pd.read_csv(path / "final.csv", dtype=_ID_DTYPES),
            meta=meta,
        )
        want = {(v.label, s) for v, s, _ in result.config.runs()}
        have = {(r.label, int(r.seed)) for r in result.final.itertuples() if r.method != "sft"}
        in_history = {(r.label, int(r.seed)) for r in result.history[["label", "seed"]].drop_duplicates().itertuples()}
        if have != want or in_history != want:
            raise CorruptUnit(f"{path} is incomplete: it does not hold exactly the sweep's {len(want)} runs")
        return result

    def seed_mean(self, frame: pd.DataFrame | None = None) -> pd.DataFrame:
        """Mean and standard deviation over seeds per ``label`` (and ``step`` for histories)."""
        frame = self.final if frame is None else frame
        keys = ["label", "method", "gamma", "group_size"] + (["step"] if "step" in frame else [])
        numeric = frame.drop(columns=[c for c in ("seed",) if c in frame]).select_dtypes("number").columns
        values = [c for c in numeric if c not in keys]
        grouped = frame.groupby(keys, sort=False)[values]
        mean, std = grouped.mean(), grouped.std(ddof=1 if frame["seed"].nunique() > 1 else 0)
        return mean.join(std.add_suffix("_sd")).reset_index()
