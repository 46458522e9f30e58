"""Input validation shared by the numeric modules.

Every check raises ``ValueError`` whose message names the argument and repeats
the first offending value, so that a bad element inside a large array is easy to
find. The rules, for every numeric argument:

- accepted: real numbers (Python ``int``/``float``, ``decimal.Decimal``,
  ``fractions.Fraction``, numpy integer and floating scalars) and rectangular
  arrays or nested lists of them;
- rejected: booleans (``True`` is not a group size), strings and bytes (no
  parsing of ``"3"``), ``None``, complex numbers, dicts and other objects, ragged
  nested lists, and NaN;
- integer arguments (group sizes, counts) must also be finite whole numbers below
  :data:`MAX_EXACT_INT` ``= 2**53``, the range in which float64 represents every
  integer exactly, because the closed forms compute with them in float64;
- arguments that broadcast together are checked with :func:`broadcast_named`, whose
  error names the two arguments that clash and their shapes.
"""

from __future__ import annotations

import decimal
import numbers

import numpy as np

MAX_EXACT_INT = 2**53
"""Integer arguments must be smaller than this: 2**53 is where float64 stops representing every integer."""


def _plain(x) -> object:
    return x.item() if isinstance(x, np.generic) else x


def _first_bad(arr: np.ndarray, bad: np.ndarray) -> object:
    return _plain(arr[bad].flat[0]) if arr.ndim else _plain(arr[()])


def _raw_array(name: str, value) -> np.ndarray:
    """``value`` as an array of real numbers in its own dtype (integer, float or object); no conversion yet."""
    if isinstance(value, (str, bytes)):
        raise ValueError(f"{name} must be numeric, got the string {value!r}")
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError, OverflowError):  # e.g. ragged nested lists
        raise ValueError(f"{name} must be a number or a rectangular array of numbers, got {value!r}") from None
    kind = raw.dtype.kind
    if kind == "b":
        raise ValueError(f"{name} must be numeric, not boolean, got {value!r}")
    if kind == "O" or isinstance(value, (list, tuple)):
        # np.asarray turns [True, 2] into [1, 2] and [1, "a"] into strings: look at the elements themselves
        try:
            elements = np.asarray(value, dtype=object)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number or a rectangular array of numbers, got {value!r}") from None
        for t in {type(x) for x in elements.flat}:
            if issubclass(t, (bool, np.bool_)):
                raise ValueError(f"{name} must be numeric, not boolean, got {value!r}")
            if not issubclass(t, (numbers.Real, decimal.Decimal)):
                raise ValueError(f"{name} must be numeric, got {value!r}")
    elif kind not in "iuf":  # strings, complex, datetimes, structured arrays
        raise ValueError(f"{name} must be real-valued numeric, got {value!r} (dtype {raw.dtype})")
    return raw


def _to_float(name: str, raw: np.ndarray, value) -> np.ndarray:
    try:
        arr = raw.astype(np.float64)
    except OverflowError:  # a Python int beyond 1.8e308
        raise ValueError(f"{name} is too large for float64, got {value!r}") from None
    except (TypeError, ValueError, decimal.InvalidOperation):
        raise ValueError(f"{name} must be numeric, got {value!r}") from None
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not be NaN, got {value!r}")
    return arr


def as_float(name: str, value) -> np.ndarray:
    """Return ``value`` as a float64 array; reject NaN and non-numeric input (see the module docstring)."""
    return _to_float(name, _raw_array(name, value), value)


def check_finite(name: str, value) -> np.ndarray:
    """Return ``value`` as a float64 array of finite numbers."""
    arr = as_float(name, value)
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"{name} must be finite, got {_first_bad(arr, bad)!r}")
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
    """Check that ``value`` holds whole numbers with ``minimum <= value < 2**53``; return it as int64.

    The upper limit :data:`MAX_EXACT_INT` keeps every value exact in float64 (and far from int64
    wrap-around); ``inf`` is rejected like any other non-integer.
    """
    raw = _raw_array(name, value)
    arr = _to_float(name, raw, value)
    bad = ~np.isfinite(arr) | (arr != np.round(arr))
    if bad.any():
        raise ValueError(f"{name} must be a whole number, got {_first_bad(raw, bad)!r}")
    bad = arr < minimum
    if bad.any():
        raise ValueError(f"{name} must be >= {minimum}, got {_first_bad(raw, bad)!r}")
    # any integer >= 2**53 rounds to a float >= 2**53, so this test on the float copy is exact
    bad = arr >= MAX_EXACT_INT
    if bad.any():
        raise ValueError(
            f"{name} must be below 2**53 = {MAX_EXACT_INT} (beyond it float64 cannot represent every integer), "
            f"got {_first_bad(raw, bad)!r}"
        )
    return arr.astype(np.int64)


def check_nonnegative(name: str, value) -> np.ndarray:
    """Return ``value`` as a float64 array of finite numbers ``>= 0``."""
    arr = as_float(name, value)
    bad = (arr < 0) | ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"{name} must be finite and >= 0, got {_first_bad(arr, bad)!r}")
    return arr


