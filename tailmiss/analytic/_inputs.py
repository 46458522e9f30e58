"""Input checks shared by the analytic modules (probabilities, masks, rewards)."""

from __future__ import annotations

import numpy as np

from tailmiss._checks import broadcast_named, broadcast_shapes_named, check_finite, check_nonnegative

BATCH = "probs (without its action axis)"
"""How errors name the batch axes of ``probs`` when a per-distribution argument does not broadcast against them."""


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
    """A boolean mask over the actions that broadcasts against ``probs`` of shape ``shape``."""
    try:
        arr = np.asarray(mask)
    except (TypeError, ValueError):  # ragged nested lists
        raise ValueError(f"{name} must be a boolean mask (a rectangular array of bools), got {mask!r}") from None
    if arr.dtype != bool:
        raise ValueError(f"{name} must be a boolean mask, got dtype {arr.dtype}")
    broadcast_shapes_named(("probs", shape), (name, arr.shape))
    return arr


def batch_shape(p: np.ndarray, *masks: tuple[str, np.ndarray]) -> tuple[int, ...]:
    """Shape of the distributions' batch: ``probs`` and the masks broadcast together, without the action axis."""
    return broadcast_shapes_named(("probs", p.shape), *((name, m.shape) for name, m in masks))[:-1]


def check_rewards(r_c, r_w, *against: tuple[str, tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray]:
    """Finite rewards with ``r_c > r_w``, broadcast together; they must also broadcast against the
    ``(name, shape)`` pairs ``against`` (e.g. the batch shape of ``probs``)."""
    r_c, r_w = check_finite("r_c", r_c), check_finite("r_w", r_w)
    broadcast_shapes_named(*against, ("r_c", r_c.shape), ("r_w", r_w.shape))
    r_c, r_w = broadcast_named(("r_c", r_c), ("r_w", r_w))
    bad = r_c <= r_w
    if bad.any():
        raise ValueError(f"r_c must exceed r_w, got r_c={r_c[bad].flat[0].item()!r}, r_w={r_w[bad].flat[0].item()!r}")
    return r_c, r_w
