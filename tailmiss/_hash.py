"""A stateless counter-based hash to uniforms, shared by the simulator's sampler and the LLM's rollout sampler.

Every value is a pure function of its integer inputs (seed, index, step), so a
draw never depends on which other draws were made, in which order, on which
device or in which process.
"""

from __future__ import annotations

import torch

__all__ = ["hash_uniform"]

_M32 = 0xFFFFFFFF
_MUL = 0x45D9F3B  # < 2^27, so (x < 2^32) * _MUL stays below 2^63 in int64
_SALT_HI, _SALT_LO, _SALT_STEP = 0x9E3779B9, 0x85EBCA6B, 0xC2B2AE35


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """Avalanche hash of 32-bit values held in int64 (two multiply-xorshift rounds).

    Works on a copy in place (one temporary instead of one per operation); ``x`` is left unchanged.
    """
    x = (x >> 16).bitwise_xor_(x).mul_(_MUL).bitwise_and_(_M32)
    x = (x >> 16).bitwise_xor_(x).mul_(_MUL).bitwise_and_(_M32)
    return (x >> 16).bitwise_xor_(x)


def _keys(seed: torch.Tensor, index: torch.Tensor, salt: int) -> torch.Tensor:
    return _mix32(_mix32((index & _M32) ^ salt) ^ _mix32(seed & _M32))


def _from_keys(key_hi: torch.Tensor, key_lo: torch.Tensor, step: int) -> torch.Tensor:
    s = _mix32(torch.tensor(step & _M32, dtype=torch.int64, device=key_hi.device) ^ _SALT_STEP)
    # one avalanche round per half: the keys are already hashes of (seed, index)
    hi = _mix32(key_hi ^ s)
    lo = _mix32(key_lo ^ s)
    # 32 + 21 bits -> a float64 uniform on [0, 1) with full 53-bit resolution
    return hi.bitwise_left_shift_(21).bitwise_or_(lo.bitwise_right_shift_(11)).to(torch.float64).mul_(2.0**-53)


def hash_uniform(seed: torch.Tensor, index: torch.Tensor, step: int) -> torch.Tensor:
    """Uniform on ``[0, 1)`` determined by ``(seed, index, step)`` alone."""
    seed, index = torch.broadcast_tensors(seed.to(torch.int64), index.to(torch.int64))
    return _from_keys(_keys(seed, index, _SALT_HI), _keys(seed, index, _SALT_LO), step)
