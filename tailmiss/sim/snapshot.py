"""Snapshots of a running simulation, so that a killed sweep resumes where it stopped, bit for bit.

A snapshot holds the logits, the optimizer state, the next step, the rows
logged so far, the metrics' reference policy and the elapsed time, keyed by
the config, the selected runs, the device type and the code fingerprint of the
simulator (:func:`tailmiss.store.code_fingerprint`): a snapshot of anything
else is never loaded.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from tailmiss.io import atomic_write
from tailmiss.sim.config import SimConfig
from tailmiss.sim.metrics import _Metrics
from tailmiss.store import code_fingerprint

__all__: list[str] = []


class _Checkpoint:
    """Periodic, atomic snapshots of a simulation (logits, optimizer state, step, logged rows).

    Every random draw of a step is a function of ``(seed, N, step)`` only
    (:class:`~tailmiss.sim.sampler.CountSampler`), so a run resumed from a
    snapshot repeats the uninterrupted one bit for bit on the same device.
    """

    def __init__(self, path, config: SimConfig, index: list[int], dev, every_steps, every_s):
        self.path = Path(path)
        self.key = {
            "config": config.to_dict(),
            "code": code_fingerprint("sim"),
            "runs": list(index),
            "device": dev.type,
        }
        self.name, self.index, self.dev = config.name, list(index), dev
        self.every_steps, self.every_s = every_steps, every_s
        self.last = time.monotonic()

    def load(self, log=None) -> dict | None:
        """The snapshot to resume from, or None (none there, another sweep, other code, or unreadable)."""
        if not self.path.is_file():
            return None
        say = log or (lambda message: None)
        try:
            state = torch.load(self.path, map_location="cpu", weights_only=True)
        except Exception:  # a damaged file is never loaded: start over
            say(f"{self.path}: unreadable snapshot, starting over")
            return None
        key = state.get("key") if isinstance(state, dict) else None
        if key != self.key:
            what = "code" if isinstance(key, dict) and {**key, "code": self.key["code"]} == self.key else "sweep"
            say(f"{self.path}: a snapshot of another {what}, starting over")
            return None
        return state

    def resume(
        self, z: torch.Tensor, optimizer: torch.optim.Optimizer, metrics: _Metrics, log=None
    ) -> tuple[list[dict[str, torch.Tensor]], int, float]:
        """Restore ``z``, ``optimizer`` and ``metrics`` from the snapshot, if there is one to resume from.

        Returns the rows logged before the snapshot, the step to go on from and
        the seconds already spent: ``([], 0, 0.0)`` without a snapshot.
        """
        state = self.load(log)
        if state is None:
            return [], 0, 0.0
        dev = self.dev
        with torch.no_grad():
            z.copy_(state["z"].to(dev))
        optimizer.load_state_dict(state["optimizer"])
        logged = [{k: t.to(dev) for k, t in row.items()} for row in state["logged"]]
        metrics.p0_pos = state["p0_pos"].to(dev)
        metrics.q0 = state["q0"].to(dev)
        start, before = int(state["step"]), float(state["elapsed_s"])
        if log is not None:
            log(f"{self.name}: resuming runs {self.index[0]}..{self.index[-1]} from step {start} ({self.path})")
        return logged, start, before

    def due(self, done: int, total: int) -> bool:
        if done >= total:
            return False
        if self.every_steps is not None and done % self.every_steps == 0:
            return True
        return self.every_s is not None and time.monotonic() - self.last >= self.every_s

    def save_step(
        self,
        step: int,
        z: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        logged: list[dict[str, torch.Tensor]],
        metrics: _Metrics,
        elapsed_s: float,
    ) -> None:
        """Snapshot the simulation before ``step`` (:meth:`save`)."""
        self.save(
            {
                "step": step,
                "z": z.detach().cpu(),
                "optimizer": optimizer.state_dict(),
                "logged": [{k: t.cpu() for k, t in row.items()} for row in logged],
                "p0_pos": metrics.p0_pos.cpu(),
                "q0": metrics.q0.cpu(),
                "elapsed_s": elapsed_s,
            }
        )

    def save(self, state: dict) -> None:
        with atomic_write(self.path, "wb") as fh:
            torch.save({"key": self.key, **state}, fh)
        self.last = time.monotonic()
