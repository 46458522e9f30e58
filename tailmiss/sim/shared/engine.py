r"""The batched loop of the shared-parameter simulator.

State: one parameter tensor :math:`\Theta` of shape ``[runs, features, actions]`` and one optimizer over it (torch's
optimizers are elementwise, so this equals one optimizer per run). One step, for all runs and prompts:

1. the logits ``z = Φ̃ Θ`` of every ``(run, prompt)`` row, ``[runs · prompts, actions]``;
2. then, a tile of rows at a time, exactly the table simulator's step on those rows
   (:mod:`tailmiss.sim.engine`): the softmax, ``N`` counter-based draws per row
   (:class:`~tailmiss.sim.sampler.CountSampler`), the correct count ``X`` of each row in its prompt's correct set,
   the advantages and the focal weight (:mod:`tailmiss.objectives`), and the surrogate's closed-form gradient in
   the logits;
3. the chain rule to the parameters, :math:`\nabla_\Theta = \tilde\Phi^\top \nabla_z` (prompts summed), and one
   optimizer step (ascent) for the whole sweep.

Step 2 is the table simulator's arithmetic, row by row, so with one-hot prompt features and no bias each prompt's
trajectory is that of :func:`tailmiss.sim.simulate` with its seed, bit for bit (tested).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from scipy import special

from tailmiss import objectives
from tailmiss._device import resolve_device
from tailmiss.sim.engine import _make_optimizer, initial_logits, row_softmax
from tailmiss.sim.memory import _tile_rows, _tiles
from tailmiss.sim.metrics import expected_steps
from tailmiss.sim.sampler import CountSampler, NonFiniteProbabilities
from tailmiss.sim.shared.config import PROMPT_TYPES, SharedSimConfig, prompt_features
from tailmiss.sim.shared.result import SharedSimResult, tidy_history

__all__ = ["simulate_shared", "starting_point", "row_seed"]

_SEED_STRIDE = 0x9E3779B9  # an odd constant: prompts of one run get distinct streams, prompt 0 the run's own


def row_seed(seed: int, prompt: int) -> int:
    r"""The draw seed of prompt ``prompt`` in a run of seed ``seed``: :math:`(s + x \cdot \mathtt{0x9E3779B9})
    \bmod 2^{32}`, so prompt 0 draws what a table run (:func:`tailmiss.sim.simulate`) of seed ``seed`` draws."""
    return (int(seed) + int(prompt) * _SEED_STRIDE) % 2**32


def starting_point(config: SharedSimConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""``(theta0, target, fit_kl)``: the starting parameters ``[features, actions]``, the prompts' intended starting
    logits ``[prompts, actions]`` and the KL divergence :math:`\mathrm{KL}(\pi_x \,\|\, \hat\pi_x)` of each
    prompt's fitted start from its intended one (float64).

    A rest prompt's intended start is the simulator's starting policy (:func:`tailmiss.sim.initial_logits`); a
    minority prompt's is the same with the blocks of the two correct sets swapped. With one-hot prompt features
    :math:`\Theta_0` holds each prompt's logits in its row (and 0 in the bias row): exact, KL 0. Otherwise it is the
    least-squares solution of :math:`\tilde\Phi \Theta_0 = Z_0 - \bar Z_0` (logits centred per prompt, softmax being
    blind to a shift).
    """
    base = initial_logits(config.sim)
    c = config.sim.num_correct
    minority = base.copy()
    minority[: 2 * c] = np.concatenate([base[c : 2 * c], base[:c]]) if config.minority_prompts else base[: 2 * c]
    target = np.stack([base if t == "rest" else minority for t in config.prompt_types()])
    phi = prompt_features(config)
    if config.prompt_features == "one-hot":
        theta0 = target.copy()
        if config.train_bias:
            theta0 = np.concatenate([theta0, np.zeros((1, target.shape[1]))])
    else:
        centred = target - target.mean(1, keepdims=True)
        theta0 = np.linalg.lstsq(phi, centred, rcond=None)[0]
    fitted = phi @ theta0
    logp, logq = special.log_softmax(target, axis=1), special.log_softmax(fitted, axis=1)
    fit_kl = np.maximum((np.exp(logp) * (logp - logq)).sum(1), 0.0)
    return theta0, target, fit_kl


