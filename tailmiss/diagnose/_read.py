"""Raw rows of one log file, chunk by chunk: CSV, JSONL (one JSON object per line) and parquet.

Each reader yields :class:`Chunk` frames holding only the columns the caller picks from the
file's column names (a verl dump's prompt and answer texts are never kept), with each row's
place in the file for messages. JSONL is parsed a block of lines at a time (one ``json.loads``
per block; a block that fails is parsed line by line to name the line), so a 2 M-line log is
read in seconds with memory for one block of dicts. A last line that does not parse, what a run
killed in the middle of a write leaves, is skipped with a :class:`CutLineWarning` naming it;
any other bad line is a ``ValueError`` naming it.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["SUFFIXES", "Chunk", "CutLineWarning", "log_files", "read_chunks"]

SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
BLOCK_BYTES = 1 << 23

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
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
    if not files:
        raise ValueError(f"folder {str(path)!r} holds no {', '.join(SUFFIXES)} files")
    return files


def read_chunks(path: Path, pick: Pick) -> Iterator[Chunk]:
    """The non-empty chunks of one file, restricted to ``pick(columns)``; ``ValueError`` naming the file."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        yield from _jsonl(path, pick)
        return
    if suffix == ".csv":
        header = _guarded(path, lambda: list(pd.read_csv(path, nrows=0).columns))
        keep = None if header is None else pick(header)
        frame = None if keep is None else _guarded(path, lambda: pd.read_csv(path, usecols=keep))
    else:
        frame = _guarded(path, lambda: pd.read_parquet(path))
        frame = None if frame is None else frame[pick(list(frame.columns))]
    if frame is not None and len(frame):
        yield Chunk(frame.reset_index(drop=True), np.arange(1, len(frame) + 1), "row")


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
    or booleans. Otherwise None, and the reader above takes the file block by block, naming a bad line
    and skipping a cut last one. Both give the same values: numbers and strings as the file wrote
    them, missing ones empty.
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
    if any(types.is_nested(col.type) for col in columns.values()):
        return None
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
