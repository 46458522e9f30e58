"""The simulation's claims: F-GRPO Fig. 2 and BroRL Fig. 3 on the simulated presets."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss.analytic.regimes import ZONE_THRESHOLD
from tailmiss.results.sim import SimulatedMeans

__all__ = ["Fig2Claims", "fig2_claims", "BrorlClaims", "brorl_claims", "KEEPS", "VANISHED"]

KEEPS = 0.99
"""M_ret "≈ 1 throughout" (F-GRPO Fig. 2): its smallest value over the run's steps is at least this."""
VANISHED = 1e-6
"""A worst drop has "vanished" (BroRL Fig. 3) when its final size is below this (the initial p_i are ~1e-5)."""


@dataclass(frozen=True)
class Fig2Claims:
    """F-GRPO Fig. 2's claims on one simulated preset (:class:`~tailmiss.results.sim.SimulatedMeans`)."""

    final: pd.DataFrame
    """The final step's seed means, one row per (N, γ)."""
    zone: tuple[float, float] | None
    """Zone II: the N interval where the final γ = 0 M_ret is below
    :data:`~tailmiss.analytic.regimes.ZONE_THRESHOLD`."""
    rises: bool
    """Q_pos ends above its start for every (N, γ)."""
    argmin: int
    min_mret: float
    nmax: int
    largest_min_mret: float
    """The smallest M_ret over steps at the largest N, γ = 0."""
    lift_in: float
    """Mean ΔM_ret (γ = 1 − γ = 0) inside zone II (NaN without γ = 1 runs or without a zone)."""
    lift_out: float
    ends: tuple[float, float]
    """Final γ = 0 M_ret at the smallest and the largest N."""
    nonmonotone: bool
    """M_ret dips into zone II and both ends lie more than 0.3 above the dip."""
    keepers: tuple = ()
    """The N whose γ = 0 M_ret stays at or above :data:`KEEPS` at every step."""

    @property
    def largest_keeps(self) -> bool:
        """The largest N keeps M_ret ≈ 1 throughout."""
        return self.nmax in self.keepers

    @property
    def alone(self) -> bool:
        """The largest N is the only N that keeps M_ret ≈ 1 throughout (the paper's "alone")."""
        return self.keepers == (self.nmax,)

    @property
    def lifts_in_zone(self) -> bool:
        """γ = 1 lifts M_ret, more inside zone II than outside it."""
        return bool(self.lift_in > 0 and self.lift_in > self.lift_out)


def fig2_claims(means: SimulatedMeans) -> Fig2Claims:
    """F-GRPO Fig. 2's claims (Q_pos rises, M_ret is non-monotone in N, γ = 1 lifts it in zone II, the largest N
    keeps it) on one simulated preset."""
    frame = means.means
    start = frame[frame["step"] == 0].set_index(["group_size", "gamma"])
    final = frame[frame["step"] == means.final_step].set_index(["group_size", "gamma"])
    g0 = final.xs(0.0, level="gamma")
    zone = means.zone
    rises = bool((final["q_pos"] > start["q_pos"]).all())
    argmin = int(g0["retained_mass"].idxmin())
    nmax = int(g0.index.max())
    largest = frame[(frame["group_size"] == nmax) & (frame["gamma"] == 0)]
    lows = frame[frame["gamma"] == 0].groupby("group_size")["retained_mass"].min()
    lift_in = lift_out = float("nan")
    if 1.0 in final.index.get_level_values("gamma"):
        lift = final.xs(1.0, level="gamma")["retained_mass"] - g0["retained_mass"]
        if zone is not None:
            inside = (lift.index > zone[0]) & (lift.index < zone[1])
            lift_in = float(lift[inside].mean()) if inside.any() else float("nan")
            lift_out = float(lift[~inside].mean()) if (~inside).any() else float("nan")
    min_mret = float(g0["retained_mass"].min())
    ends = (float(g0["retained_mass"].iloc[0]), float(g0["retained_mass"].iloc[-1]))
    return Fig2Claims(
        final=final.reset_index(),
        zone=zone,
        rises=rises,
        argmin=argmin,
        min_mret=min_mret,
        nmax=nmax,
        largest_min_mret=float(largest["retained_mass"].min()),
        lift_in=lift_in,
        lift_out=lift_out,
        ends=ends,
        nonmonotone=min_mret < ZONE_THRESHOLD and min(ends) > min_mret + 0.3,
        keepers=tuple(int(n) for n, low in lows.items() if low >= KEEPS),
    )


@dataclass(frozen=True)
class BrorlClaims:
    """BroRL Fig. 3's claims on its simulated preset: the final values by N (ascending)."""

    group_sizes: np.ndarray
    gains: np.ndarray
    """ΔQ_pos from step 0 to the final step."""
    worst_drop: np.ndarray
    improved: np.ndarray
    """Final fraction of correct actions whose probability rose."""
    gains_increase: bool
    """ΔQ_pos strictly increases with N."""

    @property
    def falls_at(self) -> tuple:
        """The N whose Q_pos ends below its start."""
        return tuple(int(n) for n, g in zip(self.group_sizes, self.gains) if g < 0)

    @property
    def slopes(self) -> np.ndarray:
        """ΔQ_pos gained per doubling of N between neighbouring N."""
        return np.diff(self.gains) / np.diff(np.log2(self.group_sizes.astype(float)))

    @property
    def concave(self) -> bool:
        """ "Gains monotone but concave in N" (BroRL §4.1): increasing, with a gain per doubling that never grows."""
        return bool(self.gains_increase and np.all(np.diff(self.slopes) <= 0))

    @property
    def drops_vanish(self) -> bool:
        """The worst drop at the largest N is below :data:`VANISHED` in size and smaller than at the smallest N."""
        w = np.abs(np.minimum(self.worst_drop, 0.0))
        return bool(w[-1] < VANISHED and w[-1] < w[0])

    @property
    def improved_increase(self) -> bool:
        """The share of improved correct actions rises with N."""
        return bool(np.all(np.diff(self.improved) > 0))


def brorl_claims(means: SimulatedMeans) -> BrorlClaims:
    """BroRL Fig. 3's claims: larger N raises Q_pos faster, drops vanish, more correct actions improve."""
    frame = means.means
    bfinal = frame[frame["step"] == means.final_step].sort_values("group_size")
    gains = bfinal["q_pos"].to_numpy() - frame[frame["step"] == 0].sort_values("group_size")["q_pos"].to_numpy()
    return BrorlClaims(
        group_sizes=bfinal["group_size"].to_numpy(),
        gains=gains,
        worst_drop=bfinal["worst_drop"].to_numpy(),
        improved=bfinal["frac_correct_improved"].to_numpy(),
        gains_increase=bool(np.all(np.diff(gains) > 0)),
    )
