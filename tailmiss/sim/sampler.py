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
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from tailmiss._hash import _SALT_HI, _SALT_LO, _from_keys, _keys, hash_uniform

__all__ = ["CountSampler", "hash_uniform"]


class NonFiniteProbabilities(ValueError):
    """A row's probabilities are not finite (or all zero): nothing can be drawn from it."""

    def __init__(self, row: int):
        super().__init__(f"the probabilities of row {row} are not finite")
        self.row = row


class _Block(NamedTuple):
    r0: int  # rows r0 .. r1 - 1, all with group size n
    r1: int
    n: int
    key_hi: torch.Tensor  # [rows, n + 1] hashes of (seed, index): n draws plus one normaliser
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

    Parameters
    ----------
    group_sizes, seeds : sequence of int
        Per run (row).
    num_actions : int
    device : torch.device
    max_draws_per_chunk : int
        Draws handled at once; a block of rows is split so that it holds at most
        this many (a single larger row is a block of its own).
    """

    def __init__(self, group_sizes, seeds, num_actions: int, device, max_draws_per_chunk: int = 2**22):
        self.device = torch.device(device)
        sizes = [int(x) for x in torch.as_tensor(list(group_sizes), dtype=torch.int64).reshape(-1)]
        if not sizes or min(sizes) < 1:
            raise ValueError(f"group_sizes must be positive integers, got {list(group_sizes)!r}")
        self.num_rows = len(sizes)
        seeds = [int(x) for x in seeds]
        if len(seeds) != self.num_rows:
            raise ValueError(f"seeds must have one entry per row ({self.num_rows}), got {len(seeds)}")
        self.num_actions = int(num_actions)
        self.group_sizes = sizes
        # row of each draw, in the order of :meth:`indices`
        self.rows = torch.repeat_interleave(torch.arange(self.num_rows), torch.tensor(sizes)).to(self.device)
        self._blocks: list[_Block] = []
        r0 = 0
        while r0 < self.num_rows:
            n = sizes[r0]
            r1 = r0 + 1
            per_block = max(1, max_draws_per_chunk // (n + 1))
            while r1 < self.num_rows and sizes[r1] == n and r1 - r0 < per_block:
                r1 += 1
            seed_t = torch.tensor(seeds[r0:r1], dtype=torch.int64)[:, None]
            index = torch.arange(n + 1, dtype=torch.int64)[None, :]
            self._blocks.append(
                _Block(
                    r0,
                    r1,
                    n,
                    _keys(seed_t, index, _SALT_HI).to(self.device),
                    _keys(seed_t, index, _SALT_LO).to(self.device),
                )
            )
            r0 = r1

    def _check(self, probs: torch.Tensor) -> bool:
        shared = probs.shape == (1, self.num_actions)
        if not shared and probs.shape != (self.num_rows, self.num_actions):
            raise ValueError(
                f"probs must have shape {(self.num_rows, self.num_actions)} or (1, {self.num_actions}), "
                f"got {tuple(probs.shape)}"
            )
        return shared

    @staticmethod
    def _sorted_uniforms(block: _Block, step: int) -> torch.Tensor:
        """Sorted uniforms ``[rows, n]`` of the block's rows at ``step``."""
        u = _from_keys(block.key_hi, block.key_lo, step)
        s = u.neg_().log1p_().neg_().cumsum_(dim=1)  # exponentials, then S_1 .. S_{n+1} of each row
        u_sorted = s[:, :-1] / s[:, -1:]
        return u_sorted.clamp_(max=1.0 - 2.0**-53)

    def _block_queries(self, probs: torch.Tensor, step: int, search: bool = True):
        """Yield ``(block, queries [rows, n], action indices [rows, n] or None)`` for every block."""
        shared = self._check(probs)
        cdf = torch.cumsum(probs, dim=1, dtype=torch.float64)  # row-local prefix sums
        total = cdf[:, -1:]
        bad = ~(torch.isfinite(total) & (total > 0))
        if bool(bad.any()):  # NaN/inf logits would otherwise index past the last action
            raise NonFiniteProbabilities(int(bad.nonzero()[0, 0]))
        inner = torch.nextafter(total, torch.zeros_like(total))  # largest query strictly inside the row
        for block in self._blocks:
            rows = slice(0, 1) if shared else slice(block.r0, block.r1)
            u = self._sorted_uniforms(block, step)
            query = torch.minimum(u * total[rows], inner[rows])
            if not search:
                yield block, query, None
                continue
            if shared:  # one CDF for every row: search all the block's queries in it at once (no expanded copy)
                hits = torch.searchsorted(cdf[rows], query.reshape(1, -1), right=True).reshape(query.shape)
            else:
                hits = torch.searchsorted(cdf[rows], query, right=True)
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
        return torch.cat([q.reshape(-1) for _, q, _ in self._block_queries(probs, step, search=False)])

    def indices(self, probs: torch.Tensor, step: int) -> torch.Tensor:
        """Action index of every draw (int64, rows' draws contiguous, row order).

        ``probs`` is ``[rows, actions]`` (any float dtype; the CDF is
        accumulated in float64), or ``[1, actions]`` when every row draws from
        the same distribution.
        """
        return torch.cat([idx.reshape(-1) for _, idx in self._block_indices(probs, step)])

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
        else:
            out.zero_()
        correct = None if num_correct is None else torch.empty(self.num_rows, dtype=torch.float64, device=self.device)
        for block, idx in self._block_indices(probs, step):
            out[block.r0 : block.r1].scatter_add_(
                1, idx, torch.ones((), dtype=out.dtype, device=out.device).expand_as(idx)
            )
            if correct is not None:
                correct[block.r0 : block.r1] = (idx < num_correct).sum(1, dtype=torch.float64)
        return out, correct

    def counts(self, probs: torch.Tensor, step: int) -> torch.Tensor:
        """Draw counts ``[rows, actions]`` (int64) at ``step``; ``probs`` as in :meth:`indices`."""
        return self.sample(probs, step)[0]
