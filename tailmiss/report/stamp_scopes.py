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

__all__ = ["scopes_of", "excused"]


@functools.cache
def _scope_members(package: Path) -> dict[str, frozenset[str]]:
    """``scope name -> its files`` (package paths) of every scope a declaration may name: each of
    :data:`~tailmiss._fingerprint.SCOPES` less the :data:`~tailmiss._fingerprint.OWN_SCOPE` modules (as its units'
    fingerprint is taken), and each of those modules with the package modules it imports."""

    def rel(paths) -> frozenset[str]:
        return frozenset(p.relative_to(package).as_posix() for p in paths)

    members = {name: rel(store._scope_files(name)) for name in SCOPES}
    for module in OWN_SCOPE:
        members[module] = rel(import_closure(package, [package / module], [package / p for p in NO_NUMBERS]))
    return members


def _scope_fingerprint(name: str) -> str:
    return store.module_fingerprint(name) if name in OWN_SCOPE else store.code_fingerprint(name)


def scopes_of(files) -> dict[str, str]:
    """``scope name -> current fingerprint`` of every unit scope holding one of ``files`` (package paths)."""
    files = set(files)
    return {
        name: _scope_fingerprint(name) for name, members in _scope_members(store._PACKAGE).items() if members & files
    }


def _fresh_fingerprint(name: str) -> str:
    """The scope ``name``'s fingerprint from its sources as they are now (not the process's cached one: a check
    after an edit in the same process reads the edit)."""
    package = store._PACKAGE
    if name in OWN_SCOPE:
        return source_digest(import_closure(package, [package / name], [package / p for p in NO_NUMBERS]))
    return source_digest(store._scope_files(name))


def excused(file: str, scopes: dict) -> bool:
    """Whether a change of ``file`` keeps a stamp that recorded the scope fingerprints ``scopes``: some scope holds
    it, and every scope holding it runs code declared to compute what the recorded fingerprint's did
    (:func:`tailmiss.store.same_code`)."""

    holders = [name for name, members in _scope_members(store._PACKAGE).items() if file in members]
    return bool(holders) and all(
        name in scopes and store.same_code(name, scopes[name], current=_fresh_fingerprint(name)) for name in holders
    )
