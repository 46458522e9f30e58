"""Tests of the tiny transformer: shapes, causality, KV cache against the full forward, and the sampling law."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tailmiss.llm.model import GPT, ModelConfig, answer_logprobs, generate, with_dtype

VOCAB = 15  # the size of MultiSolutionTask's vocabulary
BLOCK = 16
EOS = 3
TINY = ModelConfig(n_layer=1, n_head=2, n_embd=16)
SMALL = ModelConfig(n_layer=2, n_head=4, n_embd=32)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models on a shared 2-core machine: thread hand-offs cost more than they save."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _model(cfg: ModelConfig = SMALL, seed: int = 0, std: float | None = 0.3, dtype=torch.float64) -> GPT:
    """A random model; with ``std`` every parameter is redrawn from N(0, std^2) so that its logits are far from flat.

    The GPT-2 initialisation (std 0.02) gives almost uniform next-token laws, against which a wrong
    sampler or a wrong cache could still pass; std 0.3 gives logits of spread about 1 that depend on context.
    """
    torch.manual_seed(seed)
    model = GPT(cfg, VOCAB, BLOCK)
    if std is not None:
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * std)
    return model.to(dtype).eval().requires_grad_(False)


def _prompts(batch: int, length: int, seed: int = 1) -> torch.Tensor:
    """Random prompts that avoid EOS (any other id is fine for a model test)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB - 1, (batch, length), generator=g)
    return torch.where(ids >= EOS, ids + 1, ids)  # skip id 3


def _first_eos(tokens: torch.Tensor) -> torch.Tensor:
    """Index of each row's first EOS, or the row length when it has none, (B,)."""
    is_eos = tokens == EOS
    width = tokens.shape[1]
    idx = torch.where(is_eos, torch.arange(width), torch.full_like(tokens, width))
    return idx.min(1).values


# -- shapes and configuration --------------------------------------------------------------


def test_forward_shapes_and_tied_embeddings():
    model = _model(TINY, std=None, dtype=torch.float32)
    x = torch.randint(0, VOCAB, (3, 7), generator=torch.Generator().manual_seed(0))
    assert model(x).shape == (3, 7, VOCAB)
    assert model(x[:, :1]).shape == (3, 1, VOCAB)
    assert model(x).dtype == torch.float32
    assert model.lm_head.weight is model.wte.weight
    # the tie survives a dtype conversion
    m64 = with_dtype(model, torch.float64)
    assert m64.lm_head.weight is m64.wte.weight
    # tied weights are counted once
    assert model.num_params() == sum(p.numel() for p in set(model.parameters()))


@pytest.mark.parametrize(
    ("cfg", "lo", "hi"),
    [
        (ModelConfig(n_layer=1, n_head=1, n_embd=64), 40_000, 120_000),
        (ModelConfig(n_layer=1, n_head=2, n_embd=64), 40_000, 120_000),
        (ModelConfig(n_layer=6, n_head=8, n_embd=256), 4_000_000, 6_000_000),
    ],
)
def test_parameter_count_in_documented_range(cfg, lo, hi):
    # the module docstring: "about 50k (1 layer x 64) to about 5M parameters (6 layers x 256)"
    assert lo <= GPT(cfg, vocab_size=20, block_size=300).num_params() <= hi


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"n_embd": 30, "n_head": 4}, "n_embd"),
        ({"n_layer": 0}, "n_layer"),
        ({"n_layer": -2}, "n_layer"),
        ({"n_head": 0}, "n_head"),
        ({"n_layer": True}, "n_layer"),
        ({"n_head": True, "n_embd": 8}, "n_head"),
        ({"n_embd": 64.0}, "n_embd"),
        ({"mlp_ratio": 0}, "mlp_ratio"),
        ({"mlp_ratio": False}, "mlp_ratio"),
    ],
)
def test_model_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        ModelConfig(**kwargs)


@pytest.mark.parametrize(("vocab", "block", "field"), [(0, 8, "vocab_size"), (15, 0, "block_size"), (True, 8, "vocab")])
def test_gpt_rejects_bad_sizes(vocab, block, field):
    with pytest.raises(ValueError, match=field):
        GPT(TINY, vocab, block)


