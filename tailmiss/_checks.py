"""Input validation shared by the numeric modules.

Every check raises ``ValueError`` whose message names the argument and repeats
the first offending value, so that a bad element inside a large array is easy to
find.
"""

from __future__ import annotations

import numpy as np


def _first_bad(arr: np.ndarray, bad: np.ndarray) -> object:
    return arr[bad].flat[0].item() if arr.ndim else arr.item()


def as_float(name: str, value) -> np.ndarray:
    """Return ``value`` as a float64 array; reject NaN and non-numeric input."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numeric, got {value!r}") from None
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not be NaN, got {value!r}")
    return arr


def check_interval(name: str, value, lo: float, hi: float, *, lo_open: bool, hi_open: bool) -> np.ndarray:
    """Check ``lo <(=) value <(=) hi`` elementwise and return a float64 array."""
    arr = as_float(name, value)
    below = arr <= lo if lo_open else arr < lo
    above = arr >= hi if hi_open else arr > hi
    bad = below | above
    if bad.any():
        interval = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
        raise ValueError(f"{name} must lie in {interval}, got {_first_bad(arr, bad)!r}")
    return arr


def check_integer(name: str, value, minimum: int) -> np.ndarray:
    """Check that ``value`` is integer-valued and ``>= minimum``; return it as int64."""
    arr = as_float(name, value)
    bad = ~np.isfinite(arr) | (arr != np.round(arr))
    if bad.any():
        raise ValueError(f"{name} must be a whole number, got {_first_bad(arr, bad)!r}")
    bad = arr < minimum
    if bad.any():
        raise ValueError(f"{name} must be >= {minimum}, got {int(_first_bad(arr, bad))!r}")
    return arr.astype(np.int64)


def check_nonnegative(name: str, value) -> np.ndarray:
    arr = as_float(name, value)
    bad = (arr < 0) | ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"{name} must be finite and >= 0, got {_first_bad(arr, bad)!r}")
    return arr


def check_not_above(name: str, value: np.ndarray, bound_name: str, bound: np.ndarray) -> None:
    """Raise unless ``value <= bound`` elementwise (both already broadcast)."""
    bad = value > bound
    if bad.any():
        raise ValueError(
            f"{name} must not exceed {bound_name}, got {name}={value[bad].flat[0].item()!r} "
            f"with {bound_name}={bound[bad].flat[0].item()!r}"
        )
