r"""Evaluation: sampled unbiased pass@k, and exact answer masses for enumerable tasks.

For a task with a finite answer space, every well-formed answer is scored by
teacher forcing over the answers' prefix tree (next-token laws normalised and
summed in float64), which gives per prompt :math:`x`

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
from tailmiss.llm.model import GPT, KVCache, generate, param_device, with_dtype
from tailmiss.llm.tasks import EOS, PAD, AnswerSet, Task

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
    complete : bool
        Whether every well-formed answer was scored (``False``: the correct
        ones only, so :attr:`off_format` is unknown).
    """

    logp: torch.Tensor
    correct: torch.Tensor
    lengths: torch.Tensor
    complete: bool = True

    @property
    def probs(self) -> torch.Tensor:
        return self.logp.exp()

    @property
    def mu_pos(self) -> torch.Tensor:
        """Correct mass per prompt, (P,)."""
        return (self.probs * self.correct).sum(1)

    @property
    def off_format(self) -> torch.Tensor:
        """Mass outside the well-formed answers per prompt, (P,) (NaN when only the correct answers were scored)."""
        if not self.complete:
            return torch.full(self.logp.shape[:1], float("nan"), dtype=torch.float64)
        return (1.0 - self.probs.sum(1)).clamp(min=0.0)


@dataclass(frozen=True)
class _PrefixTree:
    """The distinct live prefixes of one answer set (or of a chunk's answer sets), depth by depth.

    Depth 0 holds the empty prefix of each prompt. At depth ``d >= 1`` the nodes
    are the distinct (prompt, ``tokens[:, :d]``) of the answers longer than
    ``d`` (those that still need a next-token law there), in lexicographic
    order, so the children of a parent are contiguous and ordered like their
    parents. ``parent[d]``, ``token[d]``: each node's parent at depth ``d - 1``
    and its last token (empty at depth 0); ``node[d]``: each answer's node
    (-1 once the answer has ended).
    """

    parent: tuple[torch.Tensor, ...]
    token: tuple[torch.Tensor, ...]
    node: tuple[torch.Tensor, ...]

    @property
    def depth(self) -> int:
        return len(self.node)

    def size(self, d: int) -> int:
        """Nodes at depth ``d`` (0 below the deepest level)."""
        if d >= self.depth:
            return 0
        return int(self.node[0].max()) + 1 if d == 0 else len(self.token[d])


def _build_tree(tokens: torch.Tensor, lengths: torch.Tensor) -> _PrefixTree:
    M = tokens.shape[0]
    empty = torch.zeros(0, dtype=torch.long)
    parent, token, node = [empty], [empty], [torch.zeros(M, dtype=torch.long)]
    for d in range(1, tokens.shape[1]):
        live = torch.nonzero(lengths > d).squeeze(1)
        if not len(live):
            break
        keys, inverse = torch.unique(tokens[live, :d], dim=0, return_inverse=True)  # sorted: siblings adjacent
        through = torch.empty(len(keys), dtype=torch.long).scatter_(0, inverse, live)  # an answer through each node
        parent.append(node[d - 1][through])
        token.append(keys[:, d - 1])
        node.append(torch.full((M,), -1, dtype=torch.long).index_put_((live,), inverse))
    return _PrefixTree(tuple(parent), tuple(token), tuple(node))


_TREES: dict = {}


def _tree(answers: AnswerSet) -> _PrefixTree:
    """The prefix tree of an answer set, built once per distinct set (task (a) has one for all its prompts, or one
    per allowed set, at most 385, when only the correct answers are scored)."""
    key = (tuple(answers.tokens.shape), answers.tokens.numpy().tobytes(), answers.lengths.numpy().tobytes())
    if key not in _TREES:
        if len(_TREES) >= 1024:
            _TREES.pop(next(iter(_TREES)))
        _TREES[key] = _build_tree(answers.tokens, answers.lengths)
    return _TREES[key]


