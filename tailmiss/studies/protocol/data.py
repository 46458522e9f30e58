"""The protocol study's data: the protocol ladder's four sweeps and the paper-protocol runs' per-prompt masses."""

from __future__ import annotations

from dataclasses import dataclass

from tailmiss.studies.context import Context
from tailmiss.studies.runs import sweeps_data

__all__ = ["PROTOCOL_FAMILIES", "ProtocolData", "protocol_data"]

PROTOCOL_FAMILIES = ("protocol-today", "protocol-difficulty", "protocol-on-policy", "paper-protocol")
"""The sweep families of the protocol ladder (:data:`tailmiss.studies.protocol.claims.RUNGS`)."""


@dataclass
class ProtocolData:
    """The protocol ladder's sweeps and the paper-protocol runs' per-prompt evaluations.

    Attributes
    ----------
    histories : dict
        Sweep family -> its runs' evaluation history (``SweepResult.history``).
    per_prompt : dict
        ``(label, seed) -> (steps, mu_pos)`` of every ``paper-protocol`` run.
    names : dict
        Sweep family -> the preset that ran (quick or full).
    quick : bool
    """

    histories: dict
    per_prompt: dict
    names: dict
    quick: bool


def protocol_data(ctx: Context) -> ProtocolData:
    """Run (or load) the protocol ladder's four sweeps and read the paper-protocol runs' per-prompt masses."""
    return ProtocolData(**sweeps_data(PROTOCOL_FAMILIES, ctx, ("paper-protocol",)))
