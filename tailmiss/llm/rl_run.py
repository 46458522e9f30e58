"""One RL run while it trains: the object every stage of the loop (:mod:`tailmiss.llm.train`) reads.

:class:`RLRun` holds what a step needs (the config, the task, the model and its
frozen SFT copy, the optimiser, the device, whether this process is rank 0) and
what the run accumulates (its history, the compute spent, the per-prompt
evaluations). The stages take the run and the step: the rollouts
(:mod:`~tailmiss.llm.rollouts`), the update (:mod:`~tailmiss.llm.rl_update`) and
the evaluation (:mod:`~tailmiss.llm.rl_eval`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from tailmiss.llm.checkpoint import LoadedRun
from tailmiss.llm.config import RLConfig

__all__ = ["RLRun", "Spent", "EvalSets"]


@dataclass
class Spent:
    """Rollouts and tokens sampled so far (the run's compute)."""

    rollouts: int = 0
    tokens: int = 0


@dataclass
class EvalSets:
    """What rank 0 scores at each evaluation: held-out prompts, the SFT model's distributions on them and on the
    training pool (enumerable tasks), and the SFT checkpoint's hash that keys those distributions."""

    prompts: list
    reference: object
    pool: tuple | None
    start_sha: str


@dataclass
class RLRun:
    """The state of one RL run.

    Attributes
    ----------
    cfg : RLConfig
    sft : LoadedRun
        The SFT run it starts from: its task, and its model, which the run trains in place.
    init : str or Path
        The SFT run's folder.
    reference : torch.nn.Module
        The SFT model, frozen (KL to it; the exact metrics' reference).
    optimizer
        Built from ``cfg.optim`` (:func:`tailmiss.llm.optim.make_optimizer`).
    dev : torch.device
    main : bool
        Rank 0 (the only process in a single-process run): it evaluates and writes the run folder.
    ddp : torch.nn.Module
        The model, wrapped in DistributedDataParallel when several processes run.
    start : int
        The first step this process trains (a resumed run's checkpoint step).
    history, spent, per_prompt
        Logged rows, compute spent, per-prompt :math:`\\mu_{pos}` of the evaluations (``eval_per_prompt``).
    evals : EvalSets
        What each evaluation scores (set once the run starts).
    """

    cfg: RLConfig
    sft: LoadedRun
    init: str | Path
    reference: torch.nn.Module
    optimizer: object
    dev: torch.device
    main: bool = True
    ddp: torch.nn.Module | None = None
    start: int = 0
    history: list = field(default_factory=list)
    spent: Spent = field(default_factory=Spent)
    per_prompt: dict = field(default_factory=dict)
    evals: EvalSets | None = None

    @property
    def task(self):
        return self.sft.task

    @property
    def model(self) -> torch.nn.Module:
        return self.sft.model
