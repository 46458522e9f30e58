r"""The batched categorical-policy simulation loop.

State: logits ``z`` of shape ``[runs, actions]`` on one device, one optimizer
over that single tensor (torch's SGD/Adam/AdamW are elementwise, so this equals
one optimizer per run). One step, for all runs, a tile of consecutive rows at a
time (on the CPU at most :data:`~tailmiss.sim.memory.TILE_ELEMENTS` actions per tile, so that the
tile's matrices stay in cache; elsewhere all runs of one group size):

1. ``p = softmax(z)`` of the tile (float64 accumulation for the CDF and metric sums); log metrics if due;
2. draw ``N_r`` actions per run (:class:`~tailmiss.sim.sampler.CountSampler`) straight into a
   count matrix of the logit dtype, reused by every tile and step;
3. per-run advantages of a correct and an incorrect draw and the focal weight
   from the correct count ``X`` (:mod:`tailmiss.objectives`);
4. per-action weights ``w_i = c_i A(i)`` (scaled in place in the count matrix;
   the distinct-action rewards for the ``theory`` surrogate) and the
   surrogate's closed-form gradient, times ``g / N``, into the tile's rows of
   the gradient;

then one optimizer step (ascent) for the whole sweep. Every operation of a
tile works row by row, so tiles change no number (tested bit for bit).

The logged metrics live in :mod:`tailmiss.sim.metrics`, the tiles and the
memory estimate in :mod:`tailmiss.sim.memory`, the snapshots a run resumes from
in :mod:`tailmiss.sim.snapshot`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from scipy import special

from tailmiss import analytic, objectives
from tailmiss._device import resolve_device
from tailmiss.sim.config import SimConfig, _select_runs
from tailmiss.sim.memory import _check_fits, _tile_rows, _tiles
from tailmiss.sim.metrics import _DRAW_METRICS, _cat, _Metrics, _tidy, expected_steps, realised_mass_balance
from tailmiss.sim.result import SimResult
from tailmiss.sim.sampler import CountSampler, NonFiniteProbabilities
from tailmiss.sim.snapshot import _Checkpoint

__all__ = ["simulate", "initial_logits"]


def initial_logits(config: SimConfig) -> np.ndarray:
    """Logits of the starting policy (float64, length ``num_actions``)."""
    return initial_policy(config).logits


def initial_policy(config: SimConfig) -> analytic.InitialDistribution:
    """The starting policy of ``config`` as :func:`tailmiss.analytic.initial_distribution` builds it."""
    if config.init == "logits":
        z = np.asarray(config.logits, dtype=np.float64)
        correct = np.arange(config.num_actions) < config.num_correct
        return analytic.InitialDistribution(special.softmax(z), correct, None, z)
    return analytic.initial_distribution(
        config.num_actions,
        config.num_correct,
        config.init,
        config.anchor_logit,
        config.correct_logit,
        config.incorrect_logit,
    )


def _make_optimizer(config: SimConfig, params: torch.Tensor) -> torch.optim.Optimizer:
    if config.optimizer == "sgd":
        cls, kwargs = torch.optim.SGD, {"lr": config.lr, "weight_decay": config.weight_decay}
    else:
        cls = torch.optim.Adam if config.optimizer == "adam" else torch.optim.AdamW
        kwargs = {"lr": config.lr, "betas": config.betas, "eps": config.eps, "weight_decay": config.weight_decay}
    try:  # the fused kernels make one pass over the state instead of several
        return cls([params], fused=True, **kwargs)
    except (RuntimeError, TypeError, ValueError):
        return cls([params], **kwargs)


def simulate(
    config: SimConfig,
    device=None,
    progress: bool = True,
    keep_final: bool = False,
    runs=None,
    checkpoint=None,
    checkpoint_every: int | None = None,
    checkpoint_every_s: float | None = 60.0,
    log=None,
) -> SimResult:
    """Run every ``(group_size, gamma, seed)`` of ``config`` together as one tensor.

    Parameters
    ----------
    config : SimConfig
    device : str or torch.device, optional
        Defaults to CUDA when available, else CPU.
    progress : bool
        Show a progress bar over steps.
    keep_final : bool
        Also return every run's final policy (``SimResult.final_probs``,
        float64 ``[runs, actions]``; not saved with the result).
    runs : sequence of int, optional
        Simulate only these runs (indices into ``config.runs()``); the history
        keeps their global ``run`` index. Each run's draws depend on its own
        ``(N, seed)`` and the step only, so a run's history is the same alone,
        in a shard or in the whole sweep (bit for bit on the CPU with one
        intra-op thread, which is what ``torchrun`` sets).
    checkpoint : path, optional
        Snapshot file: resume from it when it holds a snapshot of the same
        config, runs, device type and code, and rewrite it atomically every
        ``checkpoint_every`` steps and/or ``checkpoint_every_s`` seconds. The
        caller removes it once the result is saved.
    log : callable, optional
        Receives one line when a snapshot is resumed.

    Returns
    -------
    SimResult
        Tidy history (one row per run and logged step) plus the config.
    """
    _check_arguments(config, checkpoint_every)
    sweep = _setup(config, resolve_device(device), runs)
    logged, start, before = [], 0, 0.0
    snap = None
    if checkpoint is not None:
        snap = _Checkpoint(checkpoint, config, sweep.index, sweep.dev, checkpoint_every, checkpoint_every_s)
        logged, start, before = snap.resume(sweep.z, sweep.optimizer, sweep.metrics, log)
    _allocate_step_buffers(sweep)
    started = time.perf_counter()
    bar = _progress(config, sweep.dev, len(sweep.runs), start) if progress else None
    try:
        for step in range(start, config.steps):
            row = _step(sweep, step)
            if row is not None:
                logged.append(row)
            if snap is not None and snap.due(step + 1, config.steps):
                elapsed = before + time.perf_counter() - started
                snap.save_step(step + 1, sweep.z, sweep.optimizer, logged, sweep.metrics, elapsed)
            if bar is not None:
                bar.update(1)
        row, final_probs = _final_row(sweep, keep_final)
        logged.append(row)
    finally:
        if bar is not None:
            bar.close()
    return _result(sweep, logged, before + time.perf_counter() - started, start, final_probs)


def _check_arguments(config, checkpoint_every) -> None:
    if not isinstance(config, SimConfig):
        raise ValueError(f"config must be a SimConfig, got {type(config).__name__}")
    if checkpoint_every is not None and (
        not isinstance(checkpoint_every, int) or isinstance(checkpoint_every, bool) or checkpoint_every < 1
    ):
        raise ValueError(f"checkpoint_every must be a positive integer, got {checkpoint_every!r}")


@dataclass
class _Sweep:
    """What every step of a simulation works on: the selected runs, their logits, optimizer, sampler and tiles."""

    config: SimConfig
    dev: torch.device
    index: list[int]  # global run indices of the rows
    runs: list[tuple[int, float, int]]  # (N, gamma, seed) of the rows
    dtype: torch.dtype  # of the logits
    group_size: torch.Tensor  # [runs] float64
    gamma: torch.Tensor  # [runs] float64
    sampler: CountSampler
    tile_plan: list[tuple[int, int, list[int]]]  # (r0, r1, sampler blocks) of each tile
    surrogate: objectives.Surrogate
    z: torch.Tensor  # [runs, actions] logits, the one parameter of the optimizer
    optimizer: torch.optim.Optimizer
    metrics: _Metrics
    log_steps: list[int]
    log_at: set[int]
    grad: torch.Tensor | None = None  # [runs, actions]
    counts: torch.Tensor | None = None  # one tile's count matrix, reused by every tile and step


def _setup(config: SimConfig, dev: torch.device, runs) -> _Sweep:
    """The selected runs' starting logits, optimizer, sampler and tile plan, once the sweep is known to fit ``dev``."""
    index, runs = _select_runs(config, runs)
    _check_fits(config, dev, index)
    dtype = getattr(torch, config.dtype)
    num_runs, v = len(runs), config.num_actions
    n_list = [r[0] for r in runs]
    group_size = torch.tensor(n_list, dtype=torch.float64, device=dev)
    gamma = torch.tensor([r[1] for r in runs], dtype=torch.float64, device=dev)
    tile_rows = _tile_rows(v) if dev.type == "cpu" else None
    sampler = CountSampler(n_list, [r[2] for r in runs], v, dev, config.max_draws_per_chunk, tile_rows)
    tile_plan = _tiles(sampler.blocks, tile_rows)
    surrogate = objectives.SURROGATES[config.surrogate]

    z0 = torch.as_tensor(initial_logits(config), device=dev)
    z = z0.to(dtype).expand(num_runs, v).clone().requires_grad_(True)
    optimizer = _make_optimizer(config, z)
    metrics = _Metrics(config)
    log_steps = expected_steps(config)
    return _Sweep(
        config=config,
        dev=dev,
        index=index,
        runs=runs,
        dtype=dtype,
        group_size=group_size,
        gamma=gamma,
        sampler=sampler,
        tile_plan=tile_plan,
        surrogate=surrogate,
        z=z,
        optimizer=optimizer,
        metrics=metrics,
        log_steps=log_steps,
        log_at=set(log_steps),
    )


