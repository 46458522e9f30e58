r"""Per-rollout logs of real RL runs: one schema, CSV / JSONL / parquet readers, TRL and verl adapters.

The schema (``format="tailmiss"``) has one row per rollout:

=============  ==========  ============================================================
column         type        meaning
=============  ==========  ============================================================
``step``       integer     training step the rollout was sampled for
``prompt_id``  any         identifies the prompt; the rollouts of one prompt at one step
                           form a group
``reward``     number      the rollout's scalar reward (empty / NaN: unscored, dropped)
``correct``    0/1, bool   optional success flag; without it, success comes from ``reward``
=============  ==========  ============================================================

Other columns are ignored. Success decides :math:`X` (correct rollouts of a group), hence
:math:`\hat\mu = X/N` (F-GRPO Eq. 11): the ``correct`` column when present, else
``reward >= threshold`` when a threshold is given, else the reward itself, which must then be
binary, {0, 1} or {-1, 1} (1 is correct). Shaped rewards (DAPO's overlong penalty, format
bonuses) need the threshold or the ``correct`` column: F-GRPO takes X from correctness.

Adapters turn what the training stacks write into this schema:

``trl``
    TRL's ``GRPOTrainer`` with ``log_completions=True`` writes
    ``output_dir/completions/completions_<step>.parquet``: ``step``, ``prompt``,
    ``completion``, one column per reward function, ``advantage``. A group is one prompt text
    within a step; the reward is the only reward-function column (name one with
    ``reward_column`` when there are several). The table holds the last generation batch
    before each logging step. The callback of :mod:`tailmiss.integrations.trl` writes the
    tailmiss schema itself, every step.
``verl``
    verl with ``trainer.rollout_data_dir=DIR`` writes ``DIR/<step>.jsonl``: ``input``,
    ``output``, ``gts``, ``score``, ``step`` and the reward function's extra fields (such as
    ``acc``); verl's v1 trainer adds ``uid`` = ``<prompt uid>_<session>_<output>``. A group is
    the prompt part of ``uid`` when present, else the ``input`` text; the reward is ``score``
    and ``acc``, when present, is the success flag.
``auto``
    ``tailmiss`` if the columns include ``prompt_id``, ``verl`` if ``input`` and ``score``,
    ``trl`` if ``prompt`` and ``completion``.

A path may be a file or a folder; a folder is read as all its ``.csv``, ``.jsonl``, ``.json``
and ``.parquet`` files (verl's dump folder, TRL's ``completions/``). Parquet needs pyarrow.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["FORMATS", "SCHEMA_COLUMNS", "RolloutLog", "read_rollouts", "success_flags", "group_counts"]

FORMATS = ("auto", "tailmiss", "trl", "verl")
SCHEMA_COLUMNS = ("step", "prompt_id", "reward")
"""Required columns of the tailmiss schema; ``correct`` is optional."""
SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
_TRL_FIXED = ("step", "prompt", "completion", "advantage", "image")


@dataclass(frozen=True)
class RolloutLog:
    """A per-rollout log in the tailmiss schema, with where it came from."""

    frame: pd.DataFrame
    """Columns ``step`` (int), ``prompt_id`` (str), ``reward`` (float) and, if known, ``correct`` (bool)."""
    source: str
    format: str
    """The format it was read as (never ``"auto"``)."""
    rows_read: int
    rows_without_reward: int


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------


def _files(path: Path) -> list[Path]:
    if not path.exists():
        raise ValueError(f"no such file or folder: {str(path)!r}")
    if path.is_file():
        if path.suffix.lower() not in SUFFIXES:
            raise ValueError(f"{str(path)!r}: unknown log type {path.suffix!r}; expected {', '.join(SUFFIXES)}")
        return [path]
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
    if not files:
        raise ValueError(f"folder {str(path)!r} holds no {', '.join(SUFFIXES)} files")
    return files


def _read_file(path: Path) -> pd.DataFrame:
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            return pd.read_csv(path)
        if suffix == ".parquet":
            return pd.read_parquet(path)
        if path.stat().st_size == 0:
            return pd.DataFrame()
        return pd.read_json(path, lines=True)
    except ImportError:
        raise ValueError(f"reading parquet ({str(path)!r}) needs pyarrow: pip install pyarrow") from None
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {str(path)!r}: {exc}") from None


# ---------------------------------------------------------------------------
# Adapters: each maps a raw frame to step / prompt_id / reward (/ correct)
# ---------------------------------------------------------------------------


def _need(frame: pd.DataFrame, columns, what: str, source: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        have = ", ".join(map(str, frame.columns[:12])) or "none"
        raise ValueError(f"{source}: the {what} log needs column(s) {', '.join(missing)} (found: {have})")


def _prompt_key(value) -> str:
    # TRL's prompts may be conversations (lists of messages): their text form is the key
    return value if isinstance(value, str) else repr(value)


def _from_tailmiss(raw: pd.DataFrame, source: str, reward_column: str | None) -> pd.DataFrame:
    reward = reward_column or "reward"
    _need(raw, ("step", "prompt_id", reward), "tailmiss", source)
    out = pd.DataFrame({"step": raw["step"], "prompt_id": raw["prompt_id"], "reward": raw[reward]})
    if "correct" in raw.columns:
        out["correct"] = raw["correct"]
    return out


def _from_trl(raw: pd.DataFrame, source: str, reward_column: str | None) -> pd.DataFrame:
    _need(raw, ("step", "prompt"), "trl", source)
    if reward_column is None:
        candidates = [c for c in raw.columns if c not in _TRL_FIXED and pd.api.types.is_numeric_dtype(raw[c])]
        if len(candidates) != 1:
            found = ", ".join(candidates) or "none"
            raise ValueError(f"{source}: name the reward column of the trl log with --reward-column (found: {found})")
        reward_column = candidates[0]
    _need(raw, (reward_column,), "trl", source)
    prompt_id = raw["prompt"].map(_prompt_key)
    return pd.DataFrame({"step": raw["step"], "prompt_id": prompt_id, "reward": raw[reward_column]})


def _from_verl(raw: pd.DataFrame, source: str, reward_column: str | None) -> pd.DataFrame:
    reward = reward_column or "score"
    _need(raw, ("step", reward), "verl", source)
    if "uid" in raw.columns:
        prompt_id = raw["uid"].astype(str).str.rsplit("_", n=2).str[0]
    else:
        _need(raw, ("input",), "verl", source)
        prompt_id = raw["input"].map(_prompt_key)
    out = pd.DataFrame({"step": raw["step"], "prompt_id": prompt_id, "reward": raw[reward]})
    if "acc" in raw.columns:
        out["correct"] = raw["acc"]
    return out


_ADAPTERS = {"tailmiss": _from_tailmiss, "trl": _from_trl, "verl": _from_verl}


def _detect(raw: pd.DataFrame, source: str) -> str:
    cols = set(raw.columns)
    if "prompt_id" in cols:
        return "tailmiss"
    if {"input", "score"} <= cols:
        return "verl"
    if {"prompt", "completion"} <= cols:
        return "trl"
    have = ", ".join(map(str, raw.columns[:12])) or "none"
    raise ValueError(
        f"{source}: cannot tell the log format from its columns ({have}); the tailmiss schema needs "
        "step, prompt_id, reward (or pass --format trl / verl)"
    )


# ---------------------------------------------------------------------------
# Cleaning
# ---------------------------------------------------------------------------


def _as_numeric(values: pd.Series, name: str, source: str) -> pd.Series:
    out = pd.to_numeric(values, errors="coerce")
    bad = out.isna() & values.notna()
    if bad.any():
        raise ValueError(f"{source}: column {name!r} must be numeric, got {values[bad].iloc[0]!r}")
    return out.astype(np.float64)


def _clean(frame: pd.DataFrame, source: str) -> tuple[pd.DataFrame, int]:
    """Typed columns; rows without a reward dropped (returned count). ``ValueError`` on bad values."""
    step = _as_numeric(frame["step"], "step", source)
    if step.isna().any() or (step != np.round(step)).any():
        bad = frame["step"][step.isna() | (step != np.round(step))].iloc[0]
        raise ValueError(f"{source}: column 'step' must hold whole numbers, got {bad!r}")
    if frame["prompt_id"].isna().any():
        raise ValueError(f"{source}: column 'prompt_id' has empty values")
    reward = _as_numeric(frame["reward"], "reward", source)
    if np.isinf(reward).any():
        raise ValueError(f"{source}: column 'reward' holds an infinite value")
    out = pd.DataFrame({"step": step.astype(np.int64), "prompt_id": frame["prompt_id"].astype(str), "reward": reward})
    keep = out["reward"].notna()
    out = out[keep].reset_index(drop=True)
    if "correct" in frame.columns:  # unscored rows may carry no flag either
        out["correct"] = _as_flags(frame.loc[keep, "correct"].reset_index(drop=True), source)
    return out, int((~keep).sum())


def _as_flags(values: pd.Series, source: str) -> pd.Series:
    num = _as_numeric(values.map(lambda v: float(v) if isinstance(v, (bool, np.bool_)) else v), "correct", source)
    bad = num.isna() | ~num.isin([0.0, 1.0])
    if bad.any():
        raise ValueError(f"{source}: column 'correct' must hold 0/1 or true/false, got {values[bad].iloc[0]!r}")
    return num.astype(bool)


def read_rollouts(path: str | os.PathLike, format: str = "auto", reward_column: str | None = None) -> RolloutLog:
    """Read a per-rollout log (a file or a folder of files) into the tailmiss schema.

    Parameters
    ----------
    path : path-like
        A ``.csv``, ``.jsonl`` / ``.json`` (one JSON object per line) or ``.parquet`` file, or a
        folder of them (read in name order and concatenated).
    format : {"auto", "tailmiss", "trl", "verl"}
        The writer; ``auto`` decides from the first file's columns (see the module docstring).
    reward_column : str, optional
        Column to read the reward from instead of the format's default (``reward``; ``score``
        for verl; the only reward-function column for TRL).

    Returns
    -------
    RolloutLog

    Raises
    ------
    ValueError
        Missing path, unknown file type, unreadable or empty file, missing columns, non-numeric
        values, or parquet without pyarrow; the message names the file.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    path = Path(path)
    parts, fmt = [], None if format == "auto" else format
    for file in _files(path):
        raw = _read_file(file)
        if raw.empty:
            continue
        fmt = fmt or _detect(raw, str(file))
        parts.append(_ADAPTERS[fmt](raw, str(file), reward_column))
    if not parts:
        raise ValueError(f"{str(path)!r} holds no rollouts (empty log)")
    frame = pd.concat(parts, ignore_index=True)
    rows_read = len(frame)
    frame, dropped = _clean(frame, str(path))
    if frame.empty:
        raise ValueError(f"{str(path)!r}: no rollout has a reward ({dropped} rows, all empty)")
    return RolloutLog(frame, str(path), fmt, rows_read, dropped)


