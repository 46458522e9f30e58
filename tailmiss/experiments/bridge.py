r"""The bridge: the categorical simulation's regimes beside real RL runs of a small transformer.

For a group-size sweep of task (a) (:mod:`tailmiss.experiments.sweep`), every
evaluation prompt :math:`x` has an exactly known SFT answer distribution
:math:`\pi_0(\cdot \mid x)` over its :math:`10^K` well-formed answers. The bridge

1. turns each prompt into a categorical policy: one action per well-formed
   answer (correct answers first) plus one "off-format" action holding the mass
   of every other sequence, with logits :math:`\log \pi_0`;
2. runs the simulator (:func:`tailmiss.sim.simulate`, ``init="logits"``) from
   it with the LLM runs' group sizes, focal exponents, surrogate family
   (log-probability policy gradient with std-normalised group advantages, as
   GRPO) and update count (one update per LLM step), for every seed;
3. evaluates F-GRPO Lemma 3.1 per prompt with the SFT model's
   :math:`\mu_{pos}(x)` and the mass :math:`\tau(x)` of its rare-correct set
   (the correct answers of smallest SFT mass holding at most ``rare_share`` of
   :math:`\mu_{pos}(x)`): the predicted probability that an active group misses
   the rare set, beside the observed change of that set's mass;
4. saves the per-prompt rows and their summary (means over prompts, then
   seeds) per source, :math:`N` and :math:`\gamma`; the verdict (Spearman rank
   agreement of :math:`M_{ret}` and :math:`Q_{pos}` across :math:`N`, the zones
   of F-GRPO Fig. 2 in both, the focal effect) is judged from that summary in
   :mod:`tailmiss.studies.bridge.claims`.

The simulation and the transformer differ in one way the comparison cannot
remove: the transformer is never trained on the evaluation prompts (held-out
split), so their answer distributions move only through what the shared
weights learn from other prompts, while each simulated prompt is updated
directly. The bridge compares regimes (orderings in :math:`N`), not magnitudes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from tailmiss import analytic
from tailmiss.experiments.sweep import LLMSweep, SweepResult
from tailmiss.experiments.sweep_result import SCOPE as SWEEP_SCOPE
from tailmiss.llm.checkpoint import LoadedRun
from tailmiss.llm.evaluate import AnswerDistribution, _rare_sets, answer_distribution
from tailmiss.options import RunOptions
from tailmiss.sim.config import SimConfig
from tailmiss.sim.engine import simulate
from tailmiss.store import Scope, UnitKind, lookup, open_unit, own_scope_of, read_meta, save_tables, unit_clock

__all__ = [
    "BRIDGE_GAMMAS",
    "DEFAULT_SIM_LR",
    "SENSITIVITY_LRS",
    "BridgeResult",
    "BRIDGE_UNIT",
    "prompt_policies",
    "bridge_name",
    "run_bridge",
]

BRIDGE_GAMMAS = (0.0, 0.5, 1.0)
"""Focal exponents simulated at every group size."""
DEFAULT_SIM_LR = 1e-2
"""Adam learning rate of the simulated logits (F-GRPO App. J's)."""
SENSITIVITY_LRS = (1e-2, 3e-2, 1e-1)
"""Simulator learning rates the report checks the verdict against (the LLM runs fix N, γ and steps, not this)."""
_OFF_FORMAT_FLOOR = 1e-30
_FILES = ("prompts.csv", "summary.csv", "config.toml", "meta.json")
SCOPE = Scope("bridge", ("sim", "llm", "experiments/sweep.py", "experiments/bridge.py"), SWEEP_SCOPE.no_numbers)
"""A bridge result's numbers: the sweep result's and the simulator's, and the code that joins them."""


@dataclass(frozen=True)
class PromptPolicy:
    """One prompt's SFT answer distribution as a categorical policy (correct actions first, off-format last)."""

    logits: np.ndarray
    num_correct: int
    rare: np.ndarray
    """Boolean mask over the actions: the prompt's rare-correct set."""
    mu_pos: float
    tau: float


def prompt_policies(reference: AnswerDistribution, rare_share: float) -> list[PromptPolicy]:
    """Categorical policies of every prompt of ``reference`` (exact SFT answer distributions).

    Each prompt's actions are its correct answers, then its incorrect ones, then
    one off-format action with mass :math:`1 - \\sum_a \\pi_0(a)` (floored at
    1e-30 so its logit stays finite); the logits are the float64 log-masses.
    """
    rare_all = _rare_sets(reference, rare_share)
    out = []
    for i in range(reference.logp.shape[0]):
        logp, correct = reference.logp[i].numpy(), reference.correct[i].numpy()
        valid = np.isfinite(logp)
        rare = rare_all[i].numpy()
        order = np.concatenate([np.flatnonzero(correct & valid), np.flatnonzero(~correct & valid)])
        off = max(float(reference.off_format[i]), _OFF_FORMAT_FLOOR)
        logits = np.concatenate([logp[order], [np.log(off)]])
        mask = np.concatenate([rare[order], [False]])
        probs = np.exp(logp[order])
        c = int((correct & valid).sum())
        out.append(PromptPolicy(logits, c, mask, float(probs[:c].sum()), float(probs[mask[:-1]].sum())))
    return out


def _sim_config(policy: PromptPolicy, sweep: LLMSweep, group_sizes, seeds, lr: float) -> SimConfig:
    rl = sweep.rl
    return SimConfig(
        name="bridge",
        num_actions=len(policy.logits),
        num_correct=policy.num_correct,
        init="logits",
        logits=tuple(float(x) for x in policy.logits),
        reward_correct=1.0,
        reward_incorrect=0.0,  # the transformer's binary verifier
        advantage="std",
        std_kind=rl.std_kind,
        adv_eps=rl.adv_eps,
        surrogate="logprob",
        optimizer="adam",
        lr=lr,
        group_sizes=tuple(group_sizes),
        gammas=BRIDGE_GAMMAS,
        seeds=tuple(seeds),
        steps=rl.steps,
        log_every=rl.steps,
        dtype="float64",
    )


def _simulate_prompts(policies, sweep, lr, progress) -> pd.DataFrame:
    group_sizes = sorted({v.group_size for v in sweep.variants})
    rows = []
    bar = None
    if progress:
        from tailmiss.options import ProgressBar

        bar = ProgressBar(total=len(policies), description=f"bridge: simulating {len(policies)} prompts")
    try:
        for i, pol in enumerate(policies):
            cfg = _sim_config(pol, sweep, group_sizes, sweep.seeds, lr)
            res = simulate(cfg, device="cpu", progress=False, keep_final=True)
            final = res.final
            tau_end = res.final_probs[:, pol.rare].sum(1)
            for r, (n, g, s) in enumerate(cfg.runs()):
                rows.append(
                    {
                        "source": "sim",
                        "prompt": i,
                        "group_size": n,
                        "gamma": float(g),
                        "seed": s,
                        "mu_pos0": pol.mu_pos,
                        "tau0": pol.tau,
                        "q_pos": float(final["q_pos"].iloc[r]),
                        "retained_mass": float(final["retained_mass"].iloc[r]),
                        "tau": float(tau_end[r]),
                    }
                )
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return pd.DataFrame(rows)


def _llm_prompts(sweep: LLMSweep, root: Path, prompts, policies, reference) -> pd.DataFrame:
    rows = []
    p0 = reference.probs
    rare = _rare_sets(reference, sweep.rl.rare_share)
    c0 = (p0 * reference.correct).sum(1)
    for variant, seed, cfg in sweep.runs():
        run = LoadedRun(root / cfg.name)
        cur = answer_distribution(run.model, run.task, prompts)
        p = cur.probs
        retained = 1.0 - ((p0 - p).clamp(min=0.0) * cur.correct).sum(1) / c0
        tau = (p * rare).sum(1)
        for i, pol in enumerate(policies):
            rows.append(
                {
                    "source": "llm",
                    "prompt": i,
                    "group_size": variant.group_size,
                    "gamma": variant.gamma,
                    "seed": seed,
                    "mu_pos0": pol.mu_pos,
                    "tau0": pol.tau,
                    "q_pos": float(cur.mu_pos[i]),
                    "retained_mass": float(retained[i]),
                    "tau": float(tau[i]),
                }
            )
    return pd.DataFrame(rows)


@dataclass
class BridgeResult:
    """Per-prompt and summary comparison of a sweep's LLM runs with their simulation.

    Attributes
    ----------
    prompts : DataFrame
        One row per source (``llm``/``sim``), prompt, group size, γ and seed:
        SFT ``mu_pos0`` and ``tau0``, final ``q_pos``, ``retained_mass`` and
        rare-set mass ``tau``, and ``tail_miss`` (Lemma 3.1 at the SFT
        :math:`\\mu_{pos}, \\tau` and that group size).
    summary : DataFrame
        Means over prompts, then mean and standard deviation over seeds, per
        source, group size and γ.
    sweep : LLMSweep
    sim_lr : float
    """

    prompts: pd.DataFrame
    summary: pd.DataFrame
    sweep: LLMSweep
    sim_lr: float

    def save(self, path: str | Path) -> Path:
        """Write ``path/`` atomically, sealed with checksums and provenance (:func:`tailmiss.store.save_unit`)."""
        tables = {"prompts.csv": self.prompts, "summary.csv": self.summary}
        return save_tables(path, self.sweep, tables, {"sim_lr": self.sim_lr}, SCOPE, BRIDGE_UNIT.what)

    @classmethod
    def load(cls, path: str | Path) -> BridgeResult:
        """Read a saved result after verifying its checksums (``CorruptUnit`` otherwise)."""
        path = Path(path)
        open_unit(path, BRIDGE_UNIT.files, BRIDGE_UNIT.what)
        lr = read_meta(path)["sim_lr"]
        return cls(
            prompts=pd.read_csv(path / "prompts.csv"),
            summary=pd.read_csv(path / "summary.csv"),
            sweep=LLMSweep.from_toml(path / "config.toml"),
            sim_lr=lr,
        )


BRIDGE_UNIT = UnitKind(_FILES, "bridge result", SCOPE, BridgeResult.load)
"""A saved :class:`BridgeResult` as a unit of the store: its files, its name, its scope and its loader."""


def _summarise(prompts: pd.DataFrame) -> pd.DataFrame:
    keys = ["source", "group_size", "gamma"]
    per_seed = prompts.groupby([*keys, "seed"], as_index=False)[["q_pos", "retained_mass"]].mean()
    g = per_seed.groupby(keys)[["q_pos", "retained_mass"]]
    ddof = 1 if per_seed["seed"].nunique() > 1 else 0
    return g.mean().join(g.std(ddof=ddof).add_suffix("_sd")).reset_index()


def bridge_name(sweep: LLMSweep, sim_lr: float = DEFAULT_SIM_LR) -> str:
    """The folder of the bridge of ``sweep`` at ``sim_lr`` under the cache: ``<sweep>-bridge`` at the default rate,
    ``<sweep>-bridge-lr<sim_lr>`` at another."""
    return f"{sweep.name}-bridge" if sim_lr == DEFAULT_SIM_LR else f"{sweep.name}-bridge-lr{sim_lr:g}"


def run_bridge(
    sweep_result: SweepResult,
    root: str | Path,
    sim_lr: float = DEFAULT_SIM_LR,
    options: RunOptions = RunOptions(),
) -> BridgeResult:
    """Simulate every evaluation prompt of a finished task-(a) sweep and compare with its LLM runs.

    Parameters
    ----------
    sweep_result : SweepResult
        A finished sweep (:func:`tailmiss.experiments.sweep.run_sweep`) on an
        enumerable task; its run folders must be under ``root``.
    root : path
        The sweep's cache root; the result is saved to ``root/<sweep>-bridge``
        (``-bridge-lr<sim_lr>`` for another learning rate) and reused when it
        was made from the same sweep and ``sim_lr``.
    sim_lr : float
        Adam learning rate of the simulated logits (F-GRPO App. J uses 1e-2).
    options : RunOptions
        Progress bars, the log of cache decisions and whether to reuse a saved comparison made by other code
        (``reuse_stale``, with a warning). The simulations run on the CPU in this process.
    """
    if not isinstance(sweep_result, SweepResult):
        raise ValueError(f"sweep_result must be a SweepResult, got {type(sweep_result).__name__}")
    if not (isinstance(sim_lr, (int, float)) and np.isfinite(sim_lr) and sim_lr > 0):
        raise ValueError(f"sim_lr must be a positive number, got {sim_lr!r}")
    sweep, root = sweep_result.config, Path(root)
    out_dir = root / bridge_name(sweep, sim_lr)
    found = lookup(
        out_dir,
        BRIDGE_UNIT,
        lambda r: r.sweep == sweep and r.sim_lr == float(sim_lr),
        reuse_stale=options.reuse_stale,
        log=options.log,
        modules=own_scope_of(sweep.sft.task),
    )
    if found.usable:
        return found.value
    with unit_clock():  # the CPU seconds of the comparison, recorded in the result
        frame = _compare(sweep, root, float(sim_lr), options.progress)
        BridgeResult(frame, _summarise(frame), sweep, float(sim_lr)).save(out_dir)
    return BridgeResult.load(out_dir)  # as saved: the numbers a later reuse reads, to the last digit


def _compare(sweep: LLMSweep, root: Path, sim_lr: float, progress: bool) -> pd.DataFrame:
    """Per prompt, run and group size: the transformer's runs beside the simulator's from the SFT model's answer
    distribution on the sweep's evaluation prompts, with each prompt's tail-miss probability (F-GRPO Lemma 3.1)."""
    sft = LoadedRun(root / sweep.sft.name)
    if not sft.task.enumerable:
        raise ValueError(f"the bridge needs an enumerable task, got {sft.task.name!r}")
    torch.set_grad_enabled(True)
    prompts = sft.task.prompts(sweep.rl.eval_split, sweep.rl.eval_prompts, seed=sweep.rl.seed, distinct=True)
    reference = answer_distribution(sft.model, sft.task, prompts)
    policies = prompt_policies(reference, sweep.rl.rare_share)
    frame = pd.concat(
        [_llm_prompts(sweep, root, prompts, policies, reference), _simulate_prompts(policies, sweep, sim_lr, progress)],
        ignore_index=True,
    )
    has_rare = frame["tau0"] > 0
    frame["tail_miss"] = np.nan
    frame.loc[has_rare, "tail_miss"] = analytic.tail_miss_probability(
        frame.loc[has_rare, "mu_pos0"].to_numpy(),
        frame.loc[has_rare, "tau0"].to_numpy(),
        frame.loc[has_rare, "group_size"].to_numpy(),
    )
    return frame
