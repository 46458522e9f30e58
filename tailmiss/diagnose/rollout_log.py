r"""Per-rollout logs of real RL runs: one schema, CSV / JSONL / parquet readers, TRL and verl adapters.

The schema (``format="tailmiss"``) has one row per rollout:

================  ==========  ============================================================
column            type        meaning
================  ==========  ============================================================
``step``          integer     training step the rollout was sampled for (0 <= step < 2**53)
``prompt_id``     text        identifies the prompt; the rollouts of one prompt at one step
                              form a group
``reward``        number      the rollout's scalar reward (empty / NaN: unscored, dropped)
``correct``       0/1, bool   optional success flag; without it, success comes from ``reward``
``rollout``       text        optional: identifies the rollout within its group; a log that
                              repeats a (step, prompt_id, rollout) is refused
``focal_weight``  number      optional: the focal weight F-GRPO gave the rollout's group
                              (TailMissCallback logs it); ``tailmiss diagnose`` reads the
                              run's gamma from it
================  ==========  ============================================================

Ids are text. A CSV file's ids are read exactly as written: ``007`` and ``7``, ``1e5`` and
``100000``, ``1.0`` and ``1`` are distinct ids, and an empty one is refused. A JSON string is
its text; a JSON number becomes its plain text (``7`` and ``7.0``: ``"7"``; ``8.5``: ``"8.5"``),
so ``"007"`` and ``7`` stay distinct while ``"7"`` and ``7`` are one id. Parquet gives strings
as stored and integers as their decimal text.

Without a ``rollout`` column, rollouts logged twice cannot be told from a larger group: they
join their group. When some steps hold every group at k >= 2 times the log's usual group size
while other steps hold the usual size, or every row of the log repeats a multiple of k times
(where the rewards tell rollouts apart: the whole log written k times), the log is read with a
:class:`RepeatedRowsWarning` (its text also in :attr:`RolloutLog.warnings`); a ``rollout`` column
makes the log unambiguous.

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
    tailmiss schema itself, every step, with ``rollout``.
``verl``
    verl with ``trainer.rollout_data_dir=DIR`` writes ``DIR/<step>.jsonl``: ``input``,
    ``output``, ``gts``, ``score``, ``step`` and the reward function's extra fields (such as
    ``acc``); verl's v1 trainer adds ``uid`` = ``<prompt uid>_<session>_<output>``. A group is
    the prompt part of ``uid`` when present (in the v1 form ``<session>_<output>`` is the rollout), else
    the ``input`` text; the reward is ``score`` and ``acc``, when present, is the success flag.
``auto``
    ``tailmiss`` if the columns include ``prompt_id``, ``verl`` if ``input`` and ``score``,
    ``trl`` if ``prompt`` and ``completion``.

A path may be a file or a folder; a folder is read as all its ``.csv``, ``.jsonl``, ``.json``
and ``.parquet`` files (verl's dump folder, TRL's ``completions/``). Parquet needs pyarrow. Only
the columns an adapter uses are kept, and prompt and rollout ids are stored once each (a
categorical), so a log of millions of rows fits in a few hundred MB.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tailmiss._checks import check_choice
from tailmiss.diagnose._clean import Ids, clean, id_text, shown
from tailmiss.diagnose._read import CutLineWarning, log_files, read_chunks
from tailmiss.diagnose._repeats import RepeatedRowsWarning, repeated_steps

__all__ = [
    "FORMATS",
    "SCHEMA_COLUMNS",
    "CutLineWarning",
    "RepeatedRowsWarning",
    "RolloutLog",
    "read_rollouts",
    "success_flags",
    "group_counts",
]

FORMATS = ("auto", "tailmiss", "trl", "verl")
"""The ``format`` values :func:`read_rollouts` accepts: the writer of the log (the tailmiss schema, TRL or verl), or
``"auto"`` to tell it from the first file's columns."""
SCHEMA_COLUMNS = ("step", "prompt_id", "reward")
"""Required columns of the tailmiss schema; ``correct`` and ``rollout`` are optional."""
_TRL_FIXED = ("step", "prompt", "completion", "advantage", "image")
_KEYS = ("step", "prompt_id", "rollout")
_ID_COLUMNS = ("prompt_id", "rollout", "prompt", "input", "uid")
"""Raw columns that identify a group or a rollout: a CSV file's are read as text, exactly as written."""


