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

import datetime
import functools
import hashlib
import json
import platform
from collections.abc import Callable, Iterable
from pathlib import Path

from tailmiss._checks import check_choice
from tailmiss._fingerprint import EQUIVALENT, NO_NUMBERS, OWN_SCOPE, SCOPES, Scope, import_closure, source_digest
from tailmiss._provenance import cpu_seconds, git_revision, host, unit_clock
from tailmiss._units import COMPUTE_NOTHING_ENV, Lookup, MissingEvidence, UnitKind, UnitState, check_may_compute
from tailmiss.archive import archived_without
from tailmiss.archive import consult as consult_archive
from tailmiss.io import ConfigError, recover, result_dir

__all__ = [
    "Scope",
    "SCOPES",
    "NO_NUMBERS",
    "OWN_SCOPE",
    "own_scope_of",
    "module_fingerprint",
    "CorruptUnit",
    "MissingEvidence",
    "COMPUTE_NOTHING_ENV",
    "check_may_compute",
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
    "consult_archive",
    "archived_without",
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
    spent = cpu_seconds()
    if spent is not None:
        out["cpu_s"] = spent
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
    dropped = archived_without(meta)
    for name in files:
        if name == "meta.json" or name in dropped:
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


def judge(
    path: str | Path,
    kind: UnitKind,
    matches: Callable[[object], bool | str],
    reuse_stale: bool = False,
    modules: Iterable[str] = (),
    archive: bool = True,
) -> Lookup:
    """The one decision whether the unit of ``kind`` at ``path`` may stand in for new work.

    In order: it exists; it is intact (:func:`open_unit`: every file of ``kind`` there, checksums equal);
    ``kind.load`` reads it; ``matches`` accepts the value (``True``; ``False`` or a string saying why not make it
    :attr:`UnitState.OTHER`); it was made by the running code (:func:`stale_reason`: the code of ``kind.scope`` and of
    the :data:`OWN_SCOPE` ``modules`` the unit uses), else it is stale, or reused when ``reuse_stale``. Only a
    damaged unit (:class:`CorruptUnit`) or a config file this code refuses (:class:`tailmiss.io.ConfigError`) reads
    as corrupt: any other error of ``kind.load`` is a bug of the loader and is raised.

    With ``archive`` (the default), the evidence archive's unit of the same name is then judged the same way and
    stands in when it is better (:func:`consult_archive`).
    """
    path = Path(path)

    def here(folder: Path) -> Lookup:
        return judge(folder, kind, matches, reuse_stale, modules, archive=False)

    if archive:
        return consult_archive(path, here(path), here)
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
    elif found.reason:  # restored from the archive, or an archived unit that could not stand in
        say(f"{path}: {found.reason}")
    if not found.usable:
        check_may_compute(path, kind.what, found.reason)
    return found
