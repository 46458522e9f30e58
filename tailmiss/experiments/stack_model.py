r"""Several GPTs of one shape evaluated as one: the forward pass of a run stack (:mod:`tailmiss.experiments.run_stack`).

The R models keep their own parameters (each run's optimiser, clipping and checkpoint stay its own). A forward
pass of :class:`StackedGPT` takes the rows of every model at once, run-major: rows ``r*B .. (r+1)*B - 1`` belong
to model r. Its matrices are stacked for the call (:func:`torch.stack`, so gradients flow back to each model's own
parameters) and every linear layer is one batched product over the runs,

.. math:: Y_r = X_r W_r^\top + b_r, \quad r = 1..R \qquad (\texttt{torch.baddbmm}),

while attention, which has no parameters, takes the R·B rows as one batch. Embeddings and layer norms run model
by model. Every other operation is the one-run code itself (``tailmiss.llm.model.Block`` and
``tailmiss.llm.model.CausalSelfAttention`` are called with this module's layers in place of ``nn.Linear``),
so on the CPU each row's logits, and each model's gradients, equal those of its model run alone bit for bit
(``tests/test_stack.py`` checks it, forward and backward).

:class:`RunDraws` lets :func:`tailmiss.llm.model.generate` sample the stacked rows with each run's own random
stream, so a run's rollouts do not depend on the stack it trains in.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tailmiss.llm.model import GPT, Block, CausalSelfAttention, CounterStream, check_siblings

__all__ = ["StackedGPT", "RunDraws", "stackable_models"]


def stackable_models(models: Sequence) -> bool:
    """Whether ``models`` can be stacked: transformers (:class:`GPT`) of one shape, vocabulary, context and dtype."""
    if not models or not all(isinstance(m, GPT) for m in models):
        return False
    first = models[0]
    shape = (first.cfg, first.vocab_size, first.block_size, first.wte.weight.dtype, first.wte.weight.device)
    return all((m.cfg, m.vocab_size, m.block_size, m.wte.weight.dtype, m.wte.weight.device) == shape for m in models)


class _Linear:
    """R ``nn.Linear`` layers applied to the run-major rows of their runs: one ``baddbmm`` (``bmm`` without bias)."""

    def __init__(self, layers: Sequence[torch.nn.Linear]):
        self.weights = [layer.weight for layer in layers]
        self.biases = None if layers[0].bias is None else [layer.bias for layer in layers]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        runs = len(self.weights)
        w = torch.stack(self.weights).transpose(1, 2)  # (R, in, out)
        rows = x.reshape(runs, -1, x.shape[-1])  # (R, rows per run, in)
        if self.biases is None:
            y = torch.bmm(rows, w)
        else:
            y = torch.baddbmm(torch.stack(self.biases)[:, None], rows, w)
        return y.reshape(*x.shape[:-1], w.shape[-1])


class _PerRun:
    """A parameterised layer (``nn.LayerNorm``) applied by each run to its own rows."""

    def __init__(self, layers: Sequence[torch.nn.Module]):
        self.layers = list(layers)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        parts = x.reshape(len(self.layers), -1, *x.shape[1:])
        return torch.cat([layer(part) for layer, part in zip(self.layers, parts)])


class _Attention:
    """The stacked runs' ``CausalSelfAttention`` of one layer (its ``forward`` run on stacked projections)."""

    def __init__(self, layers: Sequence[CausalSelfAttention]):
        self.n_head = layers[0].n_head
        self.qkv = _Linear([a.qkv for a in layers])
        self.proj = _Linear([a.proj for a in layers])

    def __call__(self, *args):
        return CausalSelfAttention.forward(self, *args)


class _Block:
    """The stacked runs' ``Block`` of one layer."""

    def __init__(self, blocks: Sequence[Block]):
        self.ln_1 = _PerRun([b.ln_1 for b in blocks])
        self.attn = _Attention([b.attn for b in blocks])
        self.ln_2 = _PerRun([b.ln_2 for b in blocks])
        first, act, second = zip(*(b.mlp for b in blocks))
        self.mlp = _MLP(_Linear(first), act[0], _Linear(second))

    def __call__(self, *args):
        return Block.forward(self, *args)