@dataclass(frozen=True)
class RolloutLog:
    """A per-rollout log in the tailmiss schema, with where it came from."""

    frame: pd.DataFrame
    """``step`` (int64), ``prompt_id`` (categorical of str), ``reward`` (float64) and, if known, ``correct``
    (bool) and ``rollout`` (categorical of str)."""
    source: str
    format: str
    """The format it was read as (never ``"auto"``)."""
    rows_read: int
    """Rows read (a cut-off last line is not a row)."""
    rows_without_reward: int
    """Rows dropped for an empty or NaN reward (unscored rollouts)."""
    warnings: tuple[str, ...] = ()
    """What was skipped, and why (a JSONL file's cut-off last line), and what looks wrong (steps that look logged
    twice in a log without a ``rollout`` column)."""
    cut_lines: int = 0
    """JSONL last lines skipped because they do not parse (a run killed while writing), one per file at most."""


# ---------------------------------------------------------------------------
# Adapters: each picks its columns and maps raw rows to step / prompt_id / reward (/ correct, rollout)
# ---------------------------------------------------------------------------


def _need(columns, wanted, what: str, source: str) -> None:
    missing = [c for c in wanted if c not in columns]
    if missing:
        have = ", ".join(map(str, list(columns)[:12])) or "none"
        raise ValueError(f"{source}: the {what} log needs column(s) {', '.join(missing)} (found: {have})")


def _prompt_key(value) -> str:
    # TRL's prompts may be conversations (lists of messages): their text form is the key
    return value if isinstance(value, str) else repr(value)


def _pick_tailmiss(columns, source, reward_column):
    _need(columns, ("step", "prompt_id", reward_column or "reward"), "tailmiss", source)
    wanted = ("step", "prompt_id", reward_column or "reward", "correct", "rollout", "focal_weight")
    return [c for c in wanted if c in columns]


def _from_tailmiss(raw: pd.DataFrame, reward_column: str | None) -> pd.DataFrame:
    out = pd.DataFrame({"step": raw["step"], "prompt_id": raw["prompt_id"], "reward": raw[reward_column or "reward"]})
    for optional in ("correct", "rollout", "focal_weight"):
        if optional in raw.columns:
            out[optional] = raw[optional]
    return out


def _pick_trl(columns, source, reward_column):
    _need(columns, ("step", "prompt"), "trl", source)
    if reward_column is not None:
        _need(columns, (reward_column,), "trl", source)
        return ["step", "prompt", reward_column]
    return [c for c in columns if c not in ("completion", "image")]


def _from_trl(raw: pd.DataFrame, reward_column: str | None, source: str) -> pd.DataFrame:
    if reward_column is None:
        candidates = [
            c for c in raw.columns if c not in _TRL_FIXED and pd.api.types.is_numeric_dtype(raw[c].infer_objects())
        ]
        if len(candidates) != 1:
            found = ", ".join(candidates) or "none"
            raise ValueError(f"{source}: name the reward column of the trl log with --reward-column (found: {found})")
        reward_column = candidates[0]
    prompt_id = raw["prompt"].map(_prompt_key)
    return pd.DataFrame({"step": raw["step"], "prompt_id": prompt_id, "reward": raw[reward_column]})


def _pick_verl(columns, source, reward_column):
    _need(columns, ("step", reward_column or "score"), "verl", source)
    if "uid" not in columns:
        _need(columns, ("input",), "verl", source)
    group = "uid" if "uid" in columns else "input"
    return [c for c in ("step", group, reward_column or "score", "acc") if c in columns]


