r"""The shared simulator on the small transformer's task: a ladder's shared rung as a shared law.

The shared rung of a ladder (:class:`~tailmiss.llm.tabular.SharedPolicy`) holds, over the pool's prompts and every
well-formed answer plus the off-format action,

.. math:: z(x, a) = c(x, a) + \phi(x)^\top W \psi(a),

with :math:`c` the SFT model's exact log-probabilities, :math:`\phi` the prompt's digits and :math:`\psi` the
answer's digit at each position. :func:`law_of_policy` copies those arrays (the start is the SFT model's law
exactly) and each prompt's correct set from the task; :func:`rung_sim_config` states the ladder's update (binary
rewards, std-normalised group advantages, the log-probability surrogate, Adam at the rung's rate, its N, γ and
steps); :func:`simulate_rung` runs the batched simulator (:func:`tailmiss.sim.shared.simulate_law`) on it, and
:func:`run_rung_simulation` keeps what the report reads of it (each run's held-out metrics by prompt type) as a unit
of the store, so that the report re-derived from the evidence archive reads it instead of simulating again. The
trainer and the simulator then share the law and differ in their random streams and in two details of the
trainer's step that the simulator does not have: the gradient-norm clip (``optim.grad_clip``) and the loss's
token-mean denominator (the total response tokens of the step, nearly constant here: every well-formed answer has
the same length). A test checks that they agree in law where neither detail acts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from tailmiss.experiments.ladder import Ladder, Rung
from tailmiss.experiments.prompt_types import by_type
from tailmiss.experiments.sweep_config import LLMSweep, Variant
from tailmiss.llm.checkpoint import CHECKPOINT, LoadedRun
from tailmiss.llm.rollouts import training_pool
from tailmiss.llm.tabular import SharedPolicy
from tailmiss.options import RunOptions
from tailmiss.sim.config import SimConfig
from tailmiss.sim.shared import LawSimResult, SharedLaw, simulate_law
from tailmiss.store import (
    Scope,
    UnitKind,
    file_sha256,
    lookup,
    open_unit,
    own_scope_of,
    read_meta,
    save_tables,
    unit_clock,
)

__all__ = [
    "SIM_SEEDS",
    "law_of_policy",
    "rung_sim_config",
    "shared_rung",
    "simulate_rung",
    "typed_history",
    "RungSimulation",
    "RUNG_SIMULATION_UNIT",
    "SCOPE",
    "rung_simulation_name",
    "run_rung_simulation",
]

SIM_SEEDS = tuple(range(20))
"""The simulator's seeds for a rung (its streams are its own, so they need not be the trainer's)."""


def _types(task, prompts) -> tuple[str, ...]:
    if hasattr(task, "minority_mask"):
        return tuple("minority" if m else "rest" for m in task.minority_mask(prompts))
    return ("all",) * len(prompts)


def law_of_policy(policy: SharedPolicy, task, prompts, prompts_per_step: int | None = None) -> SharedLaw:
    r"""The law of ``policy`` on ``prompts``: its offset, features and :math:`W`, each prompt's correct answers.

    Parameters
    ----------
    policy : SharedPolicy
        The trainer's shared policy; its rows are looked up by the prompts' tokens.
    task : Task
        The enumerable task it was made for: the correct set of prompt :math:`x` is its well-formed answers that
        ``task`` scores correct (the off-format action, ``<eos>`` alone, never is); prompt types from the task's
        ``minority_mask`` where it has one.
    prompts : sequence
        The prompts to simulate, each held by ``policy``.
    prompts_per_step : int, optional
        Prompts trained on per step (default all).

    Raises
    ------
    ValueError
        When ``policy`` is no :class:`SharedPolicy`, a prompt is not one of its rows, or the task's answer list is
        not the policy's.
    """
    if not isinstance(policy, SharedPolicy):
        raise ValueError(f"policy must be a SharedPolicy, got {type(policy).__name__}")
    keys = task.encode_prompts(prompts).long()
    held = {tuple(k): i for i, k in enumerate(policy.prompt_keys.tolist())}
    rows = [held.get(tuple(k)) for k in keys.tolist()]
    if any(r is None for r in rows):
        missing = [str(p) for p, r in zip(prompts, rows) if r is None]
        raise ValueError(f"the policy holds no row for the prompt(s) {', '.join(missing[:3])}")
    correct = []
    for p in prompts:
        answers = task.enumerate_answers(p)
        if not torch.equal(answers.tokens, policy.answers[:-1].to(answers.tokens.dtype)):
            raise ValueError(f"the answers of task {task.name!r} are not the policy's")
        correct.append(np.append(answers.correct.numpy(), False))
    idx = torch.as_tensor(rows)

    def as64(t: torch.Tensor) -> np.ndarray:
        return t.detach().double().cpu().numpy()

    return SharedLaw(
        prompt_features=as64(policy.prompt_features[idx]),
        correct=np.stack(correct),
        weight=as64(policy.weight),
        offset=as64(policy.offset[idx]),
        answer_features=as64(policy.answer_features),
        prompt_types=_types(task, prompts),
        prompts_per_step=prompts_per_step,
    )


def shared_rung(ladder: Ladder) -> tuple[Rung, object]:
    """The one shared rung of ``ladder`` and its sweep (``ValueError`` when it has none or several)."""
    found = [(r, s) for r, s in ladder.sweeps() if r.model == "shared"]
    if len(found) != 1:
        raise ValueError(f"ladder {ladder.name!r} must have one shared rung, has {len(found)}")
    return found[0]


def rung_sim_config(ladder: Ladder, num_actions: int, seeds=SIM_SEEDS, dtype: str = "float64") -> SimConfig:
    """The simulator's update of ``ladder``'s shared rung over ``num_actions`` actions: rewards 1/0, GRPO's
    std-normalised advantages (the RL config's ``std_kind`` and ``adv_eps``), the log-probability surrogate, Adam
    at the rung's rate and betas (weight decay 0: the ladder's AdamW is Adam), the ladder's N, γ and steps, logged
    at its evaluation steps."""
    rung, sweep = shared_rung(ladder)
    rl = ladder.rl
    if ladder.budget != "steps":
        raise ValueError(f"ladder {ladder.name!r} sets steps by its rollout budget; simulate it per N instead")
    if rl.optim.weight_decay != 0 or rung.optimizer != "adamw":
        raise ValueError(f"the simulator states Adam without weight decay; ladder {ladder.name!r} trains otherwise")
    return SimConfig(
        name=f"{sweep.name}-sim",
        num_actions=num_actions,
        num_correct=1,  # not read: the law holds each prompt's correct set
        init="zero",  # not read: the law holds the start
        reward_correct=1.0,
        reward_incorrect=0.0,
        advantage="std",
        std_kind=rl.std_kind,
        adv_eps=rl.adv_eps,
        surrogate="logprob",
        optimizer="adam",
        lr=rung.lr,
        betas=tuple(rl.optim.betas),
        group_sizes=ladder.group_sizes,
        gammas=ladder.gammas,
        seeds=tuple(seeds),
        steps=rl.steps,
        log_every=rl.eval_every,
        dtype=dtype,
    )


def simulate_rung(
    ladder: Ladder, root: str | Path, seeds=SIM_SEEDS, device="cpu", progress: bool = False
) -> LawSimResult:
    """The shared simulator from ``ladder``'s shared rung at its start (the derived policy under ``root``, made by
    :func:`tailmiss.experiments.ladder.run_ladder`), on the ladder's training pool, ``prompts_per_step`` of them a
    step, for every N, γ and seed of ``seeds``."""
    _, sweep = shared_rung(ladder)
    folder = Path(root) / sweep.sft.name
    if not (folder / "meta.json").is_file():
        raise ValueError(f"{folder} holds no shared policy: run the ladder {ladder.name!r} first")
    run = LoadedRun(folder)
    rl = ladder.rl
    pool = list(training_pool(run.task, rl.train_prompts, rl.pool_seed))
    law = law_of_policy(run.model, run.task, pool, rl.prompts_per_step)
    return simulate_law(law, rung_sim_config(ladder, law.num_actions, seeds), device=device, progress=progress)


# --- the simulation as a unit of the store ----------------------------------------------------------------------------

SCOPE = Scope("rung-simulation", ("sim", "llm", "experiments/shared_bridge.py", "experiments/prompt_types.py"))
"""Its numbers: the simulator's, the trainer's policy (the law is read off it), the law and update stated here, and
the reduction by prompt type."""
_FILES = ("config.toml", "typed.csv", "meta.json")


def typed_history(result: LawSimResult) -> pd.DataFrame:
    """The simulation ``result`` in the ladder's form: one row per run label (``GRPO N=8``, ``F-GRPO γ=1 N=8``),
    seed, logged step and prompt type, with held-out pass@1 and exact pass@k over the type's prompts
    (:func:`tailmiss.experiments.prompt_types.by_type` of each run's per-prompt correct mass ``q_pos``)."""
    h = result.history
    types = np.asarray(result.law.prompt_types)
    per_prompt = {}
    for (n, gamma, seed), part in h.groupby(["group_size", "gamma", "seed"]):
        wide = part.pivot_table(index="step", columns="prompt", values="q_pos").sort_index()
        label = Variant("grpo", float(gamma), int(n)).label
        per_prompt[(label, int(seed))] = (wide.index.to_numpy(), wide[sorted(wide.columns)].to_numpy())
    return by_type(per_prompt, types == "minority")


@dataclass
class RungSimulation:
    """What the report reads of the shared simulator run from a ladder's shared rung (:func:`run_rung_simulation`).

    Attributes
    ----------
    sweep : LLMSweep
        The shared rung's sweep (its SFT config is the derived shared policy the law is read off).
    seeds : tuple of int
        The simulator's seeds.
    typed : DataFrame
        :func:`typed_history` of the simulation.
    num_prompts, num_actions : int
        The simulated law's size.
    device : str
        Where it ran.
    start : str
        The SHA-256 of the shared policy's checkpoint the law was read off.
    """

    sweep: LLMSweep
    seeds: tuple[int, ...]
    typed: pd.DataFrame
    num_prompts: int
    num_actions: int
    device: str
    start: str

    def save(self, path: str | Path) -> Path:
        """Write ``path/`` atomically, sealed with checksums and provenance (:func:`tailmiss.store.save_tables`)."""
        meta = {
            "seeds": list(self.seeds),
            "num_prompts": self.num_prompts,
            "num_actions": self.num_actions,
            "device": self.device,
            "init_checkpoint": self.start,
        }
        return save_tables(path, self.sweep, {"typed.csv": self.typed}, meta, SCOPE, RUNG_SIMULATION_UNIT.what)

    @classmethod
    def load(cls, path: str | Path) -> RungSimulation:
        """Read a saved unit after verifying its checksums (``CorruptUnit`` otherwise)."""
        path = Path(path)
        open_unit(path, _FILES, RUNG_SIMULATION_UNIT.what)
        meta = read_meta(path)
        return cls(
            sweep=LLMSweep.from_toml(path / "config.toml"),
            seeds=tuple(int(s) for s in meta["seeds"]),
            typed=pd.read_csv(path / "typed.csv", dtype={"seed": "int64", "step": "int64"}),
            num_prompts=int(meta["num_prompts"]),
            num_actions=int(meta["num_actions"]),
            device=str(meta["device"]),
            start=str(meta["init_checkpoint"]),
        )


RUNG_SIMULATION_UNIT = UnitKind(_FILES, "shared simulation", SCOPE, RungSimulation.load)
"""A saved :class:`RungSimulation` as a unit of the store: its files, its name, its scope and its loader."""


def rung_simulation_name(ladder: Ladder) -> str:
    """The unit's folder under the cache: ``<shared rung's sweep>-sim``."""
    return f"{shared_rung(ladder)[1].name}-sim"


def run_rung_simulation(
    ladder: Ladder, root: str | Path, seeds=SIM_SEEDS, options: RunOptions = RunOptions()
) -> RungSimulation:
    """:func:`simulate_rung` of ``ladder`` read by prompt type (:func:`typed_history`), saved as
    ``root/<shared rung's sweep>-sim/``, or that unit when it holds the same sweep and seeds, was started from the
    shared policy ``root`` holds (the same checkpoint) and was made by the running code (or by the evidence
    archive's).

    Parameters
    ----------
    ladder : Ladder
        A ladder with one shared rung whose derived policy is under ``root``
        (:func:`tailmiss.experiments.ladder.run_ladder`).
    root : path
        The LLM cache.
    seeds : sequence of int
        The simulator's seeds.
    options : RunOptions
        Progress bars, the log of cache decisions and ``reuse_stale``. The simulation runs on the CPU here.
    """
    _, sweep = shared_rung(ladder)
    seeds = tuple(int(s) for s in seeds)
    start_file = Path(root) / sweep.sft.name / CHECKPOINT
    if not start_file.is_file():
        raise ValueError(f"{start_file.parent} holds no shared policy: run the ladder {ladder.name!r} first")
    start = file_sha256(start_file)
    out = Path(root) / rung_simulation_name(ladder)

    def matches(found: RungSimulation) -> bool | str:
        if found.sweep != sweep or found.seeds != seeds:
            return False
        return True if found.start == start else "it was started from another shared policy"

    found = lookup(out, RUNG_SIMULATION_UNIT, matches, options.reuse_stale, options.log, own_scope_of(sweep.sft.task))
    if found.usable:
        return found.value
    with unit_clock():  # the CPU seconds of the simulation, recorded in the unit
        sim = simulate_rung(ladder, root, seeds=seeds, progress=options.progress)
        RungSimulation(
            sweep,
            seeds,
            typed_history(sim),
            sim.law.num_prompts,
            sim.law.num_actions,
            str(sim.meta.get("device", "cpu")),
            start,
        ).save(out)
    return RungSimulation.load(out)  # as saved: the numbers a later reuse reads, to the last digit
