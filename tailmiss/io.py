"""Atomic result files and strict TOML configuration.

Nothing half-written ever lands on disk: files and result folders are written
under a temporary name next to their destination and moved into place with
``os.replace`` once complete.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import numbers
import os
import re
import reprlib
import shutil
import socket
import sys
import tempfile
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

import tomli_w

__all__ = [
    "ConfigError",
    "atomic_write",
    "atomic_dir",
    "clean_leftovers",
    "recover",
    "result_dir",
    "check_result_dest",
    "check_writable_folder",
    "check_run_name",
    "RUN_NAME_MAX_BYTES",
    "read_toml",
    "write_toml",
    "dataclass_from_mapping",
    "dataclass_to_mapping",
]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_HOST = socket.gethostname().replace(".", "_").replace("/", "_") or "host"


def _temp_prefix(path: Path) -> str:
    """Hidden temporary names carry the host and PID of their writer, so leftovers of dead writers can be found."""
    return f".{path.name}.{_HOST}-{os.getpid()}."


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def clean_leftovers(path: str | os.PathLike) -> list[Path]:
    """Remove temporary files and folders that crashed writers of ``path`` left behind; return them.

    Only names written by :func:`atomic_write` / :func:`atomic_dir` on this
    host whose writing process no longer runs are touched.
    """
    path = Path(path)
    if not path.parent.is_dir():
        return []
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.{re.escape(_HOST)}-(\d+)\..*\.(tmp|old)$")
    removed = []
    for entry in path.parent.iterdir():
        match = pattern.match(entry.name)
        if match is None or _pid_alive(int(match.group(1))):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
        removed.append(entry)
    return removed


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w") -> Iterator[typing.IO]:
    """Open a temporary file beside ``path``; move it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(path)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a finished file gets the usual mode
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``); False if unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):  # old kernel or a file system without it
        return False
    raise OSError(err, os.strerror(err), str(b))


def _restore_replaced(path: Path) -> None:
    """Finish a replacement that died between its two renames (systems without an atomic exchange)."""
    if path.exists():
        return
    pattern = re.compile(rf"^\.{re.escape(path.name)}\..*\.old$")
    for entry in sorted(path.parent.iterdir()) if path.parent.is_dir() else []:
        if pattern.match(entry.name) and (entry / "x").exists():
            os.replace(entry / "x", path)
            shutil.rmtree(entry, ignore_errors=True)
            return


def recover(path: str | os.PathLike) -> None:
    """Undo a replacement of ``path`` that died half-way, then remove crashed writers' leftovers."""
    path = Path(path)
    _restore_replaced(path)
    clean_leftovers(path)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder that replaces ``path`` as a whole when the block succeeds.

    An existing ``path`` is swapped with the new folder in one atomic step on
    Linux (``renameat2`` with ``RENAME_EXCHANGE``), so a reader or a crash sees
    the old result or the new one, never none. Elsewhere the old folder is
    first moved aside, and a replacement that dies between the two renames is
    undone by the next call. Temporary folders of crashed writers are removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    recover(path)
    tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        if not path.exists():
            os.replace(tmp, path)
        elif _exchange(tmp, path):
            shutil.rmtree(tmp)  # now the old result
        else:
            old = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), suffix=".old", dir=path.parent))
            os.replace(path, old / "x")
            os.replace(tmp, path)
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def result_dir(path: str | os.PathLike, files: tuple[str, ...], what: str) -> Iterator[Path]:
    """:func:`atomic_dir` for a result folder made of ``files``.

    An existing ``path`` is replaced only if it is an earlier result of the same
    kind (nothing but ``files`` in it); anything else raises ``ValueError``.
    """
    with atomic_dir(check_result_dest(path, files, what)) as tmp:
        yield tmp


