r"""Evaluation: sampled unbiased pass@k, and exact answer masses for enumerable tasks.

For a task with a finite answer space, every well-formed answer is scored by
teacher forcing in float64, which gives per prompt :math:`x`

* the answer distribution :math:`\pi(a \mid x)` and the off-format mass
  :math:`1 - \sum_a \pi(a \mid x)` (sequences that are not well-formed answers);
* :math:`\mu_{pos}(x) = \sum_{a \in C(x)} \pi(a \mid x)` (F-GRPO Eq. 2) and exact
  pass@k :math:`= 1 - (1-\mu_{pos}(x))^k` (BroRL);
* against a reference (the SFT model) :math:`\pi_0`: the retained positive mass
  (F-GRPO Eq. 26 applied per prompt)

  .. math::

      M_{ret}(x) = 1 - \frac{\sum_{a\in C(x)} \max(0, \pi_0(a) - \pi(a))}{\sum_{a\in C(x)} \pi_0(a)},

  the rare-correct set :math:`E_x` (the correct answers of smallest reference
  mass that together hold at most ``rare_share`` of :math:`\mu_{pos,0}(x)`, so
  :math:`\rho = \tau/\mu_{pos} \le` ``rare_share``), its mass :math:`\tau(x)`,
  and :math:`\Delta\mathrm{NLL}_{rare}` (F-GRPO App. M.2): the mean over the pooled
  rare sets of the length-normalised NLL :math:`-\log\pi(a)/|a|` under the
  current model minus the same under the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tailmiss import analytic
from tailmiss.llm.model import GPT, generate, param_device, with_dtype
from tailmiss.llm.tasks import EOS, PAD, Task

__all__ = [
    "PASS_KS",
    "AnswerDistribution",
    "answer_distribution",
    "exact_metrics",
    "sample_correct_counts",
    "sampled_pass_at_k",
]

PASS_KS = tuple(2**i for i in range(9))
"""k = 1, 2, 4, ..., 256 (F-GRPO's evaluation)."""


@dataclass(frozen=True)
class AnswerDistribution:
    """Exact answer masses of a model on a list of prompts (all float64, one row per prompt).

    Attributes
    ----------
    logp : Tensor (P, M)
        :math:`\\log\\pi(a \\mid x)` of each well-formed answer (``-inf`` in padding columns).
    correct : BoolTensor (P, M)
    lengths : LongTensor (P, M)
        Answer tokens, ``<eos>`` included (1 in padding columns).
    """

    logp: torch.Tensor
    correct: torch.Tensor
    lengths: torch.Tensor

    @property
    def probs(self) -> torch.Tensor:
        return self.logp.exp()

    @property
    def mu_pos(self) -> torch.Tensor:
        """Correct mass per prompt, (P,)."""
        return (self.probs * self.correct).sum(1)

    @property
    def off_format(self) -> torch.Tensor:
        """Mass outside the well-formed answers per prompt, (P,)."""
        return (1.0 - self.probs.sum(1)).clamp(min=0.0)


@torch.no_grad()
def _score_answers(model, prompt_ids: torch.Tensor, owner: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
    r"""Token log-probs (R, L) of ``answers`` (R, L) after ``prompt_ids[owner]``, each distinct prefix run once.

    The prompts (B, P) fill a KV cache once. Then, depth by depth, every
    distinct (prompt, answer prefix) pair is one row whose cache is copied from
    its parent prefix's row and advanced by its last token: answers that share
    a prefix share its computation, so 10^K digit strings of length K cost
    :math:`10 + 100 + \dots + 10^{K-1}` token positions per prompt instead of
    :math:`(K) \cdot 10^K`.
    """
    B, P = prompt_ids.shape
    R, L = answers.shape
    cache = model.new_cache(B, P)
    logits = model(prompt_ids, cache, 0)[:, -1].log_softmax(-1)  # (B, vocab): after the empty prefix
    out = torch.empty((R, L), dtype=logits.dtype, device=logits.device)
    node = owner  # (R,): each answer's row at the current depth
    out[:, 0] = logits[node].gather(1, answers[:, :1]).squeeze(1)
    for d in range(1, L):
        keys = torch.cat([owner[:, None], answers[:, :d]], dim=1)  # (R, 1 + d): prompt and prefix
        _, child = torch.unique(keys, dim=0, return_inverse=True)  # (R,): the prefix's row at depth d
        n = int(child.max()) + 1
        first = torch.empty(n, dtype=torch.long, device=child.device).scatter_(
            0, child, torch.arange(R, device=child.device)
        )
        parent = node[first]  # (n,): each new row's parent row
        nxt = model.new_cache(n, P + d)
        nxt.k[:, :, :, : P + d - 1] = cache.k[:, parent, :, : P + d - 1]
        nxt.v[:, :, :, : P + d - 1] = cache.v[:, parent, :, : P + d - 1]
        logits = model(answers[first, d - 1 : d], nxt, P + d - 1)[:, -1].log_softmax(-1)  # (n, vocab)
        out[:, d] = logits[child].gather(1, answers[:, d : d + 1]).squeeze(1)
        cache, node = nxt, child
    return out


@torch.no_grad()
def answer_distribution(model: GPT, task: Task, prompts: Sequence, batch_size: int = 16384) -> AnswerDistribution:
    """Score every well-formed answer of each prompt by teacher forcing in float64."""
    if not task.enumerable:
        raise ValueError(f"task {task.name!r} has no finite answer space; use sampled_pass_at_k")
    model64 = with_dtype(model, torch.float64).eval()
    device = param_device(model)
    sets = [task.enumerate_answers(p) for p in prompts]
    width = max(s.tokens.shape[0] for s in sets)
    logp = torch.full((len(prompts), width), float("-inf"), dtype=torch.float64)
    correct = torch.zeros((len(prompts), width), dtype=torch.bool)
    lengths = torch.ones((len(prompts), width), dtype=torch.long)
    prompt_ids = task.encode_prompts(prompts).to(device)
    lo = 0
    while lo < len(sets):  # chunks of whole prompts, about batch_size answers each
        hi, rows = lo, 0
        while hi < len(sets) and (hi == lo or rows + sets[hi].tokens.shape[0] <= batch_size):
            rows += sets[hi].tokens.shape[0]
            hi += 1
        chunk = sets[lo:hi]
        answers = torch.full((rows, task.max_answer_len), PAD, dtype=torch.long)
        owner = torch.cat([torch.full((s.tokens.shape[0],), j) for j, s in enumerate(chunk)])
        lens = torch.cat([s.lengths for s in chunk])
        r = 0
        for s in chunk:
            answers[r : r + s.tokens.shape[0], : s.tokens.shape[1]] = s.tokens
            r += s.tokens.shape[0]
        lp = _score_answers(model64, prompt_ids[lo:hi], owner.to(device), answers.to(device)).cpu()
        valid = torch.arange(task.max_answer_len)[None, :] < lens[:, None]
        seq_logp = (lp * valid).sum(1)
        r = 0
        for i, s in enumerate(chunk, start=lo):
            m = s.tokens.shape[0]
            logp[i, :m] = seq_logp[r : r + m]
            correct[i, :m] = s.correct
            lengths[i, :m] = s.lengths
            r += m
        lo = hi
    return AnswerDistribution(logp=logp, correct=correct, lengths=lengths)


def _rare_sets(reference: AnswerDistribution, rare_share: float) -> torch.Tensor:
    p0 = torch.where(reference.correct, reference.probs, torch.full_like(reference.logp, float("inf")))
    order = torch.argsort(p0, dim=1)  # ascending reference mass, incorrect answers last
    sorted_p = torch.gather(p0, 1, order).nan_to_num(posinf=0.0)
    within = sorted_p.cumsum(1) <= rare_share * reference.mu_pos[:, None]
    within &= torch.gather(reference.correct, 1, order)
    return torch.zeros_like(within).scatter(1, order, within)


def exact_metrics(
    current: AnswerDistribution,
    reference: AnswerDistribution | None = None,
    ks: Sequence[int] = PASS_KS,
    rare_share: float = 0.1,
) -> dict:
    """Exact per-prompt metrics and their means over prompts.

    Returns a dict with per-prompt numpy arrays ``mu_pos``, ``off_format``,
    ``retained_mass``, ``tau_rare``, ``tau_rare_ref``, ``rare_count`` and the
    means ``mu_pos_mean``, ``off_format_mean``, ``retained_mass_mean``,
    ``dnll_rare`` (NaN if no prompt has a rare set), ``exact_pass_at_k``
    (``{k: mean over prompts}``) and ``rare_pass_at_k``: the probability that
    ``k`` samples hit the prompt's rare-correct set at least once,
    :math:`1-(1-\tau(x))^k`, averaged over prompts (the coverage of initially
    unlikely correct answers that pass@k measures on LLM benchmarks). Without ``reference`` the model is compared
    with itself (retained mass 1, ΔNLL 0).
    """
    ref = current if reference is None else reference
    if ref.logp.shape != current.logp.shape or not torch.equal(ref.correct, current.correct):
        raise ValueError("reference and current distributions must score the same prompts and answers")
    mu = current.mu_pos
    p, p0 = current.probs, ref.probs
    c0 = (p0 * ref.correct).sum(1)
    drop = ((p0 - p).clamp(min=0.0) * current.correct).sum(1)
    retained = 1.0 - drop / c0
    rare = _rare_sets(ref, rare_share)
    nll = -current.logp / current.lengths
    nll0 = -ref.logp / ref.lengths
    dnll = (nll - nll0)[rare]
    mu_np = mu.numpy()
    tau = (p * rare).sum(1).numpy()
    exact = {int(k): float(np.mean(analytic.pass_at_k_from_mass(np.clip(mu_np, 0.0, 1.0), int(k)))) for k in ks}
    rare_hit = {int(k): float(np.mean(analytic.pass_at_k_from_mass(np.clip(tau, 0.0, 1.0), int(k)))) for k in ks}
    return {
        "mu_pos": mu_np,
        "off_format": current.off_format.numpy(),
        "retained_mass": retained.numpy(),
        "tau_rare": tau,
        "tau_rare_ref": (p0 * rare).sum(1).numpy(),
        "rare_count": rare.sum(1).numpy(),
        "mu_pos_mean": float(mu.mean()),
        "off_format_mean": float(current.off_format.mean()),
        "retained_mass_mean": float(retained.mean()),
        "dnll_rare": float(dnll.mean()) if dnll.numel() else float("nan"),
        "exact_pass_at_k": exact,
        "rare_pass_at_k": rare_hit,
    }


@torch.no_grad()
def sample_correct_counts(
    model: GPT,
    task: Task,
    prompts: Sequence,
    n_samples: int,
    generator: torch.Generator,
    temperature: float = 1.0,
    batch_size: int = 4096,
    progress=None,
) -> np.ndarray:
    """Correct answers among ``n_samples`` KV-cache samples of each prompt, (P,) int64."""
    model = model.eval()
    device = param_device(model)
    ids = task.encode_prompts(prompts)
    counts = np.zeros(len(prompts), dtype=np.int64)
    per_batch = max(1, batch_size // n_samples)
    for lo in range(0, len(prompts), per_batch):
        chunk = list(range(lo, min(lo + per_batch, len(prompts))))
        prompt_ids = ids[chunk].repeat_interleave(n_samples, dim=0).to(device)
        tokens, _ = generate(model, prompt_ids, task.max_answer_len, EOS, PAD, temperature, generator=generator)
        tokens = tokens.cpu().tolist()
        for j, i in enumerate(chunk):
            rows = tokens[j * n_samples : (j + 1) * n_samples]
            counts[i] = sum(task.reward(prompts[i], r) for r in rows)
        if progress is not None:
            progress(len(chunk))
    return counts


def sampled_pass_at_k(counts: np.ndarray, n_samples: int, ks: Sequence[int] = PASS_KS) -> dict[int, float]:
    """Unbiased pass@k (Chen et al. 2021) averaged over prompts, for each ``k <= n_samples``."""
    counts = np.asarray(counts)
    return {int(k): float(np.mean(analytic.pass_at_k(n_samples, counts, int(k)))) for k in ks if k <= n_samples}
