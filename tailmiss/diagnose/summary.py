"""The typed summary of a diagnosed run (:class:`DiagnoseSummary`) and its JSON form, ``diagnose.json``."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["RiskRow", "FocalRow", "DiagnoseSummary", "sides_of", "side_text", "summary_json"]


@dataclass(frozen=True)
class RiskRow:
    """Lemma 3.1 over a run's groups for one rare share ρ.

    ``risk_at_observed_n`` is the mean over the solved groups (X > 0) of each group's risk at its own N (``None``
    without a solved group); ``n_star`` and ``peak`` are the argmax and maximum of their mixture over one common N
    (``None`` when the risk is 0 at every N or no group is solved); ``sides`` says, per group size of the run,
    whether it lies ``"below"``, ``"at"`` or ``"above"`` N*.
    """

    rho: float
    risk_at_observed_n: float | None
    group_sizes: tuple[int, ...]
    n_star: int | None
    peak: float | None
    sides: tuple[tuple[int, str], ...]
    solved: bool

    @property
    def n_observed(self) -> int | None:
        """The run's group size when all groups share it."""
        return self.group_sizes[0] if len(self.group_sizes) == 1 else None


@dataclass(frozen=True)
class FocalRow:
    """The focal weight g = (1 − μ̂)^γ for one γ: its mean over active groups and its value at each active μ̂."""

    gamma: float
    mean_over_active: float
    mu_hat: tuple[float, ...]
    weight: tuple[float, ...]


@dataclass(frozen=True)
class DiagnoseSummary:
    """What :func:`diagnose` found, typed; :func:`summary_json` writes it as ``diagnose.json``."""

    source: str
    source_path: str
    format: str
    rows: int
    rows_without_reward: int
    warnings: tuple[str, ...]
    success: str
    """The success rule used (the log's flags, a threshold, or binary rewards)."""
    steps: int
    groups: int
    group_sizes: tuple[int, ...]
    mu_hat_mean: float
    share_all_incorrect: float
    share_all_correct: float
    share_inactive: float
    tail_miss: tuple[RiskRow, ...]
    focal_weights: tuple[FocalRow, ...]


def sides_of(sizes: list[int], n_star: int | None) -> tuple[tuple[int, str], ...]:
    if n_star is None:
        return ()
    return tuple((n, "below" if n < n_star else "above" if n > n_star else "at") for n in sizes)


def side_text(row: RiskRow) -> str:
    """Where the run's group sizes lie against :math:`N^*`: one word, or one per size when they differ."""
    if not row.solved:
        return "no solved group"
    if row.n_star is None:
        return "no peak: risk 0 at every N"
    words = {word for _, word in row.sides}
    if len(words) == 1:
        return words.pop()
    return ", ".join(f"N = {n} {word}" for n, word in row.sides)


def summary_json(s: DiagnoseSummary, steps: pd.DataFrame | None = None) -> dict:
    """``diagnose.json``'s content: the summary as plain JSON values (NaN as ``null``), the side of N* in words, the
    rare-mass rule, and the per-step table ``steps`` when given."""
    out = {k: v for k, v in dataclasses.asdict(s).items() if k not in ("tail_miss", "focal_weights")}
    out["rare_mass"] = "tau = rho * mu_hat in each group with X > 0 (rho: share of the correct mass held by E)"
    out["tail_miss"] = [
        {
            "rho": r.rho,
            "risk_at_observed_n": r.risk_at_observed_n,
            "group_sizes": r.group_sizes,
            "n_observed": r.n_observed,
            "n_star": r.n_star,
            "peak": r.peak,
            "side": side_text(r),
        }
        for r in s.tail_miss
    ]
    out["focal_weights"] = [dataclasses.asdict(f) for f in s.focal_weights]
    if steps is not None:
        out["per_step"] = steps.to_dict(orient="records")
    return _json_ready(out)


def _json_ready(value):
    """Plain Python values for JSON: numpy scalars unwrapped, NaN as None."""
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