def _from_verl(raw: pd.DataFrame, reward_column: str | None) -> pd.DataFrame:
    out = pd.DataFrame({"step": raw["step"], "reward": raw[reward_column or "score"]})
    if "uid" in raw.columns:
        parts = raw["uid"].map(id_text).str.rsplit("_", n=2)
        out["prompt_id"] = parts.str[0]
        if (parts.str.len() == 3).all():  # the v1 trainer's <prompt uid>_<session>_<output>
            out["rollout"] = parts.str[1] + "_" + parts.str[2]
    else:
        out["prompt_id"] = raw["input"].map(_prompt_key)
    if "acc" in raw.columns:
        out["correct"] = raw["acc"]
    return out


_PICKERS = {"tailmiss": _pick_tailmiss, "trl": _pick_trl, "verl": _pick_verl}


def _adapt(fmt: str, raw: pd.DataFrame, reward_column: str | None, source: str) -> pd.DataFrame:
    if fmt == "trl":
        return _from_trl(raw, reward_column, source)
    return _from_verl(raw, reward_column) if fmt == "verl" else _from_tailmiss(raw, reward_column)


def _detect(columns, source: str) -> str:
    cols = set(columns)
    if "prompt_id" in cols:
        return "tailmiss"
    if {"input", "score"} <= cols:
        return "verl"
    if {"prompt", "completion"} <= cols:
        return "trl"
    have = ", ".join(map(str, list(columns)[:12])) or "none"
    raise ValueError(
        f"{source}: cannot tell the log format from its columns ({have}); the tailmiss schema needs "
        "step, prompt_id, reward (or pass --format trl / verl)"
    )


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------


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
        Missing path, unknown file type, unreadable or empty file, missing columns, bad values
        (the message names the file and the line or row), a (step, prompt_id, rollout) logged
        twice, or parquet without pyarrow.

    Warns
    -----
    CutLineWarning
        A JSONL file's last line does not parse (a run killed while writing): it is skipped (counted in
        ``cut_lines``).
    RepeatedRowsWarning
        No ``rollout`` column, and some steps look logged more than once (see the module docstring).
    """
    check_choice("format", format, FORMATS)
    path = Path(path)
    parts, rows_read, ids, fmt, notes = _read_parts(path, None if format == "auto" else format, reward_column)
    for note in notes:
        warnings.warn(note, CutLineWarning, stacklevel=2)
    if not rows_read:
        raise ValueError(f"{str(path)!r} holds no rollouts (empty log)")
    frame = _join(parts, str(path), ids)
    if frame.empty:
        raise ValueError(f"{str(path)!r}: no rollout has a reward ({rows_read} rows, all empty)")
    repeats = () if "rollout" in frame.columns else repeated_steps(frame, str(path))
    for note in repeats:
        warnings.warn(note, RepeatedRowsWarning, stacklevel=2)
    return RolloutLog(frame, str(path), fmt, rows_read, rows_read - len(frame), notes + repeats, len(notes))


def _read_parts(path: Path, fmt: str | None, reward_column: str | None):
    """Every file's rows in the schema (ids as codes), the rows read, the ids, the format and the cut-line notes."""
    parts, rows_read, ids = [], 0, {"prompt_id": Ids(), "rollout": Ids()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CutLineWarning)
        for file in log_files(path):
            source = str(file)

            def pick(columns, source=source):
                nonlocal fmt
                fmt = fmt or _detect(columns, source)
                return _PICKERS[fmt](columns, source, reward_column)

            for chunk in read_chunks(file, pick, _ID_COLUMNS):
                rows_read += len(chunk.frame)
                part = clean(_adapt(fmt, chunk.frame, reward_column, source), chunk.place, chunk.unit, source)
                for key, interned in ids.items():
                    if key in part.columns:
                        part[key] = interned.codes(part[key])
                parts.append(part)
    notes = tuple(str(w.message) for w in caught if issubclass(w.category, CutLineWarning))
    return parts, rows_read, ids, fmt, notes


