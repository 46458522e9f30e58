"""The simulator's fast paths draw and compute exactly what the plain ones do, bit for bit.

The sampler scans each row's CDF in a thread pool, hashes on int32 words into
reused buffers, and the step works through the sweep in tiles of rows. None of
this may change a number: the random stream is pinned by a digest, and every
fast path is compared with its plain form.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest
import torch

from tailmiss import _hash
from tailmiss.sim import CountSampler, preset, simulate
from tailmiss.sim import memory as memory_module
from tailmiss.sim.sampler import partition_rows, row_cdf


def _reference_uniforms(seed: torch.Tensor, index: torch.Tensor, step: int) -> torch.Tensor:
    """The counter hash written plainly on int64 (the form the int32 words must reproduce)."""
    m32, salt_step = _hash._M32, _hash._SALT_STEP

    def keys(salt):
        return _hash._mix32(_hash._mix32((index & m32) ^ salt) ^ _hash._mix32(seed & m32))

    s = _hash._mix32(torch.tensor(step & m32, dtype=torch.int64) ^ salt_step)
    hi = _hash._mix32(keys(_hash._SALT_HI) ^ s)
    lo = _hash._mix32(keys(_hash._SALT_LO) ^ s)
    return ((hi << 21) | (lo >> 11)).to(torch.float64) * 2.0**-53


@pytest.mark.parametrize("length", [1, 7, 8, 9, 1023, 100_003])
def test_int32_hash_equals_the_int64_reference(length):
    gen = torch.Generator().manual_seed(length)
    seed = torch.randint(0, 2**40, (length,), generator=gen)
    index = torch.randint(0, 2**40, (length,), generator=gen)
    for step in (0, 1, 2**31 - 1, 2**31, 2**33 + 5):
        expected = _reference_uniforms(seed, index, step)
        assert torch.equal(_hash.hash_uniform(seed, index, step), expected)
        # the same with the caller's buffers (what the sampler does every step)
        key_hi = _hash._keys(seed, index, _hash._SALT_HI)
        key_lo = _hash._keys(seed, index, _hash._SALT_LO)
        work = [torch.empty(length, dtype=torch.int32) for _ in range(3)] + [torch.empty(length, dtype=torch.int64)]
        out = torch.empty(length, dtype=torch.float64)
        assert torch.equal(_hash._from_keys(key_hi, key_lo, step, out, work), expected)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(1, 5), (2, 1000), (3, 128_000), (17, 4097)])
def test_row_cdf_is_a_sequential_float64_scan_of_each_row(shape, threads):
    gen = torch.Generator().manual_seed(sum(shape))
    probs = torch.softmax(4 * torch.randn(shape, generator=gen), 1)  # float32, very uneven
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = row_cdf(probs)
    finally:
        torch.set_num_threads(before)
    expected = np.cumsum(probs.numpy().astype(np.float64), axis=1)  # numpy's cumsum adds left to right
    assert np.array_equal(got.numpy(), expected)
    assert torch.equal(got, torch.cumsum(probs, dim=1, dtype=torch.float64))


def test_the_random_stream_is_pinned():
    """Counts and searched values of a fixed set of rows, steps and seeds, as drawn since the sampler became row-local.

    A change to the hash, the order statistics or the search changes this digest; such a change must re-run
    the full presets and regenerate the figures and the report.
    """
    gen = torch.Generator().manual_seed(123)
    v = 5000
    probs = torch.softmax(torch.randn(7, v, generator=gen, dtype=torch.float64) * 3, 1).to(torch.float32)
    sizes = [1, 2, 2, 37, 37, 4096, 9000]
    seeds = [0, 1, 2**32 - 1, 5, 6, 7, 123456789]
    digest = hashlib.sha256()
    for step in (0, 1, 999, 2**31 + 7):
        sampler = CountSampler(sizes, seeds, v, "cpu")
        digest.update(sampler.counts(probs, step).numpy().tobytes())
        digest.update(sampler.queries(probs, step).numpy().tobytes())
    assert digest.hexdigest() == "0fd66916ac03b20628fcf0f26175e5297584f331006479fce5dddaca34698ba6"


@pytest.mark.parametrize("max_rows", [None, 1, 2, 3])
@pytest.mark.parametrize("max_draws", [7, 500, 2**22])
def test_block_by_block_sampling_equals_sampling_the_whole_matrix(max_rows, max_draws):
    gen = torch.Generator().manual_seed(5)
    sizes = [3, 3, 3, 3, 3, 40, 40, 700, 2, 2]
    seeds = list(range(len(sizes)))
    probs = torch.softmax(2 * torch.randn(len(sizes), 300, generator=gen), 1)
    plain = CountSampler(sizes, seeds, 300, "cpu")
    tiled = CountSampler(sizes, seeds, 300, "cpu", max_draws, max_rows)
    assert [(b.r0, b.r1, b.n) for b in tiled.blocks] == partition_rows(sizes, max_draws, max_rows)
    if max_rows is not None:
        assert max(b.r1 - b.r0 for b in tiled.blocks) <= max_rows
    for step in (0, 3):
        counts, correct = plain.sample(probs, step, torch.float32, 20)
        assert torch.equal(tiled.sample(probs, step, torch.float32, 20)[0], counts)
        assert torch.equal(tiled.queries(probs, step), plain.queries(probs, step))
        assert torch.equal(tiled.indices(probs, step), plain.indices(probs, step))
        for i, (block, u) in enumerate(zip(tiled.blocks, tiled.uniforms(step))):
            part, hits = tiled.sample_block(i, probs[block.r0 : block.r1], u, torch.float32, 20)
            assert torch.equal(part, counts[block.r0 : block.r1])
            assert torch.equal(hits, correct[block.r0 : block.r1])


def test_partition_rows_splits_runs_of_equal_sizes_evenly():
    assert partition_rows([2] * 9, 2**22, 8) == [(0, 4, 2), (4, 9, 2)]
    assert partition_rows([2, 2, 5, 5, 5], 2**22) == [(0, 2, 2), (2, 5, 5)]
    assert partition_rows([10] * 4, 25) == [(0, 2, 10), (2, 4, 10)]  # at most 25 // 11 = 2 rows of 11 values
    assert partition_rows([100], 7) == [(0, 1, 100)]  # a row larger than the limit is a block of its own


@pytest.mark.parametrize("name", ["fgrpo-fig2", "fgrpo-fig2-prob", "brorl-fig3"])
def test_tiles_do_not_change_the_history(name, monkeypatch):
    """A few logged steps of a reduced paper sweep with 2-row tiles, with the default tiles and with one tile per N."""
    config = preset(name)
    config = config.replace(
        group_sizes=config.group_sizes[::3], seeds=config.seeds[:2], steps=4, log_every=1, num_actions=20_000
    )
    histories = []
    for elements in (1, memory_module.TILE_ELEMENTS, 2**40):
        monkeypatch.setattr(memory_module, "TILE_ELEMENTS", elements)
        histories.append(simulate(config, device="cpu", progress=False).history)
    for other in histories[1:]:
        pd.testing.assert_frame_equal(histories[0], other, check_exact=True)