def check_result_dest(path: str | os.PathLike, files: tuple[str, ...], what: str) -> Path:
    """Check, before any work, that a result of kind ``what`` can be written to the folder ``path``.

    ``path`` must be absent or an earlier result folder (nothing but
    ``files`` in it), and the folder that will hold it must be creatable and
    writable by this process. Nothing is created. Raises ``ValueError``
    naming the path otherwise.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{str(path)!r} is a file, not a result folder")
    if path.is_dir() and not {p.name for p in path.iterdir()} <= set(files):
        raise ValueError(f"refusing to replace {str(path)!r}: it is not an earlier {what} folder")
    check_writable_folder(path.parent, f"cannot write {str(path)!r}")
    return path


def check_writable_folder(path: str | os.PathLike, what: str) -> Path:
    """Check that ``path`` is, or can be created as, a folder this process can write; leave nothing behind.

    ``ValueError`` starting with ``what`` otherwise (a file in the way, no
    write permission on the nearest existing folder, or a folder that refuses
    new entries whatever its permission bits say: a read-only or virtual file
    system such as ``/proc``, where even root cannot write). The last is found
    by making and removing an empty folder in the nearest existing one.
    """
    path = Path(path)
    probe = path.absolute()
    while not probe.exists():
        probe = probe.parent
    inside = "" if probe == path.absolute() else f": {str(probe)!r}"
    if not probe.is_dir():
        raise ValueError(f"{what}{inside} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"{what}{inside} is not writable")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".tailmiss-probe-", dir=probe))
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ValueError(f"{what}: the folder {str(probe)!r} is not writable ({reason})") from None
    return path


RUN_NAME_MAX_BYTES = 100
"""Longest run name (UTF-8 bytes). It becomes a folder name that sweeps extend (``-grpo-n8-g0.5-s0``) and atomic
writes wrap in a temporary name (host name, PID, random part), which must fit the 255-byte file-name limit."""


def check_run_name(value, key: str = "name") -> None:
    """Raise ``ValueError`` unless ``value`` can name a run's result folder under a cache root.

    A run's name becomes one folder (``runs/sim/<name>``, ``runs/llm/<name>``), so
    it must be a non-empty string of at most :data:`~tailmiss.io.RUN_NAME_MAX_BYTES` UTF-8
    bytes without a path separator (``/``, ``\\``), a NUL or a leading ``.``
    (which also rules out ``.`` and ``..``).
    """
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string, got {value!r}")
    if (
        not value
        or value.startswith(".")
        or any(c in value for c in "/\\\0")
        or len(value.encode("utf-8", "surrogatepass")) > RUN_NAME_MAX_BYTES
    ):
        raise ValueError(
            f"{key} must name one folder: a non-empty string of at most {RUN_NAME_MAX_BYTES} bytes without "
            f"'/', '\\', NUL or a leading '.', got {value!r}"
        )


class ConfigError(ValueError):
    """A config file this code cannot read or refuses (missing, not TOML, unknown keys, a value out of range): raised
    by :func:`read_toml` and :func:`dataclass_from_mapping`, so that a store can tell a folder holding such a file
    from a bug of its own loader."""


def read_toml(path: str | os.PathLike) -> dict:
    """Parse a TOML file; a syntax error becomes a :class:`ConfigError` naming the file."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"config file {str(path)!r} is a folder")
    if not path.is_file():
        raise ConfigError(f"config file not found: {str(path)!r}")
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror or exc}") from None


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


_SCALARS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
_PLURAL = {bool: "booleans", int: "integers", float: "numbers", str: "strings"}


def _hint_parts(hint):
    """``("optional", X)``, ``("tuple", (T, ...))``, ``("scalar", T)`` or ``(None, None)`` (unchecked)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return ("optional", rest[0]) if len(rest) == 1 and len(args) == 2 else (None, None)
    if origin is tuple and args and all(a in _SCALARS for a in args if a is not Ellipsis):
        return "tuple", args
    return ("scalar", hint) if hint in _SCALARS else (None, None)


def _accepts(hint, value) -> bool:
    kind, inner = _hint_parts(hint)
    if kind == "optional":
        return value is None or _accepts(inner, value)
    if kind == "tuple":
        if not isinstance(value, (list, tuple)):
            return False
        variadic = len(inner) == 2 and inner[1] is Ellipsis
        items = inner[:1] * len(value) if variadic else inner
        return len(items) == len(value) and all(_accepts(t, v) for t, v in zip(items, value))
    if kind == "scalar":
        if inner is bool or inner is str:
            return isinstance(value, inner)
        number = numbers.Integral if inner is int else numbers.Real
        return isinstance(value, number) and not isinstance(value, bool)
    return True


def _describe_hint(hint) -> str:
    kind, inner = _hint_parts(hint)
    if kind == "optional":
        return _describe_hint(inner)
    if kind == "tuple":
        if len(inner) == 2 and inner[1] is Ellipsis:
            return f"a list of {_PLURAL[inner[0]]}"
        if len(set(inner)) == 1:
            return f"a list of {len(inner)} {_PLURAL[inner[0]]}"
        return f"a list of {', '.join(_SCALARS[t] for t in inner)}"
    return _SCALARS[inner]


_SHORT = reprlib.Repr()
_SHORT.maxlist = _SHORT.maxtuple = 6
_SHORT.maxstring = _SHORT.maxother = 80


def dataclass_from_mapping(cls, data: Mapping, where: str = "config"):
    """Build dataclass ``cls`` from ``data``, rejecting unknown keys and values of the wrong type by name.

    Before ``cls`` runs, each value is checked against its field's annotation:
    ``str``, ``bool``, ``int``, ``float`` (an integer is a number too; a bool is
    never a number), ``tuple[T, ...]`` and ``tuple[T, U]`` (a list or tuple of
    those) and ``X | None``; a mismatch raises ``ValueError("<where>: <key> must
    be <type>, got <value>")``. Other annotations, and every range, are left to
    ``cls`` itself, whose ``ValueError`` is prefixed with ``where`` too.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a table, got {data!r}")
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; known keys: {', '.join(sorted(names))}"
        )
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError, AttributeError):  # an annotation we cannot resolve: leave the checks to cls
        hints = {}
    for key, value in data.items():
        hint = hints.get(key)
        if hint is not None and not _accepts(hint, value):
            raise ConfigError(f"{where}: {key} must be {_describe_hint(hint)}, got {_SHORT.repr(value)}")
    try:
        return cls(**data)
    except ValueError as exc:  # the class's own range checks: say where, once
        msg = str(exc)
        raise ConfigError(msg if msg.startswith(f"{where}:") else f"{where}: {msg}") from None
