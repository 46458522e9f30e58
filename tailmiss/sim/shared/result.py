"""What a shared-parameter simulation returns: a tidy history per run, prompt and logged step, and its summaries by
prompt type."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from tailmiss.analytic import pass_at_k_from_mass
from tailmiss.sim.config import SimConfig
from tailmiss.sim.metrics import expected_steps
from tailmiss.sim.shared.config import SharedSimConfig
from tailmiss.sim.shared.law import SharedLaw
from tailmiss.store import CorruptUnit, UnitKind, open_unit, read_meta, save_tables

__all__ = ["SharedSimResult", "LawSimResult", "SHARED_UNIT", "SHARED_METRICS", "tidy_history", "by_type"]

SHARED_METRICS = ("q_pos", "retained_mass", "entropy", "mu_hat")
"""Columns logged per run, prompt and step: the prompt's correct mass :math:`Q_{pos}`, its retained mass (F-GRPO
Eq. 26, against its own start), the policy's entropy on it (nats) and the share of correct draws :math:`X/N` taken
at that step (NaN at the last step, where no draws follow)."""
_FILES = ("config.toml", "history.csv", "meta.json")
_KEYS = ("run", "group_size", "gamma", "seed", "prompt", "prompt_type", "step")
_DTYPES = {
    "run": "int64",
    "group_size": "int64",
    "gamma": "float64",
    "seed": "int64",
    "prompt": "int64",
    "prompt_type": "str",
    "step": "int64",
}


def tidy_history(runs, prompt_types, log_steps: list[int], logged: list[dict[str, torch.Tensor]]) -> pd.DataFrame:
    """One row per run, prompt and logged step from the logged rows (each ``name -> [runs · prompts]``); ``runs``
    the sweep's ``(N, gamma, seed)`` and ``prompt_types`` a label per prompt."""
    p = len(prompt_types)
    rows = len(runs) * p
    cols = {name: torch.stack([row[name] for row in logged]).cpu().numpy().reshape(-1) for name in SHARED_METRICS}
    t = len(logged)
    run = np.repeat(np.arange(len(runs)), p)
    types = np.asarray(prompt_types)
    frame = pd.DataFrame(
        {
            "run": np.tile(run, t),
            "group_size": np.tile(np.repeat([r[0] for r in runs], p), t),
            "gamma": np.tile(np.repeat([float(r[1]) for r in runs], p), t),
            "seed": np.tile(np.repeat([r[2] for r in runs], p), t),
            "prompt": np.tile(np.tile(np.arange(p), len(runs)), t),
            "prompt_type": np.tile(np.tile(types, len(runs)), t),
            "step": np.repeat(np.asarray(log_steps[:t]), rows),
            **cols,
        }
    )
    return frame.sort_values(["run", "prompt", "step"], kind="stable").reset_index(drop=True)


def by_type(frame: pd.DataFrame, ks=(1, 256)) -> pd.DataFrame:
    r"""Each prompt type's mean over its prompts, then over seeds, per ``(group_size, gamma, prompt_type, step)``:
    :data:`SHARED_METRICS` and ``pass@k`` for each ``k`` of ``ks``, where a prompt's pass@k is
    :math:`1 - (1 - Q_{pos})^k` (BroRL §3; :func:`tailmiss.analytic.pass_at_k_from_mass`), so it is exact, not
    sampled. ``frame``: history rows (``run, seed, group_size, gamma, prompt, prompt_type, step`` and the metrics)."""
    frame = frame.copy()
    for k in ks:
        frame[f"pass@{k}"] = pass_at_k_from_mass(frame["q_pos"].clip(0.0, 1.0).to_numpy(), k)
    keys = ["group_size", "gamma", "prompt_type", "step"]
    per_run = frame.drop(columns=["prompt"]).groupby(["run", "seed", *keys], as_index=False).mean()
    return per_run.drop(columns=["run", "seed"]).groupby(keys, as_index=False).mean()


