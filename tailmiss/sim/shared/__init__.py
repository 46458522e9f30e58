r"""A simulator whose prompts share parameters: a log-linear categorical policy over prompt and answer features.

The table simulator (:mod:`tailmiss.sim`) keeps one set of logits per run and prompt, so no update on one prompt can
move another, and the interference between prompts that narrows the small transformer's coverage cannot happen in
it. Here every run holds one parameter matrix for all its prompts,

.. math::

    z(x, a) = b_a + \phi(x)^\top W \psi(a),

and an update on one prompt moves every prompt that shares a feature with it; the rest of the step (draws,
advantages, focal weight, surrogates, optimizers) is the table simulator's, row by row.

>>> from tailmiss.sim.shared import shared_preset, simulate_shared
>>> result = simulate_shared(shared_preset("shared-conflict-quick"))  # doctest: +SKIP
>>> final = result.by_type(frame=result.final)  # doctest: +SKIP
>>> final[["group_size", "gamma", "prompt_type", "q_pos", "retained_mass"]]  # doctest: +SKIP

Any law of this form (an offset, prompt and answer features, each prompt's correct set) runs the same loop:
:class:`SharedLaw` and :func:`simulate_law`; the small transformer's shared rung is one
(:mod:`tailmiss.experiments.shared_bridge`).
"""

from tailmiss.sim.shared.config import PROMPT_FEATURES, PROMPT_TYPES, SharedSimConfig, prompt_features
from tailmiss.sim.shared.engine import row_seed, trained_prompts
from tailmiss.sim.shared.law import SharedLaw, conflict_law, starting_point
from tailmiss.sim.shared.presets import SHARED_PRESETS, shared_preset
from tailmiss.sim.shared.result import SHARED_METRICS, SHARED_UNIT, LawSimResult, SharedSimResult
from tailmiss.sim.shared.runner import run_shared
from tailmiss.sim.shared.simulate import simulate_law, simulate_shared

__all__ = [
    "SharedSimConfig",
    "SharedSimResult",
    "simulate_shared",
    "SharedLaw",
    "simulate_law",
    "LawSimResult",
    "conflict_law",
    "run_shared",
    "shared_preset",
    "SHARED_PRESETS",
    "SHARED_METRICS",
    "SHARED_UNIT",
    "PROMPT_FEATURES",
    "PROMPT_TYPES",
    "prompt_features",
    "starting_point",
    "row_seed",
    "trained_prompts",
]