def _allocate_step_buffers(sweep: _Sweep) -> None:
    """The gradient and the tile's count matrix (after a resume, whose logits pass through the device first)."""
    # counts are exact in float32 below 2^24 draws per row; beyond that they are kept in float64
    count_dtype = sweep.dtype if max(r[0] for r in sweep.runs) < 2**24 else torch.float64
    sweep.grad = torch.zeros_like(sweep.z, requires_grad=False)
    rows = max(r1 - r0 for r0, r1, _ in sweep.tile_plan)
    sweep.counts = torch.empty((rows, sweep.config.num_actions), dtype=count_dtype, device=sweep.dev)


def _step(sweep: _Sweep, step: int) -> dict[str, torch.Tensor] | None:
    """Step ``step`` of every run, a tile at a time, then one optimizer step; the logged row if ``step`` is logged."""
    log = step in sweep.log_at
    row = None
    with torch.no_grad():
        tiles = []
        uniforms = sweep.sampler.uniforms(step)  # block by block, used before the next is asked for
        try:
            for r0, r1, members in sweep.tile_plan:
                draws = ((i, next(uniforms)) for i in members)
                tiles.append(_step_tile(sweep, r0, r1, draws, log))
        except NonFiniteProbabilities as exc:
            n, g, s = sweep.runs[exc.row]
            raise ValueError(
                f"run {sweep.index[exc.row]} (N={n}, gamma={g:g}, seed={s}) diverged by step {step}: its logits are "
                f"no longer finite; lower lr (now {sweep.config.lr:g})"
            ) from None
        if log:
            row = _cat(tiles)
        sweep.z.grad = sweep.grad
    sweep.optimizer.step()
    return row


