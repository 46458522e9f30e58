"""Which LLM sweep and ladder families each part of ``paper_repro.md`` reads.

One table for the report (what ``tailmiss repro`` trains for a section, what a deferred section names) and for its
stamps (which presets a section's stamp records), so the two cannot disagree.
"""

from __future__ import annotations

from tailmiss.results import CONTROL_FAMILIES, PROTOCOL_FAMILIES

__all__ = ["SECTION_LLM", "TRANSFORMER_PARTS", "families_of"]

SECTION_LLM = {
    "nsweep": ("nsweep",),
    "objectives": ("objectives",),
    "maze": ("maze",),
    "ladder": ("ladder", "ladder-budget", "ladder-hard"),
    "protocol": PROTOCOL_FAMILIES,
    "controls": CONTROL_FAMILIES,
}
"""Each part of the report -> the LLM families (keys of ``tailmiss.results.SWEEPS`` or ``LADDERS``) it reads."""

TRANSFORMER_PARTS = ("nsweep", "objectives", "maze")
"""The parts of the small transformer's ``## `` section; the first look can defer all but the group-size sweep."""


def families_of(parts) -> tuple[str, ...]:
    """The LLM families that ``parts`` (names of :data:`SECTION_LLM`) read, in order, each once."""
    return tuple(dict.fromkeys(f for part in parts for f in SECTION_LLM[part]))