@dataclass
class _Sweep:
    """What every step works on: the runs, the parameters and their optimizer, the rows' sampler and buffers."""

    config: SharedSimConfig
    dev: torch.device
    runs: list[tuple[int, float, int]]  # (N, gamma, seed) of each run
    dtype: torch.dtype
    phi: torch.Tensor  # [prompts, features] in dtype
    theta: torch.Tensor  # [runs, features, actions], the one parameter of the optimizer
    optimizer: torch.optim.Optimizer
    sampler: CountSampler
    tile_plan: list[tuple[int, int, list[int]]]
    surrogate: objectives.Surrogate
    group_size: torch.Tensor  # [rows] float64
    gamma: torch.Tensor  # [rows] float64
    row_prompt: torch.Tensor  # [rows] int64: the prompt of each (run, prompt) row
    row_type: torch.Tensor  # [rows] int64: index into PROMPT_TYPES
    masks: torch.Tensor  # [types, actions] bool: each type's correct set
    grad: torch.Tensor  # [rows, actions]: the loss's gradient in the logits
    counts: torch.Tensor  # one tile's count matrix
    log_at: set[int]
    p0: torch.Tensor | None = None  # [prompts, actions]: each prompt's starting correct probabilities, 0 elsewhere
    q0: torch.Tensor | None = None  # [prompts] float64
    fit_kl: np.ndarray | None = None  # [prompts]: KL of each prompt's fitted start from its intended one


def _setup(config: SharedSimConfig, dev: torch.device) -> _Sweep:
    sim = config.sim
    dtype = getattr(torch, sim.dtype)
    runs, p, v = sim.runs(), config.num_prompts, sim.num_actions
    sizes = [n for n, _, _ in runs for _ in range(p)]
    seeds = [row_seed(s, x) for _, _, s in runs for x in range(p)]
    tile_rows = _tile_rows(v) if dev.type == "cpu" else None
    sampler = CountSampler(sizes, seeds, v, dev, sim.max_draws_per_chunk, tile_rows)
    tile_plan = _tiles(sampler.blocks, tile_rows)
    theta0, _, fit_kl = starting_point(config)
    theta = torch.as_tensor(theta0, device=dev).to(dtype).expand(len(runs), *theta0.shape).clone()
    theta.requires_grad_(True)
    types = [PROMPT_TYPES.index(t) for t in config.prompt_types()]
    masks = torch.zeros((len(PROMPT_TYPES), v), dtype=torch.bool, device=dev)
    for i, kind in enumerate(PROMPT_TYPES):
        lo, hi = config.correct_range(kind)
        masks[i, lo:hi] = True
    rows = len(sizes)
    count_dtype = dtype if max(sizes) < 2**24 else torch.float64  # counts are exact in float32 below 2^24
    sweep = _Sweep(
        config=config,
        dev=dev,
        runs=runs,
        dtype=dtype,
        phi=torch.as_tensor(prompt_features(config), device=dev).to(dtype),
        theta=theta,
        optimizer=_make_optimizer(sim, theta),
        sampler=sampler,
        tile_plan=tile_plan,
        surrogate=objectives.SURROGATES[sim.surrogate],
        group_size=torch.tensor(sizes, dtype=torch.float64, device=dev),
        gamma=torch.tensor([g for _, g, _ in runs for _ in range(p)], dtype=torch.float64, device=dev),
        row_prompt=torch.arange(p, device=dev).repeat(len(runs)),
        row_type=torch.tensor(types, device=dev).repeat(len(runs)),
        masks=masks,
        grad=torch.zeros((rows, v), dtype=dtype, device=dev),
        counts=torch.empty((max(r1 - r0 for r0, r1, _ in tile_plan), v), dtype=count_dtype, device=dev),
        log_at=set(expected_steps(sim)),
        fit_kl=fit_kl,
    )
    # each prompt's starting correct probabilities (every run starts alike): the same arithmetic as the loop's
    # first softmax, so that step 0 compares each row with itself exactly
    with torch.no_grad():
        start = row_softmax(_logits(sweep)[:p])
    sweep.p0 = start.masked_fill(~masks[sweep.row_type[:p]], 0)
    sweep.q0 = torch.stack(
        [
            sweep.p0[x, slice(*config.correct_range(kind))].sum(dtype=torch.float64)
            for x, kind in enumerate(config.prompt_types())
        ]
    )
    return sweep


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
    sweep = _setup(config, resolve_device(device))
    steps = config.sim.steps
    logged: list[dict[str, torch.Tensor]] = []
    bar = None
    if progress:
        from tailmiss.options import ProgressBar

        bar = ProgressBar(
            total=steps,
            description=f"{config.name}: {len(sweep.runs)} runs x {config.num_prompts} prompts on {sweep.dev}",
        )
    started = time.perf_counter()
    try:
        for step in range(steps):
            row = _step(sweep, step)
            if row is not None:
                logged.append(row)
            if bar is not None:
                bar.update(1)
        with torch.no_grad():
            z = _logits(sweep)
            probs = row_softmax(z)
            final = _metrics(sweep, probs, 0, probs.shape[0], None)
            logged.append(final)
            final_probs = probs.to(torch.float64).reshape(len(sweep.runs), config.num_prompts, -1).cpu().numpy()
    finally:
        if bar is not None:
            bar.close()
    elapsed = time.perf_counter() - started
    rows = len(sweep.runs) * config.num_prompts
    meta = {
        "device": str(sweep.dev),
        "torch": torch.__version__,
        "elapsed_s": round(elapsed, 3),
        "action_updates_per_s": rows * config.sim.num_actions * steps / max(elapsed, 1e-9),
        "initial": {
            "fit_kl_max": float(sweep.fit_kl.max()),
            **{f"q_pos_{kind}": float(q) for kind, q in _start_mass(sweep).items()},
        },
    }
    history = tidy_history(config, expected_steps(config.sim), logged)
    return SharedSimResult(config=config, history=history, meta=meta, final_probs=final_probs if keep_final else None)


