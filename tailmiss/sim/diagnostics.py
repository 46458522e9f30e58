"""Sampler diagnostics against the closed forms: empirical tail-miss frequency."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from tailmiss import analytic
from tailmiss._device import resolve_device
from tailmiss.sim.config import SimConfig
from tailmiss.sim.engine import initial_policy, row_softmax
from tailmiss.sim.sampler import CountSampler

__all__ = ["empirical_tail_miss"]


def empirical_tail_miss(
    config: SimConfig,
    group_sizes,
    num_groups: int = 4096,
    draw_budget: int = 2**24,
    seed: int = 0,
    device=None,
) -> pd.DataFrame:
    r"""Frequency of active groups that miss a rare-correct leaf, from the simulator's own sampler.

    Draws groups of each size from the *initial* policy of ``config`` (no
    update) with :class:`~tailmiss.sim.sampler.CountSampler` and estimates
    :math:`\Pr(0 < X < N,\ c_\ell = 0)` for a non-anchor correct action
    :math:`\ell` by averaging ``1[active] * (fraction of leaves with zero
    count)`` over groups. Every leaf has the same probability, so this is an
    unbiased estimate of F-GRPO Lemma 3.1 with :math:`\mu_{pos} = Q_{pos}(0)`
    and :math:`\tau = \tau_{leaf}`, with far less variance than following a
    single leaf.

    Parameters
    ----------
    config : SimConfig
        Supplies the action space and the (seeded) initial logits.
    group_sizes : sequence of int
    num_groups : int
        Groups per size, reduced to ``draw_budget // N`` (at least 16) for
        large ``N``.
    draw_budget : int
        Largest number of draws per group size.
    seed : int

    Returns
    -------
    DataFrame
        ``group_size, estimate, stderr, num_groups, analytic``.
    """
    if num_groups < 2:
        raise ValueError(f"num_groups must be at least 2, got {num_groups}")
    if config.init != "seeded":
        raise ValueError(f"empirical_tail_miss needs the seeded init (leaves beside the anchor), got {config.init!r}")
    dev = resolve_device(device)
    v, c = config.num_actions, config.num_correct
    init = initial_policy(config)
    p0 = row_softmax(torch.as_tensor(init.logits, device=dev)[None, :])
    records = []
    for n in group_sizes:
        groups = max(16, min(num_groups, draw_budget // int(n)))
        seeds = [(seed * 1_000_003 + g) % 2**32 for g in range(groups)]
        sampler = CountSampler([n] * groups, seeds, v, dev, config.max_draws_per_chunk)
        action = sampler.indices(p0, step=0)
        x = torch.bincount(sampler.rows, weights=(action < c).to(torch.float64), minlength=groups)
        active = (x > 0) & (x < n)
        leaf = (action >= 1) & (action < c)
        hit = torch.unique(sampler.rows[leaf] * v + action[leaf])  # distinct (group, leaf) pairs
        leaves_hit = torch.bincount(hit // v, minlength=groups).to(torch.float64)
        values = (active.to(torch.float64) * (1.0 - leaves_hit / (c - 1))).cpu().numpy()
        records.append(
            {
                "group_size": int(n),
                "estimate": float(values.mean()),
                "stderr": float(values.std(ddof=1) / np.sqrt(values.size)),
                "num_groups": int(values.size),
                "analytic": float(analytic.tail_miss_probability(init.q_pos, init.tau_leaf, n)),
            }
        )
    return pd.DataFrame.from_records(records)
