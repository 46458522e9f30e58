"""Pieces shared by the SFT and RL loops: seeds per step, learning-rate schedule, optimizer, progress, processes.

Under ``torchrun`` (see :mod:`tailmiss._dist`) rank 0 alone checks and writes
the run folder; :func:`prepare_run` and :func:`run_complete` hand its decisions
to the other ranks, :func:`data_parallel` wraps the model in
:class:`~torch.nn.parallel.DistributedDataParallel` and :func:`all_sum` adds a
few statistics over the ranks. In a single process each is a no-op (all_sum
then only converts to float64).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.distributed as dist

from tailmiss._dist import broadcast_object, is_main, world

__all__ = [
    "step_seed",
    "lr_at",
    "set_lr",
    "make_optimizer",
    "PlainOptimizer",
    "progress_bar",
    "step_done",
    "environment",
    "prepare_run",
    "run_complete",
    "data_parallel",
    "all_sum",
]


def step_seed(seed: int, step: int, stream: int) -> int:
    """A 63-bit seed for the random draws of ``stream`` at ``step``: no RNG state crosses steps, so resume is exact."""
    return int(np.random.SeedSequence([seed, step, stream]).generate_state(2, dtype=np.uint32).view(np.uint64)[0] >> 1)


def lr_at(step: int, cfg) -> float:
    """Linear warm-up over ``warmup_steps``, then constant or cosine decay to 10 % at ``steps``."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if cfg.lr_schedule == "constant":
        return cfg.lr
    frac = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(frac, 1.0))))


def set_lr(optimizer: torch.optim.Optimizer, step: int, cfg) -> float:
    """Set the scheduled rate of ``step`` on every parameter group; return it."""
    lr = lr_at(step, cfg)
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def make_optimizer(model: torch.nn.Module, cfg):
    """AdamW (or plain SGD when ``cfg.optimizer == "sgd"``) with weight decay on the matrices only.

    On the CPU a :class:`PlainOptimizer` (the same arithmetic as torch's, without importing ``torch._dynamo``),
    elsewhere ``torch.optim``'s (its multi-tensor kernels).
    """
    # decay matrices only (nanoGPT): no weight decay on biases, LayerNorm gains or position tables
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    sgd = getattr(cfg, "optimizer", "adamw") == "sgd"
    if all(p.device.type == "cpu" for p in params):
        return PlainOptimizer(groups, "sgd" if sgd else "adamw", lr=cfg.lr, betas=cfg.betas)
    if sgd:
        return torch.optim.SGD(groups, lr=cfg.lr)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)


