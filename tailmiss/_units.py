"""The words of every reuse decision: what a folder holds for the work asked of it (:class:`UnitState`), the
outcome of judging it (:class:`Lookup`) and a kind of unit (:class:`UnitKind`); and the one rule that may forbid
computing a unit at all (:func:`check_may_compute`: the report re-derived from the evidence archive alone).

The result store (:mod:`tailmiss.store`) judges units with them and the evidence archive (:mod:`tailmiss.archive`)
weighs its own units against the cache's with them; both re-export nothing else from here.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Callable
from pathlib import Path

from tailmiss._fingerprint import Scope

__all__ = ["UnitState", "Lookup", "UnitKind", "COMPUTE_NOTHING_ENV", "MissingEvidence", "check_may_compute"]


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
    """Outcome of :func:`tailmiss.store.judge` and :func:`tailmiss.store.lookup`: the :class:`UnitState`, the loaded
    value when it may be used, and why it may not (or why a stale one is reused)."""

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
        The unit's files, ``meta.json`` included (what :func:`tailmiss.store.open_unit` verifies).
    what : str
        Its name in messages (``"SimResult"``, ``"sweep result"``, ...).
    scope : str or Scope
        The code that makes its numbers (:func:`tailmiss.store.stale_reason`).
    load : callable
        ``load(path)``: the unit's value, read from a verified folder.
    """

    files: tuple[str, ...]
    what: str
    scope: str | Scope
    load: Callable[[Path], object]


COMPUTE_NOTHING_ENV = "TAILMISS_COMPUTE_NOTHING"
"""Set (to anything but empty or ``0``), every unit must be found in the cache or the archive: asking to compute one
raises :class:`MissingEvidence` (how the report is re-derived from the archive alone)."""


class MissingEvidence(ValueError):
    """A unit had to be computed where nothing may be (:data:`COMPUTE_NOTHING_ENV`)."""


def check_may_compute(path: str | os.PathLike | Path, what: str, reason: str | None = None) -> None:
    """Raise :class:`MissingEvidence` naming the unit at ``path`` (a ``what``) when units may not be computed."""
    if os.environ.get(COMPUTE_NOTHING_ENV, "") in ("", "0"):
        return
    because = f" ({reason})" if reason else ""
    raise MissingEvidence(
        f"{path}: the {what} would be computed{because}, and nothing may be: the evidence archive does not hold it "
        "current (tailmiss repro --plan lists what it lacks)"
    )
