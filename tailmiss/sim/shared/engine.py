r"""The batched loop of the shared-parameter simulator, for any :class:`~tailmiss.sim.shared.SharedLaw`.

State: one parameter tensor :math:`W` of shape ``[runs, features, G]`` and one optimizer over it (torch's
optimizers are elementwise, so this equals one optimizer per run). One step, for all runs and prompts:

1. the logits ``z = c + Φ W Ψᵀ`` of every ``(run, prompt)`` row, ``[runs · prompts, actions]`` (one-hot prompt
   features and answers index instead of multiplying);
2. then, a tile of rows at a time, exactly the table simulator's step on those rows
   (:mod:`tailmiss.sim.engine`): the softmax, ``N`` counter-based draws per row
   (:class:`~tailmiss.sim.sampler.CountSampler`), the correct count ``X`` of each row in its prompt's correct set,
   the advantages and the focal weight (:mod:`tailmiss.objectives`), and the surrogate's closed-form gradient in
   the logits;
3. the rows of the prompts the step does not train on set to zero (``prompts_per_step``), the chain rule to the
   parameters, :math:`\nabla_W = \Phi^\top \nabla_z \Psi` (prompts summed), and one optimizer step (ascent) for
   the whole sweep.

Step 2 is the table simulator's arithmetic, row by row, so with one-hot prompt features and no bias each prompt's
trajectory is that of :func:`tailmiss.sim.simulate` with its seed, bit for bit (tested).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tailmiss import objectives
from tailmiss.sim.config import SimConfig
from tailmiss.sim.engine import _make_optimizer, row_softmax
from tailmiss.sim.memory import _tile_rows, _tiles
from tailmiss.sim.metrics import expected_steps
from tailmiss.sim.sampler import CountSampler, NonFiniteProbabilities
from tailmiss.sim.shared.law import SharedLaw

__all__ = ["row_seed", "trained_prompts"]

_SEED_STRIDE = 0x9E3779B9  # an odd constant: prompts of one run get distinct streams, prompt 0 the run's own


def row_seed(seed: int, prompt: int) -> int:
    r"""The draw seed of prompt ``prompt`` in a run of seed ``seed``: :math:`(s + x \cdot \mathtt{0x9E3779B9})
    \bmod 2^{32}`, so prompt 0 draws what a table run (:func:`tailmiss.sim.simulate`) of seed ``seed`` draws."""
    return (int(seed) + int(prompt) * _SEED_STRIDE) % 2**32


_SELECT = 0x5E1EC7  # the stream of the prompts each step trains on (prompts_per_step), apart from the draws'


def _layout(phi: np.ndarray) -> str:
    """``"one-hot"`` (Φ̃ = I), ``"one-hot+bias"`` (Φ̃ = [I, 1]) or ``"dense"``: one-hot features index instead of
    multiplying, so that each prompt's logits are its parameters' values exactly."""
    p = phi.shape[0]
    if np.array_equal(phi, np.eye(p)):
        return "one-hot"
    if phi.shape[1] == p + 1 and np.array_equal(phi, np.concatenate([np.eye(p), np.ones((p, 1))], axis=1)):
        return "one-hot+bias"
    return "dense"


@dataclass
class _Sweep:
    """What every step works on: the runs, the parameters and their optimizer, the rows' sampler and buffers."""

    sim: SimConfig
    law: SharedLaw
    dev: torch.device
    runs: list[tuple[int, float, int]]  # (N, gamma, seed) of each run
    dtype: torch.dtype
    layout: str  # _layout of the prompt features
    phi: torch.Tensor  # [prompts, features] in dtype
    psi: torch.Tensor | None  # [actions, G] in dtype; None: one-hot answers
    offset: torch.Tensor | None  # [prompts, actions] in dtype
    theta: torch.Tensor  # [runs, features, G], the one parameter of the optimizer
    optimizer: torch.optim.Optimizer
    sampler: CountSampler
    tile_plan: list[tuple[int, int, list[int]]]
    surrogate: objectives.Surrogate
    group_size: torch.Tensor  # [rows] float64
    gamma: torch.Tensor  # [rows] float64
    row_prompt: torch.Tensor  # [rows] int64: the prompt of each (run, prompt) row
    row_class: torch.Tensor  # [rows] int64: index into masks
    masks: torch.Tensor  # [classes, actions] bool: the distinct correct sets
    ranges: list[tuple[int, int]] | None  # each class's correct set as (first, end), when every one is a range
    grad: torch.Tensor  # [rows, actions]: the loss's gradient in the logits
    counts: torch.Tensor  # one tile's count matrix
    log_at: set[int]
    p0: torch.Tensor | None = None  # [prompts, actions]: each prompt's starting correct probabilities, 0 elsewhere
    q0: torch.Tensor | None = None  # [prompts] float64