def _final_row(sweep: _Sweep, keep_final: bool) -> tuple[dict[str, torch.Tensor], np.ndarray | None]:
    """The logged row of the last step (its draw metrics NaN: no draws follow) and, if kept, every final policy."""
    final_probs = None
    with torch.no_grad():
        if keep_final:
            final_probs = row_softmax(sweep.z.detach()).to(torch.float64).cpu().numpy()
        row = _cat([sweep.metrics(row_softmax(sweep.z.detach()[r0:r1])) for r0, r1, _ in sweep.tile_plan])
        row.update({name: torch.full_like(row["q_pos"], float("nan")) for name in _DRAW_METRICS})
    return row, final_probs


def _result(sweep: _Sweep, logged, elapsed: float, start: int, final_probs) -> SimResult:
    config, num_runs = sweep.config, len(sweep.runs)
    history = _tidy(sweep.index, sweep.runs, sweep.log_steps, logged)
    meta = {
        "device": str(sweep.dev),
        "torch": torch.__version__,
        "elapsed_s": round(elapsed, 3),
        "action_updates_per_s": num_runs * config.num_actions * config.steps / max(elapsed, 1e-9),
        "initial": _initial_summary(config),
    }
    if start:
        meta["resumed_from_step"] = start
    return SimResult(config=config, history=history, meta=meta, final_probs=final_probs)


