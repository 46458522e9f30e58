"""Atomic result files and strict TOML configuration.

Nothing half-written ever lands on disk: files and result folders are written
under a temporary name next to their destination and moved into place with
``os.replace`` once complete.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import tempfile
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

import tomli_w

__all__ = [
    "atomic_write",
    "atomic_dir",
    "result_dir",
    "require_files",
    "read_toml",
    "write_toml",
    "dataclass_from_mapping",
    "dataclass_to_mapping",
]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w") -> Iterator[typing.IO]:
    """Open a temporary file beside ``path``; move it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a finished file gets the usual mode
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder that replaces ``path`` as a whole when the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            os.replace(path, old / "x")
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def result_dir(path: str | os.PathLike, files: tuple[str, ...], what: str) -> Iterator[Path]:
    """:func:`atomic_dir` for a result folder made of ``files``.

    An existing ``path`` is replaced only if it is an earlier result of the same
    kind (nothing but ``files`` in it); anything else raises ``ValueError``.
    """
    path = Path(path)
    if path.exists() and not (path.is_dir() and {p.name for p in path.iterdir()} <= set(files)):
        raise ValueError(f"refusing to replace {str(path)!r}: it is not an earlier {what} folder")
    with atomic_dir(path) as tmp:
        yield tmp


def require_files(path: str | os.PathLike, files: tuple[str, ...], what: str) -> Path:
    """``Path(path)`` after checking that every one of ``files`` is in it (``ValueError`` naming the first missing)."""
    path = Path(path)
    for name in files:
        if not (path / name).is_file():
            raise ValueError(f"{str(path)!r} is not a saved {what}: {name} is missing")
    return path


def read_toml(path: str | os.PathLike) -> dict:
    """Parse a TOML file; a syntax error becomes a ``ValueError`` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"config file not found: {str(path)!r}")
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML: {exc}") from None


def write_toml(path: str | os.PathLike, data: Mapping) -> None:
    with atomic_write(path, "wb") as fh:
        tomli_w.dump(dict(data), fh)


def dataclass_to_mapping(obj) -> dict:
    """Plain dict of a dataclass with tuples turned into lists (TOML/JSON friendly)."""
    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def dataclass_from_mapping(cls, data: Mapping, where: str = "config"):
    """Build dataclass ``cls`` from ``data``, rejecting unknown keys by name."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; known keys: {', '.join(sorted(names))}"
        )
    return cls(**data)