def _classes(correct: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], list[tuple[int, int]] | None]:
    """Each prompt's class (its correct set among the distinct ones, in order of first appearance), the classes'
    masks and, when every class is a run of consecutive actions, their ``(first, end)``."""
    keys, of, masks = {}, [], []
    for row in correct:
        key = row.tobytes()
        if key not in keys:
            keys[key] = len(masks)
            masks.append(row)
        of.append(keys[key])
    ranges = []
    for m in masks:
        idx = np.flatnonzero(m)
        if idx.size == 0 or idx[-1] - idx[0] + 1 != idx.size:
            ranges = None
            break
        ranges.append((int(idx[0]), int(idx[-1]) + 1))
    return np.asarray(of), masks, ranges


def _setup(law: SharedLaw, sim: SimConfig, dev: torch.device) -> _Sweep:
    dtype = getattr(torch, sim.dtype)
    runs, p, v = sim.runs(), law.num_prompts, law.num_actions
    sizes = [n for n, _, _ in runs for _ in range(p)]
    seeds = [row_seed(s, x) for _, _, s in runs for x in range(p)]
    tile_rows = _tile_rows(v) if dev.type == "cpu" else None
    sampler = CountSampler(sizes, seeds, v, dev, sim.max_draws_per_chunk, tile_rows)
    tile_plan = _tiles(sampler.blocks, tile_rows)
    theta = torch.as_tensor(law.weight, device=dev).to(dtype).expand(len(runs), *law.weight.shape).clone()
    theta.requires_grad_(True)
    of, masks, ranges = _classes(law.correct)
    rows = len(sizes)
    count_dtype = dtype if max(sizes) < 2**24 else torch.float64  # counts are exact in float32 below 2^24

    def as_dtype(m: np.ndarray | None) -> torch.Tensor | None:
        return None if m is None else torch.as_tensor(m, device=dev).to(dtype)

    sweep = _Sweep(
        sim=sim,
        law=law,
        dev=dev,
        runs=runs,
        dtype=dtype,
        layout=_layout(law.prompt_features) if law.answer_features is None else "dense",
        phi=as_dtype(law.prompt_features),
        psi=as_dtype(law.answer_features),
        offset=as_dtype(law.offset),
        theta=theta,
        optimizer=_make_optimizer(sim, theta),
        sampler=sampler,
        tile_plan=tile_plan,
        surrogate=objectives.SURROGATES[sim.surrogate],
        group_size=torch.tensor(sizes, dtype=torch.float64, device=dev),
        gamma=torch.tensor([g for _, g, _ in runs for _ in range(p)], dtype=torch.float64, device=dev),
        row_prompt=torch.arange(p, device=dev).repeat(len(runs)),
        row_class=torch.as_tensor(of, device=dev).repeat(len(runs)),
        masks=torch.as_tensor(np.stack(masks), device=dev),
        ranges=ranges,
        grad=torch.zeros((rows, v), dtype=dtype, device=dev),
        counts=torch.empty((max(r1 - r0 for r0, r1, _ in tile_plan), v), dtype=count_dtype, device=dev),
        log_at=set(expected_steps(sim)),
    )
    # each prompt's starting correct probabilities (every run starts alike): the same arithmetic as the loop's
    # first softmax, so that step 0 compares each row with itself exactly
    with torch.no_grad():
        start = row_softmax(_logits(sweep)[:p])
    sweep.p0 = start.masked_fill(~sweep.masks[sweep.row_class[:p]], 0)
    if ranges is not None:
        sweep.q0 = torch.stack([sweep.p0[x, slice(*ranges[of[x]])].sum(dtype=torch.float64) for x in range(p)])
    else:
        sweep.q0 = sweep.p0.sum(1, dtype=torch.float64)
    return sweep