def test_forward_refuses_sequences_longer_than_block_size():
    model = _model(TINY, std=None, dtype=torch.float32)
    model(torch.zeros((1, BLOCK), dtype=torch.long))  # exactly block_size is fine
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros((1, BLOCK + 1), dtype=torch.long))
    cache = model.new_cache(1, BLOCK + 1)
    with pytest.raises(ValueError, match="block_size"):  # the offset counts too
        model(torch.zeros((1, 2), dtype=torch.long), cache, BLOCK - 1)


# -- causality and the KV cache ----------------------------------------------------------------


@pytest.mark.parametrize("pos", [0, 3, 9])
def test_changing_a_later_token_never_changes_earlier_logits(pos):
    model = _model(SMALL, seed=2)
    x = _prompts(4, 10, seed=3)
    y = x.clone()
    y[:, pos] = (y[:, pos] + 5) % VOCAB
    lx, ly = model(x), model(y)
    torch.testing.assert_close(ly[:, :pos], lx[:, :pos], rtol=0, atol=1e-12)
    # and the change is visible from its own position on, so the check above can fail
    assert (ly[:, pos:] - lx[:, pos:]).abs().amax(-1).min() > 1e-6


@pytest.mark.parametrize("split", [1, 3, 6, 9])
def test_cached_multi_token_forward_equals_full_forward(split):
    model = _model(SMALL, seed=4)
    x = _prompts(3, 10, seed=5)
    full = model(x)
    cache = model.new_cache(3, 10)
    head = model(x[:, :split], cache, 0)
    tail = model(x[:, split:], cache, split)
    torch.testing.assert_close(head, full[:, :split], rtol=0, atol=1e-12)
    torch.testing.assert_close(tail, full[:, split:], rtol=0, atol=1e-12)


def test_cached_token_by_token_forward_equals_full_forward():
    model = _model(SMALL, seed=4)
    x = _prompts(3, 10, seed=5)
    full = model(x)
    cache = model.new_cache(3, 10)
    steps = torch.cat([model(x[:, t : t + 1], cache, t) for t in range(10)], dim=1)
    torch.testing.assert_close(steps, full, rtol=0, atol=1e-12)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_generate_logprobs_equal_teacher_forcing(temperature):
    model = _model(SMALL, seed=6)
    prompts = _prompts(64, 5, seed=7)
    g = torch.Generator().manual_seed(8)
    tokens, logprobs = generate(model, prompts, 8, EOS, temperature=temperature, generator=g)
    assert tokens.shape == logprobs.shape == (64, 8) and logprobs.dtype == torch.float64
    first = _first_eos(tokens)
    assert (first < 8).any() and (first == 8).any()  # both finished and unfinished rows are checked
    ref = answer_logprobs(model, prompts, tokens, temperature=temperature)
    upto = torch.arange(8)[None, :] <= first[:, None]  # up to and including the first EOS
    torch.testing.assert_close(logprobs[upto], ref[upto], rtol=0, atol=1e-12)


def test_generate_with_and_without_cache_gives_identical_samples():
    model = _model(SMALL, seed=9)
    prompts = _prompts(32, 4, seed=10)
    out = [
        generate(model, prompts, 9, EOS, generator=torch.Generator().manual_seed(11), use_cache=use_cache)
        for use_cache in (True, False)
    ]
    assert torch.equal(out[0][0], out[1][0])
    torch.testing.assert_close(out[0][1], out[1][1], rtol=0, atol=1e-12)


# -- generate ----------------------------------------------------------------------------------------


def _eos_prone(seed: int = 0, strength: float = 4.0) -> GPT:
    """A model whose next-token law ignores the context and gives EOS most of the mass.

    With the final LayerNorm's gain zeroed, the hidden state is its bias b, so the logits are
    ``wte @ b`` at every position; b along wte[EOS] makes EOS the favourite.
    """
    model = _model(TINY, seed=seed, std=None)
    with torch.no_grad():
        e = model.wte.weight[EOS]
        model.ln_f.weight.zero_()
        model.ln_f.bias.copy_(strength * e / e.dot(e))
    return model


