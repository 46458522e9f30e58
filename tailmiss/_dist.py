"""torch.distributed plumbing shared by the simulator and the LLM trainer.

A command started by ``torchrun`` (``WORLD_SIZE`` > 1 in the environment) joins
the process group once (:func:`init_from_env`): gloo on the CPU, NCCL when the
ranks run on CUDA devices, one device per rank (``cuda:LOCAL_RANK``). Without
``torchrun`` every helper here behaves as a world of one process, so library
code calls them unconditionally.

torch is imported only by the helpers that need it: a process that never
imported ``torch.distributed`` has no process group, so the queries answer
without it, and the command line starts without torch (``tailmiss diagnose``
needs none).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = [
    "world",
    "rank",
    "is_main",
    "env_world_size",
    "init_from_env",
    "shard_bounds",
    "gather_objects",
    "all_gather_objects",
    "broadcast_object",
    "barrier",
    "destroy",
    "local",
    "env_rank",
]


_local_depth = 0


def _dist():
    import torch.distributed

    return torch.distributed


def _active() -> bool:
    dist = sys.modules.get("torch.distributed")  # not imported yet: no group was ever joined
    return _local_depth == 0 and dist is not None and dist.is_available() and dist.is_initialized()


@contextlib.contextmanager
def local():
    """Inside the block this process acts as a world of one, group or not.

    A sweep sharded across ranks trains each of its runs on one rank alone:
    the run's code must not wait for the other ranks, which train other runs.
    """
    global _local_depth
    _local_depth += 1
    try:
        yield
    finally:
        _local_depth -= 1


def world() -> int:
    """Number of processes in the group (1 without one)."""
    return _dist().get_world_size() if _active() else 1


def rank() -> int:
    """This process's rank (0 without a group)."""
    return _dist().get_rank() if _active() else 0


def is_main() -> bool:
    return rank() == 0


def env_world_size() -> int:
    """``WORLD_SIZE`` as ``torchrun`` sets it (1 when unset); ``ValueError`` if it is not a positive integer."""
    raw = os.environ.get("WORLD_SIZE", "1")
    try:
        size = int(raw)
    except ValueError:
        size = 0
    if size < 1:
        raise ValueError(f"WORLD_SIZE must be a positive integer, got {raw!r}")
    return size


def init_from_env(device=None) -> torch.device | None:
    """Join the process group ``torchrun`` describes; return this rank's device (None when not launched so).

    ``device`` ``None`` picks ``cuda:LOCAL_RANK`` when CUDA is available, else
    the CPU; ``"cpu"`` forces gloo on the CPU; ``"cuda"`` requires CUDA.
    """
    if env_world_size() == 1:
        return None
    import torch

    local = int(os.environ.get("LOCAL_RANK", "0"))
    want = None if device is None else torch.device(device)
    use_cuda = torch.cuda.is_available() if want is None else want.type == "cuda"
    if use_cuda and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r} requested but CUDA is not available")
    dev = torch.device("cuda", local) if use_cuda else torch.device("cpu")
    if not _active():
        if use_cuda:
            torch.cuda.set_device(dev)
        _dist().init_process_group("nccl" if use_cuda else "gloo")
    return dev


def destroy() -> None:
    if _active():
        _dist().destroy_process_group()


def shard_bounds(n: int, parts: int | None = None, index: int | None = None) -> tuple[int, int]:
    """``[start, stop)`` of part ``index`` of ``parts`` contiguous, balanced parts of ``range(n)``.

    Defaults: this rank of this world. The first ``n % parts`` parts hold one
    item more, as :func:`numpy.array_split` splits.
    """
    parts = world() if parts is None else parts
    index = rank() if index is None else index
    base, extra = divmod(n, parts)
    start = index * base + min(index, extra)
    return start, start + base + (1 if index < extra else 0)


def gather_objects(obj) -> list | None:
    """Every rank's ``obj`` in rank order on rank 0 (``None`` elsewhere)."""
    if not _active():
        return [obj]
    out = [None] * world() if is_main() else None
    _dist().gather_object(obj, out, dst=0)
    return out


def all_gather_objects(obj) -> list:
    """Every rank's ``obj`` in rank order, on every rank."""
    if not _active():
        return [obj]
    out = [None] * world()
    _dist().all_gather_object(out, obj)
    return out


def broadcast_object(obj, src: int = 0):
    """Rank ``src``'s ``obj`` on every rank."""
    if not _active():
        return obj
    box = [obj]
    _dist().broadcast_object_list(box, src=src)
    return box[0]


def barrier() -> None:
    if _active():
        _dist().barrier()


def env_rank() -> int:
    """``RANK`` as ``torchrun`` sets it (0 when unset)."""
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0
