r"""The batched categorical-policy simulation loop.

State: logits ``z`` of shape ``[runs, actions]`` on one device, one optimizer
over that single tensor (torch's SGD/Adam/AdamW are elementwise, so this equals
one optimizer per run). One step, for all runs, a tile of consecutive rows at a
time (on the CPU at most :data:`TILE_ELEMENTS` actions per tile, so that the
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
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch
from scipy import special

from tailmiss import analytic, objectives
from tailmiss._device import resolve_device
from tailmiss.sim.config import SimConfig
from tailmiss.sim.result import SimResult
from tailmiss.sim.sampler import CountSampler, NonFiniteProbabilities

__all__ = ["simulate", "initial_logits", "realised_mass_balance", "memory_estimate", "device_memory", "METRICS"]

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


TILE_ELEMENTS = 2**20
"""On the CPU a step works through the sweep in tiles of rows of about this many actions (at least two rows)."""


def _tile_rows(num_actions: int) -> int:
    return max(2, TILE_ELEMENTS // num_actions)


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


def memory_estimate(config: SimConfig, runs=None, device=None) -> dict:
    """Peak memory of :func:`simulate` for ``config`` (or its runs ``runs``) on ``device``, by part, in bytes.

    An upper estimate. ``state``: the ``[runs, actions]`` logits, gradient and
    two Adam moments (SGD: none). ``tile``: a step works through the sweep a
    block of rows at a time (on the CPU at most :data:`TILE_ELEMENTS` actions,
    elsewhere every run of one group size), holding that block's
    probabilities, counts and surrogate temporaries in the logit dtype and its
    float64 CDF and three float64 metric temporaries. ``sampler``: two int32
    keys per draw for the whole sweep plus a workspace of 36 bytes per draw of
    its largest segment of rows (:class:`~tailmiss.sim.sampler.CountSampler`).
    ``allocator`` (CPU only): the C allocator keeps freed temporaries (the
    sampler's construction, the tiles) and the runtime holds thread arenas, so
    the process grows by more than its live tensors; half the tensors plus
    96 MiB bounds what was measured (peak RSS growth over 4 steps, 2 CPU
    threads: fgrpo-fig2 635-647 MiB against 703, fgrpo-fig2-prob 517-646
    against 703, brorl-fig3 107-112 against 123).
    """
    from tailmiss.sim.sampler import partition_rows

    chosen = _select_runs(config, runs)[1]
    dev = resolve_device(device)
    runs, v = len(chosen), config.num_actions
    item = 8 if config.dtype == "float64" else 4
    moments = 0 if config.optimizer == "sgd" else 2
    sizes = [n for n, _, _ in chosen]
    most = _tile_rows(v) if dev.type == "cpu" else None
    tile_rows = max(r1 - r0 for r0, r1, _ in _tiles(partition_rows(sizes, config.max_draws_per_chunk, most), most))
    values = sum(n + 1 for n in sizes)
    segment = max(min(config.max_draws_per_chunk, values), max(n + 1 for n in sizes))
    parts = {
        "state": runs * v * item * (2 + moments),
        "tile": tile_rows * v * (item * 5 + 8 * 4),
        "sampler": values * 8 + segment * 36,
    }
    tensors = sum(parts.values())
    parts["allocator"] = tensors // 2 + 96 * 2**20 if dev.type == "cpu" else 0
    parts["total"] = tensors + parts["allocator"]
    parts.update(runs=runs, actions=v, draws_per_step=values - runs, tile_rows=tile_rows)
    return parts


def device_memory(device) -> int | None:
    """Bytes free on ``device`` now (CUDA: ``mem_get_info``; CPU: available RAM on Linux), or None if unknown."""
    dev = resolve_device(device)
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0])
    try:
        import os

        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _check_fits(config: SimConfig, dev: torch.device, runs=None) -> None:
    need = memory_estimate(config, runs, dev)["total"]
    free = device_memory(dev)
    if free is not None and need > free:
        raise ValueError(
            f"sweep {config.name!r} needs about {need / 2**30:.1f} GiB on {dev} but {free / 2**30:.1f} GiB are free; "
            "run fewer runs at once (group_sizes, gammas, seeds) or use a larger device"
        )


def _select_runs(config: SimConfig, runs) -> tuple[list[int], list[tuple[int, float, int]]]:
    """Run indices and ``(N, γ, seed)`` of the selected runs (all by default)."""
    every = config.runs()
    if runs is None:
        return list(range(len(every))), every
    try:
        index = [int(i) for i in runs]
    except (TypeError, ValueError):
        raise ValueError(f"runs must be run indices, got {runs!r}") from None
    if not index or any(i < 0 or i >= len(every) for i in index) or len(set(index)) != len(index):
        raise ValueError(f"runs must be distinct indices in [0, {len(every)}), got {runs!r}")
    return index, [every[i] for i in index]


class _Checkpoint:
    """Periodic, atomic snapshots of a simulation (logits, optimizer state, step, logged rows).

    Every random draw of a step is a function of ``(seed, N, step)`` only
    (:class:`~tailmiss.sim.sampler.CountSampler`), so a run resumed from a
    snapshot repeats the uninterrupted one bit for bit on the same device.
    """

    def __init__(self, path, config: SimConfig, index: list[int], dev, every_steps, every_s):
        from pathlib import Path

        from tailmiss.store import code_fingerprint

        self.path = Path(path)
        self.key = {
            "config": config.to_dict(),
            "code": code_fingerprint("sim"),
            "runs": list(index),
            "device": dev.type,
        }
        self.every_steps, self.every_s = every_steps, every_s
        self.last = time.monotonic()

    def load(self, log=None) -> dict | None:
        """The snapshot to resume from, or None (none there, another sweep, other code, or unreadable)."""
        if not self.path.is_file():
            return None
        say = log or (lambda message: None)
        try:
            state = torch.load(self.path, map_location="cpu", weights_only=True)
        except Exception:  # a damaged file is never loaded: start over
            say(f"{self.path}: unreadable snapshot, starting over")
            return None
        key = state.get("key") if isinstance(state, dict) else None
        if key != self.key:
            what = "code" if isinstance(key, dict) and {**key, "code": self.key["code"]} == self.key else "sweep"
            say(f"{self.path}: a snapshot of another {what}, starting over")
            return None
        return state

    def due(self, done: int, total: int) -> bool:
        if done >= total:
            return False
        if self.every_steps is not None and done % self.every_steps == 0:
            return True
        return self.every_s is not None and time.monotonic() - self.last >= self.every_s

    def save(self, state: dict) -> None:
        from tailmiss.io import atomic_write

        with atomic_write(self.path, "wb") as fh:
            torch.save({"key": self.key, **state}, fh)
        self.last = time.monotonic()


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
    if not isinstance(config, SimConfig):
        raise ValueError(f"config must be a SimConfig, got {type(config).__name__}")
    if checkpoint_every is not None and (
        not isinstance(checkpoint_every, int) or isinstance(checkpoint_every, bool) or checkpoint_every < 1
    ):
        raise ValueError(f"checkpoint_every must be a positive integer, got {checkpoint_every!r}")
    dev = resolve_device(device)
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

    log_steps = sorted(set(range(0, config.steps, config.log_every)) | {config.steps})
    log_at = set(log_steps)
    logged: list[dict[str, torch.Tensor]] = []
    start, before = 0, 0.0
    snap = None
    if checkpoint is not None:
        snap = _Checkpoint(checkpoint, config, index, dev, checkpoint_every, checkpoint_every_s)
        state = snap.load(log)
        if state is not None:
            with torch.no_grad():
                z.copy_(state["z"].to(dev))
            optimizer.load_state_dict(state["optimizer"])
            logged = [{k: t.to(dev) for k, t in row.items()} for row in state["logged"]]
            metrics.p0_pos = state["p0_pos"].to(dev)
            metrics.q0 = state["q0"].to(dev)
            start, before = int(state["step"]), float(state["elapsed_s"])
            if log is not None:
                log(f"{config.name}: resuming runs {index[0]}..{index[-1]} from step {start} ({snap.path})")
    # counts are exact in float32 below 2^24 draws per row; beyond that they are kept in float64
    count_dtype = dtype if max(n_list) < 2**24 else torch.float64
    grad = torch.zeros_like(z, requires_grad=False)
    # one tile's count matrix, reused by every tile and step
    counts = torch.empty((max(r1 - r0 for r0, r1, _ in tile_plan), v), dtype=count_dtype, device=dev)
    started = time.perf_counter()
    bar = _progress(config, dev, num_runs, start) if progress else None
    final_probs = None
    try:
        for step in range(start, config.steps + 1):
            with torch.no_grad():
                if step == config.steps:
                    if keep_final:
                        final_probs = row_softmax(z.detach()).to(torch.float64).cpu().numpy()
                    row = _cat([metrics(row_softmax(z.detach()[r0:r1])) for r0, r1, _ in tile_plan])
                    row.update({name: torch.full_like(row["q_pos"], float("nan")) for name in _DRAW_METRICS})
                    logged.append(row)
                    break
                tiles = []
                uniforms = sampler.uniforms(step)  # block by block, used before the next is asked for
                try:
                    for r0, r1, members in tile_plan:
                        rows = slice(r0, r1)
                        draws = ((i, next(uniforms)) for i in members)
                        tiles.append(
                            _step_tile(
                                config,
                                surrogate,
                                metrics,
                                sampler,
                                r0,
                                draws,
                                z.detach()[rows],
                                counts[: r1 - r0],
                                group_size[rows],
                                gamma[rows],
                                dtype,
                                grad[rows],
                                step in log_at,
                            )
                        )
                except NonFiniteProbabilities as exc:
                    n, g, s = runs[exc.row]
                    raise ValueError(
                        f"run {index[exc.row]} (N={n}, gamma={g:g}, seed={s}) diverged by step {step}: its logits are "
                        f"no longer finite; lower lr (now {config.lr:g})"
                    ) from None
                if step in log_at:
                    logged.append(_cat(tiles))
                z.grad = grad
            optimizer.step()
            if snap is not None and snap.due(step + 1, config.steps):
                snap.save(
                    {
                        "step": step + 1,
                        "z": z.detach().cpu(),
                        "optimizer": optimizer.state_dict(),
                        "logged": [{k: t.cpu() for k, t in row.items()} for row in logged],
                        "p0_pos": metrics.p0_pos.cpu(),
                        "q0": metrics.q0.cpu(),
                        "elapsed_s": before + time.perf_counter() - started,
                    }
                )
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    elapsed = before + time.perf_counter() - started
    history = _tidy(index, runs, log_steps, logged)
    meta = {
        "device": str(dev),
        "torch": torch.__version__,
        "elapsed_s": round(elapsed, 3),
        "action_updates_per_s": num_runs * v * config.steps / max(elapsed, 1e-9),
        "initial": _initial_summary(config),
    }
    if start:
        meta["resumed_from_step"] = start
    return SimResult(config=config, history=history, meta=meta, final_probs=final_probs)


def _cat(tiles: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """One logged row from the tiles' rows (rows in order)."""
    return {name: torch.cat([t[name] for t in tiles]) for name in tiles[0]}


def _tiles(blocks, most_rows: int | None) -> list[tuple[int, int, list[int]]]:
    """Consecutive blocks ``(r0, r1, ...)`` grouped into tiles ``(r0, r1, block indices)``.

    A tile holds at most ``most_rows`` rows (a larger block stays whole); with
    ``most_rows`` None every block is a tile of its own.
    """
    plan: list[tuple[int, int, list[int]]] = []
    for i, (b0, b1, *_) in enumerate(blocks):
        if plan and most_rows is not None and b1 - plan[-1][0] <= most_rows:
            r0, _, members = plan[-1]
            plan[-1] = (r0, b1, [*members, i])
        else:
            plan.append((b0, b1, [i]))
    return plan


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


def _step_tile(config, surrogate, metrics, sampler, r0, draws, z, counts, group_size, gamma, dtype, grad, log):
    """One step of the tile of rows starting at ``r0``: draws, logged metrics (if ``log``), the gradient into ``grad``.

    ``draws`` yields ``(sampler block index, its uniforms)`` for the tile's
    blocks. Every operation works on the tile's rows alone (softmax, row sums,
    draws), so a tile's numbers are those of the whole matrix; small tiles keep
    the step's matrices in cache and its temporaries small. Raises
    :class:`~tailmiss.sim.sampler.NonFiniteProbabilities` for a diverged row.
    """
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


def _initial_summary(config: SimConfig) -> dict:
    init = initial_policy(config)
    return {"q_pos": init.q_pos, "tau_leaf": init.tau_leaf, "p_anchor": init.p_anchor, "entropy": init.entropy}


def _progress(config: SimConfig, dev: torch.device, num_runs: int, done: int = 0):
    from tailmiss._progress import ProgressBar

    bar = ProgressBar(total=config.steps, description=f"{config.name}: {num_runs} runs on {dev}")
    if done:
        bar.update(done)
    return bar
