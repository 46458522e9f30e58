"""What runs the trainer and the simulator: presets, sweeps, ladders, the pools of jobs and the bridge.

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
cached, jobs, pool, ray_pool
    Cached SFT and RL runs (reused, resumed or redone) as :class:`Job` s, and what trains them: the pool of
    single-threaded processes on this machine, or Ray tasks on a cluster (``RunOptions(executor="ray")``).
bridge
    :func:`run_bridge`: each held-out prompt's SFT answer distribution simulated by :mod:`tailmiss.sim` beside the
    transformer's runs.

Every runner takes one :class:`~tailmiss.options.RunOptions`. A sweep result's cache
fingerprint covers the code that collects it and the trainer, not the presets nor the pool
(``tailmiss.experiments.sweep_result.SCOPE``, a :class:`tailmiss.store.Scope`).

The names below are imported on first use (the module's ``__getattr__``): a pool worker or ``tailmiss llm train``
that needs the presets or one cached run then loads neither the bridge's simulator nor pandas.
"""

import importlib

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

_HOME = {
    **dict.fromkeys(("BridgeResult", "run_bridge"), "bridge"),
    **dict.fromkeys(("Ladder", "LadderResult", "Rung", "run_ladder"), "ladder"),
    **dict.fromkeys(("Job", "run_jobs", "train_all"), "pool"),
    **dict.fromkeys(
        ("LADDERS", "LLM_PRESETS", "LLM_SWEEPS", "ladder_preset", "llm_preset", "llm_sweep", "quick_name", "workload"),
        "presets",
    ),
    **dict.fromkeys(("SweepResult", "run_sweep"), "sweep"),
    **dict.fromkeys(("LLMSweep", "Variant", "load_sweep"), "sweep_config"),
}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
