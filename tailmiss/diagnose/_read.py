"""Raw rows of one log file, chunk by chunk: CSV, JSONL (one JSON object per line) and parquet.

Each reader yields :class:`Chunk` frames holding only the columns the caller picks from the
file's column names (a verl dump's prompt and answer texts are never kept), with each row's
place in the file for messages. JSONL is parsed a block of lines at a time (one ``json.loads``
per block; a block that fails is parsed line by line to name the line), so a 2 M-line log is
read in seconds with memory for one block of dicts. A last line that does not parse, what a run
killed in the middle of a write leaves, is skipped with a :class:`CutLineWarning` naming it;
any other bad line is a ``ValueError`` naming it.

Id columns (the caller names them) keep their text: CSV reads them as strings exactly as written
(``007`` is not ``7``, ``1e5`` not ``100000``; only an empty field is missing), JSONL and parquet
give strings as stored and numbers as numbers (turned into text when ids are interned).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["SUFFIXES", "Chunk", "CutLineWarning", "log_files", "read_chunks"]

SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
BLOCK_BYTES = 1 << 23
_NA_TEXTS = (
    *("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN"),
    *("<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"),
)
"""What pandas' CSV reader takes for missing by default (its ``na_values`` list); an id column takes only ``""``."""

Pick = Callable[[list[str]], list[str]]
"""Given a file's column names (in order), the ones to keep."""


class CutLineWarning(UserWarning):
    """The last line of a JSONL log does not parse (cut off when the run was killed?) and was skipped."""


@dataclass(frozen=True)
class Chunk:
    """Some rows of one file: ``frame`` (the picked columns) and each row's ``place`` (line or row number)."""

    frame: pd.DataFrame
    place: np.ndarray
    unit: str
    """``"line"`` (JSONL: the file's line) or ``"row"`` (CSV, parquet: the data row, from 1)."""


def log_files(path: Path) -> list[Path]:
    """``[path]`` for a log file, else the folder's log files in name order; ``ValueError`` when there are none."""
    if not path.exists():
        raise ValueError(f"no such file or folder: {str(path)!r}")
    if path.is_file():
        if path.suffix.lower() not in SUFFIXES:
            raise ValueError(f"{str(path)!r}: unknown log type {path.suffix!r}; expected {', '.join(SUFFIXES)}")
        return [path]
    if not path.is_dir():  # a device, a pipe or a socket: /dev/null is no log
        raise ValueError(f"{str(path)!r} is not a log file or folder")
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
    if not files:
        raise ValueError(f"folder {str(path)!r} holds no {', '.join(SUFFIXES)} files")
    return files


def read_chunks(path: Path, pick: Pick, text: Collection[str] = ()) -> Iterator[Chunk]:
    """The non-empty chunks of one file, restricted to ``pick(columns)``; ``ValueError`` naming the file.

    The ``text`` columns (ids) of a CSV file are read as strings exactly as written, an empty field as missing.
    """
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        yield from _jsonl(path, pick)
        return
    if suffix == ".csv":
        header = _guarded(path, lambda: list(pd.read_csv(path, nrows=0).columns))
        keep = None if header is None else pick(header)
        frame = None if keep is None else _guarded(path, lambda: _read_csv(path, keep, text))
    else:
        frame = _guarded(path, lambda: pd.read_parquet(path))
        frame = None if frame is None else frame[pick(list(frame.columns))]
    if frame is not None and len(frame):
        yield Chunk(frame.reset_index(drop=True), np.arange(1, len(frame) + 1), "row")


def _read_csv(path: Path, keep: list[str], text: Collection[str]) -> pd.DataFrame:
    """The ``keep`` columns of a CSV file; the ``text`` ones as strings (no number parsing, only ``""`` missing)."""
    ids = [c for c in keep if c in text]
    missing = {c: [""] if c in ids else list(_NA_TEXTS) for c in keep}
    return pd.read_csv(path, usecols=keep, dtype=dict.fromkeys(ids, str), keep_default_na=False, na_values=missing)


def _guarded(path: Path, read):
    """``read()``, None for an empty file; reader errors as one ``ValueError`` naming the file."""
    try:
        return read()
    except ImportError:
        raise ValueError(f"reading parquet ({str(path)!r}) needs pyarrow: pip install pyarrow") from None
    except pd.errors.EmptyDataError:
        return None
    except (ValueError, UnicodeDecodeError) as exc:  # pandas' ParserError, pyarrow's ArrowInvalid
        raise ValueError(f"cannot read {str(path)!r}: {' '.join(str(exc).split())}") from None


