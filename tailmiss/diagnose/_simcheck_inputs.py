"""Input checks of :func:`tailmiss.diagnose.simcheck.simulate_spends`: each ``ValueError`` names the bad value."""

from __future__ import annotations

import math

import numpy as np

from tailmiss._checks import check_int

__all__ = ["check_mu", "check_rho", "check_spends", "check_seeds"]

_MAX_SEED = 2**32  # the simulator's seeds are 32-bit


def check_mu(mu) -> np.ndarray:
    try:
        arr = np.asarray(mu, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"mu must be an array of success rates in (0, 1), got {mu!r}") from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"mu must be a non-empty 1-D array of success rates in (0, 1), got shape {arr.shape}")
    bad = ~((arr > 0.0) & (arr < 1.0))  # NaN fails too
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"mu must lie strictly inside (0, 1), got mu[{i}] = {float(arr[i])!r}")
    return arr


def check_rho(rho) -> float:
    number = isinstance(rho, (int, float, np.integer, np.floating)) and not isinstance(rho, (bool, np.bool_))
    if not (number and 0.0 < float(rho) < 1.0):
        raise ValueError(f"rho must be a number strictly inside (0, 1), got {rho!r}")
    return float(rho)


def check_spends(spends) -> list[tuple[int, float]]:
    try:
        items = list(spends)
    except TypeError:
        raise ValueError(f"spends must be a sequence of (group size N, gamma) pairs, got {spends!r}") from None
    if not items:
        raise ValueError("spends must hold at least one (group size N, gamma) pair, got none")
    out = []
    for item in items:
        try:
            n, gamma = item
        except (TypeError, ValueError):
            raise ValueError(f"each spend must be a (group size N, gamma) pair, got {item!r}") from None
        if isinstance(n, np.integer):
            n = int(n)
        if not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
            raise ValueError(f"a spend's group size N must be an integer >= 1, got N = {n!r} in {item!r}")
        number = isinstance(gamma, (int, float, np.integer, np.floating)) and not isinstance(gamma, (bool, np.bool_))
        if not (number and math.isfinite(float(gamma)) and float(gamma) >= 0.0):
            raise ValueError(f"a spend's gamma must be a finite number >= 0, got gamma = {gamma!r} in {item!r}")
        out.append((n, float(gamma)))
    if len(set(out)) != len(out):
        raise ValueError(f"spends must be distinct (N, gamma) pairs, got {items!r}")
    return out


def check_seeds(seeds, prompts: int) -> list[int]:
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise ValueError(f"seeds must be a sequence of integers, got {seeds!r}")
    out = [int(s) if isinstance(s, np.integer) else s for s in seeds]
    if not out or len(set(out)) != len(out):
        raise ValueError(f"seeds must be a non-empty sequence of distinct integers, got {seeds!r}")
    limit = _MAX_SEED // prompts  # seed * prompts + prompt index stays a 32-bit simulator seed
    for s in out:
        check_int("seeds entry", s, 0, limit)
    return out
