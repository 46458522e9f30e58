"""The bridge's claim: F-GRPO Fig. 2's regimes in the simulation and in the transformer agree."""

from __future__ import annotations

__all__ = ["BRIDGE_SPEARMAN", "bridge_agrees"]

BRIDGE_SPEARMAN = 0.5
"""The bridge's regimes agree when the M_ret rank correlation over N exceeds this and every zone is equal."""


def bridge_agrees(verdict: dict) -> bool:
    """The bridge's yes/no: M_ret's rank correlation over N above :data:`BRIDGE_SPEARMAN` and every zone equal.

    ``verdict`` is a :attr:`tailmiss.experiments.bridge.BridgeResult.verdict`.
    """
    return verdict["spearman_retained_mass"] > BRIDGE_SPEARMAN and verdict["zone_agreement"] == 1.0
