"""Typed columns of the tailmiss schema, one chunk of rows at a time; messages name the file and line or row."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tailmiss._checks import MAX_EXACT_INT

__all__ = ["shown", "id_text", "clean", "Ids"]


def shown(value) -> str:
    """A value for a message, in plain numbers: ``1.5``, ``1e+20``, ``3`` (never ``np.float64(1.5)``)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


def id_text(value) -> str:
    """An id as text: a string as written, a number as its plain text (``7`` and ``7.0``: ``"7"``; ``8.5``: ``"8.5"``).

    CSV ids arrive as strings (``"007"`` and ``"7"`` stay two ids); JSON and parquet numbers arrive as numbers, and
    a JSON reader may give ``7.0`` for ``7`` (pyarrow, in a column that also holds ``8.5``): both are ``"7"``.
    """
    return value if isinstance(value, str) else shown(value)


def _as_numeric(values: pd.Series, name: str, where) -> np.ndarray:
    out = pd.to_numeric(values, errors="coerce").to_numpy(np.float64, na_value=np.nan)
    bad = np.isnan(out) & values.notna().to_numpy()
    if bad.any():
        raise ValueError(f"{where(bad)}: column {name!r} must be numeric, got {shown(values[bad].iloc[0])}")
    return out


def _steps(values: pd.Series, where) -> np.ndarray:
    step = _as_numeric(values, "step", where)
    bad = ~np.isfinite(step) | (step != np.round(step)) | (step < 0) | (step >= MAX_EXACT_INT)
    if bad.any():
        shown_bad = shown(values[bad].iloc[0]) if values[bad].notna().iloc[0] else "an empty value"
        raise ValueError(f"{where(bad)}: column 'step' must hold whole numbers in [0, 2**53), got {shown_bad}")
    return step.astype(np.int64)


def _as_flags(values: pd.Series, where) -> np.ndarray:
    try:  # bools, 0/1, None: one conversion; anything else gets the checked path below
        num = values.to_numpy(np.float64, na_value=np.nan)
    except (TypeError, ValueError):
        num = _as_numeric(values.map(lambda v: float(v) if isinstance(v, (bool, np.bool_)) else v), "correct", where)
    bad = ~np.isin(num, [0.0, 1.0])
    if bad.any():
        got = shown(values[bad].iloc[0]) if values[bad].notna().iloc[0] else "an empty value"
        raise ValueError(f"{where(bad)}: column 'correct' must hold 0/1 or true/false, got {got}")
    return num == 1.0


def clean(frame: pd.DataFrame, place: np.ndarray, unit: str, source: str) -> pd.DataFrame:
    """Typed columns, rows without a reward dropped. ``ValueError`` naming the first bad line or row."""

    def where(bad):
        return f"{source}, {unit} {int(place[np.flatnonzero(bad)[0]])}"

    step = _steps(frame["step"], where)
    if frame["prompt_id"].isna().any():
        raise ValueError(f"{where(frame['prompt_id'].isna().to_numpy())}: column 'prompt_id' is empty")
    reward = _as_numeric(frame["reward"], "reward", where)
    if np.isinf(reward).any():
        raise ValueError(f"{where(np.isinf(reward))}: column 'reward' holds an infinite value")
    keep = ~np.isnan(reward)
    prompt_id = frame["prompt_id"][keep].reset_index(drop=True)  # ids stay in their own dtype until interned
    out = pd.DataFrame({"step": step[keep], "prompt_id": prompt_id, "reward": reward[keep]})
    if "correct" in frame.columns:  # unscored rows may carry no flag either
        out["correct"] = _as_flags(frame["correct"][keep].reset_index(drop=True), lambda bad: where(_within(keep, bad)))
    if "rollout" in frame.columns:
        rollout = frame["rollout"][keep].reset_index(drop=True)
        if rollout.isna().any():  # unscored rows may carry no rollout id either
            raise ValueError(f"{where(_within(keep, rollout.isna().to_numpy()))}: column 'rollout' is empty")
        out["rollout"] = rollout
    if "focal_weight" in frame.columns:  # what F-GRPO scaled the rollout's advantage by (TailMissCallback logs it)
        out["focal_weight"] = _as_numeric(frame["focal_weight"], "focal_weight", where)[keep]
    return out


def _within(keep: np.ndarray, bad: np.ndarray) -> np.ndarray:
    """``bad`` (over the kept rows) as a mask over all rows."""
    full = np.zeros(keep.shape, dtype=bool)
    full[np.flatnonzero(keep)[bad]] = True
    return full


_ONE_KIND = ("string", "integer", "floating", "mixed-integer-float", "boolean", "empty")
"""What pandas infers for an object column whose equal values (as ``factorize`` compares them) have one text."""


class Ids:
    """Interns string ids across chunks: each distinct id stored once, rows hold int32 codes."""

    def __init__(self):
        self.index: dict[str, int] = {}

    def codes(self, values: pd.Series) -> np.ndarray:
        """The int32 code of each id's text (:func:`id_text`), new texts added to the index."""
        if values.dtype == object and pd.api.types.infer_dtype(values, skipna=True) not in _ONE_KIND:
            values = values.map(id_text)  # as text first: factorize would take True and 1 for one id
        local, uniques = pd.factorize(values)
        names = [id_text(u) for u in uniques]  # 7 and 7.0 (the JSON readers may give either) are both "7"
        lookup = np.array([self.index.setdefault(name, len(self.index)) for name in names], dtype=np.int32)
        return lookup[local]

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        names = np.array(list(self.index), dtype=object)
        order = np.argsort(names, kind="stable")  # sorted categories: groups sort by their ids' text
        rank = np.empty(order.size, dtype=np.int32)
        rank[order] = np.arange(order.size, dtype=np.int32)
        return pd.Categorical.from_codes(rank[codes], categories=pd.Index(names[order], dtype=object))
