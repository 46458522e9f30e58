"""The unit scopes a stamp's code reaches, and whether a changed file keeps a stamp current
(:mod:`tailmiss.report.stamps`).

A stamp records the fingerprint of each unit scope its closure reaches (:data:`tailmiss._fingerprint.SCOPES` and each
:data:`~tailmiss._fingerprint.OWN_SCOPE` module). A changed file keeps the stamp current when every scope holding it
now runs code that :data:`tailmiss._fingerprint.EQUIVALENT` declares to replace, down the chain, the fingerprint the
stamp recorded (each declaration rests on runs retrained bit for bit).
"""

from __future__ import annotations

import functools
from pathlib import Path

from tailmiss import store
from tailmiss._fingerprint import NO_NUMBERS, OWN_SCOPE, SCOPES, import_closure, source_digest

__all__ = ["scopes_of", "excused", "fresh_fingerprint", "forget"]


def _files(name: str) -> list[Path]:
    """The files of scope ``name`` (a :data:`~tailmiss._fingerprint.SCOPES` name, as its units' fingerprint takes
    them, or an :data:`~tailmiss._fingerprint.OWN_SCOPE` module with the package modules it imports)."""
    if name not in OWN_SCOPE:
        return store._scope_files(name)
    package = store._PACKAGE  # as store.module_fingerprint takes them
    return import_closure(package, [package / name], [package / p for p in NO_NUMBERS])


@functools.cache
def _scope_members(package: Path) -> dict[str, frozenset[str]]:
    """``scope name -> its files`` (package paths) of every scope a declaration may name."""
    return {name: frozenset(p.relative_to(package).as_posix() for p in _files(name)) for name in (*SCOPES, *OWN_SCOPE)}


def scopes_of(files) -> dict[str, str]:
    """``scope name -> current fingerprint`` (the process's) of every unit scope holding one of ``files`` (package
    paths)."""
    files = set(files)
    members = _scope_members(store._PACKAGE)
    return {
        name: store.module_fingerprint(name) if name in OWN_SCOPE else store.code_fingerprint(name)
        for name, held in members.items()
        if held & files
    }


@functools.cache
def fresh_fingerprint(name: str) -> str:
    """The scope ``name``'s fingerprint from its sources as they are now, not the process's (a check after an edit
    in the same process reads the edit); kept until :func:`forget`, which each check calls first."""
    return source_digest(_files(name))


def forget() -> None:
    """Drop the fingerprints :func:`fresh_fingerprint` keeps (the sources may have changed since)."""
    fresh_fingerprint.cache_clear()


def excused(file: str, scopes: dict) -> bool:
    """Whether a change of ``file`` keeps a stamp that recorded the scope fingerprints ``scopes``: some scope holds
    it, and every scope holding it runs code declared to compute what the recorded fingerprint's did
    (:func:`tailmiss.store.same_code`). A file that is gone (renamed or removed) is judged by the scopes whose
    entries held it: a folder entry above it, or the module itself."""
    holders = [name for name, members in _scope_members(store._PACKAGE).items() if file in members]
    if not holders and not (store._PACKAGE / file).exists():
        holders = _held_before(file)
    return bool(holders) and all(
        name in scopes and store.same_code(name, scopes[name], current=fresh_fingerprint(name)) for name in holders
    )


def _held_before(file: str) -> list[str]:
    """The scopes whose entries hold the package path ``file`` (a folder entry above it, or the module itself):
    those that held a file that is gone."""
    entries = {name: SCOPES[name].entries for name in SCOPES} | {name: (name,) for name in OWN_SCOPE}
    return [name for name, held in entries.items() if any(file == e or file.startswith(e + "/") for e in held)]