class _MLP:
    def __init__(self, first: _Linear, act: torch.nn.Module, second: _Linear):
        self.first, self.act, self.second = first, act, second

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.act(self.first(x)))


class StackedGPT:
    """R :class:`GPT` models of one shape (:func:`stackable_models`) called as one model on run-major rows.

    ``stack(idx, cache, start, siblings)`` takes ``idx`` (R·B, T), rows ``r*B ..`` for model r, and returns the
    logits (R·B, T, vocab) that :meth:`GPT.forward` gives each model on its rows. A cache comes from
    :meth:`new_cache` with R·B rows. :func:`tailmiss.llm.model.generate` and
    :func:`tailmiss.llm.model.answer_logprobs` accept it in place of a model.
    """

    def __init__(self, models: Sequence[GPT]):
        models = list(models)
        if not stackable_models(models):
            raise ValueError("a stack needs transformers (GPT) of one shape, vocabulary, context, dtype and device")
        self.models = models
        first = models[0]
        self.cfg, self.block_size = first.cfg, first.block_size
        self.blocks = [_Block(layer) for layer in zip(*(m.blocks for m in models))]
        self.ln_f = _PerRun([m.ln_f for m in models])
        self.lm_head = _Linear([m.lm_head for m in models])

    def __len__(self) -> int:
        return len(self.models)

    def parameters(self):
        """Every model's parameters, model by model."""
        for model in self.models:
            yield from model.parameters()

    def eval(self) -> StackedGPT:
        for model in self.models:
            model.eval()
        return self

    def train(self, mode: bool = True) -> StackedGPT:
        for model in self.models:
            model.train(mode)
        return self

    def new_cache(self, batch: int, max_len: int):
        """A KV cache for ``batch`` run-major rows (all runs together)."""
        return self.models[0].new_cache(batch, max_len)

    def __call__(self, idx: torch.Tensor, cache=None, start: int = 0, siblings: bool = False) -> torch.Tensor:
        runs = len(self.models)
        if idx.shape[0] % runs:
            raise ValueError(f"{idx.shape[0]} rows do not split evenly over {runs} stacked runs")
        T = idx.shape[1]
        last = start + (1 if siblings else T)
        if last > self.block_size:
            raise ValueError(f"sequence of {last} tokens exceeds block_size={self.block_size}")
        check_siblings(siblings, cache, start)
        pos = torch.full((T,), start, device=idx.device) if siblings else torch.arange(start, last, device=idx.device)
        parts = idx.reshape(runs, -1, T)
        x = torch.cat([m.wte(part) + m.wpe(pos) for m, part in zip(self.models, parts)])  # (R*B, T, C)
        for layer, block in enumerate(self.blocks):
            x = block(x, cache, layer, start, siblings)
        return self.lm_head(self.ln_f(x))


class RunDraws(CounterStream):
    """The random draws of a stack's rollouts: each run's rows drawn from that run's own stream.

    ``streams[r]`` is run r's :class:`torch.Generator` (one stream for its B rows, drawn by
    :func:`torch.multinomial` as :func:`tailmiss.llm.model.generate` draws a single run) or its
    :class:`CounterStream`; ``rows`` is B, the rows per run. Passed to :func:`~tailmiss.llm.model.generate` as its
    ``generator``.
    """

    def __init__(self, streams: Sequence, rows: int):
        if not streams:
            raise ValueError("a stack draws for at least one run")
        self.streams, self.per_run = list(streams), int(rows)
        self.seed, self.rows = 0, torch.arange(len(self.streams) * self.per_run)

    def draw(self, probs: torch.Tensor, t: int) -> torch.Tensor:
        parts = probs.reshape(len(self.streams), self.per_run, probs.shape[-1])
        out = []
        for stream, part in zip(self.streams, parts):
            if isinstance(stream, CounterStream):
                out.append(stream.draw(part, t))
            else:
                out.append(torch.multinomial(part, 1, generator=stream).squeeze(1))
        return torch.cat(out)