@pytest.mark.parametrize("pad_id", [0, -1])
def test_generate_pads_after_eos(pad_id):
    model = _model(SMALL, seed=12)
    prompts = _prompts(64, 4, seed=13)
    tokens, logprobs = generate(model, prompts, 10, EOS, pad_id=pad_id, generator=torch.Generator().manual_seed(14))
    first = _first_eos(tokens)
    assert (first < 9).sum() >= 5  # several rows have something after their EOS
    after = torch.arange(10)[None, :] > first[:, None]
    assert (tokens[after] == pad_id).all()
    assert (logprobs[after] == 0).all()
    upto = ~after
    assert (logprobs[upto] < 0).all()  # a sampled token never has probability 1 under this model
    if pad_id == -1:
        assert (tokens[upto] >= 0).all()


@pytest.mark.parametrize("use_cache", [True, False])
def test_generate_stops_once_every_row_has_finished(use_cache):
    model = _eos_prone()
    calls = []
    handle = model.register_forward_hook(lambda *_: calls.append(1))
    try:
        tokens, _ = generate(
            model, _prompts(6, 3), 20, EOS, generator=torch.Generator().manual_seed(0), use_cache=use_cache
        )
    finally:
        handle.remove()
    last = int(_first_eos(tokens).max())
    assert last < 19  # every row finished early, so stopping early is observable
    # one call on the prompt, then one per step until the step at which the last row emits EOS
    assert len(calls) == last + 1
    assert tokens.shape == (6, 20) and (tokens[:, last + 1 :] == 0).all()


def _greedy_brute_force(model: GPT, prompts: torch.Tensor, steps: int, temperature: float):
    """Argmax of the full-forward logits, step by step, re-encoding the whole prefix each time."""
    seq, done = prompts, torch.zeros(len(prompts), dtype=torch.bool)
    tokens = torch.zeros((len(prompts), steps), dtype=torch.long)
    logprobs = torch.zeros((len(prompts), steps), dtype=torch.float64)
    for t in range(steps):
        logits = model(seq)[:, -1] / temperature
        nxt = logits.argmax(-1)
        lp = logits.log_softmax(-1).gather(1, nxt[:, None]).squeeze(1)
        tokens[:, t] = torch.where(done, 0, nxt)
        logprobs[:, t] = torch.where(done, 0.0, lp)
        done |= nxt == EOS
        seq = torch.cat([seq, nxt[:, None]], dim=1)
    return tokens, logprobs


@pytest.mark.parametrize(("top_k", "top_p"), [(1, 1.0), (None, 1e-9), (1, 1e-9)])
@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_top_k_one_and_tiny_top_p_are_greedy(top_k, top_p, temperature):
    model = _model(SMALL, seed=15, std=0.5)
    prompts = _prompts(16, 4, seed=16)
    want_tokens, want_lp = _greedy_brute_force(model, prompts, 7, temperature)
    tokens, logprobs = generate(
        model, prompts, 7, EOS, temperature=temperature, top_k=top_k, top_p=top_p,
        generator=torch.Generator().manual_seed(17),
    )  # fmt: skip
    assert torch.equal(tokens, want_tokens)
    torch.testing.assert_close(logprobs, want_lp, rtol=0, atol=1e-12)


@pytest.mark.parametrize("temperature", [0.25, 1.0, 3.0])
def test_returned_logprobs_are_tempered_log_softmax(temperature):
    model = _model(SMALL, seed=18)
    prompts = _prompts(32, 5, seed=19)
    tokens, logprobs = generate(
        model, prompts, 1, EOS, temperature=temperature, generator=torch.Generator().manual_seed(1)
    )
    want = (model(prompts)[:, -1] / temperature).log_softmax(-1).gather(1, tokens).squeeze(1)
    torch.testing.assert_close(logprobs[:, 0], want, rtol=0, atol=1e-12)
    if temperature != 1.0:  # and the temperature matters, so the check above can fail
        plain = model(prompts)[:, -1].log_softmax(-1).gather(1, tokens).squeeze(1)
        assert (plain - want).abs().max() > 1e-3


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"temperature": 0.0}, "temperature"),
        ({"temperature": -1.0}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": -3}, "top_k"),
        ({"top_k": 2.0}, "top_k"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_p": float("nan")}, "top_p"),
    ],
)
def test_generate_rejects_bad_sampling_arguments(kwargs, name):
    model = _model(TINY, std=None)
    with pytest.raises(ValueError, match=name):
        generate(model, _prompts(2, 3), 4, EOS, **kwargs)


def test_generate_rejects_bool_top_k():
    with pytest.raises(ValueError, match="top_k"):
        generate(_model(TINY, std=None), _prompts(2, 3), 4, EOS, top_k=True)


