r"""What the simulator logs: the metric columns, their batched reductions and the tidy history they make.

Every metric is a row reduction of a tile's policy ``p`` (and, for the draw
metrics, its count matrix), accumulated in float64; :func:`simulate
<tailmiss.sim.engine.simulate>` logs them at the steps of
:func:`expected_steps` and ``_tidy`` turns the logged rows into one row
per run and step.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from tailmiss.sim.config import SimConfig

__all__ = ["METRICS", "realised_mass_balance", "expected_steps"]

METRICS = (
    "q_pos",
    "retained_mass",
    "entropy",
    "anchor_prob",
    "frac_correct_improved",
    "worst_drop",
    "q_u_pos",
    "mu_hat",
    "mb_sampled_correct",
    "mb_sampled_incorrect",
    "mb_unsampled",
)
"""Columns logged per run and step. The last five describe the draws taken *at*
that step, so they are NaN at the final step, where no draws follow: ``q_u_pos``
(correct mass left unsampled), ``mu_hat`` (X/N) and the three terms of BroRL's
mass balance (Eq. 17) for those draws, per unit step prefactor, with the
config's rewards (:func:`realised_mass_balance`)."""
_DRAW_METRICS = METRICS[6:]


def expected_steps(config: SimConfig) -> list[int]:
    """The logged steps of ``config``: 0, every ``log_every`` steps, and the last."""
    return sorted(set(range(0, config.steps, config.log_every)) | {config.steps})


def realised_mass_balance(p: torch.Tensor, counts: torch.Tensor, num_correct: int, r_c: float, r_w: float):
    r"""BroRL Eq. 17 terms of each row's realised draws, per unit :math:`\eta/N`.

    Rows of ``p`` are policies whose first ``num_correct`` actions are correct;
    ``counts > 0`` marks the distinct sampled actions. Returns float64 tensors
    ``(sampled_correct, sampled_incorrect, unsampled)``; same formula as
    :func:`tailmiss.analytic.mass_balance`, batched on the device.
    """
    c = num_correct
    pos, neg = slice(0, c), slice(c, None)
    sampled = (counts > 0).to(p.dtype)  # exactly 0 or 1, so every product below is a masked value, exactly
    p2 = p.square()
    p_s = p * sampled
    p2_s = p2 * sampled
    p2_u = p2.sub_(p2_s)  # p^2 on the unsampled actions: x - x = 0 and x - 0 = x exactly
    q_pos = p[:, pos].sum(1, dtype=torch.float64)  # masked sums below accumulate in float64
    q_neg = 1.0 - q_pos

    def part_sum(values, part):
        return values[:, part].sum(1, dtype=torch.float64)

    p_pos, p_neg = part_sum(p_s, pos), part_sum(p_s, neg)
    a2, b2 = part_sum(p2_s, pos), part_sum(p2_s, neg)
    u_pos2, u_neg2 = part_sum(p2_u, pos), part_sum(p2_u, neg)
    s_r = r_c * p_pos + r_w * p_neg
    return (
        (r_c - s_r) * q_neg * a2,
        (s_r - r_w) * q_pos * b2,
        s_r * (q_pos * u_neg2 - q_neg * u_pos2),
    )


class _Metrics:
    """Batched metric reductions against the initial policy, accumulated in float64.

    The reference ``p0`` is the first row of the first policy the loop computes,
    so step 0 compares the policy with itself bit for bit (no rounding noise in
    ``frac_correct_improved`` or ``worst_drop``).
    """

    def __init__(self, config: SimConfig):
        self.c = config.num_correct
        self.has_anchor = config.init == "seeded"
        self.p0_pos: torch.Tensor | None = None

    def __call__(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        pos = p[:, : self.c]
        if self.p0_pos is None:
            self.p0_pos = pos[0].clone()
            self.q0 = self.p0_pos.sum(dtype=torch.float64)
        drop = (self.p0_pos - pos).clamp_(min=0).sum(1, dtype=torch.float64)
        anchor = p[:, 0].to(
            torch.float64, copy=True
        )  # a copy: a column view would keep the whole matrix alive in the log
        return {
            "q_pos": pos.sum(1, dtype=torch.float64),
            "retained_mass": 1.0 - drop / self.q0,
            # terms in the logit dtype, summed in float64 (no float64 copy of the matrix)
            "entropy": -torch.special.xlogy(p, p).sum(1, dtype=torch.float64),
            "anchor_prob": anchor if self.has_anchor else torch.full_like(anchor, float("nan")),
            "frac_correct_improved": (pos > self.p0_pos).to(torch.float64).mean(1),
            "worst_drop": (pos - self.p0_pos).min(1).values.to(torch.float64),
        }


def _cat(tiles: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """One logged row from the tiles' rows (rows in order)."""
    return {name: torch.cat([t[name] for t in tiles]) for name in tiles[0]}


def _tidy(index, runs, log_steps, logged) -> pd.DataFrame:
    num_runs = len(runs)
    cols = {name: torch.stack([row[name] for row in logged]).cpu().numpy() for name in METRICS}  # (T, R)
    steps = np.repeat(np.asarray(log_steps[: len(logged)]), num_runs)
    frame = pd.DataFrame(
        {
            "run": np.tile(np.asarray(index, dtype=np.int64), len(logged)),
            "group_size": np.tile([r[0] for r in runs], len(logged)),
            "gamma": np.tile([float(r[1]) for r in runs], len(logged)),
            "seed": np.tile([r[2] for r in runs], len(logged)),
            "step": steps,
            **{name: cols[name].reshape(-1) for name in METRICS},
        }
    )
    return frame.sort_values(["run", "step"], kind="stable").reset_index(drop=True)