def check_scalar(name: str, arr: np.ndarray) -> None:
    """Raise unless the already-checked ``arr`` is 0-d (a lone number; ``[5]`` is an array, not a number)."""
    if arr.ndim:
        raise ValueError(f"{name} must be a single number, got an array of shape {arr.shape}")


def check_not_above(name: str, value: np.ndarray, bound_name: str, bound: np.ndarray) -> None:
    """Raise unless ``value <= bound`` elementwise (both already broadcast)."""
    bad = value > bound
    if bad.any():
        raise ValueError(
            f"{name} must not exceed {bound_name}, got {name}={value[bad].flat[0].item()!r} "
            f"with {bound_name}={bound[bad].flat[0].item()!r}"
        )


def broadcast_shapes_named(*named: tuple[str, tuple[int, ...]]) -> tuple[int, ...]:
    """``np.broadcast_shapes`` of ``(name, shape)`` pairs; on failure name the first two that clash.

    Broadcasting is decided axis by axis (all sizes equal or 1), so shapes that broadcast pairwise
    broadcast together, and a failure always has a clashing pair.
    """
    try:
        return np.broadcast_shapes(*(shape for _, shape in named))
    except ValueError:
        pass
    for j, (name_j, shape_j) in enumerate(named):
        for name_i, shape_i in named[:j]:
            try:
                np.broadcast_shapes(shape_i, shape_j)
            except ValueError:
                raise ValueError(
                    f"{name_i} with shape {tuple(shape_i)} and {name_j} with shape {tuple(shape_j)} do not broadcast"
                ) from None
    raise ValueError(" and ".join(f"{n} with shape {tuple(s)}" for n, s in named) + " do not broadcast")


def broadcast_named(*named: tuple[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """``np.broadcast_arrays`` of ``(name, array)`` pairs, with the error of :func:`broadcast_shapes_named`."""
    shape = broadcast_shapes_named(*((name, np.shape(a)) for name, a in named))
    return tuple(np.broadcast_to(a, shape) for _, a in named)


def check_choice(name: str, value, choices) -> str:
    """Return ``value`` if it is one of the strings ``choices`` (arrays and other objects are rejected)."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


# -- scalar settings -------------------------------------------------------------------------------
# The configs (simulator, trainer, sweeps, losses) validate one setting at a time with the checks below.
# They accept Python ``int``/``float`` only (numpy scalars are turned into them when a config is read),
# never ``bool``, and raise one ``ValueError`` line naming the setting and its value.


def is_number(value) -> bool:
    """True for a Python ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _interval(lo: float, hi: float, lo_open: bool, hi_open: bool) -> str:
    return f"{'(' if lo_open or lo == -np.inf else '['}{lo:g}, {hi:g}{')' if hi_open or hi == np.inf else ']'}"


def check_int(name: str, value, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` if it is an ``int`` (not a ``bool``) with ``minimum <= value`` (and ``value < maximum`` if given)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    if maximum is None:
        if not ok:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    elif not (ok and value < maximum):
        raise ValueError(f"{name} must be an integer in [{minimum}, {maximum}), got {value!r}")
    return value


def check_number(
    name: str,
    value,
    lo: float = -np.inf,
    hi: float = np.inf,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
    dtype: str = "float64",
) -> float:
    """``value`` if it is a number, finite in ``dtype`` (NaN and ±inf never are), inside the interval.

    The interval is ``[lo, hi]``, each end open when ``lo_open`` / ``hi_open``; the message writes it.
    """
    if not is_number(value):
        raise ValueError(f"{name} must be a number, got {value!r}")
    limit = float(np.finfo(dtype).max)
    if not abs(value) <= limit:
        raise ValueError(f"{name} must be a finite number (|{name}| <= {limit:.4g} in {dtype}), got {value!r}")
    if not ((value > lo if lo_open else value >= lo) and (value < hi if hi_open else value <= hi)):
        raise ValueError(f"{name} must be a number in {_interval(lo, hi, lo_open, hi_open)}, got {value!r}")
    return value


def check_epsilon(name: str, value, dtype: str = "float64") -> float:
    """A stabiliser added to a denominator: a finite number at least the smallest normal number of ``dtype``."""
    check_number(name, value, dtype=dtype)
    tiny = float(np.finfo(dtype).tiny)
    if not value >= tiny:
        raise ValueError(
            f"{name} must be at least the smallest normal {dtype} number, {tiny:.4g} (it guards a division, "
            f"and a smaller one rounds to 0 or a subnormal in {dtype}), got {value!r}"
        )
    return value


def check_bool(name: str, value) -> bool:
    """``value`` if it is ``True`` or ``False`` (TOML ``true`` / ``false``; ``1`` is not a switch)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return value


def check_numbers(name: str, value, count: int, lo: float, hi: float, *, hi_open: bool = True) -> tuple:
    """``value`` if it is a tuple of ``count`` numbers, each in ``[lo, hi)`` (``[lo, hi]`` if not ``hi_open``)."""
    ok = isinstance(value, tuple) and len(value) == count and all(is_number(v) for v in value)
    if not (ok and all(lo <= v and (v < hi if hi_open else v <= hi) for v in value)):
        raise ValueError(f"{name} must be {count} numbers in {_interval(lo, hi, False, hi_open)}, got {value!r}")
    return value
