r"""Batched multinomial draws with counter-based randomness.

Each run's draws are a pure function of ``(seed, step, draw index)`` and of that
run's own probabilities: the uniforms come from a stateless integer hash, not
from a shared generator stream, and every prefix sum and search is taken within
one row. A run therefore gets the same draws, bit for bit, whether it is
simulated alone or inside a sweep of any size, on the CPU or on a GPU, and runs
that share a seed share their uniforms (common random numbers across ``N`` and
``γ``, which sharpens comparisons between them).

Sampling is exact inverse-CDF sampling: a float64 cumulative sum along each row
of the probability matrix, and a batched ``searchsorted`` of each row's sorted
uniforms (scaled by the row's total) in that row alone. Rows are handled in
blocks of consecutive rows with the same group size (a sweep's rows are ordered
N-major, so a block is every run of one N), each block as one
``[rows, N]`` search; the hits are added to a ``[runs, actions]`` count matrix
by ``scatter_add_``, in the caller's float dtype if it likes (counts up to 2^24
are exact in float32). Blocks are split by rows so that group sizes up to 2^17
per run fit in memory.

Speed (same values, bit for bit): on the CPU each row's prefix sum is one
sequential float64 scan of that row's float32 probabilities, taken by a pool of
``torch.get_num_threads()`` threads over the rows into a buffer reused every
step (``torch.cumsum`` of a whole ``[rows, actions]`` matrix with a float64
result first copies the matrix to float64 and scans on one thread, 4-8x
slower); the uniforms are hashed on int32 words, over many rows at once
(one set of elementwise passes instead of one per group size), into work
buffers reused every step, and the queries are computed in place.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import torch

from tailmiss._hash import _SALT_HI, _SALT_LO, _from_keys, _keys, hash_uniform

__all__ = ["CountSampler", "hash_uniform", "row_cdf", "partition_rows"]

_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(workers: int) -> ThreadPoolExecutor:
    with _POOLS_LOCK:
        if workers not in _POOLS:
            _POOLS[workers] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tailmiss-cdf")
        return _POOLS[workers]


def partition_rows(sizes, max_draws: int, max_rows: int | None = None) -> list[tuple[int, int, int]]:
    """Blocks ``(r0, r1, n)`` of consecutive rows with one group size ``n``, as :class:`CountSampler` makes them.

    Each run of equal sizes is split evenly into the fewest blocks of at most
    ``max_rows`` rows and at most ``max_draws`` draws (a single larger row is a
    block of its own).
    """
    sizes = list(sizes)
    out = []
    r0 = 0
    while r0 < len(sizes):
        n = sizes[r0]
        end = r0 + 1
        while end < len(sizes) and sizes[end] == n:
            end += 1
        most = max(1, max_draws // (n + 1))
        if max_rows is not None:
            most = min(most, max_rows)
        parts = -(-(end - r0) // most)
        bounds = [r0 + (end - r0) * k // parts for k in range(parts + 1)]
        out += [(lo, hi, n) for lo, hi in zip(bounds[:-1], bounds[1:])]
        r0 = end
    return out


def row_cdf(probs: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Float64 cumulative sums along each row of ``probs`` (``[rows, actions]``, any float dtype).

    Each row's value is one sequential scan of that row alone, in float64: the
    same numbers as ``torch.cumsum(probs, dim=1, dtype=torch.float64)`` and as
    ``numpy.cumsum`` of the row in float64, bit for bit (tested), whatever the
    number of rows or threads. On the CPU the rows are shared among
    ``torch.get_num_threads()`` threads, each scanning whole rows; on other
    devices it is that one ``torch.cumsum``. ``out`` (``[rows, actions]``
    float64) is reused when given.
    """
    if out is None:
        out = torch.empty(probs.shape, dtype=torch.float64, device=probs.device)
    if probs.device.type != "cpu" or probs.shape[0] < 2:
        return torch.cumsum(probs, dim=1, dtype=torch.float64, out=out)
    rows = probs.shape[0]
    workers = min(torch.get_num_threads(), rows)

    def scan(first: int) -> None:
        for r in range(first, rows, workers):
            torch.cumsum(probs[r], dim=0, dtype=torch.float64, out=out[r])

    if workers < 2:
        scan(0)
    else:
        for done in [_pool(workers).submit(scan, k) for k in range(workers)]:
            done.result()
    return out


class NonFiniteProbabilities(ValueError):
    """A row's probabilities are not finite (or all zero): nothing can be drawn from it."""

    def __init__(self, row: int):
        super().__init__(f"the probabilities of row {row} are not finite")
        self.row = row


