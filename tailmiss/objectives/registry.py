"""Name registries of losses: read-only mappings that grow by registration only.

:data:`~tailmiss.objectives.POLICY_LOSSES`, :data:`~tailmiss.objectives.AGGREGATIONS`
and :data:`~tailmiss.objectives.SURROGATES` are :class:`Registry` instances. Code
outside the package adds an entry with the matching decorator
(:func:`~tailmiss.objectives.register_policy_loss`,
:func:`~tailmiss.objectives.register_aggregation`,
:func:`~tailmiss.objectives.register_surrogate`); every consumer that validates a
name (``RLConfig.method``, a sweep's variants, ``SimConfig.surrogate``) looks it up
in the registry when it validates, so a registered name is accepted everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """A read-only mapping from names to entries of one kind, filled by :meth:`add`.

    Parameters
    ----------
    kind : str
        What an entry is ("policy loss", "aggregation", ...), for messages.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` under ``name`` and return it.

        Raises
        ------
        ValueError
            If ``name`` is not a non-empty string or is already registered (the
            message names it): an entry is never replaced silently.
        """
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a {self.kind} name must be a non-empty string, got {name!r}")
        if name in self._entries:
            raise ValueError(f"a {self.kind} named {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def remove(self, name: str) -> T:
        """Unregister ``name`` and return its entry (for tests and plugins that undo a registration)."""
        if name not in self._entries:
            raise KeyError(f"no {self.kind} named {name!r} is registered")
        return self._entries.pop(name)

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(map(repr, self._entries))
            raise KeyError(f"unknown {self.kind} {name!r}; registered: {known}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"
