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

As a unit of the store (:func:`run_attribution`, saved as ``root/<sweep>-attribution/``) it reads the final weights of
a sweep's chosen runs, which the evidence archive does not keep (:mod:`tailmiss.archive`): it is computed where the
runs were trained (or trained again) and archived like any unit, reused while its sweep, its runs, its batches and
its code are the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from tailmiss import objectives
from tailmiss.llm.config import RLConfig
from tailmiss.llm.model import answer_logprobs, generate
from tailmiss.llm.rl_update import advantages
from tailmiss.llm.rollouts import response_mask
from tailmiss.llm.tasks import EOS, PAD
from tailmiss.options import RunOptions
from tailmiss.store import Scope, UnitKind, lookup, open_unit, own_scope_of, read_meta, save_tables, unit_clock

__all__ = [
    "BUCKETS",
    "bucket",
    "GroupBatch",
    "log_correct_mass",
    "sample_batch",
    "group_contributions",
    "attribute",
    "held_out_by_type",
    "attribute_runs",
    "Attribution",
    "ATTRIBUTION_UNIT",
    "SCOPE",
    "attribution_name",
    "run_attribution",
]

SCOPE = Scope("attribution", ("llm", "experiments/attribution.py"))
"""Its numbers: the runs' (the trainer's), the sampling and the attribution here."""

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


def held_out_by_type(task, cfg: RLConfig) -> dict:
    """A run's held-out prompts split by type: ``minority`` and ``rest`` (the task's ``minority_mask``)."""
    prompts = task.prompts(cfg.eval_split, cfg.eval_prompts, seed=cfg.eval_prompt_seed, distinct=True)
    mask = task.minority_mask(prompts)
    return {
        "minority": [p for p, m in zip(prompts, mask) if m],
        "rest": [p for p, m in zip(prompts, mask) if not m],
    }


def _chosen(sweep, labels: Sequence[str], seeds: Sequence[int]) -> dict:
    """``(label, seed) -> RLConfig`` of the runs of ``sweep`` the attribution reads; ``ValueError`` naming a label or
    seed the sweep lacks."""
    have_labels = {v.label for v in sweep.variants}
    unknown = [label for label in labels if label not in have_labels]
    if unknown:
        raise ValueError(f"labels {unknown!r} are not variants of the sweep {sweep.name!r}")
    absent = [s for s in seeds if s not in set(sweep.seeds)]
    if absent:
        raise ValueError(f"seeds {absent!r} are not seeds of the sweep {sweep.name!r}")
    return {(v.label, s): cfg for v, s, cfg in sweep.runs() if v.label in labels and s in seeds}


def attribute_runs(
    sweep, root, labels: Sequence[str], seeds: Sequence[int], batches: int, sft_batches: int = 0
) -> pd.DataFrame:
    """The attribution (:func:`attribute`) at the final checkpoint of each run of ``labels`` and ``seeds`` of
    ``sweep``, and (``sft_batches`` > 0) at the sweep's SFT model.

    Parameters
    ----------
    sweep : LLMSweep
        Its task must be enumerable and have ``minority_mask`` (the narrowing task).
    root : path
        The LLM runs' folder, holding the runs with their weights and the SFT model.
    labels, seeds : sequence
        The runs read.
    batches : int
        Batches drawn from each run's final checkpoint (batch ``b`` of seed ``s``: seed ``1000 s + b``).
    sft_batches : int
        Batches drawn from the SFT model, each read under every label's config (the same rollouts: the focal weight
        alone differs); their rows' ``seed`` is the batch's index ``i``, drawn with seed ``1000 (10000 + i)``.

    Returns
    -------
    DataFrame
        :func:`attribute`'s rows with ``checkpoint`` (``"SFT model"`` or ``"step <steps>"``) and ``seed``.
    """
    from tailmiss.llm.checkpoint import LoadedRun

    if batches < 1 or sft_batches < 0:
        raise ValueError(f"batches must be ≥ 1 and sft_batches ≥ 0, got {batches} and {sft_batches}")
    runs = _chosen(sweep, labels, seeds)
    task = sweep.sft.task
    first = runs[min(runs, key=lambda k: (k[1], labels.index(k[0])))]
    held = held_out_by_type(task, first)
    torch.manual_seed(0)
    frames = []
    if sft_batches:
        from tailmiss import archive

        archive.ensure(Path(root) / sweep.sft.name)  # the SFT model's weights, restored from the archive if need be
        sft = LoadedRun(Path(root) / sweep.sft.name).model
        low = min(seeds)
        cfgs = {label: runs[(label, low)] for label in labels}
        for i in range(sft_batches):
            part = attribute(sft, task, cfgs, held, batches=1, seed=10_000 + i)
            frames.append(part.assign(checkpoint="SFT model", seed=i))
    checkpoint = f"step {sweep.rl.steps}"
    for (label, seed), cfg in sorted(runs.items()):
        model = LoadedRun(Path(root) / cfg.name).model
        part = attribute(model, task, {label: cfg}, held, batches=batches, seed=seed)
        frames.append(part.assign(checkpoint=checkpoint, seed=seed))
    return pd.concat(frames, ignore_index=True)