class PlainOptimizer:
    r"""``torch.optim.AdamW`` (``kind="adamw"``) or ``torch.optim.SGD`` without momentum (``kind="sgd"``), one
    tensor at a time as torch does on the CPU, with the same results bit for bit and the same ``state_dict``.

    AdamW, per parameter :math:`\theta` with gradient :math:`g` at step :math:`t` (Loshchilov & Hutter 2019):

    .. math::
        \theta \leftarrow \theta (1 - \eta\lambda),\quad m \leftarrow \beta_1 m + (1 - \beta_1) g,\quad
        v \leftarrow \beta_2 v + (1 - \beta_2) g^2,\quad
        \theta \leftarrow \theta - \frac{\eta}{1 - \beta_1^t} \frac{m}{\sqrt{v / (1 - \beta_2^t)} + \epsilon};

    SGD: :math:`\theta \leftarrow \theta - \eta (g + \lambda\theta)`. Why not ``torch.optim``: constructing or
    stepping any ``torch.optim.Optimizer`` imports ``torch._dynamo`` (about 75 MB and a second or more of start-up
    in every process), which these small models never use.
    """

    def __init__(self, groups: list[dict], kind: str, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        if kind not in ("adamw", "sgd"):
            raise ValueError(f"kind must be 'adamw' or 'sgd', got {kind!r}")
        self.kind = kind
        extra = {"betas": tuple(betas), "eps": eps} if kind == "adamw" else {}
        self.param_groups = [{"lr": lr, **extra, **g, "params": list(g["params"])} for g in groups]
        self.state: dict[torch.Tensor, dict] = {}

    def _params(self) -> list[torch.Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self._params():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            lr, decay = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if self.kind == "sgd":
                    grad = p.grad.add(p, alpha=decay) if decay != 0 else p.grad
                    p.add_(grad, alpha=-lr)
                else:
                    self._adamw(p, p.grad, group, lr, decay)

    def _adamw(self, p: torch.Tensor, grad: torch.Tensor, group: dict, lr: float, decay: float) -> None:
        beta1, beta2 = group["betas"]
        state = self.state.get(p)
        if state is None:
            zeros = torch.zeros_like(p, memory_format=torch.preserve_format)
            state = self.state[p] = {"step": torch.tensor(0.0), "exp_avg": zeros, "exp_avg_sq": zeros.clone()}
        state["step"] += 1
        if decay != 0:
            p.mul_(1 - lr * decay)
        state["exp_avg"].lerp_(grad, 1 - beta1)
        state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step = state["step"].item()
        step_size = lr / (1 - beta1**step)
        denom = (state["exp_avg_sq"].sqrt() / (1 - beta2**step) ** 0.5).add_(group["eps"])
        p.addcdiv_(state["exp_avg"], denom, value=-step_size)

    def state_dict(self) -> dict:
        """``torch.optim``'s layout: per-parameter state keyed by position, groups with parameter positions."""
        index = {id(p): i for i, p in enumerate(self._params())}
        groups, start = [], 0
        for g in self.param_groups:
            groups.append(
                {
                    **{k: v for k, v in g.items() if k != "params"},
                    "params": list(range(start, start + len(g["params"]))),
                }
            )
            start += len(g["params"])
        state = {index[id(p)]: dict(s) for p, s in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what :meth:`state_dict` (or the matching ``torch.optim`` optimizer) saved."""
        saved = state_dict["param_groups"]
        if [len(g["params"]) for g in saved] != [len(g["params"]) for g in self.param_groups]:
            raise ValueError("the saved optimizer state holds other parameter groups")
        for group, old in zip(self.param_groups, saved):
            group.update({k: v for k, v in old.items() if k in group and k != "params"})
        params = self._params()
        self.state = {}
        for i, s in state_dict["state"].items():
            p = params[int(i)]
            # copies: the saved tensors may be another optimizer's live state
            self.state[p] = {k: v.clone() if k == "step" else v.to(p.device, p.dtype, copy=True) for k, v in s.items()}


def progress_bar(enabled: bool, total: int, description: str, done: int = 0):
    """A progress bar over ``total`` steps, ``done`` of them already taken (a resumed run); ``None`` if disabled."""
    if not enabled:
        return None
    from tailmiss.options import ProgressBar

    bar = ProgressBar(total=total, description=description)
    if done:
        bar.update(min(done, total))
    return bar


def step_done(step: int, cfg, checkpoint, bar, on_step) -> None:
    """After step ``step``: checkpoint when due, advance the bar, call the caller's hook."""
    if (step + 1) % cfg.checkpoint_every == 0:
        checkpoint(step + 1)
    if bar is not None:
        bar.update(1)
    if on_step is not None:
        on_step(step)


def environment(device: torch.device) -> dict:
    return {"device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads(), "processes": world()}


def prepare_run(folder, cfg, resume: bool) -> dict | None:
    """``folder.prepare(cfg, resume)`` on rank 0, then the checkpoint to resume from (or ``None``) on every rank.

    The other ranks wait for rank 0's check, raise its error if it refused the
    folder, and read the checkpoint it found from the shared filesystem.
    """
    if world() == 1:
        return folder.prepare(cfg, resume)
    state, outcome = None, None
    if is_main():
        try:
            state = folder.prepare(cfg, resume)
            outcome = ("ok", state is not None)
        except Exception as exc:  # the other ranks must not wait for a rank that has given up
            broadcast_object(("error", type(exc).__name__, str(exc)))
            raise
    outcome = broadcast_object(outcome)
    if outcome[0] == "error":
        raise (ValueError if outcome[1] == "ValueError" else RuntimeError)(outcome[2])
    if not is_main() and outcome[1]:
        state = folder.load_checkpoint()
    return state


def run_complete(folder, history: list[dict], steps: int) -> bool:
    """Rank 0's verdict, on every rank: every step is in ``history`` and ``meta.json`` is written."""
    done = bool(history) and history[-1]["step"] == steps and (folder.path / "meta.json").is_file()
    return broadcast_object(done if is_main() else None)


def first_step(folder, history: list[dict], start: int, steps: int) -> int | None:
    """The step a (resumed) run goes on from, or ``None`` when the run is complete.

    A run whose history holds every step but that was killed before ``meta.json``
    goes on from ``steps + 1``: it trains nothing and writes its last files again.
    """
    if history and history[-1]["step"] == steps:
        return None if run_complete(folder, history, steps) else steps + 1
    return start


def data_parallel(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``model`` wrapped in DistributedDataParallel when several processes run, else ``model`` itself.

    DDP averages the ranks' gradients in ``backward``; every parameter of the
    GPT takes part in every forward, so no unused-parameter search is needed.
    """
    if world() == 1:
        return model
    device_ids = [device.index] if device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids, broadcast_buffers=False)


def all_sum(values, device: torch.device) -> list[float]:
    """Each of ``values`` (numbers or 0-d tensors) summed over the ranks, in float64.

    The one reduction of the logged statistics at any world size: in a single
    process it is the sum over one rank (the values in float64), so one code
    path serves one process and many.
    """
    total = torch.tensor([float(v) for v in values], dtype=torch.float64, device=device)
    if world() > 1:
        dist.all_reduce(total)
    return total.tolist()