def _logits(sweep: _Sweep) -> torch.Tensor:
    """``z = Φ̃ Θ`` of every row, ``[runs · prompts, actions]`` (detached); one-hot features index instead of
    multiplying, so that each prompt's logits are its parameters' values exactly."""
    theta, config = sweep.theta.detach(), sweep.config
    p = config.num_prompts
    if config.prompt_features == "one-hot":
        z = theta[:, :p] + theta[:, p:] if config.train_bias else theta
    else:
        z = torch.matmul(sweep.phi, theta)  # [P, F] @ [R, F, V] -> [R, P, V]
    return z.reshape(-1, z.shape[-1])


def _theta_grad(sweep: _Sweep) -> torch.Tensor:
    r"""The chain rule :math:`\nabla_\Theta = \tilde\Phi^\top \nabla_z` (``[runs, features, actions]``)."""
    config = sweep.config
    p = config.num_prompts
    gz = sweep.grad.view(len(sweep.runs), p, -1)
    if config.prompt_features == "one-hot":
        return torch.cat([gz, gz.sum(1, keepdim=True)], dim=1) if config.train_bias else gz.clone()
    return torch.matmul(sweep.phi.T, gz)  # [F, P] @ [R, P, V] -> [R, F, V]


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
            run, prompt = divmod(exc.row, sweep.config.num_prompts)
            n, g, s = sweep.runs[run]
            raise ValueError(
                f"run {run} (N={n}, gamma={g:g}, seed={s}) diverged on prompt {prompt} by step {step}: its logits are "
                f"no longer finite; lower lr (now {sweep.config.sim.lr:g})"
            ) from None
        sweep.theta.grad = _theta_grad(sweep)
    sweep.optimizer.step()
    return {name: torch.cat([t[name] for t in tiles]) for name in tiles[0]} if log else None


def _step_tile(sweep: _Sweep, z: torch.Tensor, r0: int, r1: int, draws, log: bool) -> dict[str, torch.Tensor]:
    """The table simulator's step on rows ``r0:r1`` (each against its prompt's correct set): draws, logged metrics
    (if ``log``), and the surrogate's gradient into the rows of ``sweep.grad``."""
    sim, sampler, dtype = sweep.config.sim, sweep.sampler, sweep.dtype
    p = row_softmax(z[r0:r1])
    counts = sweep.counts[: r1 - r0]
    mask = sweep.masks[sweep.row_type[r0:r1]]  # [rows, actions]: each row's correct set
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

    The sums run over each type's correct actions as a slice, as the table simulator's over its first
    ``num_correct``, so that they round alike.
    """
    q_pos = torch.empty(r1 - r0, dtype=torch.float64, device=p.device)
    drop = torch.empty_like(q_pos)
    row_type, prompt = sweep.row_type[r0:r1], sweep.row_prompt[r0:r1]
    for t, kind in enumerate(PROMPT_TYPES):
        lo, hi = sweep.config.correct_range(kind)
        rows = row_type == t
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
    """The mean starting correct mass of each prompt type present."""
    types = sweep.config.prompt_types()
    return {
        kind: float(np.mean([float(sweep.q0[x]) for x, t in enumerate(types) if t == kind]))
        for kind in PROMPT_TYPES
        if kind in types
    }
