"""The controls study's data: the paper-protocol, controls and γ sweeps and their runs' per-prompt masses."""

from __future__ import annotations

from dataclasses import dataclass

from tailmiss.studies.context import Context
from tailmiss.studies.protocol.data import ProtocolData
from tailmiss.studies.runs import resolve_family, sweeps_data

__all__ = ["CONTROL_FAMILIES", "ControlsData", "controls_data"]

CONTROL_FAMILIES = ("paper-protocol", "paper-protocol-controls", "paper-protocol-gamma")
"""The sweep families of the controls, gamma sensitivity and pass@k curves (:mod:`tailmiss.studies.controls.claims`)."""


@dataclass
class ControlsData(ProtocolData):
    """The runs behind the controls, γ sensitivity and pass@k analyses (:data:`CONTROL_FAMILIES`): the fields of
    :class:`ProtocolData`, with ``per_prompt`` holding every run of the three sweeps (their labels are distinct),
    and ``overrides``: each control's tag -> the RL settings it changes."""

    overrides: dict = None


def controls_data(ctx: Context) -> ControlsData:
    """Run (or load) the paper-protocol, controls and γ sweeps and read their runs' per-prompt masses."""
    data = ControlsData(**sweeps_data(CONTROL_FAMILIES, ctx, CONTROL_FAMILIES))
    controls = resolve_family("paper-protocol-controls", ctx)
    data.overrides = {v.tag: dict(v.overrides) for v in controls.variants if v.tag}
    return data