def _step_tile(sweep: _Sweep, r0: int, r1: int, draws, log: bool) -> dict[str, torch.Tensor]:
    """One step of the tile of rows ``r0:r1``: draws, logged metrics (if ``log``), the gradient into its rows.

    ``draws`` yields ``(sampler block index, its uniforms)`` for the tile's
    blocks. Every operation works on the tile's rows alone (softmax, row sums,
    draws), so a tile's numbers are those of the whole matrix; small tiles keep
    the step's matrices in cache and its temporaries small. Raises
    :class:`~tailmiss.sim.sampler.NonFiniteProbabilities` for a diverged row.
    """
    config, sampler, dtype = sweep.config, sweep.sampler, sweep.dtype
    surrogate, metrics = sweep.surrogate, sweep.metrics
    rows = slice(r0, r1)
    z, counts, grad = sweep.z.detach()[rows], sweep.counts[: r1 - r0], sweep.grad[rows]
    group_size, gamma = sweep.group_size[rows], sweep.gamma[rows]
    c = config.num_correct
    p = row_softmax(z)  # in the logit dtype; the CDF and all metric sums accumulate in float64
    n_correct = torch.empty(p.shape[0], dtype=torch.float64, device=p.device)
    tile_cdf = sampler.cdf(p, r0)  # one pass of the thread pool for the whole tile
    for i, u in draws:
        block = sampler.blocks[i]
        part = slice(block.r0 - r0, block.r1 - r0)
        _, n_correct[part] = sampler.sample_block(
            i, p[part], u, counts.dtype, c, out=counts[part], cdf=tuple(x[part] for x in tile_cdf)
        )
    row = {}
    if log:
        row = metrics(p)
        row["q_u_pos"] = (p[:, :c] * (counts[:, :c] == 0)).sum(1, dtype=torch.float64)
        row["mu_hat"] = n_correct / group_size
        terms = realised_mass_balance(p, counts, c, config.reward_correct, config.reward_incorrect)
        row.update(zip(("mb_sampled_correct", "mb_sampled_incorrect", "mb_unsampled"), terms))
    a_pos, a_neg = objectives.binary_group_advantages(
        n_correct,
        group_size,
        config.reward_correct,
        config.reward_incorrect,
        config.advantage,
        config.std_kind,
        config.adv_eps,
    )
    # the surrogates are linear in the weights, so -g/N (optimizers minimise) folds into them
    scale = -objectives.focal_weight(n_correct, group_size, gamma) / group_size
    # the count buffer becomes the weights in place (metrics above have read it)
    weights = (counts > 0).to(dtype) if surrogate.distinct else counts.to(dtype)
    weights[:, :c] *= (a_pos * scale).to(dtype)[:, None]
    weights[:, c:] *= (a_neg * scale).to(dtype)[:, None]
    surrogate.ascent(p, weights, out=grad)
    return row


def row_softmax(z: torch.Tensor) -> torch.Tensor:
    """Softmax of each row in ``z``'s dtype, normalised by a float64 sum.

    torch's float32 CPU softmax accumulates its normaliser in float32: on AVX2
    machines a row of 131,072 logits (the seeded init) lost 3.6e-4 of its mass,
    which shifted the logged Q_pos by 2e-4. Exponentials stay in ``z``'s dtype.
    """
    if z.dtype == torch.float64:  # torch's own kernel is exact to float64 rounding there
        return torch.softmax(z, dim=1)
    e = torch.exp(z - z.amax(dim=1, keepdim=True))
    return e / e.sum(dim=1, keepdim=True, dtype=torch.float64).to(e.dtype)


def _initial_summary(config: SimConfig) -> dict:
    init = initial_policy(config)
    return {"q_pos": init.q_pos, "tau_leaf": init.tau_leaf, "p_anchor": init.p_anchor, "entropy": init.entropy}


def _progress(config: SimConfig, dev: torch.device, num_runs: int, done: int = 0):
    from tailmiss.options import ProgressBar

    bar = ProgressBar(total=config.steps, description=f"{config.name}: {num_runs} runs on {dev}")
    if done:
        bar.update(done)
    return bar
