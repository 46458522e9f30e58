"""Batched categorical-policy simulator (F-GRPO App. J, BroRL §4.1).

>>> from dataclasses import replace
>>> from tailmiss.sim import preset, simulate
>>> cfg = replace(preset("fgrpo-fig2"), group_sizes=[2, 256], seeds=[0])  # doctest: +SKIP
>>> result = simulate(cfg)  # doctest: +SKIP
>>> result.final[["group_size", "gamma", "q_pos", "retained_mass"]]  # doctest: +SKIP
"""

from tailmiss.sim.config import SimConfig
from tailmiss.sim.engine import initial_logits, simulate
from tailmiss.sim.metrics import METRICS
from tailmiss.sim.presets import PRESETS, preset, quick_name
from tailmiss.sim.result import SimResult
from tailmiss.sim.sampler import CountSampler, hash_uniform

__all__ = [
    "SimConfig",
    "SimResult",
    "simulate",
    "preset",
    "quick_name",
    "PRESETS",
    "METRICS",
    "initial_logits",
    "CountSampler",
    "hash_uniform",
]
