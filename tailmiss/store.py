"""The result store: every unit of work is written atomically, sealed with checksums and its provenance.

A *unit* is a folder (a simulation result, an LLM run, a sweep's tidy result, a
bridge comparison) holding data files and a ``meta.json``. :func:`save_unit`
writes it under a temporary name and moves it into place as a whole, with a
``meta.json`` that records

* ``provenance``: package, torch, numpy and Python versions, the device, the
  time, the git revision when the package lives in a git checkout, and the
  **code fingerprint** of the unit's scope (:func:`code_fingerprint`);
* ``checksums``: the SHA-256 of every data file.

:func:`open_unit` verifies a unit before anything reads it (every file there,
``meta.json`` readable, every checksum equal), so a truncated or edited file is
detected and the unit is redone, never loaded. :func:`stale_reason` compares a
unit's fingerprint with the running code's: a cache hit needs the same config
*and* the same code, unless the caller passes ``reuse_stale`` (the CLI's
``--reuse-stale``), which reuses it with a warning that names the difference.

The fingerprint hashes what the package's own sources that can change a unit's
numbers do (:data:`SCOPES`, :mod:`tailmiss._fingerprint`), not the git revision
nor how the code is written: a commit that only edits the README, a figure's
colours, a docstring or the layout of the trainer's files keeps every cached
unit valid, while an uncommitted edit to the simulator's arithmetic invalidates
the simulations. The git revision is recorded beside it for the reader. A
restructuring that keeps every number may be declared equivalent to the code it
replaces (:data:`EQUIVALENT`), on the record of runs retrained bit for bit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import enum
import functools
import hashlib
import json
import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from tailmiss._checks import check_choice
from tailmiss._fingerprint import EQUIVALENT, NO_NUMBERS, OWN_SCOPE, SCOPES, Scope, import_closure, source_digest
from tailmiss.io import ConfigError, recover, result_dir

__all__ = [
    "Scope",
    "SCOPES",
    "NO_NUMBERS",
    "OWN_SCOPE",
    "own_scope_of",
    "module_fingerprint",
    "CorruptUnit",
    "EQUIVALENT",
    "same_code",
    "code_fingerprint",
    "git_revision",
    "host",
    "unit_clock",
    "provenance",
    "file_sha256",
    "save_unit",
    "save_tables",
    "open_unit",
    "stale_reason",
    "read_meta",
    "UnitState",
    "UnitKind",
    "Lookup",
    "judge",
    "lookup",
]

_PACKAGE = Path(__file__).resolve().parent


def same_code(scope: str | Scope, stored: str | None, current: str | None = None) -> bool:
    """Whether a unit of ``scope`` (a :class:`Scope`, a name of :data:`SCOPES` or a module of :data:`OWN_SCOPE`)
    whose provenance records the fingerprint ``stored`` was made by the running code, or by code it is declared to
    replace (:data:`EQUIVALENT`); ``current``: the scope's fingerprint if computed afresh (default: the process's)."""
    if isinstance(scope, str) and scope in OWN_SCOPE:
        name, current = scope, current or module_fingerprint(scope)
    else:
        name, current = _scope(scope).name, current or code_fingerprint(scope)
    seen = set()
    while current is not None and current not in seen:
        if current == stored:
            return True
        seen.add(current)
        current = EQUIVALENT.get(name, {}).get(current)
    return False


class CorruptUnit(ValueError):
    """A stored unit is incomplete, unreadable or fails its checksums."""


def _paths(parts) -> list[Path]:
    paths = []
    for part in parts:
        path = _PACKAGE / part
        if not path.exists():  # a renamed module must not silently leave the fingerprint
            raise RuntimeError(f"code fingerprint names {part!r}, which is not in {_PACKAGE}")
        paths.append(path)
    return paths


def _scope(scope: str | Scope) -> Scope:
    """A :class:`Scope`, or the name of one of :data:`SCOPES`."""
    if isinstance(scope, Scope):
        return scope
    check_choice("scope", scope, SCOPES)
    return SCOPES[scope]


def _scope_files(scope: str | Scope) -> list[Path]:
    scope = _scope(scope)
    return import_closure(_PACKAGE, _paths(scope.entries), _paths(NO_NUMBERS + scope.no_numbers + OWN_SCOPE))


@functools.cache
def module_fingerprint(module: str) -> str:
    """SHA-256 (hex, 16 digits) of what the module ``module`` of :data:`OWN_SCOPE` (a package path) and the package
    modules it imports do (:func:`tailmiss._fingerprint.source_digest`), less :data:`NO_NUMBERS`."""
    check_choice("module", module, OWN_SCOPE)
    return source_digest(import_closure(_PACKAGE, _paths([module]), _paths(NO_NUMBERS)))


def own_scope_of(obj) -> tuple[str, ...]:
    """The :data:`OWN_SCOPE` modules whose code makes ``obj``'s numbers: the module defining ``type(obj)`` when it
    is one of them (a task outside the trainer's scope), else ``()``."""
    module = getattr(type(obj), "__module__", "") or ""
    parts = module.split(".")
    if parts[0] != _PACKAGE.name:
        return ()
    path = "/".join(parts[1:]) + ".py"
    return (path,) if path in OWN_SCOPE else ()


@functools.cache
def code_fingerprint(scope: str | Scope) -> str:
    """SHA-256 (hex, 16 digits) of what the package sources of ``scope`` (a :class:`Scope` or a name of
    :data:`SCOPES`) do.

    :func:`tailmiss._fingerprint.source_digest` of the scope's files: docstrings, comments, formatting, file names
    and the place of a definition inside the scope do not count. Computed once per process: the code of a running
    process does not change.
    """
    return source_digest(_scope_files(scope))


@functools.cache
def git_revision() -> dict | None:
    """``{"commit": sha, "dirty": bool}`` of the checkout holding the package, or None outside git."""
    try:
        head = subprocess.run(
            ["git", "-C", str(_PACKAGE), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", str(_PACKAGE), "status", "--porcelain", "--", "."], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


@functools.cache
def _cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo`` on Linux), else what :mod:`platform` knows."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def host() -> dict:
    """The machine a unit is computed on, as far as it can move a number: the processor's model, its logical cores,
    the torch threads of this process, the torch build and the vector instructions its CPU kernels use (the same
    code gives other floating-point results on another processor or with another thread count)."""
    import torch

    capability = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu_capability": capability() if capability is not None else None,
    }


_CLOCKS: list[float] = []


@contextlib.contextmanager
def unit_clock() -> Iterator[None]:
    """Count the CPU seconds (user + system, every thread of this process) of the work inside: a unit sealed inside
    (:func:`provenance`) records those spent since the clock started as ``cpu_s``. The pools start one per job, so
    each run, simulation or comparison records what it cost; clocks nest, the innermost counts."""
    _CLOCKS.append(time.process_time())
    try:
        yield
    finally:
        _CLOCKS.pop()


def provenance(scope: str | Scope, device=None, **extra) -> dict:
    """Versions, device, time, git revision and the code fingerprint of ``scope``; the host (:func:`host`) and, inside
    a :func:`unit_clock`, the CPU seconds spent so far (``cpu_s``)."""
    import numpy
    import torch

    from tailmiss import __version__

    out = {
        "tailmiss": __version__,
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": None if device is None else str(device),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git": git_revision(),
        "code": {
            "scope": _scope(scope).name,
            "fingerprint": code_fingerprint(scope),
            "modules": {m: module_fingerprint(m) for m in OWN_SCOPE},
        },
        "host": host(),
    }
    if _CLOCKS:
        out["cpu_s"] = round(time.process_time() - _CLOCKS[-1], 3)
    out.update(extra)
    return out


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save_unit(
    path: str | Path,
    writers: dict[str, Callable[[Path], None]],
    meta: dict,
    scope: str | Scope,
    what: str,
    device=None,
) -> Path:
    """Write a unit folder atomically: each ``writers[name](tmp / name)``, then a sealed ``meta.json``.

    ``path`` is replaced only if it is an earlier unit of the same kind (its
    files and nothing else); otherwise ``ValueError``.
    """
    path = Path(path)
    files = (*writers, "meta.json")
    with result_dir(path, files, what) as tmp:
        for name, write in writers.items():
            write(tmp / name)
        sealed = dict(meta)
        sealed["provenance"] = provenance(scope, device if device is not None else meta.get("device"))
        sealed["checksums"] = {name: file_sha256(tmp / name) for name in writers}
        (tmp / "meta.json").write_text(json.dumps(sealed, indent=2, default=str) + "\n")
    return path


def save_tables(path: str | Path, config, tables: dict, meta: dict, scope: str | Scope, what: str) -> Path:
    """:func:`save_unit` of a unit made of a config (``config.toml``, by its ``to_toml``) and tables (``name ->
    DataFrame``, each written as CSV with 10 significant digits); ``meta`` less any earlier provenance and checksums."""

    def csv(frame):
        return lambda p: frame.to_csv(p, index=False, float_format="%.10g")

    writers = {"config.toml": config.to_toml, **{name: csv(frame) for name, frame in tables.items()}}
    meta = {k: v for k, v in meta.items() if k not in ("provenance", "checksums")}
    return save_unit(path, writers, meta, scope, what)


def read_meta(path: str | Path) -> dict:
    """``path/meta.json`` parsed (``CorruptUnit`` when missing or unreadable)."""
    meta_file = Path(path) / "meta.json"
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError) as exc:
        raise CorruptUnit(f"{meta_file} is missing or unreadable: {exc}") from None
    if not isinstance(meta, dict):
        raise CorruptUnit(f"{meta_file} does not hold a JSON object")
    return meta