@dataclass
class SharedSimResult:
    """Output of :func:`tailmiss.sim.shared.simulate_shared`.

    Attributes
    ----------
    config : SharedSimConfig
    history : pandas.DataFrame
        One row per run, prompt and logged step: ``run, group_size, gamma, seed, prompt, prompt_type, step`` and
        :data:`SHARED_METRICS`.
    meta : dict
        Device, torch version, wall time, throughput, the start (each type's correct mass, the fit's largest KL).
    final_probs : ndarray or None
        Final policy of every run on every prompt (``keep_final=True`` only; not saved).
    """

    config: SharedSimConfig
    history: pd.DataFrame
    meta: dict = field(default_factory=dict)
    final_probs: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def final(self) -> pd.DataFrame:
        """History rows at the last step, one per run and prompt."""
        return self.history[self.history["step"] == self.config.sim.steps].reset_index(drop=True)

    def by_type(self, ks=(1, 256), frame: pd.DataFrame | None = None) -> pd.DataFrame:
        """Each prompt type's mean over its prompts, then over seeds (:func:`by_type`); ``frame`` defaults to the
        history (give :attr:`final` for the last step alone)."""
        return by_type(self.history if frame is None else frame, ks)

    def save(self, path: str | Path) -> Path:
        """Write ``path/`` with ``config.toml``, ``history.csv`` and ``meta.json`` atomically, sealed by the result
        store (:func:`tailmiss.store.save_tables`); an existing ``path`` is replaced only if it is an earlier result
        folder."""
        path = save_tables(
            path, self.config, {"history.csv": self.history}, self.meta, SHARED_UNIT.scope, SHARED_UNIT.what
        )
        self.meta = read_meta(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> SharedSimResult:
        """Read a saved result after verifying its checksums and that its history is complete (``CorruptUnit``,
        a ``ValueError``, otherwise)."""
        path = Path(path)
        meta = open_unit(path, SHARED_UNIT.files, SHARED_UNIT.what)
        config = SharedSimConfig.from_toml(path / "config.toml")
        try:
            history = pd.read_csv(path / "history.csv", dtype=_DTYPES)
        except (ValueError, pd.errors.ParserError) as exc:
            raise CorruptUnit(f"{path / 'history.csv'} is not readable: {exc}") from None
        _check_complete(path, config, history)
        return cls(config=config, history=history, meta=meta)


SHARED_UNIT = UnitKind(_FILES, "SharedSimResult", "sim", SharedSimResult.load)
"""A saved :class:`SharedSimResult` as a unit of the store: its files, its name, the simulator's scope, its loader."""


def _check_complete(path: Path, config: SharedSimConfig, history: pd.DataFrame) -> None:
    missing = [c for c in (*_KEYS, *SHARED_METRICS) if c not in history]
    if missing:
        raise CorruptUnit(f"{path / 'history.csv'} lacks the column(s) {', '.join(missing)}")
    steps = expected_steps(config.sim)
    want = config.num_runs * config.num_prompts * len(steps)
    ok = len(history) == want and np.array_equal(
        history["step"].to_numpy(), np.tile(steps, config.num_runs * config.num_prompts)
    )
    if not ok:
        raise CorruptUnit(
            f"{path / 'history.csv'} is incomplete: it has {len(history)} rows, not one per run, prompt and logged "
            f"step ({want})"
        )


@dataclass
class LawSimResult:
    """Output of :func:`tailmiss.sim.shared.simulate_law`: a law's simulation, kept in memory (a law comes from
    data, such as a model's exact answer distributions, not from a config the store could key it by).

    Attributes
    ----------
    sim : SimConfig
        The update rule, sweep and steps it ran.
    law : SharedLaw
        The prompts and their policy at the start.
    history : pandas.DataFrame
        As :attr:`SharedSimResult.history`, ``prompt_type`` the law's labels.
    meta : dict
        Device, torch version, wall time, throughput, each type's starting correct mass.
    final_probs : ndarray or None
        Final policy of every run on every prompt (``keep_final=True`` only).
    """

    sim: SimConfig
    law: SharedLaw = field(repr=False)
    history: pd.DataFrame
    meta: dict = field(default_factory=dict)
    final_probs: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def final(self) -> pd.DataFrame:
        """History rows at the last step, one per run and prompt."""
        return self.history[self.history["step"] == self.sim.steps].reset_index(drop=True)

    def by_type(self, ks=(1, 256), frame: pd.DataFrame | None = None) -> pd.DataFrame:
        """As :meth:`SharedSimResult.by_type`."""
        return by_type(self.history if frame is None else frame, ks)