# -- the sampling law -------------------------------------------------------------------------------


def _nucleus(probs: np.ndarray, top_k: int | None, top_p: float) -> np.ndarray:
    """Brute force of top-k then top-p filtering: renormalised law over the kept tokens."""
    order = np.argsort(-probs, kind="stable")
    keep = np.zeros(len(probs), dtype=bool)
    keep[order[: top_k or len(probs)]] = True
    kept = np.where(keep, probs, 0.0) / probs[keep].sum()
    mass_before = 0.0
    for i in np.argsort(-kept, kind="stable"):  # smallest prefix whose mass reaches top_p
        if not keep[i] or mass_before >= top_p:
            keep[i] = False
        mass_before += kept[i]
    out = np.where(keep, probs, 0.0)
    return out / out.sum()


@pytest.mark.parametrize(("top_k", "top_p"), [(None, 1.0), (3, 1.0), (None, 0.6), (5, 0.8)])
def test_first_sampled_token_follows_softmax(top_k, top_p):
    n = 20_000
    model = _model(TINY, seed=20, std=0.5)  # tiny and a short prompt: 20k rows cost well under a second
    prompt = _prompts(1, 3, seed=21)
    probs = model(prompt)[0, -1].softmax(-1).numpy()
    want = _nucleus(probs, top_k, top_p)
    assert want.max() < 0.6 and (want > 0.01).sum() >= 3  # a law worth testing
    tokens, _ = generate(
        model, prompt.expand(n, -1), 1, EOS, top_k=top_k, top_p=top_p, generator=torch.Generator().manual_seed(22)
    )
    freq = np.bincount(tokens[:, 0].numpy(), minlength=VOCAB) / n
    assert (freq[want == 0] == 0).all()  # filtered tokens are never drawn
    se = np.sqrt(want * (1 - want) / n)
    z = np.abs(freq - want)[want > 0] / se[want > 0]
    # 15 cells at 4.5 standard errors: a false alarm has probability < 1e-4 (and the seed is fixed)
    assert z.max() < 4.5, (freq, want)


# -- with_dtype ---------------------------------------------------------------------------------------


def test_with_dtype_returns_self_or_a_converted_copy():
    model = _model(TINY, std=None, dtype=torch.float32)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert with_dtype(model, torch.float32) is model
    m64 = with_dtype(model, torch.float64)
    assert m64 is not model
    assert all(p.dtype == torch.float64 for p in m64.parameters())
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the original is untouched
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])
        torch.testing.assert_close(m64.state_dict()[k], v.double(), rtol=0, atol=0)
    assert with_dtype(m64, torch.float64) is m64
    x = _prompts(2, 5)
    torch.testing.assert_close(m64(x).float(), model(x), rtol=1e-4, atol=1e-5)
    with torch.no_grad():  # a copy, not a view: editing it leaves the original alone
        m64.wte.weight.add_(1.0)
    assert torch.equal(model.wte.weight, before["wte.weight"])


@pytest.mark.parametrize("start", [3, 5])
def test_siblings_are_alternatives_that_each_extend_the_cached_prefix(start):
    """Row b, column j of a siblings forward equals the full forward of prefix_b + token j; the cache is untouched."""
    model = _model()
    prefix = _prompts(3, start)
    cache = model.new_cache(3, start + 1)
    model(prefix, cache, 0)
    before = cache.k[:, :, :, :start].clone()
    alternatives = torch.tensor([[1, 2, 3, 4], [4, 4, 0, 2], [5, 6, 7, 1]])  # (B, C)
    got = model(alternatives, cache, start, siblings=True)  # (B, C, vocab)
    assert got.shape == (3, 4, model.vocab_size)
    for j in range(4):
        want = model(torch.cat([prefix, alternatives[:, j : j + 1]], dim=1))[:, -1]
        torch.testing.assert_close(got[:, j], want, rtol=0, atol=1e-12)
    assert torch.equal(cache.k[:, :, :, :start], before)


def test_siblings_need_a_cached_prefix():
    model = _model()
    with pytest.raises(ValueError, match="siblings need a cache"):
        model(_prompts(2, 3), None, 0, siblings=True)
    with pytest.raises(ValueError, match="siblings need a cache"):
        model(_prompts(2, 3), model.new_cache(2, 4), 0, siblings=True)