def _forest(trees: Sequence[_PrefixTree], device) -> _PrefixTree:
    """One tree for a chunk of prompts: prompt j's nodes follow those of prompts 0..j-1 at every depth."""
    depth = max(t.depth for t in trees)
    sizes = torch.tensor([[t.size(d) for d in range(depth)] for t in trees])  # (J, depth)
    before = torch.cumsum(sizes, 0) - sizes  # (J, depth): nodes of the earlier prompts
    parent, token, node = [torch.zeros(0, dtype=torch.long)], [torch.zeros(0, dtype=torch.long)], []
    for d in range(depth):
        node.append(
            torch.cat(
                [
                    torch.where(t.node[d] >= 0, t.node[d] + before[j, d], -1)
                    if d < t.depth
                    else torch.full_like(t.node[0], -1)
                    for j, t in enumerate(trees)
                ]
            )
        )
        if d:
            deep = [(j, t) for j, t in enumerate(trees) if d < t.depth]
            parent.append(torch.cat([t.parent[d] + before[j, d - 1] for j, t in deep]))
            token.append(torch.cat([t.token[d] for _, t in deep]))
    return _PrefixTree(*(tuple(x.to(device) for x in part) for part in (parent, token, node)))


def _take_rows(model, cache: KVCache, rows: torch.Tensor, start: int) -> KVCache:
    """A new cache whose row i holds positions ``< start`` of ``cache``'s row ``rows[i]``."""
    out = model.new_cache(len(rows), cache.k.shape[3])
    out.k[:, :, :, :start] = cache.k[:, rows, :, :start]
    out.v[:, :, :, :start] = cache.v[:, rows, :, :start]
    return out


def _sibling_logits(model, cache: KVCache, parent: torch.Tensor, token: torch.Tensor, start: int) -> torch.Tensor:
    """Next-token logits (n, vocab) after each node ``parent[i]`` + ``token[i]``: the children of one parent are one
    row of alternatives (``siblings=True``), so no cache row is copied per child."""
    counts = torch.bincount(parent, minlength=cache.k.shape[1])  # children per parent
    slot = torch.arange(len(parent), device=parent.device) - (torch.cumsum(counts, 0) - counts)[parent]
    has = counts > 0
    row = torch.cumsum(has, 0) - 1  # (parents,): the row of each parent with children
    if not bool(has.all()):  # some prefixes have ended: keep the rows of those that go on
        cache = _take_rows(model, cache, torch.nonzero(has).squeeze(1), start)
    grid = torch.full((int(has.sum()), int(counts.max())), PAD, dtype=torch.long, device=parent.device)
    grid[row[parent], slot] = token  # (parents with children, most children)
    return model(grid, cache, start, siblings=True)[row[parent], slot]  # (n, vocab)


@torch.no_grad()
def _score_chunk(model, prompt_ids: torch.Tensor, tree: _PrefixTree, answers: torch.Tensor) -> torch.Tensor:
    r"""Token log-probs (R, L) in float64 of ``answers`` (R, L), each after its prompt (``tree.node[0]``).

    The prompts (B, P) fill a KV cache once; depth by depth, each node of the
    prefix tree advances a copy of its parent's cache row by its last token,
    except at the deepest level, where the children of a parent run as
    siblings on the parent's row. Answers sharing a prefix share its
    computation: task (a)'s :math:`10^K` answers of K digits cost
    :math:`1 + 10 + \dots + 10^K` positions per prompt, and only the
    :math:`10^{K-1}` deepest parents hold a cache row. Logits come in the
    model's dtype; each next-token law is normalised in float64. Positions past
    an answer's end hold 0.
    """
    B, P = prompt_ids.shape
    R, L = answers.shape
    out = torch.zeros((R, L), dtype=torch.float64, device=answers.device)
    cache = model.new_cache(B, P + L - 1)  # the prompt and every answer token but the last
    logits = model(prompt_ids, cache, 0)[:, -1]  # (B, vocab): the law of answer token 0
    for d in range(tree.depth):
        start = P + d - 1  # where a depth-d node's last token sits
        if d == tree.depth - 1 and d > 0:
            logits = _sibling_logits(model, cache, tree.parent[d], tree.token[d], start)
        elif d > 0:
            cache = _take_rows(model, cache, tree.parent[d], start)
            logits = model(tree.token[d][:, None], cache, start)[:, -1]  # (n_d, vocab)
        logp = logits.to(torch.float64).log_softmax(-1)
        live = torch.nonzero(tree.node[d] >= 0).squeeze(1)
        out[live, d] = logp[tree.node[d][live], answers[live, d]]
    return out


