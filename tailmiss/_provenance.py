"""What a unit records of where and how it was made, besides its code: the machine, the git revision, the CPU
seconds it took.

A unit's numbers follow from its config and its code (:mod:`tailmiss._fingerprint`), but their last digits also
follow from the processor, the torch build and the thread count that computed them; and what a unit cost is what a
rerun will cost. :func:`tailmiss.store.provenance` writes these beside the fingerprint in every unit's ``meta.json``,
where the evidence archive (:mod:`tailmiss.archive`) and a plan of what is left to compute read them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["git_revision", "host", "unit_clock", "cpu_seconds"]

_PACKAGE = Path(__file__).resolve().parent


@functools.cache
def git_revision() -> dict | None:
    """``{"commit": sha, "dirty": bool}`` of the checkout holding the package, or None outside git."""
    try:
        head = subprocess.run(
            ["git", "-C", str(_PACKAGE), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", str(_PACKAGE), "status", "--porcelain", "--", "."], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


@functools.cache
def _cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo`` on Linux), else what :mod:`platform` knows."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def host() -> dict:
    """The machine a unit is computed on, as far as it can move a number: the processor's model, its logical cores,
    the torch threads of this process, the torch build and the vector instructions its CPU kernels use (the same
    code gives other floating-point results on another processor or with another thread count)."""
    import torch

    capability = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu_capability": capability() if capability is not None else None,
    }


_CLOCKS: list[float] = []


@contextlib.contextmanager
def unit_clock() -> Iterator[None]:
    """Count the CPU seconds (user + system, every thread of this process) of the work inside: a unit sealed inside
    records those spent since the clock started (:func:`tailmiss._provenance.cpu_seconds`). The pools start one per
    job, so each run, simulation or comparison records what it cost; clocks nest, the innermost counts."""
    _CLOCKS.append(time.process_time())
    try:
        yield
    finally:
        _CLOCKS.pop()


def cpu_seconds() -> float | None:
    """The CPU seconds since the innermost :func:`unit_clock` started (None outside one)."""
    return round(time.process_time() - _CLOCKS[-1], 3) if _CLOCKS else None