def _join(parts: list[pd.DataFrame], source: str, ids: dict[str, Ids]) -> pd.DataFrame:
    columns = {tuple(p.columns) for p in parts}
    if len(columns) > 1:
        raise ValueError(f"{source}: its files or lines disagree on the columns ({' vs '.join(map(str, columns))})")
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    if "rollout" in frame.columns:
        _refuse_repeats(frame, source, ids)
    for key, interned in ids.items():
        if key in frame.columns:
            frame[key] = interned.categorical(frame[key].to_numpy(np.int32))
    return frame


def _refuse_repeats(frame: pd.DataFrame, source: str, ids: dict[str, Ids]) -> None:
    repeated = frame.duplicated(list(_KEYS)).to_numpy()
    if repeated.any():
        i = int(np.flatnonzero(repeated)[0])
        step = int(frame["step"].iat[i])
        prompt = list(ids["prompt_id"].index)[int(frame["prompt_id"].iat[i])]
        rollout = list(ids["rollout"].index)[int(frame["rollout"].iat[i])]
        raise ValueError(
            f"{source}: {int(repeated.sum())} rows repeat the (step, prompt_id, rollout) of an earlier row, first "
            f"step {step}, prompt {prompt!r}, rollout {rollout!r}: the run logged some steps twice (a "
            "resumed run whose logger kept the abandoned steps?); keep one copy of each step"
        )


# ---------------------------------------------------------------------------
# Success and groups
# ---------------------------------------------------------------------------


def success_flags(
    reward, threshold: float | None = None, threshold_name: str = "threshold", advice: str | None = None
) -> np.ndarray:
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
        How the caller's users set the threshold (named in the error for a bad threshold, and in the
        one for non-binary rewards unless ``advice`` is given).
    advice : str, optional
        What the error for non-binary rewards tells the caller's users to do, in the words of their
        training stack (verl: its config key); default: set ``threshold_name`` or log a ``correct``
        column (a log read by ``tailmiss diagnose``).

    Returns
    -------
    ndarray of bool
    """
    r = np.asarray(reward, dtype=np.float64)
    if threshold is not None:
        if isinstance(threshold, bool) or not np.isfinite(threshold):
            raise ValueError(f"{threshold_name} must be a finite number, got {shown(threshold)}")
        return r >= threshold
    values = np.unique(r[~np.isnan(r)])
    if set(values.tolist()) <= {0.0, 1.0} or set(values.tolist()) <= {-1.0, 1.0}:
        return r == 1.0
    odd = values[~np.isin(values, [-1.0, 0.0, 1.0])]
    listed = np.concatenate([odd[:3], values[np.isin(values, [-1.0, 0.0, 1.0])]])[:6]
    found = ", ".join(shown(v) for v in np.sort(listed)) + (", ..." if values.size > listed.size else "")
    advice = advice or f"set {threshold_name} (reward >= threshold counts as correct) or log a 'correct' column"
    raise ValueError(f"rewards are not binary ({{0, 1}} or {{-1, 1}}); found {found}: {advice}")


def group_counts(
    log: RolloutLog | pd.DataFrame, threshold: float | None = None, threshold_name: str = "threshold"
) -> pd.DataFrame:
    r"""Group size :math:`N`, correct count :math:`X` and :math:`\hat\mu = X/N` of every (step, prompt) group.

    Success is the ``correct`` column if present (``threshold`` is then unused), else
    :func:`success_flags` of the rewards.

    Returns
    -------
    DataFrame
        Columns ``step``, ``prompt_id``, ``n``, ``x``, ``mu_hat``, sorted by step, then prompt.
    """
    frame = log.frame if isinstance(log, RolloutLog) else log
    if "correct" in frame.columns:
        correct = frame["correct"]
    else:
        correct = success_flags(frame["reward"], threshold, threshold_name)
    counts = (
        pd.DataFrame({"step": frame["step"], "prompt_id": frame["prompt_id"], "correct": np.asarray(correct, np.int64)})
        .groupby(["step", "prompt_id"], sort=True, observed=True)["correct"]
        .agg(n="size", x="sum")
        .reset_index()
    )
    counts["mu_hat"] = counts["x"] / counts["n"]
    return counts
