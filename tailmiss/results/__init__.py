"""The results layer: every cached simulation, sweep, ladder and bridge the figures and the report read.

Only this package runs or loads simulations and trains the small transformer
(:func:`~tailmiss.sim.runner.run_cached`, :func:`~tailmiss.llm.sweep.run_sweep`,
:func:`~tailmiss.llm.ladder.run_ladder`, :func:`~tailmiss.llm.pool.train_all`,
:func:`~tailmiss.bridge.run_bridge`); :mod:`tailmiss.figures` only plots what
it returns and :mod:`tailmiss.repro` only writes it as text. The paper's claims
are computed once, in :mod:`tailmiss.results.claims`.

Modules
-------
context
    :class:`Context`: where and how results are computed.
sim
    :class:`SimulatedMeans` (:func:`simulated_means`), :func:`concentration_zone`, :func:`tail_miss_at_init`.
llm
    :func:`sweep_result`, :func:`resolve_sweep`, :func:`train_llm`.
ladder
    :func:`ladder_result`, :func:`resolve_ladder`.
bridge
    :class:`BridgeData` (:func:`bridge_data`).
claims
    Each paper claim's numbers and yes/no verdict.
text
    Markdown helpers of the report.
"""

from __future__ import annotations

from tailmiss.results.bridge import BridgeData, bridge_data
from tailmiss.results.context import Context
from tailmiss.results.ladder import LADDERS, ladder_result, resolve_ladder
from tailmiss.results.llm import SWEEPS, resolve_sweep, sweep_result, train_llm
from tailmiss.results.sim import SimulatedMeans, concentration_zone, simulated_means, tail_miss_at_init

__all__ = [
    "Context",
    "SimulatedMeans",
    "simulated_means",
    "concentration_zone",
    "tail_miss_at_init",
    "SWEEPS",
    "resolve_sweep",
    "sweep_result",
    "train_llm",
    "LADDERS",
    "resolve_ladder",
    "ladder_result",
    "BridgeData",
    "bridge_data",
]