def _logits(sweep: _Sweep) -> torch.Tensor:
    """``z = c + Φ W Ψᵀ`` of every row, ``[runs · prompts, actions]`` (detached)."""
    theta, p = sweep.theta.detach(), sweep.law.num_prompts
    if sweep.layout == "one-hot+bias":
        z = theta[:, :p] + theta[:, p:]
    elif sweep.layout == "one-hot":
        z = theta
    else:
        z = torch.matmul(sweep.phi, theta)  # [P, F] @ [R, F, G] -> [R, P, G]
        if sweep.psi is not None:
            z = torch.matmul(z, sweep.psi.T)  # [R, P, G] @ [G, A] -> [R, P, A]
    if sweep.offset is not None:
        z = z + sweep.offset
    return z.reshape(-1, z.shape[-1])


def _theta_grad(sweep: _Sweep) -> torch.Tensor:
    r"""The chain rule :math:`\nabla_W = \Phi^\top \nabla_z \Psi` (``[runs, features, G]``)."""
    p = sweep.law.num_prompts
    gz = sweep.grad.view(len(sweep.runs), p, -1)
    if sweep.layout == "one-hot+bias":
        return torch.cat([gz, gz.sum(1, keepdim=True)], dim=1)
    if sweep.layout == "one-hot":
        return gz.clone()
    if sweep.psi is not None:
        gz = torch.matmul(gz, sweep.psi)  # [R, P, A] @ [A, G] -> [R, P, G]
    return torch.matmul(sweep.phi.T, gz)  # [F, P] @ [R, P, G] -> [R, F, G]


def trained_prompts(seed: int, step: int, num_prompts: int, per_step: int) -> np.ndarray:
    """The prompts (sorted indices) that step ``step`` of a run of seed ``seed`` trains on, ``per_step`` of
    ``num_prompts`` drawn uniformly without replacement (:attr:`~tailmiss.sim.shared.SharedLaw.prompts_per_step`);
    the focal exponents and group sizes of one seed share them."""
    return np.sort(np.random.default_rng([int(seed), int(step), _SELECT]).permutation(num_prompts)[:per_step])


def _active(sweep: _Sweep, step: int) -> torch.Tensor | None:
    """``[rows]`` bool: the prompts step ``step`` trains on, per run (None: every prompt)."""
    b, p = sweep.law.prompts_per_step, sweep.law.num_prompts
    if b is None or b == p:
        return None
    chosen = {s: trained_prompts(s, step, p, b) for s in {s for _, _, s in sweep.runs}}
    active = np.zeros((len(sweep.runs), p), dtype=bool)
    for r, (_, _, s) in enumerate(sweep.runs):
        active[r, chosen[s]] = True
    return torch.as_tensor(active.reshape(-1), device=sweep.dev)


def _step(sweep: _Sweep, step: int) -> dict[str, torch.Tensor] | None:
    """Step ``step`` of every run, a tile of rows at a time, then one optimizer step; the logged row if due."""
    log = step in sweep.log_at
    tiles = []
    with torch.no_grad():
        z = _logits(sweep)
        uniforms = sweep.sampler.uniforms(step)
        try:
            for r0, r1, members in sweep.tile_plan:
                draws = ((i, next(uniforms)) for i in members)
                tiles.append(_step_tile(sweep, z, r0, r1, draws, log))
        except NonFiniteProbabilities as exc:
            run, prompt = divmod(exc.row, sweep.law.num_prompts)
            n, g, s = sweep.runs[run]
            raise ValueError(
                f"run {run} (N={n}, gamma={g:g}, seed={s}) diverged on prompt {prompt} by step {step}: its logits are "
                f"no longer finite; lower lr (now {sweep.sim.lr:g})"
            ) from None
        active = _active(sweep, step)
        if active is not None:
            sweep.grad[~active] = 0
        sweep.theta.grad = _theta_grad(sweep)
    sweep.optimizer.step()
    if not log:
        return None
    row = {name: torch.cat([t[name] for t in tiles]) for name in tiles[0]}
    if active is not None:
        row["mu_hat"] = row["mu_hat"].masked_fill(~active, float("nan"))
    return row


