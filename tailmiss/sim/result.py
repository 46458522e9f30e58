"""The one result format: a tidy history, the config that produced it and run metadata."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tailmiss.io import require_files, result_dir
from tailmiss.sim.config import SimConfig

__all__ = ["SimResult"]

_FILES = ("config.toml", "history.csv", "meta.json")
# CSV drops the decimal point of whole floats (gamma 1.0 -> "1"): restore the column types on load
_HISTORY_DTYPES = {"run": "int64", "group_size": "int64", "gamma": "float64", "seed": "int64", "step": "int64"}


@dataclass
class SimResult:
    """Output of :func:`tailmiss.sim.simulate`.

    Attributes
    ----------
    config : SimConfig
    history : pandas.DataFrame
        One row per run and logged step: ``run, group_size, gamma, seed, step``
        and the metrics of :data:`tailmiss.sim.engine.METRICS`.
    meta : dict
        Device, torch version, wall time, throughput, initial-policy summary.
    final_probs : ndarray or None
        Final policy of every run (``simulate(..., keep_final=True)`` only; not saved).
    """

    config: SimConfig
    history: pd.DataFrame
    meta: dict = field(default_factory=dict)
    final_probs: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def final(self) -> pd.DataFrame:
        """History rows at the last step, one per run."""
        return self.history[self.history["step"] == self.config.steps].reset_index(drop=True)

    def seed_mean(self, frame: pd.DataFrame | None = None) -> pd.DataFrame:
        """Mean over seeds per ``(group_size, gamma, step)`` of ``frame`` (default: history)."""
        frame = self.history if frame is None else frame
        return frame.drop(columns=["run", "seed"]).groupby(["group_size", "gamma", "step"], as_index=False).mean()

    def save(self, path: str | Path) -> Path:
        """Write ``path/`` with ``config.toml``, ``history.csv`` and ``meta.json`` atomically.

        An existing ``path`` is replaced only if it is an earlier result folder
        (those three files and nothing else); anything else raises ``ValueError``.
        """
        path = Path(path)
        with result_dir(path, _FILES, "SimResult") as tmp:
            self.config.to_toml(tmp / "config.toml")
            self.history.to_csv(tmp / "history.csv", index=False, float_format="%.10g")
            (tmp / "meta.json").write_text(json.dumps(self.meta, indent=2, default=str) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> SimResult:
        path = require_files(path, _FILES, "SimResult")
        config = SimConfig.from_toml(path / "config.toml")
        history = pd.read_csv(path / "history.csv", dtype=_HISTORY_DTYPES)
        meta = json.loads((path / "meta.json").read_text())
        return cls(config=config, history=history, meta=meta)
