"""The shared-parameter simulator's entry points: the synthetic conflict of a config (:func:`simulate_shared`) and
any law given by its arrays (:func:`simulate_law`), both through the batched loop of
:mod:`tailmiss.sim.shared.engine`."""

from __future__ import annotations

import time

import numpy as np
import torch

from tailmiss._device import resolve_device
from tailmiss.sim.config import SimConfig
from tailmiss.sim.engine import row_softmax
from tailmiss.sim.metrics import expected_steps
from tailmiss.sim.shared.config import SharedSimConfig
from tailmiss.sim.shared.engine import _logits, _metrics, _setup, _start_mass, _step, _Sweep
from tailmiss.sim.shared.law import SharedLaw, conflict_law
from tailmiss.sim.shared.result import LawSimResult, SharedSimResult, tidy_history

__all__ = ["simulate_shared", "simulate_law"]


def _progress(sim: SimConfig, sweep: _Sweep, progress: bool):
    if not progress:
        return None
    from tailmiss.options import ProgressBar

    return ProgressBar(
        total=sim.steps,
        description=f"{sim.name}: {len(sweep.runs)} runs x {sweep.law.num_prompts} prompts on {sweep.dev}",
    )


def _run(law: SharedLaw, sim: SimConfig, device, progress: bool) -> tuple[_Sweep, list, np.ndarray, dict]:
    """Every run of ``sim`` over the prompts of ``law``: the sweep, the logged rows, the final policies and the
    timing."""
    sweep = _setup(law, sim, resolve_device(device))
    logged: list[dict[str, torch.Tensor]] = []
    bar = _progress(sim, sweep, progress)
    started = time.perf_counter()
    try:
        for step in range(sim.steps):
            row = _step(sweep, step)
            if row is not None:
                logged.append(row)
            if bar is not None:
                bar.update(1)
        with torch.no_grad():
            z = _logits(sweep)
            probs = row_softmax(z)
            logged.append(_metrics(sweep, probs, 0, probs.shape[0], None))
            final_probs = probs.to(torch.float64).reshape(len(sweep.runs), law.num_prompts, -1).cpu().numpy()
    finally:
        if bar is not None:
            bar.close()
    elapsed = time.perf_counter() - started
    rows = len(sweep.runs) * law.num_prompts
    timing = {
        "device": str(sweep.dev),
        "torch": torch.__version__,
        "elapsed_s": round(elapsed, 3),
        "action_updates_per_s": rows * law.num_actions * sim.steps / max(elapsed, 1e-9),
    }
    return sweep, logged, final_probs, timing


def simulate_shared(
    config: SharedSimConfig, device=None, progress: bool = True, keep_final: bool = False
) -> SharedSimResult:
    """Run every ``(group_size, gamma, seed)`` of ``config``, each over all its prompts, together as one tensor.

    Parameters
    ----------
    config : SharedSimConfig
    device : str or torch.device, optional
        Defaults to CUDA when available, else CPU.
    progress : bool
        Show a progress bar over steps.
    keep_final : bool
        Also return every run's final policy on every prompt (``SharedSimResult.final_probs``, float64
        ``[runs, prompts, actions]``; not saved with the result).

    Returns
    -------
    SharedSimResult
        One history row per run, prompt and logged step, and the config.
    """
    if not isinstance(config, SharedSimConfig):
        raise ValueError(f"config must be a SharedSimConfig, got {type(config).__name__}")
    law, fit_kl = conflict_law(config)
    sweep, logged, final_probs, timing = _run(law, config.sim, device, progress)
    meta = {
        **timing,
        "initial": {"fit_kl_max": float(fit_kl.max()), **{f"q_pos_{k}": q for k, q in _start_mass(sweep).items()}},
    }
    history = tidy_history(config.sim.runs(), law.prompt_types, expected_steps(config.sim), logged)
    return SharedSimResult(config=config, history=history, meta=meta, final_probs=final_probs if keep_final else None)


def simulate_law(
    law: SharedLaw, sim: SimConfig, device=None, progress: bool = True, keep_final: bool = False
) -> LawSimResult:
    r"""Run every ``(group_size, gamma, seed)`` of ``sim`` over the prompts of ``law``, together as one tensor.

    Each step, every run draws ``N`` actions on each of its prompts from :math:`\mathrm{softmax}(z(x, \cdot))`
    (counter-based, prompt :math:`x` of seed :math:`s` from :func:`~tailmiss.sim.shared.row_seed`), scores them
    against the prompt's correct set, and ascends the group objectives of the step's prompts (all, or
    ``law.prompts_per_step`` of them) summed, through :math:`\nabla_W = \Phi^\top \nabla_z \Psi`; the offset
    stays.

    Parameters
    ----------
    law : SharedLaw
        The prompts, their features and correct sets, the offset and the starting :math:`W`.
    sim : SimConfig
        The update rule (rewards, advantage, surrogate, optimizer, rate), the sweep, the steps, the logging and the
        dtype. Its action space and starting policy are the law's: ``sim.num_actions`` must equal the law's, and
        ``num_correct`` and ``init`` are not read.
    device, progress, keep_final
        As :func:`simulate_shared`.

    Returns
    -------
    LawSimResult
        One history row per run, prompt and logged step (``mu_hat`` NaN on a prompt the step did not train on).
    """
    if not isinstance(law, SharedLaw):
        raise ValueError(f"law must be a SharedLaw, got {type(law).__name__}")
    if not isinstance(sim, SimConfig):
        raise ValueError(f"sim must be a SimConfig, got {type(sim).__name__}")
    if sim.num_actions != law.num_actions:
        raise ValueError(f"sim.num_actions ({sim.num_actions}) must equal the law's actions ({law.num_actions})")
    if sim.surrogate == "theory":
        raise ValueError("surrogate 'theory' is F-GRPO Eq. 5 on one prompt's logits; a shared law has none")
    sweep, logged, final_probs, timing = _run(law, sim, device, progress)
    meta = {**timing, "initial": {f"q_pos_{k}": q for k, q in _start_mass(sweep).items()}}
    history = tidy_history(sim.runs(), law.prompt_types, expected_steps(sim), logged)
    return LawSimResult(sim=sim, law=law, history=history, meta=meta, final_probs=final_probs if keep_final else None)
