"""Input checks shared by the analytic modules (probabilities, masks, rewards)."""

from __future__ import annotations

import numpy as np

from tailmiss._checks import as_float, check_nonnegative


def check_probs(probs) -> np.ndarray:
    p = check_nonnegative("probs", probs)
    if p.ndim == 0 or p.shape[-1] == 0:
        raise ValueError(f"probs must have a non-empty last (action) axis, got shape {p.shape}")
    total = p.sum(axis=-1)
    bad = np.abs(total - 1.0) > 1e-6
    if bad.any():
        raise ValueError(f"probs must sum to 1 along the last axis, got a sum of {total[bad].flat[0].item()!r}")
    return p


def check_mask(name: str, mask, shape) -> np.ndarray:
    arr = np.asarray(mask)
    if arr.dtype != bool:
        raise ValueError(f"{name} must be a boolean mask, got dtype {arr.dtype}")
    try:
        np.broadcast_shapes(arr.shape, shape)
    except ValueError:
        raise ValueError(f"{name} has shape {arr.shape}, which does not broadcast against probs {shape}") from None
    return arr


def check_rewards(r_c, r_w) -> tuple[np.ndarray, np.ndarray]:
    r_c, r_w = np.broadcast_arrays(as_float("r_c", r_c), as_float("r_w", r_w))
    bad = r_c <= r_w
    if bad.any():
        raise ValueError(f"r_c must exceed r_w, got r_c={r_c[bad].flat[0].item()!r}, r_w={r_w[bad].flat[0].item()!r}")
    return r_c, r_w