def _step_tile(sweep: _Sweep, z: torch.Tensor, r0: int, r1: int, draws, log: bool) -> dict[str, torch.Tensor]:
    """The table simulator's step on rows ``r0:r1`` (each against its prompt's correct set): draws, logged metrics
    (if ``log``), and the surrogate's gradient into the rows of ``sweep.grad``."""
    sim, sampler, dtype = sweep.sim, sweep.sampler, sweep.dtype
    p = row_softmax(z[r0:r1])
    counts = sweep.counts[: r1 - r0]
    mask = sweep.masks[sweep.row_class[r0:r1]]  # [rows, actions]: each row's correct set
    tile_cdf = sampler.cdf(p, r0)
    for i, u in draws:
        block = sampler.blocks[i]
        part = slice(block.r0 - r0, block.r1 - r0)
        sampler.sample_block(i, p[part], u, counts.dtype, out=counts[part], cdf=tuple(x[part] for x in tile_cdf))
    n_correct = counts.masked_fill(~mask, 0).sum(1, dtype=torch.float64)  # whole numbers: exact in any order
    row = _metrics(sweep, p, r0, r1, n_correct) if log else {}
    group_size, gamma = sweep.group_size[r0:r1], sweep.gamma[r0:r1]
    a_pos, a_neg = objectives.binary_group_advantages(
        n_correct, group_size, sim.reward_correct, sim.reward_incorrect, sim.advantage, sim.std_kind, sim.adv_eps
    )
    # the surrogates are linear in the weights, so -g/N (optimizers minimise) folds into them
    scale = -objectives.focal_weight(n_correct, group_size, gamma) / group_size
    weights = (counts > 0).to(dtype) if sweep.surrogate.distinct else counts.to(dtype)  # in place of the counts
    weights *= torch.where(mask, (a_pos * scale).to(dtype)[:, None], (a_neg * scale).to(dtype)[:, None])
    sweep.surrogate.ascent(p, weights, out=sweep.grad[r0:r1])
    return row


def _metrics(sweep: _Sweep, p: torch.Tensor, r0: int, r1: int, n_correct) -> dict[str, torch.Tensor]:
    """Each row's correct mass, retained mass (F-GRPO Eq. 26, against its prompt's start), entropy and X/N
    (NaN where no draws follow), accumulated in float64.

    When every correct set is a range of actions the sums run over it as a slice, as the table simulator's over its
    first ``num_correct``, so that they round alike; otherwise over the masked row.
    """
    prompt = sweep.row_prompt[r0:r1]
    if sweep.ranges is None:
        pos = p.masked_fill(~sweep.masks[sweep.row_class[r0:r1]], 0)
        q_pos = pos.sum(1, dtype=torch.float64)
        drop = (sweep.p0[prompt] - pos).clamp_(min=0).sum(1, dtype=torch.float64)
    else:
        q_pos = torch.empty(r1 - r0, dtype=torch.float64, device=p.device)
        drop = torch.empty_like(q_pos)
        row_class = sweep.row_class[r0:r1]
        for t, (lo, hi) in enumerate(sweep.ranges):
            rows = row_class == t
            if not bool(rows.any()):
                continue
            every = bool(rows.all())
            pos = p[:, lo:hi] if every else p[rows, lo:hi]
            start = sweep.p0[prompt if every else prompt[rows], lo:hi]
            q_pos[rows] = pos.sum(1, dtype=torch.float64)
            drop[rows] = (start - pos).clamp_(min=0).sum(1, dtype=torch.float64)
    mu_hat = torch.full((r1 - r0,), float("nan"), dtype=torch.float64, device=p.device)
    if n_correct is not None:
        mu_hat = n_correct / sweep.group_size[r0:r1]
    return {
        "q_pos": q_pos,
        "retained_mass": 1.0 - drop / sweep.q0[prompt],
        "entropy": -torch.special.xlogy(p, p).sum(1, dtype=torch.float64),
        "mu_hat": mu_hat,
    }


def _start_mass(sweep: _Sweep) -> dict[str, float]:
    """The mean starting correct mass of each prompt type, in order of first appearance."""
    types = sweep.law.prompt_types
    return {
        kind: float(np.mean([float(sweep.q0[x]) for x, t in enumerate(types) if t == kind]))
        for kind in dict.fromkeys(types)
    }
