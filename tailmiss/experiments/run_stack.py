r"""Several RL runs trained as one stack: the loop of :func:`tailmiss.llm.train.train_rl`, batched over runs.

The simulator advances every run of a sweep as one ``[runs, actions]`` tensor; :func:`train_rl_stack` does the same
for the transformer. Runs that share their shapes (:func:`stack_key`: the model, the task, the group size, prompts
per step, mini-batches, steps and sampling settings) and differ in anything else — seed, focal :math:`\gamma`,
learning rate and schedule, loss coefficients, method, evaluation — take each stage of a step together:

1. **Rollouts**: every run's prompts (its own draw), sampled in one pass of
   :class:`~tailmiss.experiments.stack_model.StackedGPT` with each run's own random stream
   (:func:`tailmiss.llm.rollouts.rollout_stream`, through :class:`~tailmiss.experiments.stack_model.RunDraws`);
   rewards by the trainer's :func:`~tailmiss.llm.rollouts.score`, logged by its
   :func:`~tailmiss.llm.rollouts.first_round_info` and :func:`~tailmiss.llm.train.sampled_row`.
2. **Advantages and mini-batches** per run, by :func:`tailmiss.llm.rl_update.plan_update`.
3. **Old and reference log-probabilities** of every run's rollouts in one stacked pass each, read by
   :func:`tailmiss.llm.rl_update.rank_logprobs`.
4. **Mini-batch updates**: one stacked forward and one backward per mini-batch for all runs, each run's loss by
   :func:`tailmiss.llm.rl_update.rank_loss` on its slice of the stacked logits; then each run's own gradient
   clipping and optimiser step, so optimiser state, clipping and the learning-rate schedule stay per run; the
   statistics by :class:`tailmiss.llm.rl_update.UpdateStats`.
5. **Evaluation and checkpoints** per run, by the trainer's :func:`tailmiss.llm.rl_eval.evaluation`,
   :func:`~tailmiss.llm.train.save_run` and :func:`~tailmiss.llm.train.finish_run`.

The stack back-propagates the runs' losses as separate roots. On the CPU every run's history, per-prompt
evaluations and checkpoint therefore equal what :func:`~tailmiss.llm.train.train_rl` writes for it alone, bit for
bit (``tests/test_stack.py``); a run's folder is an ordinary run folder, and a stack that dies leaves each run
resumable, alone or in another stack.

**Where it lives.** The stack is a way of running the trainer, as the pools are, not a second trainer: every
stage calls the trainer's own public functions (this module holds only the batching: the stacked passes and the
replay of their logits), and ``tests/test_stack.py`` checks in CI that its runs equal the
trainer's bit for bit. So it sits outside the trainer's scope (``tailmiss/llm``, :data:`tailmiss.store.SCOPES`)
and a run's store key is the same whichever way it was trained.

On the CPU it gives no speed: a stack of the narrowing study's N = 8 runs took 0.97x the CPU time of one run per
process (``benchmarks/llm_stack.py``), because a step's mini-batches already hold hundreds of token rows per run;
the pools stack only on an accelerator unless asked (``RunOptions.stack``).

Not stacked (:func:`stack_key` is None; they train one by one): policies other than the transformer, DAPO's dynamic
sampling (the number of groups kept varies per run and step), reward transforms that read log-probabilities, and
several processes (``torchrun``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import torch

from tailmiss import objectives
from tailmiss._device import resolve_device
from tailmiss._dist import world
from tailmiss.experiments.stack_model import RunDraws, StackedGPT
from tailmiss.llm.checkpoint import RunFolder, read_run_config
from tailmiss.llm.config import RLConfig
from tailmiss.llm.loop import data_parallel, first_step, progress_bar, step_done
from tailmiss.llm.model import generate
from tailmiss.llm.optim import set_lr
from tailmiss.llm.rl_eval import eval_sets, evaluation
from tailmiss.llm.rl_run import RLRun
from tailmiss.llm.rl_update import Minibatch, UpdateStats, plan_update, rank_logprobs, rank_loss
from tailmiss.llm.rollouts import Rollouts, first_round_info, response_mask, rollout_stream, score, step_prompts
from tailmiss.llm.tasks import EOS, PAD
from tailmiss.llm.train import finish_run, open_run, sampled_row, save_run

__all__ = ["SHARED", "stack_key", "train_rl_stack"]

SHARED = ("group_size", "prompts_per_step", "minibatches", "steps", "temperature", "top_k", "top_p")
"""The RL settings every run of a stack shares (with the SFT model's shape and task): they fix the shapes of a
step's tensors and how its rollouts are sampled."""


def stack_key(cfg: RLConfig, init: str | Path) -> tuple | None:
    """What runs must share to train in one stack (equal keys stack), or None if ``cfg`` trains alone.

    The key holds the ``SHARED`` settings of ``cfg`` and the model shape and task of the SFT run ``init``
    (read from its ``config.toml``). None for dynamic sampling, a reward transform that reads log-probabilities,
    a policy other than the transformer, or several processes.
    """
    if not isinstance(cfg, RLConfig):
        raise ValueError(f"cfg must be an RLConfig, got {type(cfg).__name__}")
    transform = objectives.REWARD_TRANSFORMS[cfg.reward_transform] if cfg.reward_transform is not None else None
    if cfg.dynamic_sampling or (transform is not None and transform.needs_logprobs) or world() > 1:
        return None
    sft = read_run_config(Path(init) / "config.toml")
    if sft.model.kind != "transformer":
        return None
    return (tuple(getattr(cfg, k) for k in SHARED), repr(sft.model), repr(sft.task))


def train_rl_stack(
    cfgs: Sequence[RLConfig],
    inits: Sequence[str | Path],
    outs: Sequence[str | Path],
    device=None,
    resume: bool = False,
    progress: bool = True,
) -> list[Path]:
    """Train the runs ``cfgs[i]`` from the SFT run folders ``inits[i]`` into ``outs[i]``, as one stack.

    Every run must have the same :func:`stack_key` and, with ``resume``, stand at the same step. The folders
    written are those :func:`tailmiss.llm.train.train_rl` writes for each run alone, byte for byte on the CPU.
    Runs already complete are left as they are. Returns the folders' paths.
    """
    cfgs, inits, outs = list(cfgs), [Path(i) for i in inits], [Path(o) for o in outs]
    if not (len(cfgs) == len(inits) == len(outs)) or not cfgs:
        raise ValueError(
            f"need as many configs, inits and outs (at least one), got {len(cfgs)}, {len(inits)}, {len(outs)}"
        )
    keys = {stack_key(c, i) for c, i in zip(cfgs, inits)}
    if None in keys or len(keys) > 1:
        raise ValueError("these runs cannot train as one stack: their stack_key values differ or are None")
    if len({str(o.resolve()) for o in outs}) != len(outs):
        raise ValueError("two runs of the stack write the same folder")
    dev = resolve_device(device)
    folders = [RunFolder(o) for o in outs]
    runs = [open_run(c, i, f, dev, resume) for c, i, f in zip(cfgs, inits, folders)]
    starts = [first_step(f, r.history, r.start, r.cfg.steps) for f, r in zip(folders, runs)]
    todo = [k for k, s in enumerate(starts) if s is not None]
    if len({starts[k] for k in todo}) > 1:
        raise ValueError(f"a stack's runs must stand at one step, got {sorted({starts[k] for k in todo})}")
    if todo:
        _train([runs[k] for k in todo], [folders[k] for k in todo], starts[todo[0]], progress)
    return [f.path for f in folders]


def _train(runs: list[RLRun], folders: list[RunFolder], start: int, progress: bool) -> None:
    """The loop of :func:`tailmiss.llm.train.train_rl` for every run at once, from step ``start``."""
    steps = runs[0].cfg.steps
    for run in runs:
        run.ddp, run.evals = data_parallel(run.model, run.dev), eval_sets(run)
    stack = StackedGPT([r.model for r in runs])
    references = StackedGPT([r.reference for r in runs])
    bar = progress_bar(progress, steps, f"{len(runs)} stacked runs on {runs[0].dev}", done=start)
    started = time.perf_counter()
    try:
        for step in range(start, steps):
            rows = [{"step": step, **evaluation(run, step)} for run in runs]
            batches = _rollouts(runs, stack, step)
            for run, row, batch in zip(runs, rows, batches):
                row.update(sampled_row(run, batch, first_round_info(batch)))
            lrs = [set_lr(r.optimizer, step, r.cfg.optim, steps) for r in runs]
            for row, logged, lr in zip(rows, _update(runs, stack, references, batches, step), lrs):
                row.update(logged, lr=lr)
            for run, folder, row in zip(runs, folders, rows):
                run.history.append(row)
                step_done(step, run.cfg, lambda s, run=run, folder=folder: save_run(run, folder, s), None, None)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    elapsed = time.perf_counter() - started
    for run, folder in zip(runs, folders):
        finish_run(run, folder, start, elapsed)


@torch.no_grad()
def _rollouts(runs: list[RLRun], stack: StackedGPT, step: int) -> list[Rollouts]:
    """Step 1-2 for every run: its prompts, ``group_size`` samples each from one stacked pass with each run's own
    draws (:func:`tailmiss.llm.rollouts.rollout_stream`), its rewards."""
    cfg0, task = runs[0].cfg, runs[0].task
    n, dev = cfg0.group_size, runs[0].dev
    stack.eval()
    prompts = [step_prompts(task, r.cfg, step, 0) for r in runs]
    ids = [task.encode_prompts(p).repeat_interleave(n, dim=0) for p in prompts]  # (B*N, P) per run
    rows = ids[0].shape[0]
    streams = [rollout_stream(r.cfg, step, 0, torch.arange(rows), dev) for r in runs]
    draws = RunDraws(streams, rows)
    top_k = cfg0.top_k or None
    answers, _ = generate(
        stack, torch.cat(ids).to(dev), task.max_answer_len, EOS, PAD, cfg0.temperature, top_k, cfg0.top_p, draws
    )
    out = []
    for k, (run_prompts, run_ids) in enumerate(zip(prompts, ids)):
        run_answers = answers[k * rows : (k + 1) * rows]
        rewards = score(task, run_prompts, range(rows), run_answers.cpu().tolist(), n)
        out.append(Rollouts(run_ids.to(dev), run_answers, response_mask(run_answers), rewards))
    return out


class _Replay:
    """A model that answers one call of :func:`tailmiss.llm.model.answer_logprobs`: with run ``k``'s slice of logits
    the stack computed for every run at once."""

    def __init__(self, logits: torch.Tensor):
        self.logits = logits

    def __call__(self, seq: torch.Tensor) -> torch.Tensor:
        if seq.shape[:2] != self.logits.shape[:2]:
            raise RuntimeError(f"replayed logits of shape {tuple(self.logits.shape)} for a sequence {tuple(seq.shape)}")
        return self.logits

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self


class _RunView:
    """Run ``run`` as the one-run update stages see it, with its model replaced by replayed stacked logits."""

    def __init__(self, run: RLRun, model=None, reference=None):
        self.cfg, self.dev = run.cfg, run.dev
        self.model = self.ddp = model
        self.reference = reference


def _stacked_logits(stack: StackedGPT, batches: list[Rollouts], rows: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each run's logits on its ``rows`` (prompt then answer but its last token), from one stacked pass."""
    seqs = [torch.cat([b.prompt_ids[r], b.answers[r][:, :-1]], dim=1) for b, r in zip(batches, rows)]
    logits = stack(torch.cat(seqs))
    return list(logits.split([len(r) for r in rows]))


def _update(runs, stack: StackedGPT, references: StackedGPT, batches: list[Rollouts], step: int) -> list[dict]:
    """Steps 3-5 for every run (:func:`tailmiss.llm.rl_update.update`, batched over the runs)."""
    plans = [plan_update(run, batch, step) for run, batch in zip(runs, batches)]  # ---- 3. advantages
    out = [logged for _, logged, _ in plans]

    # ---- 4. old and reference log-probs of every run's rows, before any update -------------------------
    every = [torch.cat(mbs) for _, _, mbs in plans]
    with torch.no_grad():
        stack.eval()
        current = _stacked_logits(stack, batches, every)
        reference = _stacked_logits(references, batches, every)
    parts = []
    for k, (run, batch) in enumerate(zip(runs, batches)):
        view = _RunView(run, _Replay(current[k]), _Replay(reference[k]))
        old_logp, ref_logp, logged = rank_logprobs(view, batch, every[k])
        out[k].update(logged)
        mbs = plans[k][2]
        sizes = [len(idx) for idx in mbs]
        parts.append([Minibatch(*p) for p in zip(mbs, mbs, old_logp.split(sizes), ref_logp.split(sizes))])

    # ---- 5. mini-batch updates: one stacked forward and backward, each run's own clip and step ---------------
    stats = [UpdateStats() for _ in runs]
    stack.train()
    loss_cfgs = [r.cfg.resolved_loss() for r in runs]
    for j in range(len(parts[0])):
        mbs = [p[j] for p in parts]
        logits = _stacked_logits(stack, batches, [mb.rows for mb in mbs])
        results = [
            rank_loss(_RunView(run, _Replay(lg)), batch, plan[0], mb, loss_cfg)
            for run, batch, plan, mb, loss_cfg, lg in zip(runs, batches, plans, mbs, loss_cfgs, logits)
        ]
        for run in runs:
            run.optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward([result[0] for result in results])
        for run, batch, mb, result, s in zip(runs, batches, mbs, results, stats):
            grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), run.cfg.optim.grad_clip)
            run.optimizer.step()
            s.add(run, batch, mb, result, grad_norm)
    return [{**row, **s.means()} for row, s in zip(out, stats)]
