r"""Where the minority's loss comes from: a first-order attribution of one RL step to the groups of its batch.

For a policy :math:`\pi_\theta` and a batch of groups :math:`j` (one training prompt, its N rollouts, their
focal-weighted advantages), the method's loss is a sum over groups, :math:`\mathcal L = \sum_j \mathcal L_j`
(:math:`\mathcal L_j`: the group's token losses over the batch's denominator, so the parts add up to the batch's
loss). A gradient step :math:`\theta \to \theta - \eta \nabla \mathcal L` changes any differentiable target
:math:`T(\theta)` by

.. math::

    \Delta T \approx -\eta\, \langle \nabla T, \nabla \mathcal L \rangle
             = \eta \sum_j c_j, \qquad c_j = -\langle \nabla T, \nabla \mathcal L_j \rangle ,

so :math:`c_j` is group :math:`j`'s share of the step's first-order change of :math:`T`: positive when its update
raises the target, negative when it *interferes*. The target here is the held-out minority's log correct mass,
:math:`T = \log \frac{1}{|P|}\sum_{x \in P} \sum_{y \in C(x)} \pi_\theta(y \mid x)` (exact: every correct answer of
every held-out minority prompt scored by teacher forcing), and the same for the rest as a control.

Each group is labelled by its prompt's type (minority or rest) and its success count :math:`X` out of N, so the
sum of :math:`c_j` splits into what the minority's own groups and the rest's groups contribute, by how often they
succeed. Under the focal weight (F-GRPO, arXiv 2602.06717, §4.1) each group's advantages are scaled by
:math:`(1 - X/N)^\gamma`, so F-GRPO's :math:`c_j` at the same model and batch is GRPO's times that weight: the
attribution says whether its gain comes from fewer pushes by high-success rest groups or more lift from rare
minority successes.

The trainer steps with AdamW, which rescales each coordinate of the gradient; the attribution is that of a plain
gradient step. Its signs and the relative sizes of the parts are what carry over, not the magnitudes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from tailmiss import objectives
from tailmiss.llm.config import RLConfig
from tailmiss.llm.model import answer_logprobs, generate
from tailmiss.llm.rl_update import advantages
from tailmiss.llm.rollouts import response_mask
from tailmiss.llm.tasks import EOS, PAD

__all__ = ["GroupBatch", "log_correct_mass", "sample_batch", "group_contributions", "attribute", "BUCKETS", "bucket"]

BUCKETS = ("none correct", "rare (X/N < 1/2)", "frequent (1/2 ≤ X/N < 1)", "all correct")
"""The success buckets a group falls in by its share of correct rollouts (the first and last are silent under
GRPO: their advantages are zero)."""


def bucket(x: int, n: int) -> str:
    """The :data:`BUCKETS` entry of a group with ``x`` correct rollouts out of ``n``."""
    if x == 0:
        return BUCKETS[0]
    if x == n:
        return BUCKETS[3]
    return BUCKETS[1] if 2 * x < n else BUCKETS[2]


@dataclass(frozen=True)
class GroupBatch:
    """One sampled batch: ``prompts`` (G), their ``prompt_ids`` and ``answers`` (G*N rows), ``mask`` and ``rewards``
    (G, N)."""

    prompts: list
    prompt_ids: torch.Tensor
    answers: torch.Tensor
    mask: torch.Tensor
    rewards: torch.Tensor


def log_correct_mass(model, task, prompts: Sequence, temperature: float = 1.0) -> torch.Tensor:
    r"""The differentiable :math:`\log \frac{1}{|P|}\sum_{x} \sum_{y \in C(x)} \pi_\theta(y \mid x)` over ``prompts``
    (every correct answer of each, scored by teacher forcing; the task must be enumerable)."""
    masses = []
    for prompt in prompts:
        answers = task.enumerate_answers(prompt)
        tokens = answers.tokens[answers.correct]
        if tokens.shape[0] == 0:
            masses.append(torch.zeros((), dtype=torch.float64))
            continue
        ids = task.encode_prompts([prompt]).expand(tokens.shape[0], -1)
        logp = answer_logprobs(model, ids, tokens, temperature)  # (M, L)
        seq = torch.where(tokens != PAD, logp, 0.0).double().sum(1)
        masses.append(seq.exp().sum())
    return torch.stack(masses).mean().log()


def sample_batch(model, task, cfg: RLConfig, prompts: Sequence, seed: int) -> GroupBatch:
    """``cfg.group_size`` rollouts of each of ``prompts`` from ``model`` (the run's sampling settings, one seeded
    generator) and their rewards."""
    n = cfg.group_size
    prompt_ids = task.encode_prompts(prompts).repeat_interleave(n, dim=0)  # (G*N, P)
    gen = torch.Generator().manual_seed(int(seed))
    model.eval()
    with torch.no_grad():
        answers, _ = generate(
            model, prompt_ids, task.max_answer_len, EOS, PAD, cfg.temperature, cfg.top_k or None, cfg.top_p, gen
        )
    rewards = torch.tensor(
        [task.reward(prompts[i // n], row) for i, row in enumerate(answers.tolist())], dtype=torch.float64
    ).view(len(prompts), n)  # (G, N)
    return GroupBatch(list(prompts), prompt_ids, answers, response_mask(answers), rewards)


def _flat_grad(value: torch.Tensor, params: list) -> torch.Tensor:
    grads = torch.autograd.grad(value, params, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params)])


def group_contributions(model, cfg: RLConfig, batch: GroupBatch, targets: dict) -> pd.DataFrame:
    r"""Each group's :math:`c_j = -\langle \nabla T, \nabla \mathcal L_j \rangle` for every target (module docstring),
    on-policy (the first mini-batch's ratio is 1, so the clip is inactive), with the run's advantages and focal
    weight (:func:`tailmiss.llm.rl_update.advantages`) and aggregation.

    Parameters
    ----------
    model : GPT
    cfg : RLConfig
        The run's method, γ, advantage and loss settings.
    batch : GroupBatch
    targets : dict
        Name -> the flattened gradient :math:`\nabla T` (as :func:`attribute` computes it).

    Returns
    -------
    DataFrame
        One row per group: ``group``, ``correct`` (X), ``focal`` (its weight), and one column per target.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    adv, g = advantages(batch.rewards, cfg)
    adv = adv.reshape(-1, 1)  # (G*N, 1), in the model's dtype below (float32 in training, as the trainer's)
    loss_cfg = cfg.resolved_loss()
    aggregation = objectives.AGGREGATIONS[loss_cfg.aggregation]
    whole = max(int(aggregation.denominator(batch.mask, loss_cfg)), 1)
    n = cfg.group_size
    rows = []
    model.train()
    for j in range(batch.rewards.shape[0]):
        idx = slice(j * n, (j + 1) * n)
        mask = batch.mask[idx]
        logp = answer_logprobs(model, batch.prompt_ids[idx], batch.answers[idx], cfg.temperature)
        part = objectives.policy_loss(cfg.method, logp, logp.detach(), adv[idx].to(logp.dtype), mask, loss_cfg)
        share = int(aggregation.denominator(mask, loss_cfg)) / whole  # the group's part of the batch's loss
        grad = _flat_grad(part * share, params)
        row = {"group": j, "correct": int((batch.rewards[j] > 0.5).sum()), "focal": float(g[j])}
        row.update({name: -float(torch.dot(t, grad.double())) for name, t in targets.items()})
        rows.append(row)
    model.eval()
    return pd.DataFrame(rows)


def attribute(model, task, cfgs: dict, held_out: dict, batches: int, seed: int) -> pd.DataFrame:
    """The attribution of ``batches`` sampled batches from ``model``, read under each run config of ``cfgs``
    (label -> RLConfig; every config's batch is the same rollouts: the sampling settings must agree).

    Parameters
    ----------
    model : GPT
    task : Task
        Enumerable, with ``minority_mask``.
    cfgs : dict
        Arm label -> its RLConfig (method, γ, loss); the first one's sampling settings draw the batches.
    held_out : dict
        Target name (``minority``, ``rest``) -> its held-out prompts.
    batches : int
        Batches of ``prompts_per_step`` training prompts.
    seed : int
        Seeds the prompts and rollouts (batch ``b`` uses ``seed + b``).

    Returns
    -------
    DataFrame
        One row per arm, batch and group: ``label, batch, group, type, correct, bucket, focal`` and one column per
        target (its :math:`c_j`).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    model.eval()
    targets = {
        name: _flat_grad(log_correct_mass(model, task, prompts, next(iter(cfgs.values())).temperature), params).double()
        for name, prompts in held_out.items()
    }
    first = next(iter(cfgs.values()))
    frames = []
    for b in range(batches):
        prompts = task.prompts("train", first.prompts_per_step, seed=int(seed) * 1000 + b)
        batch = sample_batch(model, task, first, prompts, seed=int(seed) * 1000 + b)
        kinds = np.where(task.minority_mask(prompts), "minority", "rest")
        for label, cfg in cfgs.items():
            part = group_contributions(model, cfg, batch, targets)
            part["type"] = kinds[part["group"].to_numpy()]
            part["bucket"] = [bucket(x, cfg.group_size) for x in part["correct"]]
            frames.append(part.assign(label=label, batch=b))
    return pd.concat(frames, ignore_index=True)


ARMS = ("GRPO N=8", "F-GRPO γ=1 N=8")
"""The arms attributed: GRPO and F-GRPO (γ = 1) at N = 8."""
SFT_BATCHES = 5
"""Batches drawn from the SFT model (both arms read the same batches there: the seeds of its rows)."""
FINAL_BATCHES = 2
"""Batches drawn from each run's final checkpoint."""


def _held_out(task, cfg: RLConfig) -> dict:
    """The run's held-out prompts split by type: ``minority`` and ``rest``."""
    prompts = task.prompts(cfg.eval_split, cfg.eval_prompts, seed=cfg.eval_prompt_seed, distinct=True)
    mask = task.minority_mask(prompts)
    return {
        "minority": [p for p, m in zip(prompts, mask) if m],
        "rest": [p for p, m in zip(prompts, mask) if not m],
    }


def attribution_runs(sweeps: dict, root, seeds: Sequence[int] = range(5)) -> pd.DataFrame:
    """The attribution (:func:`attribute`) at the SFT model and at each run's final checkpoint.

    Parameters
    ----------
    sweeps : dict
        Checkpoint name (``"step 400"``, ``"step 1600"``) -> the sweeps (a list of
        :class:`~tailmiss.experiments.sweep_config.LLMSweep`) whose runs of :data:`ARMS` are read there; all start from
        one SFT model, whose attribution is the ``"SFT model"`` rows.
    root : path
        The LLM runs' folder.
    seeds : sequence of int
        The SFT model's batch seeds (:data:`SFT_BATCHES` of them by default), one row ``seed`` each.

    Returns
    -------
    DataFrame
        :func:`attribute`'s rows with ``checkpoint`` and ``seed`` (the run's seed; at the SFT model, the batch's).
    """
    from pathlib import Path

    from tailmiss.llm.checkpoint import LoadedRun

    torch.manual_seed(0)
    frames, sft_done = [], False
    for checkpoint, group in sweeps.items():
        runs = {(v.label, s): (sweep, c) for sweep in group for v, s, c in sweep.runs() if v.label in ARMS}
        if not runs:
            continue
        sweep, first = next(iter(runs.values()))
        task, held = sweep.sft.task, _held_out(sweep.sft.task, first)
        if not sft_done:  # one SFT model: both arms read the same batches there
            sft = LoadedRun(Path(root) / sweep.sft.name).model
            cfgs = {label: c for (label, s), (_, c) in runs.items() if s == min(s for _, s in runs)}
            for seed in list(seeds)[:SFT_BATCHES]:
                part = attribute(sft, task, cfgs, held, batches=1, seed=10_000 + seed)
                frames.append(part.assign(checkpoint="SFT model", seed=seed))
            sft_done = True
        for (label, seed), (_, cfg) in sorted(runs.items()):
            model = LoadedRun(Path(root) / cfg.name).model
            part = attribute(model, task, {label: cfg}, held, batches=FINAL_BATCHES, seed=seed)
            frames.append(part.assign(checkpoint=checkpoint, seed=seed))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def attribution_table(rows: pd.DataFrame, target: str = "minority") -> pd.DataFrame:
    """Per checkpoint, arm and seed: the mean over batches of the summed :math:`c_j` on ``target`` of the minority's
    groups, the rest's groups, and the rest's rare and frequent groups (the parts of :func:`attribute`'s rows)."""
    per_batch = rows.assign(
        minority_groups=np.where(rows["type"] == "minority", rows[target], 0.0),
        rest_groups=np.where(rows["type"] == "rest", rows[target], 0.0),
        rest_rare=np.where((rows["type"] == "rest") & (rows["bucket"] == BUCKETS[1]), rows[target], 0.0),
        rest_frequent=np.where((rows["type"] == "rest") & (rows["bucket"] == BUCKETS[2]), rows[target], 0.0),
        total=rows[target],
    )
    parts = ["minority_groups", "rest_groups", "rest_rare", "rest_frequent", "total"]
    sums = per_batch.groupby(["checkpoint", "label", "seed", "batch"], sort=False)[parts].sum()
    return sums.groupby(["checkpoint", "label", "seed"], sort=False).mean().reset_index()