def open_unit(path: str | Path, files: Iterable[str], what: str) -> dict:
    """Verify the unit at ``path`` and return its ``meta.json``.

    Raises
    ------
    CorruptUnit
        A file is missing, ``meta.json`` is unreadable or has no checksums (a
        unit from before the store, or a foreign folder), or a file's SHA-256
        differs from the recorded one (truncated or edited).
    """
    path = Path(path)
    if not path.is_dir():
        raise CorruptUnit(f"{str(path)!r} is not a saved {what}")
    if not (path / "meta.json").is_file():
        raise CorruptUnit(f"{str(path)!r} is not a saved {what}: meta.json is missing")
    meta = read_meta(path)
    sums = meta.get("checksums")
    if not isinstance(sums, dict):
        raise CorruptUnit(f"{str(path)!r} is not a sealed {what}: meta.json has no checksums")
    for name in files:
        if name == "meta.json":
            continue
        file = path / name
        if not file.is_file():
            raise CorruptUnit(f"{str(path)!r} is not a complete {what}: {name} is missing")
        if sums.get(name) != file_sha256(file):
            raise CorruptUnit(f"{file} is damaged: its SHA-256 differs from the one recorded when it was written")
    return meta


def stale_reason(meta: dict, scope: str | Scope, modules: Iterable[str] = ()) -> str | None:
    """Why a unit's code differs from the running code (None when the fingerprints agree): that of ``scope``, and
    of each :data:`OWN_SCOPE` module in ``modules`` (the unit's own, :func:`own_scope_of`)."""
    prov = meta.get("provenance") or {}
    code = prov.get("code") or {}
    stored, current = code.get("fingerprint"), code_fingerprint(scope)
    recorded = code.get("modules") or {}
    changed = [m for m in modules if not same_code(m, recorded.get(m))]
    same = same_code(scope, stored)
    if same and not changed:
        return None
    if same:
        return "made by other code of " + ", ".join(
            f"{m} ({recorded.get(m) or 'not recorded'}, not the running {module_fingerprint(m)})" for m in changed
        )
    git = prov.get("git") or {}
    made_by = f"code {stored}" if stored else "code of unknown fingerprint"
    if git.get("commit"):
        made_by += f" (git {git['commit'][:10]}{', with uncommitted changes' if git.get('dirty') else ''})"
    now = git_revision()
    running = f"code {current}"
    if now:
        running += f" (git {now['commit'][:10]}{', with uncommitted changes' if now['dirty'] else ''})"
    return f"made by {made_by}, not by the running {running}"


