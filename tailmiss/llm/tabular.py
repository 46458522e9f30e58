r"""Policies without a network, for the simulator-to-transformer ladder: ``table``, ``factorized`` and ``shared``.

Each looks up its prompts by their tokens and speaks the transformer's interface (``forward(idx, cache, start)``
returning next-token logits, ``new_cache``), so the RL loop, the sampler and
the exact evaluation of :mod:`tailmiss.llm` run them unchanged.

``table``
    One free logit per well-formed answer plus one "off-format" action, exactly
    the categorical policy of the simulator (F-GRPO App. J, BroRL §4.1) with
    :math:`p = \mathrm{softmax}(z_x)`. The off-format action is the sequence
    ``<eos>`` alone (reward 0). Next-token logits are the exact conditionals of
    the table, :math:`\log p(\text{prefix}+v) - \log p(\text{prefix})` over the
    answers' prefix tree, so the token log-probabilities of an answer sum to
    :math:`\log p(a)` and every policy-gradient step is the simulator's.
``factorized``
    One softmax per answer position (positions independent given the prompt):
    :math:`p(a) = \prod_t q_{x,t}(a_t)`. Parameters are shared across answers
    that share a token at a position, but not across prompts.
``shared``
    The table's law with a frozen per-prompt offset and one log-linear term
    shared by every prompt, :math:`z(x, a) = c(x, a) + \phi(x)^\top W \psi(a)`:
    :math:`\phi(x)` a constant and the indicator of each token in the prompt
    (the narrowing task's listed digits), :math:`\psi(a)` the one-hot token at
    each answer position. Only :math:`W` is trained, so an update on one prompt
    moves every prompt that shares a token with it; the table and this policy
    differ in one ingredient, whether the trained parameters are the prompt's
    own or shared. :math:`W` starts at 0 and :math:`c` is the table's start, so
    the policy starts at the transformer's exact law (a fit of
    :math:`\phi^\top W \psi` alone would start elsewhere).

The table and factorized policies start from a transformer's exact answer distribution: the table copies
its log-masses; the factorized policy takes the product of its per-position
marginals (the factorized law closest to it in :math:`KL(\pi\,\|\,q)`), with
the off-format mass as an early ``<eos>``.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from tailmiss._checks import check_choice
from tailmiss.llm.model import KVCache, check_siblings
from tailmiss.llm.tasks import EOS, PAD, Task

__all__ = [
    "TABULAR_KINDS",
    "TablePolicy",
    "FactorizedPolicy",
    "SharedPolicy",
    "tabular_from_distribution",
    "tabular_from_state",
]

TABULAR_KINDS = ("table", "factorized", "shared")
"""The network-free policies of the ladder: ``table`` (:class:`TablePolicy`, the simulator's categorical policy),
``factorized`` (:class:`FactorizedPolicy`, one softmax per answer position) and ``shared`` (:class:`SharedPolicy`,
a log-linear term shared across prompts)."""
_NEG = -1e9  # log-mass of an impossible token: finite, so masked products never give NaN


class _LookupPolicy(nn.Module):
    """Per-prompt parameters found by the prompt's tokens; the 'cache' keeps the token history."""

    kind = ""

    def __init__(self, prompt_keys: torch.Tensor, vocab_size: int, max_answer_len: int):
        super().__init__()
        if prompt_keys.dim() != 2 or prompt_keys.shape[0] < 1:
            raise ValueError(f"prompt_keys must be (prompts, prompt_len), got shape {tuple(prompt_keys.shape)}")
        if vocab_size ** prompt_keys.shape[1] >= 2**62:
            raise ValueError("prompts too long for a table policy (token codes would overflow 62 bits)")
        self.vocab_size, self.max_answer_len = int(vocab_size), int(max_answer_len)
        self.prompt_len = int(prompt_keys.shape[1])
        self.register_buffer("prompt_keys", prompt_keys.long().clone())
        codes = self._codes(self.prompt_keys)
        order = torch.argsort(codes)
        if bool((codes[order][1:] == codes[order][:-1]).any()):
            raise ValueError("prompt_keys must be distinct prompts")
        self.register_buffer("_sorted_codes", codes[order], persistent=False)
        self.register_buffer("_order", order, persistent=False)

    def _codes(self, tokens: torch.Tensor) -> torch.Tensor:
        weights = self.vocab_size ** torch.arange(tokens.shape[1], device=tokens.device, dtype=torch.long)
        return (tokens.long() * weights).sum(1)

    def rows(self, prompt_ids: torch.Tensor) -> torch.Tensor:
        """Parameter row of each prompt (B,); ``ValueError`` for a prompt the policy does not hold."""
        codes = self._codes(prompt_ids)
        pos = torch.searchsorted(self._sorted_codes, codes).clamp(max=len(self._sorted_codes) - 1)
        found = self._sorted_codes[pos] == codes
        if not bool(found.all()):
            raise ValueError(
                f"a {self.kind} policy holds parameters only for the prompts it was built on; "
                f"{int((~found).sum())} prompt(s) of this batch are not among its {len(self._order)}"
            )
        return self._order[pos]

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def new_cache(self, batch: int, max_len: int) -> KVCache:
        # the "keys" hold the token ids seen so far (float64 holds ids exactly); one layer, head and channel
        return KVCache(1, batch, 1, max_len, 1, self.prompt_keys.device, torch.float64)

    def forward(
        self, idx: torch.Tensor, cache: KVCache | None = None, start: int = 0, siblings: bool = False
    ) -> torch.Tensor:
        """Next-token logits (B, T, vocab) at positions ``start .. start+T-1`` (as :class:`~tailmiss.llm.model.GPT`,
        ``siblings`` included)."""
        B, T = idx.shape
        check_siblings(siblings, cache, start)
        if siblings:  # each alternative appended to the cached history on its own
            history = cache.k[0, :, 0, :start, 0].long()  # (B, start)
            outs = [self.forward(idx[:, j : j + 1], _History(history), start) for j in range(T)]
            return torch.cat(outs, dim=1)  # (B, T, vocab)
        if cache is not None:
            cache.k[0, :, 0, start : start + T, 0] = idx.to(torch.float64)
            full = cache.k[0, :, 0, : start + T, 0].long()  # (B, start+T): the whole history
        elif start != 0:
            raise ValueError("without a cache the sequence must start at position 0")
        else:
            full = idx
        P = self.prompt_len
        if full.shape[1] < P:
            raise ValueError(f"a {self.kind} policy needs the whole prompt ({P} tokens) before predicting")
        rows = self.rows(full[:, :P])
        state = self._prepare()
        outs = []
        for s in range(start, start + T):
            t = s - (P - 1)  # the answer position predicted at sequence position s
            if t < 0:  # inside the prompt: nothing is sampled there
                outs.append(torch.zeros(B, self.vocab_size, dtype=self._dtype(), device=idx.device))
            else:
                outs.append(self._next_logits(state, rows, full[:, P : P + t], t))
        return torch.stack(outs, dim=1)  # (B, T, vocab)

    def _dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    def _prepare(self):
        return None

    def _next_logits(self, state, rows: torch.Tensor, prefix: torch.Tensor, t: int) -> torch.Tensor:
        raise NotImplementedError


class _History(KVCache):
    """A throw-away copy of a token history, so that one sibling can be appended without touching the cache."""

    def __init__(self, history: torch.Tensor):
        B, start = history.shape
        super().__init__(1, B, 1, start + 1, 1, history.device, torch.float64)
        self.k[0, :, 0, :start, 0] = history.to(torch.float64)


class TablePolicy(_LookupPolicy):
    """One free logit per well-formed answer plus an off-format action, per prompt (the simulator's policy).

    Parameters
    ----------
    prompt_keys : LongTensor (R, P)
        Token ids of the R prompts the table holds.
    answers : LongTensor (M + 1, L)
        Token ids of every action's sequence (``<eos>``-terminated, ``<pad>``
        after); the last row is the off-format action, ``<eos>`` alone.
    logits : Tensor (R, M + 1)
        Initial :math:`z_x`; :math:`p = \\mathrm{softmax}(z_x)`.
    vocab_size : int
    """

    kind = "table"

    def __init__(self, prompt_keys, answers, logits, vocab_size: int):
        super().__init__(prompt_keys, vocab_size, answers.shape[1])
        if logits.shape != (prompt_keys.shape[0], answers.shape[0]):
            raise ValueError(
                f"logits must be (prompts, actions) = ({prompt_keys.shape[0]}, {answers.shape[0]}), "
                f"got {tuple(logits.shape)}"
            )
        self.register_buffer("answers", answers.long().clone())
        self.logits = nn.Parameter(logits.detach().clone().float())
        self._build_trie()

    def _build_trie(self) -> None:
        # prefix tree of the action sequences: node 0 is the empty prefix; depth_node[m, d] is the node
        # of action m after its first d+1 tokens (-1 past its <eos>); child[u, v] the node after u and v
        children: dict[tuple[int, int], int] = {}
        rows = self.answers.tolist()
        depth_node = torch.full(self.answers.shape, -1, dtype=torch.long)
        for m, seq in enumerate(rows):
            node = 0
            for d, tok in enumerate(seq):
                key = (node, tok)
                if key not in children:
                    children[key] = len(children) + 1
                node = children[key]
                depth_node[m, d] = node
                if tok == EOS:
                    break
            else:
                raise ValueError(f"action {m} of the table has no <eos>")
        n_nodes = len(children) + 1
        if n_nodes - 1 != len({c for c in children.values()}):
            raise AssertionError("prefix tree ids are not unique")
        child = torch.full((n_nodes, self.vocab_size), -1, dtype=torch.long)
        for (u, v), c in children.items():
            child[u, v] = c
        leaves = depth_node.max(1).values
        if len(set(leaves.tolist())) != len(rows):
            raise ValueError("every action sequence must be distinct and none a prefix of another")
        self.register_buffer("_depth_node", depth_node.to(self.answers.device), persistent=False)
        self.register_buffer("_child", child.to(self.answers.device), persistent=False)
        self._n_nodes = n_nodes

    def action_logits(self) -> torch.Tensor:
        """:math:`z_x` per prompt, (R, M + 1)."""
        return self.logits

    def _prepare(self) -> torch.Tensor:
        """Log-mass of every prefix-tree node per prompt, (R, nodes)."""
        probs = self.action_logits().softmax(-1)  # (R, M+1)
        mass = torch.zeros(probs.shape[0], self._n_nodes, dtype=probs.dtype, device=probs.device)
        mass[:, 0] = probs.sum(1)
        for d in range(self._depth_node.shape[1]):
            nodes = self._depth_node[:, d]
            live = nodes >= 0
            mass = mass.index_add(1, nodes[live], probs[:, live])
        return mass.clamp(min=torch.finfo(mass.dtype).tiny).log()

    def _next_logits(self, log_mass, rows, prefix, t):
        B = rows.shape[0]
        node = torch.zeros(B, dtype=torch.long, device=rows.device)
        for j in range(prefix.shape[1]):  # walk the tree along the answer so far
            nxt = self._child[node.clamp(min=0), prefix[:, j]]
            node = torch.where(node >= 0, nxt, node)
        kids = self._child[node.clamp(min=0)]  # (B, vocab)
        valid = (kids >= 0) & (node >= 0)[:, None]
        here = log_mass[rows, node.clamp(min=0)]  # (B,)
        there = log_mass[rows[:, None], kids.clamp(min=0)]  # (B, vocab)
        logits = torch.where(valid, there - here[:, None], torch.full_like(there, _NEG))
        ended = ~valid.any(1)  # past the answer's end or off the tree: any finite law (never sampled or scored)
        return torch.where(ended[:, None], torch.zeros_like(logits), logits)

    def action_probs(self) -> torch.Tensor:
        """:math:`p = \\mathrm{softmax}(z_x)` per prompt, (R, M + 1), rows in ``prompt_keys`` order."""
        return self.action_logits().detach().softmax(-1)


class SharedPolicy(TablePolicy):
    r"""The table's law with a frozen per-prompt offset and a trained log-linear term shared by every prompt.

    .. math:: z(x, a) = c(x, a) + \phi(x)^\top W \psi(a), \qquad p(\cdot \mid x) = \mathrm{softmax}(z(x, \cdot))

    The categorical policy of F-GRPO App. J (BroRL §4.1) with its free logits replaced by features shared across
    prompts: one update on a prompt moves :math:`W`, hence every prompt whose features overlap its own.

    Parameters
    ----------
    prompt_keys : LongTensor (R, P)
    answers : LongTensor (M + 1, L)
        As :class:`TablePolicy`'s (the last row is the off-format action).
    offset : Tensor (R, M + 1)
        :math:`c`, frozen (a buffer).
    vocab_size : int
    weight : Tensor (F, G), optional
        Initial :math:`W` (default zeros, so that :math:`z = c`).
    prompt_features : Tensor (R, F), optional
        :math:`\phi`; default a constant 1 and, per vocabulary token, whether it occurs in the prompt (F = V + 1).
    answer_features : Tensor (M + 1, G), optional
        :math:`\psi`; default the one-hot token at each answer position (G = L V).
    """

    kind = "shared"

    def __init__(self, prompt_keys, answers, offset, vocab_size: int, weight=None, prompt_features=None,
                 answer_features=None):  # fmt: skip
        _LookupPolicy.__init__(self, prompt_keys, vocab_size, answers.shape[1])
        R, A = prompt_keys.shape[0], answers.shape[0]
        if offset.shape != (R, A):
            raise ValueError(f"offset must be (prompts, actions) = ({R}, {A}), got {tuple(offset.shape)}")
        keys, answers = prompt_keys.long(), answers.long()
        if prompt_features is None:
            present = torch.zeros(R, vocab_size, dtype=torch.float32).scatter_(1, keys, 1.0)
            prompt_features = torch.cat([torch.ones(R, 1), present], dim=1)
        if answer_features is None:
            answer_features = nn.functional.one_hot(answers, vocab_size).flatten(1).float()
        phi, psi = prompt_features.float(), answer_features.float()
        if phi.dim() != 2 or phi.shape[0] != R or psi.dim() != 2 or psi.shape[0] != A:
            raise ValueError(
                f"features must be (prompts, F) and (actions, G), got {tuple(phi.shape)}, {tuple(psi.shape)}"
            )
        if weight is None:
            weight = torch.zeros(phi.shape[1], psi.shape[1])
        if weight.shape != (phi.shape[1], psi.shape[1]):
            raise ValueError(f"weight must be (F, G) = {(phi.shape[1], psi.shape[1])}, got {tuple(weight.shape)}")
        self.register_buffer("answers", answers.clone())
        self.register_buffer("offset", offset.detach().clone().float())
        self.register_buffer("prompt_features", phi.clone())
        self.register_buffer("answer_features", psi.clone())
        self.weight = nn.Parameter(weight.detach().clone().float())
        self._build_trie()

    def action_logits(self) -> torch.Tensor:
        """:math:`z = c + \\phi W \\psi^\\top`, (R, M + 1)."""
        return self.offset + (self.prompt_features @ self.weight) @ self.answer_features.T


class FactorizedPolicy(_LookupPolicy):
    """One softmax per answer position and prompt: :math:`p(a \\mid x) = \\prod_t q_{x,t}(a_t)`.

    Parameters
    ----------
    prompt_keys : LongTensor (R, P)
    logits : Tensor (R, L, vocab)
        Position logits; position ``t`` of every answer of prompt ``x`` is drawn
        from ``softmax(logits[x, t])`` whatever came before.
    """

    kind = "factorized"

    def __init__(self, prompt_keys, logits):
        R, L, V = logits.shape
        super().__init__(prompt_keys, V, L)
        if R != prompt_keys.shape[0]:
            raise ValueError(f"logits hold {R} prompts, prompt_keys {prompt_keys.shape[0]}")
        self.logits = nn.Parameter(logits.detach().clone().float())

    def _next_logits(self, state, rows, prefix, t):
        if t >= self.max_answer_len:
            return torch.zeros(rows.shape[0], self.vocab_size, dtype=self._dtype(), device=rows.device)
        return self.logits[rows, t]


def _action_sequences(task: Task, prompt) -> tuple[torch.Tensor, torch.Tensor]:
    """Every well-formed answer of ``prompt`` plus the off-format ``<eos>``, (M + 1, L), and their correctness."""
    answers = task.enumerate_answers(prompt)
    off = torch.full((1, task.max_answer_len), PAD, dtype=torch.long)
    off[0, 0] = EOS
    if bool((answers.tokens[:, 0] == EOS).any()):
        raise ValueError(f"task {task.name!r} has a well-formed empty answer; the off-format action would collide")
    return torch.cat([answers.tokens, off]), torch.cat([answers.correct, torch.zeros(1, dtype=torch.bool)])


def tabular_from_distribution(kind: str, task: Task, prompts, logp: torch.Tensor, off_format: torch.Tensor):
    """A ``table``, ``factorized`` or ``shared`` policy over ``prompts`` starting from an exact answer distribution.

    Parameters
    ----------
    kind : {"table", "factorized", "shared"}
    task : Task
        An enumerable task whose answer list is the same for every prompt.
    prompts : sequence
        The prompts the policy holds (training pool and evaluation prompts).
    logp : Tensor (R, M)
        :math:`\\log\\pi(a \\mid x)` of every well-formed answer
        (:attr:`tailmiss.llm.evaluate.AnswerDistribution.logp`).
    off_format : Tensor (R,)
        Mass outside the well-formed answers (floored at 1e-30).
    """
    check_choice("kind", kind, TABULAR_KINDS)
    if not task.enumerable:
        raise ValueError(f"a {kind} policy needs an enumerable task, got {task.name!r}")
    seqs, _ = _action_sequences(task, prompts[0])
    for p in prompts[1:]:
        if not torch.equal(_action_sequences(task, p)[0], seqs):
            raise ValueError(f"a {kind} policy needs the same answer list for every prompt of {task.name!r}")
    keys = task.encode_prompts(prompts)
    logp = logp.double()
    off = off_format.double().clamp(min=1e-30)
    if kind in ("table", "shared"):
        cls = TablePolicy if kind == "table" else SharedPolicy
        return cls(keys, seqs, torch.cat([logp, off.log()[:, None]], dim=1), len(task.vocab))
    well = seqs[:-1]  # (M, L): per-position marginals of the well-formed answers, off-format as an early <eos>
    probs = logp.exp()
    probs = probs / probs.sum(1, keepdim=True)
    L, V = task.max_answer_len, len(task.vocab)
    logits = torch.full((len(prompts), L, V), _NEG, dtype=torch.float64)
    lengths = (well != PAD).sum(1)
    if not bool((lengths == L).all()):
        raise ValueError("a factorized policy needs answers of one length (every position used)")
    keep = (1.0 - off) ** (1.0 / (L - 1)) if L > 1 else torch.ones_like(off)  # (R,): well-formed mass per position
    for t in range(L):
        marg = torch.zeros(len(prompts), V, dtype=torch.float64).index_add(1, well[:, t], probs)  # (R, V)
        if t < L - 1:
            marg = marg * keep[:, None]
            marg[:, EOS] += 1.0 - keep
        logits[:, t] = torch.where(marg > 0, marg.clamp(min=1e-300).log(), torch.full_like(marg, _NEG))
    return FactorizedPolicy(keys, logits)


def tabular_from_state(kind: str, weights: dict, vocab_size: int) -> _LookupPolicy:
    """Rebuild a policy from its ``state_dict`` (checkpoints) and the task's vocabulary size."""
    kind = check_choice("kind", kind, TABULAR_KINDS)
    if kind == "table":
        model = TablePolicy(weights["prompt_keys"], weights["answers"], weights["logits"], vocab_size)
    elif kind == "shared":
        names = ("weight", "prompt_features", "answer_features")
        model = SharedPolicy(weights["prompt_keys"], weights["answers"], weights["offset"], vocab_size,
                             *(weights[n] for n in names))  # fmt: skip
    else:
        model = FactorizedPolicy(weights["prompt_keys"], weights["logits"])
    model.load_state_dict(weights)
    return model
