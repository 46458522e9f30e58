"""Memory planning of a simulation: the tiles a step works through and the sweep's peak-memory estimate.

:func:`~tailmiss.sim.engine.simulate` refuses a sweep whose estimate exceeds
the memory free on its device (``_check_fits``) before it allocates
anything; ``tailmiss sim run --dry-run`` prints the estimate by part.
"""

from __future__ import annotations

import os

import torch

from tailmiss._device import resolve_device
from tailmiss.sim.config import SimConfig, _select_runs
from tailmiss.sim.sampler import partition_rows

__all__ = ["memory_estimate", "device_memory", "TILE_ELEMENTS"]

TILE_ELEMENTS = 2**20
"""On the CPU a step works through the sweep in tiles of rows of about this many actions (at least two rows)."""


def _tile_rows(num_actions: int) -> int:
    return max(2, TILE_ELEMENTS // num_actions)


def _tiles(blocks, most_rows: int | None) -> list[tuple[int, int, list[int]]]:
    """Consecutive blocks ``(r0, r1, ...)`` grouped into tiles ``(r0, r1, block indices)``.

    A tile holds at most ``most_rows`` rows (a larger block stays whole); with
    ``most_rows`` None every block is a tile of its own.
    """
    plan: list[tuple[int, int, list[int]]] = []
    for i, (b0, b1, *_) in enumerate(blocks):
        if plan and most_rows is not None and b1 - plan[-1][0] <= most_rows:
            r0, _, members = plan[-1]
            plan[-1] = (r0, b1, [*members, i])
        else:
            plan.append((b0, b1, [i]))
    return plan


def memory_estimate(config: SimConfig, runs=None, device=None) -> dict:
    """Peak memory of :func:`~tailmiss.sim.engine.simulate` for ``config`` (or its runs ``runs``) on ``device``.

    An upper estimate in bytes, by part. ``state``: the ``[runs, actions]``
    logits, gradient and two Adam moments (SGD: none). ``tile``: a step works through the sweep a
    block of rows at a time (on the CPU at most :data:`TILE_ELEMENTS` actions,
    elsewhere every run of one group size), holding that block's
    probabilities, counts and surrogate temporaries in the logit dtype and its
    float64 CDF and three float64 metric temporaries. ``sampler``: two int32
    keys per draw for the whole sweep plus a workspace of 36 bytes per draw of
    its largest segment of rows (:class:`~tailmiss.sim.sampler.CountSampler`).
    ``allocator`` (CPU only): the C allocator keeps freed temporaries (the
    sampler's construction, the tiles) and the runtime holds thread arenas, so
    the process grows by more than its live tensors; half the tensors plus
    96 MiB bounds what was measured (peak RSS growth over 4 steps, 2 CPU
    threads: fgrpo-fig2 635-647 MiB against 703, fgrpo-fig2-prob 517-646
    against 703, brorl-fig3 107-112 against 123).
    """
    chosen = _select_runs(config, runs)[1]
    dev = resolve_device(device)
    runs, v = len(chosen), config.num_actions
    item = 8 if config.dtype == "float64" else 4
    moments = 0 if config.optimizer == "sgd" else 2
    sizes = [n for n, _, _ in chosen]
    most = _tile_rows(v) if dev.type == "cpu" else None
    tile_rows = max(r1 - r0 for r0, r1, _ in _tiles(partition_rows(sizes, config.max_draws_per_chunk, most), most))
    values = sum(n + 1 for n in sizes)
    segment = max(min(config.max_draws_per_chunk, values), max(n + 1 for n in sizes))
    parts = {
        "state": runs * v * item * (2 + moments),
        "tile": tile_rows * v * (item * 5 + 8 * 4),
        "sampler": values * 8 + segment * 36,
    }
    tensors = sum(parts.values())
    parts["allocator"] = tensors // 2 + 96 * 2**20 if dev.type == "cpu" else 0
    parts["total"] = tensors + parts["allocator"]
    parts.update(runs=runs, actions=v, draws_per_step=values - runs, tile_rows=tile_rows)
    return parts


def device_memory(device) -> int | None:
    """Bytes free on ``device`` now (CUDA: ``mem_get_info``; CPU: available RAM on Linux), or None if unknown."""
    dev = resolve_device(device)
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0])
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _check_fits(config: SimConfig, dev: torch.device, runs=None) -> None:
    need = memory_estimate(config, runs, dev)["total"]
    free = device_memory(dev)
    if free is not None and need > free:
        raise ValueError(
            f"sweep {config.name!r} needs about {need / 2**30:.1f} GiB on {dev} but {free / 2**30:.1f} GiB are free; "
            "run fewer runs at once (group_sizes, gammas, seeds) or use a larger device"
        )
