"""Pieces shared by the SFT and RL loops: seeds per step, progress, checkpoints due, processes.

Under ``torchrun`` (see :mod:`tailmiss._dist`) rank 0 alone checks and writes
the run folder; :func:`prepare_run` and :func:`run_complete` hand its decisions
to the other ranks, :func:`data_parallel` wraps the model in
:class:`~torch.nn.parallel.DistributedDataParallel` and :func:`all_sum` adds a
few statistics over the ranks. In a single process each is a no-op (all_sum
then only converts to float64).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from tailmiss._dist import broadcast_object, is_main, world

__all__ = [
    "step_seed",
    "progress_bar",
    "step_done",
    "environment",
    "prepare_run",
    "run_complete",
    "data_parallel",
    "all_sum",
]


def step_seed(seed: int, step: int, stream: int) -> int:
    """A 63-bit seed for the random draws of ``stream`` at ``step``: no RNG state crosses steps, so resume is exact."""
    return int(np.random.SeedSequence([seed, step, stream]).generate_state(2, dtype=np.uint32).view(np.uint64)[0] >> 1)


def progress_bar(enabled: bool, total: int, description: str, done: int = 0):
    """A progress bar over ``total`` steps, ``done`` of them already taken (a resumed run); ``None`` if disabled."""
    if not enabled:
        return None
    from tailmiss.options import ProgressBar

    bar = ProgressBar(total=total, description=description)
    if done:
        bar.update(min(done, total))
    return bar


def step_done(step: int, cfg, checkpoint, bar, on_step) -> None:
    """After step ``step``: checkpoint when due, advance the bar, call the caller's hook."""
    if (step + 1) % cfg.checkpoint_every == 0:
        checkpoint(step + 1)
    if bar is not None:
        bar.update(1)
    if on_step is not None:
        on_step(step)


def environment(device: torch.device) -> dict:
    return {"device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads(), "processes": world()}


def prepare_run(folder, cfg, resume: bool) -> dict | None:
    """``folder.prepare(cfg, resume)`` on rank 0, then the checkpoint to resume from (or ``None``) on every rank.

    The other ranks wait for rank 0's check, raise its error if it refused the
    folder, and read the checkpoint it found from the shared filesystem.
    """
    if world() == 1:
        return folder.prepare(cfg, resume)
    state, outcome = None, None
    if is_main():
        try:
            state = folder.prepare(cfg, resume)
            outcome = ("ok", state is not None)
        except Exception as exc:  # the other ranks must not wait for a rank that has given up
            broadcast_object(("error", type(exc).__name__, str(exc)))
            raise
    outcome = broadcast_object(outcome)
    if outcome[0] == "error":
        raise (ValueError if outcome[1] == "ValueError" else RuntimeError)(outcome[2])
    if not is_main() and outcome[1]:
        state = folder.load_checkpoint()
    return state


def run_complete(folder, history: list[dict], steps: int) -> bool:
    """Rank 0's verdict, on every rank: every step is in ``history`` and ``meta.json`` is written."""
    done = bool(history) and history[-1]["step"] == steps and (folder.path / "meta.json").is_file()
    return broadcast_object(done if is_main() else None)


def first_step(folder, history: list[dict], start: int, steps: int) -> int | None:
    """The step a (resumed) run goes on from, or ``None`` when the run is complete.

    A run whose history holds every step but that was killed before ``meta.json``
    goes on from ``steps + 1``: it trains nothing and writes its last files again.
    """
    if history and history[-1]["step"] == steps:
        return None if run_complete(folder, history, steps) else steps + 1
    return start


def data_parallel(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``model`` wrapped in DistributedDataParallel when several processes run, else ``model`` itself.

    DDP averages the ranks' gradients in ``backward``; every parameter of the
    GPT takes part in every forward, so no unused-parameter search is needed.
    """
    if world() == 1:
        return model
    device_ids = [device.index] if device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids, broadcast_buffers=False)


def all_sum(values, device: torch.device) -> list[float]:
    """Each of ``values`` (numbers or 0-d tensors) summed over the ranks, in float64.

    The one reduction of the logged statistics at any world size: in a single
    process it is the sum over one rank (the values in float64), so one code
    path serves one process and many.
    """
    total = torch.tensor([float(v) for v in values], dtype=torch.float64, device=device)
    if world() > 1:
        dist.all_reduce(total)
    return total.tolist()