class _Block(NamedTuple):
    r0: int  # rows r0 .. r1 - 1, all with group size n
    r1: int
    n: int
    offset: int  # first of the block's rows × (n + 1) values in its segment's flat arrays


class _Segment(NamedTuple):
    blocks: list[_Block]
    key_hi: torch.Tensor  # flat int32 hashes of (seed, index): each row's n draws plus one normaliser
    key_lo: torch.Tensor


class CountSampler:
    r"""Draw ``group_sizes[r]`` i.i.d. actions for every row ``r`` of a probability matrix.

    Each row's ``N`` uniforms are produced already sorted, as order statistics
    from ``N + 1`` hashed exponentials (:math:`U_{(k)} = S_k / S_{N+1}`,
    :math:`S_k = E_1 + \dots + E_k`), so the inverse-CDF search of a row meets
    its queries in increasing order. The law is exactly that of ``N`` i.i.d.
    draws (the draws of a row are exchangeable; their order carries nothing).
    Every operation on a row (its exponentials' prefix sum, its CDF, its
    search) involves that row alone, so its draws do not depend on the sweep.

    The hashing and the exponentials run elementwise over a whole segment of
    consecutive rows at once (up to ``max_draws_per_chunk`` values, whatever
    their group sizes); the prefix sums and searches then run per block of
    rows with one group size.

    Parameters
    ----------
    group_sizes, seeds : sequence of int
        Per run (row).
    num_actions : int
    device : torch.device
    max_draws_per_chunk : int
        Draws handled at once; a segment (and a block) of rows is split so
        that it holds at most this many (a single larger row is a block of its
        own). The draws do not depend on it.
    max_rows_per_block : int, optional
        At most this many rows per block (:attr:`blocks`), for callers that
        work through a sweep block by block (:meth:`sample_block`). The draws
        do not depend on it.
    """

    def __init__(
        self,
        group_sizes,
        seeds,
        num_actions: int,
        device,
        max_draws_per_chunk: int = 2**22,
        max_rows_per_block: int | None = None,
    ):
        self.device = torch.device(device)
        sizes = [int(x) for x in torch.as_tensor(list(group_sizes), dtype=torch.int64).reshape(-1)]
        if not sizes or min(sizes) < 1:
            raise ValueError(f"group_sizes must be positive integers, got {list(group_sizes)!r}")
        self.num_rows = len(sizes)
        seeds = [int(x) for x in seeds]
        if len(seeds) != self.num_rows:
            raise ValueError(f"seeds must have one entry per row ({self.num_rows}), got {len(seeds)}")
        if max_rows_per_block is not None and max_rows_per_block < 1:
            raise ValueError(f"max_rows_per_block must be a positive integer, got {max_rows_per_block!r}")
        self.num_actions = int(num_actions)
        self.group_sizes = sizes
        self._cdf: torch.Tensor | None = None
        self._segments: list[_Segment] = []
        self._work_size = 0  # values of the largest segment
        self._work = None  # buffers of :meth:`_workspace`, made on first use
        self.blocks: list[_Block] = []
        """Blocks of consecutive rows with one group size, in row order."""
        parts = partition_rows(sizes, max_draws_per_chunk, max_rows_per_block)
        self.blocks += [_Block(r0, r1, n, 0) for r0, r1, n in parts]
        segment: list[_Block] = []
        used = 0
        for i, block in enumerate(self.blocks):
            size = (block.r1 - block.r0) * (block.n + 1)
            if segment and used + size > max_draws_per_chunk:
                self._add_segment(segment, used, seeds)
                segment, used = [], 0
            self.blocks[i] = block = block._replace(offset=used)
            segment.append(block)
            used += size
        self._add_segment(segment, used, seeds)

    @property
    def rows(self) -> torch.Tensor:
        """Row of each draw, in the order of :meth:`indices` (int64)."""
        return torch.repeat_interleave(torch.arange(self.num_rows), torch.tensor(self.group_sizes)).to(self.device)

    def _add_segment(self, blocks: list[_Block], size: int, seeds: list[int]) -> None:
        # a block's values: its rows' n draws (row after row), then its rows' normalisers (index n)
        key_hi = torch.empty(size, dtype=torch.int32)
        key_lo = torch.empty(size, dtype=torch.int32)
        for b in blocks:
            rows = b.r1 - b.r0
            seed_b = torch.tensor(seeds[b.r0 : b.r1], dtype=torch.int64)
            seed = torch.cat([seed_b.repeat_interleave(b.n), seed_b])
            index = torch.cat([torch.arange(b.n, dtype=torch.int64).repeat(rows), torch.full((rows,), b.n)])
            part = slice(b.offset, b.offset + rows * (b.n + 1))
            key_hi[part] = _keys(seed, index, _SALT_HI)
            key_lo[part] = _keys(seed, index, _SALT_LO)
        self._segments.append(_Segment(blocks, key_hi.to(self.device), key_lo.to(self.device)))
        self._work_size = max(self._work_size, size)

    def _workspace(self):
        """Buffers reused every step: the hash's words, the float64 values and the search hits."""
        if self._work is None:
            size, dev = self._work_size, self.device
            self._work = (
                [torch.empty(size, dtype=torch.int32, device=dev) for _ in range(3)]
                + [torch.empty(size, dtype=torch.int64, device=dev)],
                torch.empty(size, dtype=torch.float64, device=dev),
                torch.empty(size, dtype=torch.int64, device=dev),
            )
        return self._work

    def _check(self, probs: torch.Tensor) -> bool:
        shared = probs.shape == (1, self.num_actions)
        if not shared and probs.shape != (self.num_rows, self.num_actions):
            raise ValueError(
                f"probs must have shape {(self.num_rows, self.num_actions)} or (1, {self.num_actions}), "
                f"got {tuple(probs.shape)}"
            )
        return shared

    def _exponentials(self, segment: _Segment, step: int) -> torch.Tensor:
        """Flat float64 standard exponentials of the segment's values at ``step`` (in the reused workspace)."""
        work, values, _ = self._workspace()
        size = segment.key_hi.numel()
        out = _from_keys(segment.key_hi, segment.key_lo, step, values[:size], [w[:size] for w in work])
        return out.neg_().log1p_().neg_()

    @staticmethod
    def _sorted_uniforms(block: _Block, exponentials: torch.Tensor) -> torch.Tensor:
        """Sorted uniforms ``[rows, n]`` of the block's rows, computed in place in its segment's exponentials."""
        rows = block.r1 - block.r0
        end = block.offset + rows * block.n
        s = exponentials[block.offset : end].view(rows, block.n).cumsum_(dim=1)  # S_1 .. S_n of each row
        total = s[:, -1] + exponentials[end : end + rows]  # S_{n+1}: the same float64 addition as a longer scan
        return s.div_(total[:, None]).clamp_(max=1.0 - 2.0**-53)

    def uniforms(self, step: int):
        """Yield the sorted uniforms ``[rows, n]`` of every block (:attr:`blocks`, in order) at ``step``.

        They do not depend on the policy. Each is a view of a workspace that is
        overwritten once the generator moves on to the next segment of rows, so
        use a block's uniforms before asking for the next.
        """
        for segment in self._segments:
            exponentials = self._exponentials(segment, step)
            for block in segment.blocks:
                yield self._sorted_uniforms(block, exponentials)

    def cdf(self, probs: torch.Tensor, first_row: int = 0):
        """CDF, total and largest valid query of each row of ``probs`` (rows ``first_row``, ...); checks them.

        The CDF is a buffer that the next call overwrites (:func:`row_cdf`).
        Raises ``NonFiniteProbabilities`` naming the first bad row.
        """
        rows = probs.shape[0]
        if self._cdf is None or self._cdf.shape[0] < rows or self._cdf.device != probs.device:
            self._cdf = torch.empty((rows, self.num_actions), dtype=torch.float64, device=probs.device)
        cdf = row_cdf(probs, out=self._cdf[:rows])
        total = cdf[:, -1:]
        bad = ~(torch.isfinite(total) & (total > 0))
        if bool(bad.any()):  # NaN/inf logits would otherwise index past the last action
            raise NonFiniteProbabilities(first_row + int(bad.nonzero()[0, 0]))
        inner = torch.nextafter(total, torch.zeros_like(total))  # largest query strictly inside the row
        return cdf, total, inner

    def _search(self, cdf, total, inner, u: torch.Tensor, search: bool = True):
        """Queries ``[rows, n]`` (each row's sorted uniforms scaled by its total, in place of ``u``) and the hits.

        The hits are a view of a workspace that the next search overwrites.
        """
        shared = cdf.shape[0] == 1 and u.shape[0] > 1
        query = torch.minimum(u.mul_(total), inner, out=u)
        if not search:
            return query, None
        hits = self._workspace()[2][: query.numel()]
        if shared:  # one CDF for every row: search all the block's queries in it at once (no expanded copy)
            torch.searchsorted(cdf, query.reshape(1, -1), right=True, out=hits.view(1, -1))
        else:
            torch.searchsorted(cdf, query, right=True, out=hits.view(query.shape))
        return query, hits.view(query.shape)

    def sample_block(
        self,
        index: int,
        probs: torch.Tensor,
        uniforms: torch.Tensor,
        dtype: torch.dtype = torch.int64,
        num_correct: int | None = None,
        out: torch.Tensor | None = None,
        cdf: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Counts ``[rows, actions]`` of block ``index`` from its rows' probabilities and its :meth:`uniforms`.

        Same as the block's rows of :meth:`sample`; lets a caller work through
        a sweep block by block, each block's matrices small enough to stay in
        cache. ``out`` (``[rows, actions]`` of ``dtype``) is zeroed and reused.
        ``cdf``: the block's rows of :meth:`cdf` of a larger tile of rows, if
        the caller took it already.
        """
        block = self.blocks[index]
        rows = block.r1 - block.r0
        if probs.shape != (rows, self.num_actions):
            raise ValueError(f"probs must have shape {(rows, self.num_actions)}, got {tuple(probs.shape)}")
        cdf, total, inner = self.cdf(probs, block.r0) if cdf is None else cdf
        _, idx = self._search(cdf, total, inner, uniforms)
        return self._count(idx, rows, dtype, num_correct, out)

    def _count(self, idx, rows, dtype, num_correct, out):
        if out is None:
            out = torch.zeros((rows, self.num_actions), dtype=dtype, device=self.device)
        else:
            out.zero_()
        out.scatter_add_(1, idx, torch.ones((), dtype=out.dtype, device=out.device).expand_as(idx))
        correct = None if num_correct is None else (idx < num_correct).sum(1, dtype=torch.float64)
        return out, correct

    def _block_queries(self, probs: torch.Tensor, step: int, search: bool = True):
        """Yield ``(block, queries [rows, n], action indices [rows, n] or None)`` for every block."""
        shared = self._check(probs)
        if shared:
            cdf, total, inner = self.cdf(probs, 0)
        for block, u in zip(self.blocks, self.uniforms(step)):
            if not shared:
                cdf, total, inner = self.cdf(probs[block.r0 : block.r1], block.r0)
            query, hits = self._search(cdf, total, inner, u, search)
            yield block, query, hits

    def _block_indices(self, probs: torch.Tensor, step: int):
        for block, _, idx in self._block_queries(probs, step):
            yield block, idx

    def queries(self, probs: torch.Tensor, step: int) -> torch.Tensor:
        """The float64 values searched in each row's CDF (sorted within a row; rows' draws contiguous, row order).

        A draw is the first action whose cumulative probability exceeds its
        query; a row's queries depend on its seed, group size, step and total
        probability only.
        """
        return torch.cat([q.reshape(-1).clone() for _, q, _ in self._block_queries(probs, step, search=False)])

    def indices(self, probs: torch.Tensor, step: int) -> torch.Tensor:
        """Action index of every draw (int64, rows' draws contiguous, row order).

        ``probs`` is ``[rows, actions]`` (any float dtype; the CDF is
        accumulated in float64), or ``[1, actions]`` when every row draws from
        the same distribution.
        """
        return torch.cat([idx.reshape(-1).clone() for _, idx in self._block_indices(probs, step)])

    def sample(
        self,
        probs: torch.Tensor,
        step: int,
        dtype: torch.dtype = torch.int64,
        num_correct: int | None = None,
        out: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Draw counts ``[rows, actions]`` in ``dtype`` and, given ``num_correct``, each row's correct count.

        The first ``num_correct`` actions are the correct ones; the correct
        counts come back as float64 ``[rows]`` (``None`` without
        ``num_correct``). ``out`` (``[rows, actions]`` of ``dtype``) is zeroed
        and reused instead of allocating the count matrix.
        """
        if out is None:
            out = torch.zeros((self.num_rows, self.num_actions), dtype=dtype, device=self.device)
        correct = None if num_correct is None else torch.empty(self.num_rows, dtype=torch.float64, device=self.device)
        for block, idx in self._block_indices(probs, step):
            _, part = self._count(idx, block.r1 - block.r0, dtype, num_correct, out[block.r0 : block.r1])
            if correct is not None:
                correct[block.r0 : block.r1] = part
        return out, correct

    def counts(self, probs: torch.Tensor, step: int) -> torch.Tensor:
        """Draw counts ``[rows, actions]`` (int64) at ``step``; ``probs`` as in :meth:`indices`."""
        return self.sample(probs, step)[0]
