"""What runs the trainer and the simulator: presets, sweeps, ladders, the process pool and the bridge.

:mod:`tailmiss.llm` trains one run from its config; this package decides which
runs to train and how to combine them.

Modules
-------
presets
    Named SFT / RL configs, sweeps and ladders (``tailmiss llm presets``), each with a quick variant.
sweep_config, sweep
    :class:`LLMSweep` (variants × seeds from one SFT run) and :func:`run_sweep`: its runs, cached, in one tidy result.
ladder
    :class:`Ladder`: the same GRPO sweep from the simulator's policy (a table of free logits) to the transformer,
    one ingredient at a time; :func:`run_ladder`.
cached, pool
    Cached SFT and RL runs (reused, resumed or redone) and the pool of single-threaded processes that trains them.
bridge
    :func:`run_bridge`: each held-out prompt's SFT answer distribution simulated by :mod:`tailmiss.sim` beside the
    transformer's runs.

Every runner takes one :class:`~tailmiss.options.RunOptions`. A sweep result's cache
fingerprint covers this package and the trainer (:data:`tailmiss.store.SCOPES`).
"""

from tailmiss.experiments.bridge import BridgeResult, run_bridge
from tailmiss.experiments.ladder import Ladder, LadderResult, Rung, run_ladder
from tailmiss.experiments.pool import Job, run_jobs, train_all
from tailmiss.experiments.presets import (
    LADDERS,
    LLM_PRESETS,
    LLM_SWEEPS,
    ladder_preset,
    llm_preset,
    llm_sweep,
    quick_name,
    workload,
)
from tailmiss.experiments.sweep import SweepResult, run_sweep
from tailmiss.experiments.sweep_config import LLMSweep, Variant, load_sweep

__all__ = [
    "LLM_PRESETS",
    "LLM_SWEEPS",
    "LADDERS",
    "llm_preset",
    "llm_sweep",
    "ladder_preset",
    "quick_name",
    "workload",
    "LLMSweep",
    "Variant",
    "load_sweep",
    "SweepResult",
    "run_sweep",
    "Rung",
    "Ladder",
    "LadderResult",
    "run_ladder",
    "Job",
    "run_jobs",
    "train_all",
    "BridgeResult",
    "run_bridge",
]