# ---------------------------------------------------------------------------
# JSONL
# ---------------------------------------------------------------------------


def _jsonl(path: Path, pick: Pick) -> Iterator[Chunk]:
    whole = _jsonl_by_arrow(path, pick)
    if whole is not None:
        if len(whole.frame):
            yield whole
        return
    wanted = None
    with open(path, "rb") as fh:
        first, block = 1, _block(fh)
        while block:
            after = _block(fh)
            records, places = _parse(block, first, not after.strip(), str(path))
            if records:
                wanted = wanted or pick(list(dict.fromkeys(key for r in records for key in r)))
                frame = pd.DataFrame({c: _column(records, c, places, str(path)) for c in wanted}, dtype=object)
                yield Chunk(frame, places, "line")
            first += block.count(b"\n")
            block = after


def _jsonl_by_arrow(path: Path, pick: Pick) -> Chunk | None:
    """The whole file at once through pyarrow's JSON reader, if pyarrow is installed and the file is plain.

    Plain: it parses, has one row per line (no blank line) and the picked columns hold numbers, strings
    or booleans (pyarrow reads a string that looks like a time, ``"2024-01-01 10:00"``, as a timestamp:
    such a file is not plain). Otherwise None, and the reader above takes the file block by block, naming
    a bad line and skipping a cut last one. Both give the same values: numbers and strings as the file
    wrote them, missing ones empty.
    """
    try:
        from pyarrow import json as arrow_json
        from pyarrow import types
    except ImportError:
        return None
    try:
        table = arrow_json.read_json(path)
    except Exception:  # pyarrow's ArrowInvalid and kin: the block reader names the problem
        return None
    lines, last = 0, b"\n"
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(BLOCK_BYTES), b""):
            lines, last = lines + block.count(b"\n"), block[-1:]
    lines += last != b"\n"  # a last line without its newline
    if table.num_rows != lines:
        return None
    wanted = pick(table.column_names) if table.num_rows else []
    columns = {c: table.column(c) for c in wanted}
    plain = (types.is_null, types.is_boolean, types.is_integer, types.is_floating, types.is_string)
    if not all(any(kind(col.type) for kind in plain) for col in columns.values()):
        return None  # lists, objects, timestamps: the line reader keeps what the file wrote
    frame = pd.DataFrame({c: col.to_pandas() for c, col in columns.items()})
    return Chunk(frame, np.arange(1, table.num_rows + 1), "line")


def _block(fh) -> bytes:
    """The next ~BLOCK_BYTES of whole lines (the file's last line may lack its newline)."""
    data = fh.read(BLOCK_BYTES)
    if data and not data.endswith(b"\n"):
        data += fh.readline()
    return data


def _column(records: list[dict], key: str, places: np.ndarray, source: str) -> np.ndarray:
    try:
        return np.array([r.get(key) for r in records], dtype=object)
    except AttributeError:  # a line holding a JSON value other than an object
        no = next(no for no, r in zip(places, records) if type(r) is not dict)
        raise ValueError(f"{source}: line {no} is not a JSON object (one object per line)") from None


def _parse(block: bytes, first: int, last_block: bool, source: str) -> tuple[list, np.ndarray]:
    """The JSON values of the lines of ``block`` (numbered from ``first``; blank lines skipped), their line numbers."""
    lines = block.count(b"\n") + (not block.endswith(b"\n"))
    try:  # one parse for the whole block; one with a bad or a blank line (",,") is parsed line by line below
        records = json.loads(b"[" + block.rstrip(b"\n").replace(b"\n", b",") + b"]")
    except (ValueError, UnicodeDecodeError):
        records = None
    if records is not None and len(records) == lines:
        return records, np.arange(first, first + lines)
    numbered = [(first + i, line) for i, line in enumerate(block.split(b"\n")) if line.strip()]
    records = []
    for i, (no, line) in enumerate(numbered):
        try:
            records.append(json.loads(line))
        except (ValueError, UnicodeDecodeError) as exc:
            if not (last_block and i == len(numbered) - 1):
                raise ValueError(f"{source}: line {no} is not JSON ({_reason(exc)})") from None
            warnings.warn(
                f"{source}: line {no}, the last, is cut off ({_reason(exc)}): skipped it, as a run killed "
                "while writing leaves it",
                CutLineWarning,
                stacklevel=2,
            )
    return records, np.array([no for no, _ in numbered[: len(records)]], dtype=np.int64)


def _reason(exc: Exception) -> str:
    return exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
