"""The one result format: a tidy history, the config that produced it and run metadata."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tailmiss.sim.config import SimConfig
from tailmiss.sim.metrics import METRICS, expected_steps
from tailmiss.store import CorruptUnit, UnitKind, open_unit, read_meta, save_tables

__all__ = ["SimResult", "SIM_UNIT"]

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
        and the metrics of :data:`tailmiss.sim.metrics.METRICS`.
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

        ``meta.json`` is sealed by :func:`tailmiss.store.save_unit` (through
        :func:`tailmiss.store.save_tables`) with the files' checksums and the
        provenance (versions, device, code fingerprint). An existing ``path`` is
        replaced only if it is an earlier result folder (those three files and
        nothing else); anything else raises ``ValueError``.
        """
        path = save_tables(path, self.config, {"history.csv": self.history}, self.meta, SIM_UNIT.scope, SIM_UNIT.what)
        self.meta = read_meta(path)  # now with its provenance and checksums
        return path

    @classmethod
    def load(cls, path: str | Path) -> SimResult:
        """Read a saved result after verifying it (``CorruptUnit``, a ``ValueError``, otherwise).

        Verified: every file there, each file's SHA-256 equal to the one in
        ``meta.json``, and the history complete: one row per run and logged step
        of its config, in order, with every metric column.
        """
        path = Path(path)
        meta = open_unit(path, SIM_UNIT.files, SIM_UNIT.what)
        config = SimConfig.from_toml(path / "config.toml")
        try:
            history = pd.read_csv(path / "history.csv", dtype=_HISTORY_DTYPES)
        except (ValueError, pd.errors.ParserError) as exc:
            raise CorruptUnit(f"{path / 'history.csv'} is not readable: {exc}") from None
        _check_complete(path, config, history)
        return cls(config=config, history=history, meta=meta)


SIM_UNIT = UnitKind(_FILES, "SimResult", "sim", SimResult.load)
"""A saved :class:`SimResult` as a unit of the store: its files, its name, the simulator's scope and its loader."""


def _check_complete(path: Path, config: SimConfig, history: pd.DataFrame) -> None:
    missing = [c for c in ("run", "group_size", "gamma", "seed", "step", *METRICS) if c not in history]
    if missing:
        raise CorruptUnit(f"{path / 'history.csv'} lacks the column(s) {', '.join(missing)}")
    steps = expected_steps(config)
    want_run = np.repeat(np.arange(config.num_runs), len(steps))
    want_step = np.tile(steps, config.num_runs)
    if len(history) != len(want_run) or not (
        np.array_equal(history["run"].to_numpy(), want_run) and np.array_equal(history["step"].to_numpy(), want_step)
    ):
        raise CorruptUnit(
            f"{path / 'history.csv'} is incomplete: it has {len(history)} rows, not one per run and logged step "
            f"({config.num_runs} x {len(steps)} = {len(want_run)})"
        )
