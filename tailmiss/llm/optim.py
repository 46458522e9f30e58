"""The optimiser settings that SFT and RL share (TOML ``[sft.optim]``, ``[rl.optim]``), the rate schedule and the
optimiser itself.

:class:`OptimConfig` is one sub-config of both loops' configs; :func:`make_optimizer` builds AdamW (F-GRPO Table 5)
or plain SGD from it, with weight decay on the matrices only (nanoGPT), and :func:`set_lr` sets each step's rate.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from tailmiss._checks import check_choice, check_int, check_number, check_numbers

__all__ = [
    "OptimConfig",
    "OPTIMIZERS",
    "LR_SCHEDULES",
    "FLAT_KEYS",
    "lr_at",
    "set_lr",
    "make_optimizer",
    "PlainOptimizer",
]

OPTIMIZERS = ("adamw", "sgd")
"""The optimisers :attr:`OptimConfig.kind` names (:func:`make_optimizer` builds it): AdamW (F-GRPO Table 5) or
plain SGD."""
LR_SCHEDULES = ("constant", "cosine")
"""The rate schedules after the warm-up (:attr:`OptimConfig.lr_schedule`, :func:`lr_at`): a constant
rate, or cosine decay to 10 % of the peak at the last step."""
FLAT_KEYS = {
    "optimizer": "kind",
    "lr": "lr",
    "lr_schedule": "lr_schedule",
    "warmup_steps": "warmup_steps",
    "weight_decay": "weight_decay",
    "betas": "betas",
    "grad_clip": "grad_clip",
}
"""The optimiser settings as keys of ``[sft]`` / ``[rl]`` themselves (the layout before ``[optim]``), with the
``[optim]`` key each became: run folders written then are read by :func:`tailmiss.llm.checkpoint.read_run_config`; a
config file in that layout is refused with a message naming the new table."""


def _float32(name: str, value, lo: float = 0.0, lo_open: bool = False) -> None:
    check_number(name, value, lo, math.inf, lo_open=lo_open, dtype="float32")  # the trainer computes in float32


@dataclass(frozen=True)
class OptimConfig:
    """How a loop updates the weights: the optimiser, its rate schedule and gradient clipping.

    Attributes
    ----------
    kind : {"adamw", "sgd"}
        AdamW (F-GRPO Table 5; Loshchilov & Hutter 2019) or plain SGD (no momentum; its ``weight_decay`` is an
        L2 term on the matrices).
    lr, lr_schedule, warmup_steps
        Peak rate, linear warm-up over ``warmup_steps`` steps, then ``"constant"`` or ``"cosine"`` decay to 10 %
        of ``lr`` at the last step (:func:`lr_at`).
    weight_decay : float
        Decoupled weight decay (AdamW) on the weight matrices only; biases, gains and position tables take none.
    betas : tuple of float
        AdamW's moment decays.
    grad_clip : float
        The global gradient norm is clipped to this before each update.

    The defaults are the RL loop's (the paper's, F-GRPO Table 5); the SFT loop's default is
    ``OptimConfig(lr=1e-3, lr_schedule="cosine", warmup_steps=50)``. A TOML ``[optim]`` table updates the loop's
    default, so ``[sft.optim]`` holding ``lr`` alone keeps SFT's cosine schedule.
    """

    kind: str = "adamw"
    lr: float = 1e-4
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = 1.0

    def __post_init__(self) -> None:
        check_choice("optimizer kind", self.kind, OPTIMIZERS)
        _float32("lr", self.lr, lo_open=True)
        check_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        check_int("warmup_steps", self.warmup_steps, 0)
        _float32("weight_decay", self.weight_decay)
        if isinstance(self.betas, list):  # a TOML array
            object.__setattr__(self, "betas", tuple(self.betas))
        check_numbers("betas", self.betas, 2, 0.0, 1.0)
        _float32("grad_clip", self.grad_clip, lo_open=True)

    def replace(self, **changes) -> OptimConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "betas": list(self.betas)}


SFT_OPTIM = OptimConfig(lr=1e-3, lr_schedule="cosine", warmup_steps=50)
"""The SFT loop's default optimiser settings."""


def lr_at(step: int, optim: OptimConfig, steps: int) -> float:
    r"""The rate of ``step`` in a run of ``steps`` steps: linear warm-up over ``warmup_steps``, then constant or
    cosine decay to 10 % at ``steps``,

    .. math:: \eta_t = \eta \left(0.1 + 0.45 \left(1 + \cos \pi \min\left(1,
        \tfrac{t - t_w}{\max(1, T - t_w)}\right)\right)\right).
    """
    if step < optim.warmup_steps:
        return optim.lr * (step + 1) / optim.warmup_steps
    if optim.lr_schedule == "constant":
        return optim.lr
    frac = (step - optim.warmup_steps) / max(1, steps - optim.warmup_steps)
    return optim.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(frac, 1.0))))


def set_lr(optimizer, step: int, optim: OptimConfig, steps: int) -> float:
    """Set the scheduled rate of ``step`` (:func:`lr_at`) on every parameter group; return it."""
    lr = lr_at(step, optim, steps)
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def make_optimizer(model: torch.nn.Module, optim: OptimConfig):
    """AdamW (or plain SGD when ``optim.kind == "sgd"``) with weight decay on the matrices only.

    On the CPU a :class:`PlainOptimizer` (the same arithmetic as torch's, without importing ``torch._dynamo``),
    elsewhere ``torch.optim``'s (its multi-tensor kernels).
    """
    # decay matrices only (nanoGPT): no weight decay on biases, LayerNorm gains or position tables
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": optim.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    if all(p.device.type == "cpu" for p in params):
        return PlainOptimizer(groups, optim.kind, lr=optim.lr, betas=optim.betas)
    if optim.kind == "sgd":
        return torch.optim.SGD(groups, lr=optim.lr)
    return torch.optim.AdamW(groups, lr=optim.lr, betas=optim.betas)


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