_FILES = ("config.toml", "groups.csv", "meta.json")


@dataclass
class Attribution:
    """:func:`attribute_runs` of a sweep's runs, as stored.

    Attributes
    ----------
    sweep : LLMSweep
    labels : tuple of str
    seeds : tuple of int
    batches, sft_batches : int
    groups : DataFrame
        One row per checkpoint, arm, seed, batch and group (:func:`attribute_runs`).
    as_archived : dict
        Run name -> whether the final weights read are those its archived copy recorded (None: the archive holds no
        copy of it). The archive keeps no RL run's weights, so they come from the runs trained again: on a CPU other
        than the one that trained them the rounding can differ, and a sampled run then takes another path.
    """

    sweep: object
    labels: tuple[str, ...]
    seeds: tuple[int, ...]
    batches: int
    sft_batches: int
    groups: pd.DataFrame
    as_archived: dict = field(default_factory=dict)

    def key(self) -> dict:
        """The ``meta.json`` fields that key the unit besides its sweep."""
        return {
            "labels": list(self.labels),
            "seeds": [int(s) for s in self.seeds],
            "batches": int(self.batches),
            "sft_batches": int(self.sft_batches),
        }

    def save(self, path: str | Path) -> Path:
        """Write ``path/`` atomically, sealed with checksums and provenance (:func:`tailmiss.store.save_tables`)."""
        meta = {**self.key(), "as_archived": dict(self.as_archived)}
        return save_tables(path, self.sweep, {"groups.csv": self.groups}, meta, SCOPE, ATTRIBUTION_UNIT.what)

    @classmethod
    def load(cls, path: str | Path) -> Attribution:
        """Read a saved unit after verifying its checksums (``CorruptUnit`` otherwise)."""
        from tailmiss.experiments.sweep_config import LLMSweep

        path = Path(path)
        open_unit(path, ATTRIBUTION_UNIT.files, ATTRIBUTION_UNIT.what)
        meta = read_meta(path)
        groups = pd.read_csv(path / "groups.csv", dtype={"seed": "int64", "batch": "int64", "group": "int64"})
        return cls(
            sweep=LLMSweep.from_toml(path / "config.toml"),
            labels=tuple(meta["labels"]),
            seeds=tuple(int(s) for s in meta["seeds"]),
            batches=int(meta["batches"]),
            sft_batches=int(meta["sft_batches"]),
            groups=groups,
            as_archived=dict(meta.get("as_archived") or {}),
        )


ATTRIBUTION_UNIT = UnitKind(_FILES, "attribution", SCOPE, Attribution.load)


def attribution_name(sweep) -> str:
    """The unit's folder name under the cache: ``<sweep>-attribution``."""
    return f"{sweep.name}-attribution"


def _as_archived(root, runs: Sequence[str]) -> dict:
    """Run name -> whether ``root/<run>`` came out as its archived copy recorded (:func:`tailmiss.archive.differs_from`;
    None without a copy)."""
    from tailmiss import archive

    out = {}
    for name in sorted(runs):
        moved = archive.differs_from(Path(root) / name)
        out[name] = None if moved is None else not moved
    return out


def run_attribution(
    sweep,
    root: str | Path,
    labels: Sequence[str],
    seeds: Sequence[int],
    batches: int,
    sft_batches: int = 0,
    options: RunOptions = RunOptions(),
) -> Attribution:
    """:func:`attribute_runs` of the finished runs of ``sweep`` under ``root``, saved as ``root/<sweep>-attribution/``,
    or that unit when it holds the same sweep, runs and batches made by the running code (or by the evidence
    archive's)."""
    from tailmiss.experiments.sweep_config import LLMSweep

    if not isinstance(sweep, LLMSweep):
        raise ValueError(f"sweep must be an LLMSweep, got {type(sweep).__name__}")
    labels, seeds = tuple(labels), tuple(int(s) for s in seeds)
    _chosen(sweep, labels, seeds)
    want = Attribution(sweep, labels, seeds, int(batches), int(sft_batches), pd.DataFrame()).key()
    out = Path(root) / attribution_name(sweep)
    found = lookup(
        out,
        ATTRIBUTION_UNIT,
        lambda r: r.sweep == sweep and r.key() == want,
        options.reuse_stale,
        options.log,
        own_scope_of(sweep.sft.task),
    )
    if found.usable:
        return found.value
    with unit_clock():  # the CPU seconds of the attribution, recorded in the unit
        groups = attribute_runs(sweep, root, labels, seeds, batches, sft_batches)
        runs = [cfg.name for cfg in _chosen(sweep, labels, seeds).values()]
        found = Attribution(sweep, labels, seeds, int(batches), int(sft_batches), groups, _as_archived(root, runs))
        found.save(out)
    return Attribution.load(out)  # as saved: the numbers a later reuse reads, to the last digit
