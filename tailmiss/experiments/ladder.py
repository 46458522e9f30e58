r"""The ladder from the categorical simulator to the transformer: one ingredient at a time.

Every rung trains the same GRPO update (one on-policy update per step, so
GRPO, DAPO and CISPO coincide; F-GRPO Eq. 13 for the focal weight) with the
same loop (:func:`tailmiss.llm.train.train_rl`), from the same SFT answer
distributions, on the same fixed pool of training prompts, and is evaluated
exactly on the pool ("trained-on") and on held-out prompts:

* ``table``: one free logit per answer per prompt (the simulator's policy; a
  test checks that it follows :func:`tailmiss.sim.simulate` in law);
* ``factorized``: one softmax per answer position per prompt (parameters
  shared across answers, no network, nothing shared across prompts);
* ``transformer``: the SFT model itself (parameters shared across answers and
  prompts);

each with AdamW (weight decay 0, so Adam) and with plain SGD. A ladder sweeps
the group size N and the focal exponent γ for every rung over seeds, at equal
steps or at an equal rollout budget (steps ∝ 1/N).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from tailmiss import _dist
from tailmiss._checks import check_choice, check_number
from tailmiss.experiments.cached import cached_sft, run_state, sft_job
from tailmiss.experiments.pool import Job, train_all
from tailmiss.experiments.sweep_config import LLMSweep, Variant
from tailmiss.llm.checkpoint import CHECKPOINT, LoadedRun, RunFolder
from tailmiss.llm.config import RLConfig, SFTConfig
from tailmiss.llm.evaluate import answer_distribution
from tailmiss.llm.loop import environment
from tailmiss.llm.model import MODEL_KINDS, ModelConfig
from tailmiss.llm.optim import OPTIMIZERS
from tailmiss.llm.rollouts import training_pool
from tailmiss.llm.tabular import TABULAR_KINDS, tabular_from_distribution
from tailmiss.options import RunOptions
from tailmiss.store import UnitState, check_may_compute, file_sha256, read_meta, unit_clock

if TYPE_CHECKING:  # pandas and the sweep runner load when a ladder runs, not with the presets
    import pandas as pd

    from tailmiss.experiments.sweep import SweepResult

__all__ = [
    "Rung",
    "Ladder",
    "LadderResult",
    "derive_policy",
    "write_policy_run",
    "policy_prompts",
    "run_ladder",
    "SETS",
    "METRICS",
]

BUDGETS = ("steps", "rollouts")
SETS = ("pool", "heldout")
"""Where a rung is evaluated: its training pool ("trained-on") and held-out prompts."""
METRICS = {  # column, history column of the held-out set, whether lower is worse
    "q_pos": ("mu_pos", True),
    "retained_mass": ("retained_mass", True),
    "dnll_rare": ("dnll_rare", False),
    "rare_hit_at_256": ("rare_hit_at_256", True),
}
"""The metrics of a ladder's tables: column name → (the sweep history's column for the held-out prompts, ``pool_``
prefixed for the training pool; whether a lower value is worse)."""


@dataclass(frozen=True)
class Rung:
    """A policy parameterisation and an optimizer with its learning rate."""

    model: str
    optimizer: str
    lr: float

    def __post_init__(self) -> None:
        check_choice("rung model", self.model, MODEL_KINDS)
        check_choice("rung optimizer", self.optimizer, OPTIMIZERS)
        lr = check_number("rung lr", self.lr, 0.0, lo_open=True)
        object.__setattr__(self, "lr", float(lr))

    @property
    def name(self) -> str:
        return f"{self.model}-{self.optimizer}-lr{self.lr:g}"


@dataclass(frozen=True)
class Ladder:
    """Rungs × group sizes × γ × seeds, each rung one :class:`~tailmiss.experiments.sweep.LLMSweep`.

    Attributes
    ----------
    name : str
    sft : SFTConfig
        The transformer every rung starts from (table and factorized rungs copy
        its exact answer distributions on the pool and held-out prompts).
    rl : RLConfig
        The base RL run: a fixed pool (``train_prompts > 0``) and a fixed
        evaluation set (``eval_seed`` set) are required, so that every rung and
        seed trains and is scored on the same prompts.
    rungs : tuple of Rung
    group_sizes, gammas, seeds : tuples
    budget : {"steps", "rollouts"}
        ``"steps"``: every N takes ``rl.steps`` steps. ``"rollouts"``: N takes
        ``rl.steps × reference_n / N`` steps (at least 1), the same rollouts.
    reference_n : int
    """

    name: str
    sft: SFTConfig
    rl: RLConfig
    rungs: tuple[Rung, ...]
    group_sizes: tuple[int, ...]
    gammas: tuple[float, ...] = (0.0, 0.5, 1.0)
    seeds: tuple[int, ...] = (0, 1, 2)
    budget: str = "steps"
    reference_n: int = 8

    def __post_init__(self) -> None:
        if not self.rl.train_prompts:
            raise ValueError("a ladder needs a fixed training pool: set rl.train_prompts > 0")
        if self.rl.eval_seed is None:
            raise ValueError("a ladder needs one evaluation set for every seed: set rl.eval_seed")
        if not self.sft.task.enumerable:
            raise ValueError(f"a ladder needs an enumerable task (exact masses), got {self.sft.task.name!r}")
        check_choice("budget", self.budget, BUDGETS)
        rungs = tuple(r if isinstance(r, Rung) else Rung(**r) for r in self.rungs)
        if not rungs or len({r.name for r in rungs}) != len(rungs):
            raise ValueError("rungs must be a non-empty list of distinct rungs")
        object.__setattr__(self, "rungs", rungs)
        object.__setattr__(self, "group_sizes", tuple(sorted(self.group_sizes)))
        object.__setattr__(self, "gammas", tuple(float(g) for g in self.gammas))
        self.sweeps()  # validates every variant now

    def steps_for(self, n: int) -> int | None:
        """Steps of group size ``n`` (``None``: the base config's)."""
        if self.budget == "steps":
            return None
        return max(1, round(self.rl.steps * self.reference_n / n))

    def init_config(self, model: str) -> SFTConfig:
        """The SFT config of a rung's starting point (the transformer's own, or a derived table policy)."""
        if model == "transformer":
            return self.sft
        rl = self.rl
        key = f"{rl.train_prompts}-{rl.pool_seed}-{rl.eval_split}-{rl.eval_prompts}-{rl.eval_seed}"
        digest = hashlib.blake2b(key.encode(), digest_size=4).hexdigest()
        return self.sft.replace(name=f"{self.sft.name}-{model}-{digest}", model=ModelConfig(kind=model))

    def sweeps(self) -> list[tuple[Rung, LLMSweep]]:
        """Each rung's sweep (variants: GRPO at every γ and N)."""
        out = []
        for rung in self.rungs:
            optim = self.rl.optim.replace(kind=rung.optimizer, lr=rung.lr)
            rl = self.rl.replace(name=f"{self.name}-{rung.name}", optim=optim)
            variants = tuple(
                Variant("grpo", g, n, steps=self.steps_for(n)) for g in self.gammas for n in self.group_sizes
            )
            sweep = LLMSweep(f"{self.name}-{rung.name}", self.init_config(rung.model), rl, variants, self.seeds)
            out.append((rung, sweep))
        return out

    def replace(self, **changes) -> Ladder:
        return dataclasses.replace(self, **changes)

    def jobs(self, root: str | Path, options: RunOptions = RunOptions()) -> list[Job]:
        """Pool jobs: the SFT run, each derived policy (after it) and every rung's RL runs (after their start)."""
        root = Path(root)
        sft_dir = root / self.sft.name
        sft = sft_job(self.sft, root, options.reuse_stale)
        jobs = [sft]
        for rung, sweep in self.sweeps():
            start = sft
            if rung.model != "transformer":
                out = root / sweep.sft.name
                args = (self.rl, sweep.sft, sft_dir, out)
                state = functools.partial(_policy_state, *args)
                start = Job(sweep.sft.name, derive_job, args, (sft.key,), f"{rung.model} policy {out.name}", state)
                jobs.append(start)
            jobs += sweep.jobs(root, options, start=start)[1:]
        return jobs


def policy_prompts(rl: RLConfig, task) -> list:
    """The prompts a table policy must hold: the training pool, then the held-out evaluation prompts."""
    pool = list(training_pool(task, rl.train_prompts, rl.pool_seed))
    held = task.prompts(rl.eval_split, rl.eval_prompts, seed=rl.eval_prompt_seed, distinct=True)
    keys = {tuple(task.prompt_tokens(p)) for p in pool}
    return pool + [p for p in held if tuple(task.prompt_tokens(p)) not in keys]


def derive_job(rl: RLConfig, cfg: SFTConfig, source: Path, out: Path, options: RunOptions = RunOptions()) -> None:
    """Pool job: the policy of ``cfg`` derived from the SFT run ``source`` on the ladder's prompts."""
    derive_policy(cfg, source, policy_prompts(rl, LoadedRun(source).task), out, log=options.log)


def _policy_state(rl: RLConfig, cfg: SFTConfig, source: Path, out: Path) -> UnitState:
    """``UnitState.FRESH`` when ``out`` holds the policy derived from ``source`` by this code, else ``MISSING``."""
    current = _current_policy(cfg, source, policy_prompts(rl, LoadedRun(source).task), out)[0]
    return UnitState.FRESH if current else UnitState.MISSING


def _current_policy(cfg: SFTConfig, source: Path, prompts, out: Path) -> tuple[bool, str, str]:
    """Whether ``out`` holds the policy derived from ``source``'s checkpoint on ``prompts`` by this code, and the
    two digests that say so."""
    src_sha = file_sha256(source / CHECKPOINT)
    tokens = LoadedRun(source).task.encode_prompts(prompts)
    prompts_sha = hashlib.sha256(tokens.numpy().tobytes()).hexdigest()
    current = False
    if run_state(out, cfg, None) is UnitState.FRESH:
        meta = read_meta(out)
        current = meta.get("source_checkpoint") == src_sha and meta.get("prompts_sha") == prompts_sha
    return current, src_sha, prompts_sha


def derive_policy(cfg: SFTConfig, source: str | Path, prompts, out: str | Path, log=None) -> Path:
    """A run folder (kind ``"sft"``) holding a table or factorized policy built from the SFT run ``source``.

    The policy copies the source transformer's exact answer distributions on
    ``prompts`` (:func:`tailmiss.llm.tabular.tabular_from_distribution`). A
    folder made from the same source checkpoint and prompts by the running
    code is reused; anything else is rebuilt (a few seconds).
    """
    if cfg.model.kind not in TABULAR_KINDS:
        raise ValueError(f"derive_policy builds {', '.join(TABULAR_KINDS)} policies, got {cfg.model.kind!r}")
    out, source = Path(out), Path(source)
    current, src_sha, prompts_sha = _current_policy(cfg, source, prompts, out)
    if current:
        return out
    check_may_compute(out, "derived policy")
    if out.exists():
        if log is not None:
            log(f"{out}: rebuilding the {cfg.model.kind} policy")
        shutil.rmtree(out)
    with unit_clock():  # the CPU seconds of the derivation, recorded in the policy's provenance
        src = LoadedRun(source)
        dist = answer_distribution(src.model, src.task, prompts)
        model = tabular_from_distribution(cfg.model.kind, src.task, prompts, dist.logp, dist.off_format)
        extra = {"derived_from": str(source), "source_checkpoint": src_sha, "prompts_sha": prompts_sha}
        return write_policy_run(model, src.task, cfg, out, extra)


def write_policy_run(model, task, cfg: SFTConfig, out: str | Path, meta: dict | None = None) -> Path:
    """Write ``model`` (a table or factorized policy) as a finished SFT-kind run folder that RL can start from."""
    if cfg.model.kind != getattr(model, "kind", None):
        raise ValueError(f"cfg.model.kind is {cfg.model.kind!r} but the model is a {type(model).__name__}")
    folder = RunFolder(out)
    folder.prepare(cfg, resume=False)
    state = {
        "kind": "sft",
        "step": cfg.steps,
        "config": cfg.to_dict(),
        "task": task.to_dict(),
        "model_config": dataclasses.asdict(cfg.model),
        "model": model.state_dict(),
        "history": [],
    }
    folder.save_checkpoint(state)
    probs = model.action_probs() if hasattr(model, "action_probs") else None
    row = {"step": cfg.steps, "params": model.num_params()}
    if probs is not None:
        row["off_format"] = float(probs[:, -1].mean())
    folder.write_history([row])
    folder.write_meta(
        {
            "kind": "sft",
            "complete": True,
            "params": model.num_params(),
            "steps": cfg.steps,
            **(meta or {}),
            **environment(torch.device("cpu")),
        }
    )
    return Path(out)


@dataclass
class LadderResult:
    """Every rung's runs, tidy.

    Attributes
    ----------
    ladder : Ladder
    final : DataFrame
        One row per rung, group size, γ, seed and evaluation set (``pool`` /
        ``heldout``): ``q_pos``, ``retained_mass``, ``dnll_rare``,
        ``rare_hit_at_256`` at the last step, ``steps`` and ``rollouts``.
    history : DataFrame
        The same columns at every evaluation step (``step``, ``rollouts``).
    sweeps : dict
        Rung name → :class:`~tailmiss.experiments.sweep.SweepResult`.
    """

    ladder: Ladder
    final: pd.DataFrame
    history: pd.DataFrame
    sweeps: dict


def _tidy(rung: Rung, result: SweepResult) -> pd.DataFrame:
    import pandas as pd

    h = result.history
    ident = {"rung": rung.name, "model": rung.model, "optimizer": rung.optimizer, "lr": rung.lr}
    frames = []
    for where, prefix in (("pool", "pool_"), ("heldout", "")):
        cols = {prefix + src: name for name, (src, _) in METRICS.items()}
        part = h[["group_size", "gamma", "seed", "step", "rollouts", *cols]].rename(columns=cols)
        frames.append(part.assign(set=where, **ident))
    return pd.concat(frames, ignore_index=True)


def run_ladder(ladder: Ladder, root: str | Path, options: RunOptions = RunOptions()) -> LadderResult | None:
    """Train (or reuse) every rung's sweep under ``root`` and return the tidy ladder.

    The transformer SFT run is trained (or reused) first; table and factorized
    rungs start from policies derived from it (:func:`derive_policy`); each
    rung is then an ordinary sweep (:func:`tailmiss.experiments.sweep.run_sweep`), so
    finished runs are reused and partial ones resumed. In one process every
    rung's runs (and the starting points) are trained together on ``options.jobs``
    processes of ``options.threads`` threads (:func:`tailmiss.experiments.pool.train_all`; default: here, one after
    another).
    Under ``torchrun`` rank 0 prepares the starting points, every rung's runs are shared among the ranks,
    and rank 0 returns the result (the others ``None``).
    """
    import pandas as pd

    from tailmiss.experiments.sweep import run_sweep

    if not isinstance(ladder, Ladder):
        raise ValueError(f"ladder must be a Ladder, got {type(ladder).__name__}")
    root, log = Path(root), options.say
    main = _dist.is_main()
    sft_dir = root / ladder.sft.name
    if _dist.world() == 1:  # every rung's runs on one pool; the rungs' sweeps below then only collect
        train_all([ladder], root, options)
    elif main:  # the SFT run and the derived policies on rank 0 alone; the other ranks wait
        with _dist.local():
            cached_sft(ladder.sft, root, options)
            prompts = policy_prompts(ladder.rl, LoadedRun(sft_dir).task)
            for rung, sweep in ladder.sweeps():
                if rung.model != "transformer":
                    derive_policy(sweep.sft, sft_dir, prompts, root / sweep.sft.name, log=log)
    _dist.barrier()
    results, frames = {}, []
    for rung, sweep in ladder.sweeps():
        if main:
            log(f"ladder {ladder.name}: rung {rung.name}")
        result = run_sweep(sweep, root, options.replace(jobs=1))
        if result is not None:  # rank 0 (under torchrun the ranks share each rung's runs)
            results[rung.name] = result
            frames.append(_tidy(rung, result))
    if not main:
        return None
    history = pd.concat(frames, ignore_index=True)
    last = history.groupby(["rung", "set", "group_size", "gamma", "seed"])["step"].transform("max")
    final = history[history["step"] == last].reset_index(drop=True)
    return LadderResult(ladder, final, history, results)