class UnitState(str, enum.Enum):
    """What a folder holds for the work asked of it: the one vocabulary of every reuse decision (units of the store
    and run folders alike), and of the pools' log lines."""

    MISSING = "missing"
    """Nothing there."""
    FRESH = "fresh"
    """A finished unit of the requested config made by the running code: used as it is."""
    REUSED_STALE = "reused-stale"
    """A finished unit of the requested config made by other code, reused because ``reuse_stale`` says so."""
    STALE = "stale"
    """A finished unit of the requested config made by other code: redone."""
    PARTIAL = "partial"
    """A run stopped part-way by the running code: resumed from its checkpoint."""
    CORRUPT = "corrupt"
    """Damaged, incomplete or unreadable: redone."""
    OTHER = "other"
    """Another config (or another start): redone."""


@dataclasses.dataclass(frozen=True)
class Lookup:
    """Outcome of :func:`judge` and :func:`lookup`: the :class:`UnitState`, the loaded value when it may be used, and
    why it may not (or why a stale one is reused)."""

    state: UnitState
    value: object = None
    reason: str | None = None

    @property
    def usable(self) -> bool:
        return self.value is not None


@dataclasses.dataclass(frozen=True)
class UnitKind:
    """One kind of unit, declared once beside the type it stores.

    Attributes
    ----------
    files : tuple of str
        The unit's files, ``meta.json`` included (what :func:`open_unit` verifies).
    what : str
        Its name in messages (``"SimResult"``, ``"sweep result"``, ...).
    scope : str or Scope
        The code that makes its numbers (:func:`stale_reason`).
    load : callable
        ``load(path)``: the unit's value, read from a verified folder.
    """

    files: tuple[str, ...]
    what: str
    scope: str | Scope
    load: Callable[[Path], object]