# ---------------------------------------------------------------------------
# Success and groups
# ---------------------------------------------------------------------------


def success_flags(reward, threshold: float | None = None, threshold_name: str = "threshold") -> np.ndarray:
    r"""Which rollouts count as correct.

    With a threshold: ``reward >= threshold``. Without one the rewards must be binary,
    {0, 1} or {-1, 1}, and 1 is correct (F-GRPO Eq. 1 with :math:`R_c = 1`). NaN rewards
    (unscored rollouts) are never correct; drop them before counting a group's size.

    Parameters
    ----------
    reward : array_like of float
    threshold : float, optional
        Finite success threshold for non-binary rewards.
    threshold_name : str
        How the caller's users set the threshold (named in the error for non-binary rewards).

    Returns
    -------
    ndarray of bool
    """
    r = np.asarray(reward, dtype=np.float64)
    if threshold is not None:
        if isinstance(threshold, bool) or not np.isfinite(threshold):
            raise ValueError(f"{threshold_name} must be a finite number, got {threshold!r}")
        return r >= threshold
    values = np.unique(r[~np.isnan(r)])
    if set(values.tolist()) <= {0.0, 1.0} or set(values.tolist()) <= {-1.0, 1.0}:
        return r == 1.0
    shown = ", ".join(f"{v:g}" for v in values[:6]) + (", ..." if values.size > 6 else "")
    raise ValueError(
        f"rewards are not binary ({{0, 1}} or {{-1, 1}}); found {shown}: set {threshold_name} "
        "(reward >= threshold counts as correct) or log a 'correct' column"
    )


def group_counts(
    log: RolloutLog | pd.DataFrame, threshold: float | None = None, threshold_name: str = "threshold"
) -> pd.DataFrame:
    r"""Group size :math:`N`, correct count :math:`X` and :math:`\hat\mu = X/N` of every (step, prompt) group.

    Success is the ``correct`` column if present (``threshold`` is then unused), else
    :func:`success_flags` of the rewards.

    Returns
    -------
    DataFrame
        Columns ``step``, ``prompt_id``, ``n``, ``x``, ``mu_hat``, sorted by step.
    """
    frame = log.frame if isinstance(log, RolloutLog) else log
    if "correct" in frame.columns:
        correct = frame["correct"]
    else:
        correct = success_flags(frame["reward"], threshold, threshold_name)
    counts = (
        frame.assign(correct=np.asarray(correct, dtype=np.int64))
        .groupby(["step", "prompt_id"], sort=True)["correct"]
        .agg(n="size", x="sum")
        .reset_index()
    )
    counts["mu_hat"] = counts["x"] / counts["n"]
    return counts