@torch.no_grad()
def answer_distribution(
    model: GPT,
    task: Task,
    prompts: Sequence,
    batch_size: int = 4096,
    dtype: torch.dtype | None = None,
    correct_only: bool = False,
) -> AnswerDistribution:
    """Score every well-formed answer of each prompt by teacher forcing over the answers' prefix tree.

    Parameters
    ----------
    model : GPT or a table / factorized policy
    task : Task
        Enumerable.
    prompts : sequence
    batch_size : int
        About this many answers per chunk of whole prompts (small chunks keep
        the work in cache).
    dtype : torch.dtype, optional
        The dtype of the forward pass (default: the model's own). The next-token
        laws are normalised and the answers' log-probabilities summed in float64
        either way; ``torch.float64`` scores a float64 copy (agrees with float32
        scoring to about 1e-5 in log-probability on the CPU presets).
    correct_only : bool
        Score only the correct answers (each answer's log-probability is its
        own teacher-forced sum, so the correct answers' numbers are the same
        either way); the result's ``complete`` is then False.
    """
    if not task.enumerable:
        raise ValueError(f"task {task.name!r} has no finite answer space; use sampled_pass_at_k")
    scorer = model if dtype is None else with_dtype(model, dtype)
    was_training = scorer.training
    scorer.eval()
    device = param_device(model)
    sets = [task.enumerate_answers(p) for p in prompts]
    if correct_only:
        sets = [AnswerSet(s.tokens[s.correct], s.lengths[s.correct], s.correct[s.correct]) for s in sets]
    width = max(s.tokens.shape[0] for s in sets)
    logp = torch.full((len(prompts), width), float("-inf"), dtype=torch.float64)
    correct = torch.zeros((len(prompts), width), dtype=torch.bool)
    lengths = torch.ones((len(prompts), width), dtype=torch.long)
    prompt_ids = task.encode_prompts(prompts).to(device)
    try:
        for lo, hi in _chunks([s.tokens.shape[0] for s in sets], batch_size):
            chunk = sets[lo:hi]
            answers = _stack_answers(chunk, task.max_answer_len)
            tree = _forest([_tree(s) for s in chunk], device)
            seq_logp = _score_chunk(scorer, prompt_ids[lo:hi], tree, answers.to(device)).sum(1).cpu()
            r = 0
            for i, s in enumerate(chunk, start=lo):
                m = s.tokens.shape[0]
                logp[i, :m] = seq_logp[r : r + m]
                correct[i, :m] = s.correct
                lengths[i, :m] = s.lengths
                r += m
    finally:
        scorer.train(was_training)
    return AnswerDistribution(logp=logp, correct=correct, lengths=lengths, complete=not correct_only)


def _stack_answers(chunk: Sequence[AnswerSet], max_len: int) -> torch.Tensor:
    """The answers of a chunk of prompts' answer sets, one row each, padded to ``max_len``."""
    answers = torch.full((sum(s.tokens.shape[0] for s in chunk), max_len), PAD, dtype=torch.long)
    r = 0
    for s in chunk:
        answers[r : r + s.tokens.shape[0], : s.tokens.shape[1]] = s.tokens
        r += s.tokens.shape[0]
    return answers


def _chunks(sizes: Sequence[int], budget: int):
    """``(lo, hi)`` ranges of whole items, each about ``budget`` in total size and never empty."""
    lo = 0
    while lo < len(sizes):
        hi, total = lo, 0
        while hi < len(sizes) and (hi == lo or total + sizes[hi] <= budget):
            total += sizes[hi]
            hi += 1
        yield lo, hi
        lo = hi


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
