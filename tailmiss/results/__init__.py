"""The results layer: every cached simulation, sweep, ladder and bridge the figures and the report read, and the
paper's claims computed from them.

Only this package runs or loads simulations and trains the small transformer
(through :func:`~tailmiss.sim.runner.run_cached`, :func:`~tailmiss.experiments.sweep.run_sweep`,
:func:`~tailmiss.experiments.ladder.run_ladder`, :func:`~tailmiss.experiments.pool.train_all`,
:func:`~tailmiss.experiments.bridge.run_bridge`); :mod:`tailmiss.figures` only plots what
it returns and :mod:`tailmiss.report` only writes it as text. Every claim of the
paper is computed once, in :mod:`tailmiss.results.claims`.

Modules
-------
context
    :class:`Context`: which results (quick or full), where they are cached, how they are computed.
sim
    :class:`SimulatedMeans` (:func:`simulated_means`), :func:`tail_miss_at_init`.
llm
    :func:`sweep_result`, :func:`ladder_result`, :func:`resolve_family`, :func:`train_llm`,
    :class:`ProtocolData` (:func:`protocol_data`: the protocol ladder's sweeps and per-prompt masses);
    :class:`ControlsData` (:func:`controls_data`: the controls, γ and pass@k sweeps and their per-prompt masses).
bridge
    :class:`BridgeData` (:func:`bridge_data`).
claims
    Each paper claim's numbers and verdict, typed.
"""

from __future__ import annotations

from tailmiss.results.bridge import BridgeData, bridge_data
from tailmiss.results.context import Context
from tailmiss.results.llm import (
    CONTROL_FAMILIES,
    LADDERS,
    PROTOCOL_FAMILIES,
    SWEEPS,
    ControlsData,
    ProtocolData,
    controls_data,
    ladder_result,
    protocol_data,
    resolve_family,
    sweep_result,
    train_llm,
)
from tailmiss.results.sim import SimulatedMeans, simulated_means, tail_miss_at_init

__all__ = [
    "Context",
    "SimulatedMeans",
    "simulated_means",
    "tail_miss_at_init",
    "SWEEPS",
    "LADDERS",
    "resolve_family",
    "sweep_result",
    "ProtocolData",
    "protocol_data",
    "PROTOCOL_FAMILIES",
    "ControlsData",
    "controls_data",
    "CONTROL_FAMILIES",
    "ladder_result",
    "train_llm",
    "BridgeData",
    "bridge_data",
]
