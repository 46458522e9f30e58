r"""Held-out metrics by prompt type: a run's per-prompt correct masses as pass@k of each type of prompt.

On a task whose prompts come in types (the narrowing task's conflict minority and the rest), a run is read per type:
its pass@1 (the mean correct mass :math:`\mu_x` over the type's prompts) and exact pass@k,
:math:`1 - (1 - \mu_x)^k` averaged over them (F-GRPO Eq. 1 with the exact correct mass). The narrowing study reads
the transformer's runs so (:mod:`tailmiss.studies.narrowing.data`), and the shared simulator's runs are stored so
(:mod:`tailmiss.experiments.shared_bridge`), which is why the reduction sits below both.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["TYPES", "KS", "by_type"]

TYPES = ("minority", "rest", "all")
"""The prompt types of the per-type tables: the conflict's minority, the rest, and the whole stratified set."""
KS = (1, 4, 16, 64, 256)
"""The k of the per-type pass@k (exact, from the per-prompt correct mass)."""


def by_type(per_prompt: dict, minority: np.ndarray, ks=KS) -> pd.DataFrame:
    """Per run, evaluation and prompt type (:data:`TYPES`): ``mu_pos`` (held-out pass@1) and exact pass@k,
    :math:`1 - (1 - \\mu_x)^k` averaged over the type's prompts (F-GRPO Eq. 1 with the exact correct mass).

    Parameters
    ----------
    per_prompt : dict
        ``(label, seed) -> (steps (E,), mu_pos (E, P))`` (:func:`tailmiss.experiments.sweep.per_prompt_evals`).
    minority : ndarray of bool, shape (P,)
        Which evaluation prompts are the minority's.

    Returns
    -------
    DataFrame
        One row per run label, seed, evaluation step and type present: ``label, seed, step, type, mu_pos`` and
        ``pass{k}`` for each k of ``ks``.

    Raises
    ------
    ValueError
        When a run's prompts are not the mask's.
    """
    minority = np.asarray(minority, dtype=bool)
    masks = {"minority": minority, "rest": ~minority, "all": np.ones_like(minority)}
    rows = []
    for (label, seed), (steps, mu) in per_prompt.items():
        mu = np.clip(np.asarray(mu, dtype=float), 0.0, 1.0)
        if mu.shape[1] != minority.size:
            raise ValueError(f"{label} seed {seed}: {mu.shape[1]} evaluation prompts, the mask has {minority.size}")
        for kind, mask in masks.items():
            if not mask.any():
                continue
            part = mu[:, mask]
            cols = {f"pass{k}": (1.0 - (1.0 - part) ** k).mean(axis=1) for k in ks}
            frame = pd.DataFrame({"label": label, "seed": int(seed), "step": np.asarray(steps, int), "type": kind})
            rows.append(frame.assign(mu_pos=part.mean(axis=1), **cols))
    return pd.concat(rows, ignore_index=True)
