r"""Batched multinomial draws with counter-based randomness.

Each run's draws are a pure function of ``(seed, step, draw index)``: the
uniforms come from a stateless integer hash, not from a shared generator
stream. A run therefore sees the same draws whether it is simulated alone or
inside a sweep of a thousand runs, on the CPU or on a GPU, and runs that share a
seed share their uniforms (common random numbers across ``N`` and ``γ``, which
sharpens comparisons between them).

Sampling is exact inverse-CDF sampling: one float64 cumulative sum runs over
all rows laid end to end (row ``r`` occupies ``[C_r, C_{r+1})``), each draw of
row ``r`` searches that one sorted array for ``C_r + u (C_{r+1} - C_r)`` with
``searchsorted``, and ``bincount`` turns the hits into a ``[runs, actions]``
count matrix. The uniforms of a row come out sorted (order statistics from
exponential spacings), so the searches sweep the CDF in order. Draws are
processed in chunks of whole rows so that group sizes up to 2^17 per run fit in
memory.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["CountSampler", "hash_uniform"]

_M32 = 0xFFFFFFFF
_MUL = 0x45D9F3B  # < 2^27, so (x < 2^32) * _MUL stays below 2^63 in int64
_SALT_HI, _SALT_LO, _SALT_STEP = 0x9E3779B9, 0x85EBCA6B, 0xC2B2AE35


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """Avalanche hash of 32-bit values held in int64 (two multiply-xorshift rounds)."""
    x = (((x >> 16) ^ x) * _MUL) & _M32
    x = (((x >> 16) ^ x) * _MUL) & _M32
    return (x >> 16) ^ x


def _keys(seed: torch.Tensor, index: torch.Tensor, salt: int) -> torch.Tensor:
    return _mix32(_mix32((index & _M32) ^ salt) ^ _mix32(seed & _M32))


def _from_keys(key_hi: torch.Tensor, key_lo: torch.Tensor, step: int) -> torch.Tensor:
    s = _mix32(torch.tensor(step & _M32, dtype=torch.int64, device=key_hi.device) ^ _SALT_STEP)
    hi = _mix32(_mix32(key_hi ^ s))
    lo = _mix32(_mix32(key_lo ^ s))
    # 32 + 21 bits -> a float64 uniform on [0, 1) with full 53-bit resolution
    return ((hi << 21) | (lo >> 11)).to(torch.float64) * (2.0**-53)


def hash_uniform(seed: torch.Tensor, index: torch.Tensor, step: int) -> torch.Tensor:
    """Uniform on ``[0, 1)`` determined by ``(seed, index, step)`` alone."""
    seed, index = torch.broadcast_tensors(seed.to(torch.int64), index.to(torch.int64))
    return _from_keys(_keys(seed, index, _SALT_HI), _keys(seed, index, _SALT_LO), step)


class _Chunk(NamedTuple):
    lo: int  # first and end position among all rows' N + 1 exponentials
    hi: int
    draw_lo: int  # first and end draw
    draw_hi: int
    ext_pos: torch.Tensor  # k (1-based) of each position within its row
    rel: torch.Tensor  # row of each position, relative to the chunk's first row
    last: torch.Tensor  # position of each row's normaliser (its last exponential)
    keep: torch.Tensor  # positions that are draws
    draw_rel: torch.Tensor  # rel of each draw


class CountSampler:
    r"""Draw ``group_sizes[r]`` i.i.d. actions for every row ``r`` of a probability matrix.

    Each row's ``N`` uniforms are produced already sorted, as order statistics
    from ``N + 1`` hashed exponentials (:math:`U_{(k)} = S_k / S_{N+1}`,
    :math:`S_k = E_1 + \dots + E_k`), so every query of the inverse-CDF search
    arrives in increasing order and walks the CDF array front to back instead
    of jumping at random through it. The law is exactly that of ``N`` i.i.d.
    draws (the draws of a row are exchangeable; their order carries nothing).

    Parameters
    ----------
    group_sizes, seeds : sequence of int
        Per run (row).
    num_actions : int
    device : torch.device
    max_draws_per_chunk : int
        Draws handled at once; chunks hold whole rows (a larger row is a chunk of its own).
    """

    def __init__(self, group_sizes, seeds, num_actions: int, device, max_draws_per_chunk: int = 2**22):
        self.device = torch.device(device)
        n = torch.as_tensor(list(group_sizes), dtype=torch.int64)
        if n.ndim != 1 or torch.any(n < 1):
            raise ValueError(f"group_sizes must be positive integers, got {list(group_sizes)!r}")
        self.num_rows = n.numel()
        if len(list(seeds)) != self.num_rows:
            raise ValueError(f"seeds must have one entry per row ({self.num_rows}), got {len(list(seeds))}")
        self.num_actions = int(num_actions)
        # draws plus one normaliser exponential per row, rows end to end
        ext = n + 1
        ext_rows = torch.repeat_interleave(torch.arange(self.num_rows), ext)
        ext_start = torch.cumsum(ext, 0) - ext
        ext_index = torch.arange(int(ext.sum())) - ext_start[ext_rows]
        seed_t = torch.as_tensor(list(seeds), dtype=torch.int64)[ext_rows]
        self._key_hi = _keys(seed_t, ext_index, _SALT_HI).to(self.device)
        self._key_lo = _keys(seed_t, ext_index, _SALT_LO).to(self.device)
        ext_pos = (ext_index + 1).to(torch.float64)  # k of S_k within the row
        is_draw = ext_index < n[ext_rows]
        self.rows = torch.repeat_interleave(torch.arange(self.num_rows), n).to(self.device)  # row of each draw
        draw_start = torch.cumsum(n, 0) - n
        # chunks of whole rows; all index tensors precomputed, so a step does no mask-to-index syncs on a GPU
        self._chunks: list[_Chunk] = []
        bounds, first = [], 0
        for r, end in enumerate(torch.cumsum(ext, 0).tolist()):
            if end - int(ext_start[first]) > max_draws_per_chunk and r > first:
                bounds.append((first, r))
                first = r
        bounds.append((first, self.num_rows))
        for r0, r1 in bounds:
            lo, hi = int(ext_start[r0]), int(ext_start[r1 - 1] + ext[r1 - 1])
            rel = ext_rows[lo:hi] - r0
            keep = torch.nonzero(is_draw[lo:hi]).squeeze(1)
            self._chunks.append(
                _Chunk(
                    lo=lo,
                    hi=hi,
                    draw_lo=int(draw_start[r0]),
                    draw_hi=int(draw_start[r1 - 1] + n[r1 - 1]),
                    ext_pos=ext_pos[lo:hi].to(self.device),
                    rel=rel.to(self.device),
                    last=(torch.cumsum(ext[r0:r1], 0) - 1).to(self.device),
                    keep=keep.to(self.device),
                    draw_rel=rel[keep].to(self.device),
                )
            )

    def _check(self, probs: torch.Tensor) -> bool:
        shared = probs.shape == (1, self.num_actions)
        if not shared and probs.shape != (self.num_rows, self.num_actions):
            raise ValueError(
                f"probs must have shape {(self.num_rows, self.num_actions)} or (1, {self.num_actions}), "
                f"got {tuple(probs.shape)}"
            )
        return shared

    def _sorted_uniforms(self, chunk: _Chunk, step: int) -> torch.Tensor:
        """Sorted uniforms of the draws of ``chunk`` (whole rows), row by row."""
        u = _from_keys(self._key_hi[chunk.lo : chunk.hi], self._key_lo[chunk.lo : chunk.hi], step)
        # centred exponentials keep the running sum O(sqrt(draws)), so float64 keeps ~1e-13 absolute precision
        c = torch.cumsum(-torch.log1p(-u) - 1.0, 0)
        row_end = c.index_select(0, chunk.last)
        row_base = torch.cat([c.new_zeros(1), row_end[:-1]])
        # S_k = (c_k - c_before_row) + k: the sum of the row's first k exponentials, means restored
        s = c - row_base.index_select(0, chunk.rel) + chunk.ext_pos
        total = s.index_select(0, chunk.last)
        u_sorted = s.index_select(0, chunk.keep) / total.index_select(0, chunk.draw_rel)
        return u_sorted.clamp_(max=1.0 - 2.0**-53)

    def _flat_indices(self, probs: torch.Tensor, step: int):
        """Yield, chunk by chunk, ``row * num_actions + action`` of every draw (rows in order)."""
        shared = self._check(probs)
        v = self.num_actions
        # one float64 scan over all rows laid end to end: row r spans [ends[r-1], ends[r])
        flat = torch.cumsum(probs.reshape(-1), dim=0, dtype=torch.float64)
        ends = flat[v - 1 :: v]
        starts = torch.cat([ends.new_zeros(1), ends[:-1]])
        inner = torch.nextafter(ends, torch.zeros_like(ends))  # largest query strictly inside each row
        for chunk in self._chunks:
            u = self._sorted_uniforms(chunk, step)
            draw_rows = self.rows[chunk.draw_lo : chunk.draw_hi]
            r = torch.zeros_like(draw_rows) if shared else draw_rows
            lo_edge, hi_edge = starts.index_select(0, r), ends.index_select(0, r)
            query = torch.minimum(torch.addcmul(lo_edge, u, hi_edge - lo_edge), inner.index_select(0, r))
            idx = torch.searchsorted(flat, query, right=True)
            yield idx + draw_rows * v if shared else idx

    def indices(self, probs: torch.Tensor, step: int) -> torch.Tensor:
        """Action index of every draw (int64, rows' draws contiguous, row order).

        ``probs`` is ``[rows, actions]`` (any float dtype; the CDF is
        accumulated in float64), or ``[1, actions]`` when every
        row draws from the same distribution (then no per-row CDF is built).
        """
        flat = torch.cat(list(self._flat_indices(probs, step)))
        return flat - self.rows * self.num_actions

    def counts(self, probs: torch.Tensor, step: int) -> torch.Tensor:
        """Draw counts ``[rows, actions]`` (int64) at ``step``; ``probs`` as in :meth:`indices`."""
        size = self.num_rows * self.num_actions
        total = None
        for idx in self._flat_indices(probs, step):
            hits = torch.bincount(idx, minlength=size)
            total = hits if total is None else total.add_(hits)
        return total.view(self.num_rows, self.num_actions)
