"""Shared-parameter sweeps through the result store: reused when a verified result of the same config made by the
same code is there, else simulated and saved atomically."""

from __future__ import annotations

from pathlib import Path

from tailmiss.io import check_result_dest
from tailmiss.options import RunOptions
from tailmiss.sim.shared.config import SharedSimConfig
from tailmiss.sim.shared.result import SHARED_UNIT, SharedSimResult
from tailmiss.sim.shared.simulate import simulate_shared
from tailmiss.store import lookup

__all__ = ["run_shared"]


def run_shared(
    config: SharedSimConfig, out: str | Path, options: RunOptions = RunOptions(), rerun: bool = False
) -> SharedSimResult:
    """The result of ``config`` in the folder ``out``: reused, or simulated and saved.

    Parameters
    ----------
    config : SharedSimConfig
    out : path
        Result folder, checked before any work: absent or an earlier result folder, in a writable place.
    options : RunOptions
        ``device`` and ``progress`` as :func:`~tailmiss.sim.shared.simulate_shared`; ``reuse_stale`` reuses a
        result made by other code (with a warning naming the difference); ``log`` receives one line per decision.
    rerun : bool
        Simulate even if a fresh result is there.

    Notes
    -----
    A killed sweep starts again from step 0 (no snapshots yet); nothing half-written is left in ``out``.
    """
    if not isinstance(config, SharedSimConfig):
        raise ValueError(f"config must be a SharedSimConfig, got {type(config).__name__}")
    out = Path(out)
    check_result_dest(out, SHARED_UNIT.files, SHARED_UNIT.what)
    if not rerun:
        found = lookup(out, SHARED_UNIT, lambda r: r.config == config, options.reuse_stale, options.say)
        if found.usable:
            if found.state == "fresh":
                options.say(f"{config.name}: done by this code, reusing {out}")
            return found.value
    result = simulate_shared(config, device=options.device, progress=options.progress)
    result.save(out)
    return result