def judge(
    path: str | Path,
    kind: UnitKind,
    matches: Callable[[object], bool | str],
    reuse_stale: bool = False,
    modules: Iterable[str] = (),
) -> Lookup:
    """The one decision whether the unit of ``kind`` at ``path`` may stand in for new work.

    In order: it exists; it is intact (:func:`open_unit`: every file of ``kind`` there, checksums equal);
    ``kind.load`` reads it; ``matches`` accepts the value (``True``; ``False`` or a string saying why not make it
    :attr:`UnitState.OTHER`); it was made by the running code (:func:`stale_reason`: the code of ``kind.scope`` and of
    the :data:`OWN_SCOPE` ``modules`` the unit uses), else it is stale, or reused when ``reuse_stale``. Only a
    damaged unit (:class:`CorruptUnit`) or a config file this code refuses (:class:`tailmiss.io.ConfigError`) reads
    as corrupt: any other error of ``kind.load`` is a bug of the loader and is raised.
    """
    path = Path(path)
    if not path.exists():
        return Lookup(UnitState.MISSING)
    try:
        meta = open_unit(path, kind.files, kind.what)
        value = kind.load(path)
    except (CorruptUnit, ConfigError) as exc:
        return Lookup(UnitState.CORRUPT, reason=str(exc))
    verdict = matches(value)
    if verdict is not True:
        return Lookup(UnitState.OTHER, reason=verdict if isinstance(verdict, str) else "another config")
    reason = stale_reason(meta, kind.scope, modules)
    if reason is None:
        return Lookup(UnitState.FRESH, value)
    if reuse_stale:
        return Lookup(UnitState.REUSED_STALE, value, reason)
    return Lookup(UnitState.STALE, reason=reason)


def lookup(
    path: str | Path,
    kind: UnitKind,
    matches: Callable[[object], bool | str],
    reuse_stale: bool = False,
    log: Callable[[str], None] | None = None,
    modules: Iterable[str] = (),
) -> Lookup:
    """:func:`judge` on a unit written as a whole (:func:`save_unit`), after undoing a replacement of it that died
    half-way; ``log`` receives one line for every unit found but not used, and for a stale one reused."""
    path = Path(path)
    say = log or (lambda message: None)
    recover(path)
    found = judge(path, kind, matches, reuse_stale, modules)
    if found.state is UnitState.CORRUPT:
        say(f"{path}: not reused, {found.reason}; redoing it")
    elif found.state is UnitState.OTHER:
        say(f"{path}: holds another config; redoing it")
    elif found.state is UnitState.REUSED_STALE:
        say(f"warning: reusing the stale {kind.what} {path} (--reuse-stale): {found.reason}")
    elif found.state is UnitState.STALE:
        say(f"{path}: stale, {found.reason}; redoing it (--reuse-stale would reuse it)")
    return found
