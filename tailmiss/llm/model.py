"""A small decoder-only transformer (nanoGPT style) with KV-cache sampling and exact log-probabilities.

Pre-norm blocks (LayerNorm → causal self-attention → residual; LayerNorm →
MLP → residual), learned position embeddings and input/output embeddings tied.
Sized by :class:`ModelConfig` from about 50k (1 layer × 64) to about 5M
parameters (6 layers × 256); the vocabulary and the context length come from
the task. :func:`generate` draws from a :class:`torch.Generator` or, so that a
row's tokens do not depend on the batch it is generated in (RL rollouts split
over processes), from a counter-based :class:`CounterStream`.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from tailmiss._checks import check_choice
from tailmiss._hash import hash_uniform

__all__ = [
    "MODEL_KINDS",
    "ModelConfig",
    "GPT",
    "param_dtype",
    "param_device",
    "check_siblings",
    "KVCache",
    "CounterStream",
    "generate",
    "answer_logprobs",
    "with_dtype",
]


def _positive_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


MODEL_KINDS = ("transformer", "table", "factorized", "shared")
"""The policies :attr:`ModelConfig.kind` names: the transformer (:class:`GPT`) or a network-free policy of
:mod:`tailmiss.llm.tabular` (:data:`tailmiss.llm.tabular.TABULAR_KINDS`)."""


@dataclass(frozen=True)
class ModelConfig:
    """Transformer shape: ``n_layer`` blocks of width ``n_embd`` with ``n_head`` heads.

    ``kind`` is ``"transformer"`` (this module's :class:`GPT`) or one of the
    network-free policies of :mod:`tailmiss.llm.tabular` (``"table"``,
    ``"factorized"``, ``"shared"``), which are built from a trained transformer's answer
    distribution rather than trained by SFT; the shape fields do not apply to them.
    """

    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    mlp_ratio: int = 4
    kind: str = "transformer"

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, MODEL_KINDS)
        for name in ("n_layer", "n_head", "n_embd", "mlp_ratio"):
            _positive_int(name, getattr(self, name))
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd must be a multiple of n_head, got n_embd={self.n_embd}, n_head={self.n_head}")


class KVCache:
    """Keys and values of every layer for ``max_len`` positions: (n_layer, B, n_head, max_len, head_dim).

    Left uninitialised: a forward pass writes positions ``start .. start+T-1``
    before it reads ``0 .. start+T-1``, so no position is read before it is
    written (zero-filling megabytes of cache per call cost more than the scoring).
    """

    def __init__(self, n_layer, batch, n_head, max_len, head_dim, device, dtype):
        shape = (n_layer, batch, n_head, max_len, head_dim)
        self.k = torch.empty(shape, device=device, dtype=dtype)
        self.v = torch.empty(shape, device=device, dtype=dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(self, x, cache: KVCache | None = None, layer: int = 0, start: int = 0, siblings: bool = False):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)  # (B, T, C) each
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        if siblings:  # T alternatives at `start`: each sees the cached prefix and itself, and nothing is cached
            k = torch.cat([cache.k[layer, :, :, :start], k], dim=2)  # (B, H, start+T, D)
            v = torch.cat([cache.v[layer, :, :, :start], v], dim=2)
            prefix = torch.ones(T, start, dtype=torch.bool, device=x.device)
            allowed = torch.cat([prefix, torch.eye(T, dtype=torch.bool, device=x.device)], dim=1)  # (T, start+T)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        elif cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            cache.k[layer, :, :, start : start + T] = k
            cache.v[layer, :, :, start : start + T] = v
            k, v = cache.k[layer, :, :, : start + T], cache.v[layer, :, :, : start + T]  # (B, H, start+T, D)
            if T == 1:  # one new token attends to everything so far
                y = F.scaled_dot_product_attention(q, k, v)
            else:  # query i sits at position start+i and sees keys 0..start+i
                allowed = torch.ones(T, start + T, dtype=torch.bool, device=x.device).tril(diagonal=start)
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.n_embd, cfg.mlp_ratio * cfg.n_embd),
            nn.GELU(),
            nn.Linear(cfg.mlp_ratio * cfg.n_embd, cfg.n_embd),
        )

    def forward(self, x, cache=None, layer=0, start=0, siblings=False):
        x = x + self.attn(self.ln_1(x), cache, layer, start, siblings)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Decoder-only transformer over ``vocab_size`` tokens and contexts of up to ``block_size``."""

    def __init__(self, cfg: ModelConfig, vocab_size: int, block_size: int):
        super().__init__()
        _positive_int("vocab_size", vocab_size)
        _positive_int("block_size", block_size)
        self.cfg, self.vocab_size, self.block_size = cfg, vocab_size, block_size
        self.wte = nn.Embedding(vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied embeddings
        self.apply(self._init_weights)
        for block in self.blocks:  # GPT-2: residual projections scaled by depth
            nn.init.normal_(block.attn.proj.weight, std=0.02 / math.sqrt(2 * cfg.n_layer))
            nn.init.normal_(block.mlp[2].weight, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def new_cache(self, batch: int, max_len: int) -> KVCache:
        p = self.wte.weight
        head_dim = self.cfg.n_embd // self.cfg.n_head
        return KVCache(self.cfg.n_layer, batch, self.cfg.n_head, max_len, head_dim, p.device, p.dtype)

    def forward(
        self, idx: torch.Tensor, cache: KVCache | None = None, start: int = 0, siblings: bool = False
    ) -> torch.Tensor:
        """Logits (B, T, vocab) of ``idx`` (B, T), whose first token sits at position ``start``.

        With ``siblings`` the T tokens are alternatives for the one position
        ``start``: token j of row b continues row b's cached prefix (positions
        ``< start``) and sees neither the other alternatives nor is written to
        the cache, so ``[b, j]`` holds the next-token logits after prefix + j.
        Exact scoring expands the last level of an answer tree this way instead
        of copying a cache row per answer.
        """
        B, T = idx.shape
        last = start + (1 if siblings else T)
        if last > self.block_size:
            raise ValueError(f"sequence of {last} tokens exceeds block_size={self.block_size}")
        check_siblings(siblings, cache, start)
        pos = torch.full((T,), start, device=idx.device) if siblings else torch.arange(start, last, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)  # (B, T, C)
        for layer, block in enumerate(self.blocks):
            x = block(x, cache, layer, start, siblings)
        return self.lm_head(self.ln_f(x))  # (B, T, vocab)


def check_siblings(siblings: bool, cache, start: int) -> None:
    """``ValueError`` unless a forward pass that reads sibling rows (``siblings``) has a cache holding the prefix
    (``start >= 1``); every policy's forward checks it."""
    if siblings and (cache is None or start < 1):
        raise ValueError(f"siblings need a cache holding the prefix (start >= 1), got start={start}")


def param_dtype(model: nn.Module) -> torch.dtype:
    """The dtype of the model's parameters (a transformer's or a table policy's)."""
    return next(model.parameters()).dtype


def param_device(model: nn.Module) -> torch.device:
    """The device of the model's parameters."""
    return next(model.parameters()).device


def with_dtype(model: GPT, dtype: torch.dtype) -> GPT:
    """The model itself if it already has ``dtype``, else a converted copy (e.g. float64 for exact masses)."""
    if param_dtype(model) == dtype:
        return model
    return copy.deepcopy(model).to(dtype)


def _filter_logits(logits: torch.Tensor, top_k: int | None, top_p: float) -> torch.Tensor:
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop_sorted = cum - sorted_logits.softmax(-1) >= top_p  # keep the smallest prefix reaching top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


class CounterStream:
    r"""Counter-based randomness for :func:`generate`: each row's draws depend on its global id alone.

    Row ``b`` of the batch is the global row ``rows[b]``; its token at answer
    position ``t`` is the inverse-CDF draw of the uniform
    :math:`u = h(\mathrm{seed}, \mathrm{rows}[b], t)` from the row's filtered
    next-token law (:func:`tailmiss.sim.sampler.hash_uniform`, a stateless
    integer hash with 53-bit float64 output). A row therefore gets the same
    tokens whether it is generated alone or inside any batch, on any number of
    processes and on any device, as long as its probabilities are the same.

    Parameters
    ----------
    seed : int
        Non-negative; its two 32-bit halves are folded into the 32-bit key the
        hash takes.
    rows : sequence of int or LongTensor (B,)
        Global id of each row of the batch (non-negative, below 2^32).
    """

    def __init__(self, seed: int, rows):
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        rows = torch.as_tensor(rows, dtype=torch.long, device="cpu").reshape(-1)
        if rows.numel() and not (0 <= int(rows.min()) and int(rows.max()) < 2**32):
            raise ValueError(f"rows must lie in [0, 2^32), got min {int(rows.min())}, max {int(rows.max())}")
        self.seed, self.rows = seed, rows
        self._key = torch.tensor((seed ^ (seed >> 32)) & 0xFFFFFFFF, dtype=torch.long)

    def uniforms(self, t: int) -> torch.Tensor:
        """Float64 uniforms on [0, 1) of every row at answer position ``t``, (B,) on the CPU."""
        return hash_uniform(self._key, self.rows, t)

    def draw(self, probs: torch.Tensor, t: int) -> torch.Tensor:
        """Token ids (B,) drawn from ``probs`` (B, vocab), unnormalised allowed, at answer position ``t``."""
        if probs.shape[0] != self.rows.numel():
            raise ValueError(f"probs has {probs.shape[0]} rows but the stream has {self.rows.numel()}")
        return _inverse_cdf(probs, self.uniforms(t).to(probs.device))


def _inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """First index whose cumulative probability exceeds ``u`` × the row's total, (B,); never a zero-mass index.

    The prefix sums are taken in float64 within each row. A query that rounds up
    to the row's total (``u`` next to 1) is clamped to the row's last token of
    non-zero probability.
    """
    cdf = torch.cumsum(probs, dim=-1, dtype=torch.float64)  # (B, vocab)
    query = (u.to(torch.float64) * cdf[:, -1]).unsqueeze(1)  # (B, 1)
    idx = torch.searchsorted(cdf, query, right=True).squeeze(1)  # (B,)
    vocab = probs.shape[-1]
    last = vocab - 1 - (probs > 0).flip(-1).to(torch.uint8).argmax(-1)  # last index of non-zero mass
    return torch.minimum(idx, last)


@torch.no_grad()
def _check_sampling(prompts: torch.Tensor, temperature, top_k, top_p, generator) -> CounterStream | None:
    """Refuse bad sampling settings by name; the :class:`CounterStream` among them (None: a torch generator)."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 < temperature < math.inf:
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1):
        raise ValueError(f"top_k must be a positive integer or None, got {top_k!r}")
    if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        raise ValueError(f"top_p must lie in (0, 1], got {top_p!r}")
    counter = generator if isinstance(generator, CounterStream) else None
    if counter is not None and counter.rows.numel() != prompts.shape[0]:
        raise ValueError(f"the CounterStream has {counter.rows.numel()} rows but prompts has {prompts.shape[0]}")
    return counter


def generate(
    model: GPT,
    prompts: torch.Tensor,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int = 0,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    generator: torch.Generator | CounterStream | None = None,
    use_cache: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Sample continuations of equal-length ``prompts`` (B, P) until ``<eos>`` or ``max_new_tokens``.

    Each step samples from :math:`\mathrm{softmax}(\ell/T)` restricted to the
    top-k tokens and the top-p nucleus (defaults: T = 1, no top-k, top-p 1, the
    F-GRPO sampling settings). With ``use_cache`` the prompt is encoded once and
    each new token attends to cached keys and values; without it every step
    re-encodes the whole prefix (same law, for benchmarks).

    ``generator`` is a :class:`torch.Generator` (one stream for the batch, drawn
    by :func:`torch.multinomial`) or a :class:`CounterStream` (each row's draws a
    function of its global row id, so independent of the batch split).

    Returns
    -------
    tokens : LongTensor (B, max_new_tokens)
        Sampled ids; after a row's ``<eos>`` the row holds ``pad_id``.
    logprobs : Tensor (B, max_new_tokens)
        Log-probability of each sampled token under :math:`\mathrm{softmax}(\ell/T)`
        (before top-k/top-p filtering); 0 after ``<eos>``.
    """
    counter = _check_sampling(prompts, temperature, top_k, top_p, generator)
    B, P = prompts.shape
    tokens = torch.full((B, max_new_tokens), pad_id, dtype=torch.long, device=prompts.device)
    logprobs = torch.zeros((B, max_new_tokens), dtype=param_dtype(model), device=prompts.device)
    done = torch.zeros(B, dtype=torch.bool, device=prompts.device)
    cache = model.new_cache(B, P + max_new_tokens) if use_cache else None
    seq = prompts
    logits = model(prompts, cache, 0)[:, -1]  # (B, vocab)
    for t in range(max_new_tokens):
        logits = logits / temperature
        probs = _filter_logits(logits, top_k, top_p).softmax(-1)
        if counter is not None:
            nxt = counter.draw(probs, t)  # (B,)
        else:
            nxt = torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (B,)
        lp = logits.log_softmax(-1).gather(1, nxt[:, None]).squeeze(1)
        tokens[:, t] = torch.where(done, pad_id, nxt)
        logprobs[:, t] = torch.where(done, 0.0, lp)
        done |= nxt == eos_id
        if bool(done.all()) or t == max_new_tokens - 1:
            break
        if use_cache:
            logits = model(nxt[:, None], cache, P + t)[:, -1]
        else:
            seq = torch.cat([seq, nxt[:, None]], dim=1)
            logits = model(seq)[:, -1]
    return tokens, logprobs


def answer_logprobs(
    model: GPT, prompts: torch.Tensor, answers: torch.Tensor, temperature: float = 1.0, with_entropy: bool = False
):
    r"""Teacher-forced log-probabilities of ``answers`` (B, L) after ``prompts`` (B, P).

    Entry ``[b, t]`` is :math:`\log \pi(y_{b,t} \mid x_b, y_{b,<t})` under
    :math:`\mathrm{softmax}(\ell/T)`, in the model's dtype (use
    :func:`with_dtype` for float64). Padding after ``<eos>`` gets a value too;
    mask it. With ``with_entropy`` also returns the entropy of each next-token
    distribution, (B, L).
    """
    seq = torch.cat([prompts, answers[:, :-1]], dim=1)  # (B, P + L - 1)
    logits = model(seq)[:, prompts.shape[1] - 1 :] / temperature  # (B, L, vocab)
    logp_all = logits.log_softmax(-1)
    logp = logp_all.gather(-1, answers[..., None]).squeeze(-1)  # (B, L)
    if not with_entropy:
        return logp
    entropy = -(logp_all.exp() * logp_all).sum(-1)  # (B, L)
    return logp, entropy
