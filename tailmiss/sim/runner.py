"""Sweeps through the result store: reuse, resume and shard across ``torchrun`` processes.

:func:`run_sim` is what ``tailmiss sim run``, the figures and the report call:

1. the result folder is reused when it holds a verified result of the same
   config made by the same code (:mod:`tailmiss.store`), or a stale one with
   ``reuse_stale``;
2. otherwise each process simulates its contiguous share of the sweep's runs
   (all of them without ``torchrun``), snapshotting its logits, optimizer state
   and logged rows beside the result (``.<name>.resume/``) so that a killed
   command resumes where it stopped;
3. rank 0 gathers the shares, writes one result equal to the single-process
   one (bit for bit on the CPU: each run's draws depend only on its own seed,
   group size and step), and removes the snapshots.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from tailmiss import _dist
from tailmiss.io import check_result_dest
from tailmiss.options import RunOptions
from tailmiss.sim.config import SimConfig
from tailmiss.sim.engine import simulate
from tailmiss.sim.result import SIM_UNIT, SimResult
from tailmiss.store import lookup

__all__ = ["run_sim", "run_cached", "resume_dir"]


def resume_dir(out: str | Path) -> Path:
    """The hidden folder beside ``out`` that holds a sweep's snapshots while it runs."""
    out = Path(out)
    return out.parent / f".{out.name}.resume"


def _merge(config: SimConfig, shares: list) -> SimResult:
    """One result from the processes' ``(history, meta)`` shares (a single share without torchrun)."""
    history = pd.concat([h for h, _ in shares], ignore_index=True)
    history = history.sort_values(["run", "step"], kind="stable").reset_index(drop=True)
    metas = [m for _, m in shares]
    meta = dict(metas[0])
    meta["elapsed_s"] = max(m["elapsed_s"] for m in metas)  # each share's time, resumed parts included
    meta["action_updates_per_s"] = config.num_runs * config.num_actions * config.steps / max(meta["elapsed_s"], 1e-9)
    if len(metas) > 1:
        meta["processes"] = len(metas)
        meta["devices"] = [m["device"] for m in metas]
    resumed = [m.get("resumed_from_step") for m in metas if m.get("resumed_from_step")]
    if resumed:
        meta["resumed_from_step"] = min(resumed)
    return SimResult(config=config, history=history, meta=meta)


def run_sim(
    config: SimConfig,
    out: str | Path,
    options: RunOptions = RunOptions(),
    rerun: bool = False,
    checkpoint_every: int | None = None,
    checkpoint_every_s: float | None = 60.0,
) -> SimResult | None:
    """The result of ``config`` in the folder ``out``: reused, resumed or simulated (and saved).

    Parameters
    ----------
    config : SimConfig
    out : path
        Result folder. Checked before any work: it must be absent or an earlier
        result folder, in a writable place.
    options : RunOptions
        ``device`` as :func:`~tailmiss.sim.simulate` (under ``torchrun`` each rank uses
        the device :func:`tailmiss._dist.init_from_env` gave it); ``reuse_stale``
        reuses a result made by other code (with a warning naming the
        difference) instead of simulating again; ``log`` receives one line per
        decision (reused, stale, corrupt, resumed).
    rerun : bool
        Simulate even if a fresh result is there.
    checkpoint_every, checkpoint_every_s
        Snapshot cadence in steps and seconds (see :func:`~tailmiss.sim.simulate`).

    Returns
    -------
    SimResult or None
        The result on rank 0 (every process without ``torchrun``); None on
        the other ranks.
    """
    if not isinstance(config, SimConfig):
        raise ValueError(f"config must be a SimConfig, got {type(config).__name__}")
    out = Path(out)
    say = options.say
    main = _dist.is_main()
    found = None
    if main:
        check_result_dest(out, SIM_UNIT.files, SIM_UNIT.what)
        if not rerun:
            found = lookup(out, SIM_UNIT, lambda r: r.config == config, options.reuse_stale, say)
            if found.usable:
                if found.state == "fresh":
                    say(f"{config.name}: done by this code, reusing {out}")
    # every rank takes the same decision
    reuse = _dist.broadcast_object(found is not None and found.usable)
    if reuse:
        return found.value if main else None

    start, stop = _dist.shard_bounds(config.num_runs)
    snapshots = resume_dir(out)
    part = snapshots / f"runs-{start}-{stop}-of-{config.num_runs}.pt"
    share = simulate(
        config,
        device=options.device,
        progress=options.progress and main,
        runs=range(start, stop),
        checkpoint=part,
        checkpoint_every=checkpoint_every,
        checkpoint_every_s=checkpoint_every_s,
        log=say,
    )
    shares = _dist.gather_objects((share.history, share.meta))
    result = None
    if main:
        result = _merge(config, shares)
        result.save(out)
    _dist.barrier()
    if main:
        shutil.rmtree(snapshots, ignore_errors=True)
    return result


def run_cached(config: SimConfig, cache_root, options: RunOptions = RunOptions()) -> SimResult:
    """:func:`run_sim` into ``cache_root/<config.name>`` (what figures and the report use)."""
    return run_sim(config, Path(cache_root) / config.name, options)
