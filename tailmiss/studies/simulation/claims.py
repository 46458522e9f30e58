"""The simulation's claims: F-GRPO Fig. 2 and BroRL Fig. 3 on the simulated presets.

The curves' numbers come from the seed means (:func:`fig2_claims`, :func:`brorl_claims`); the verdicts compare
per-seed values by the report's noise rule (:func:`fig2_verdicts`, :func:`brorl_verdicts`,
:mod:`tailmiss.studies.rule`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss.analytic.regimes import ZONE_THRESHOLD
from tailmiss.studies.rule import Difference, Sentence, compare_values, judge, judge_any, judge_family
from tailmiss.studies.simulation.data import SimulatedMeans

__all__ = [
    "Fig2Claims",
    "fig2_claims",
    "fig2_verdicts",
    "BrorlClaims",
    "brorl_claims",
    "brorl_verdicts",
    "KEEPS",
    "VANISHED",
]

KEEPS = 0.99
"""M_ret "≈ 1 throughout" (F-GRPO Fig. 2): its smallest value over the run's steps is at least this."""
VANISHED = 1e-6
"""A worst drop has "vanished" (BroRL Fig. 3) when its final size is below this (the initial p_i are ~1e-5)."""


@dataclass(frozen=True)
class Fig2Claims:
    """F-GRPO Fig. 2's claims on one simulated preset (:class:`~tailmiss.studies.simulation.data.SimulatedMeans`)."""

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


# ---- verdicts by the report's noise rule, over seeds ---------------------------------------------------------------


def _wide(ends: pd.DataFrame, step: int, metric: str, gamma: float = 0.0) -> pd.DataFrame:
    """``metric`` at ``step`` and ``gamma``, one row per seed and one column per N."""
    rows = ends[(ends["step"] == step) & (ends["gamma"] == gamma)]
    return rows.pivot_table(index="seed", columns="group_size", values=metric).sort_index(axis=1)


def _vs(a, b, metric: str, labels: tuple[str, str]) -> Difference:
    return compare_values(np.asarray(a, float), np.asarray(b, float), metric, paired=True, labels=labels)


def fig2_verdicts(means: SimulatedMeans, claims: Fig2Claims) -> dict:
    """F-GRPO Fig. 2's claims judged over seeds by the noise rule: ``key → Sentence``.

    ``fig2-rises``: Q_pos at the end against the start, every (N, γ) (one family); ``fig2-nonmono``: M_ret at the
    smallest and at the largest N against the N of the lowest mean (one family; refuted when that N is an end);
    ``fig2-lift``: the γ = 1 − γ = 0 lift averaged over zone II's N, against 0 and against the lift outside it.
    ``fig2-alone`` stays a threshold (M_ret ≥ :data:`KEEPS` at every step, seed means): a property, not a
    comparison.
    """
    ends, last = means.ends, means.final_step
    out = {}
    parts = []
    for gamma in sorted(ends["gamma"].unique()):
        start, final = _wide(ends, 0, "q_pos", gamma), _wide(ends, last, "q_pos", gamma)
        for n in final.columns:
            parts.append((_vs(final[n], start[n], "q_pos", (f"end N={n} γ={gamma:g}", "start")), "higher"))
    out["fig2-rises"] = judge_family("Q_pos rises for every N", parts)
    m = _wide(ends, last, "retained_mass")
    ns = list(m.columns)
    # tested without picking the trough: some interior N whose M_ret both ends exceed (one family, every interior N)
    interior = [
        [
            (_vs(m[ns[0]], m[n], "retained_mass", (f"N={ns[0]}", f"N={n}")), "higher"),
            (_vs(m[ns[-1]], m[n], "retained_mass", (f"N={ns[-1]}", f"N={n}")), "higher"),
        ]
        for n in ns[1:-1]
    ]
    if interior:
        out["fig2-nonmono"] = judge_any("M_ret is non-monotone in N, lowest at intermediate N", interior)
    zone = claims.zone
    if 1.0 in set(ends["gamma"]) and zone is not None:
        lift = _wide(ends, last, "retained_mass", 1.0) - m
        inside = [n for n in lift.columns if zone[0] < n < zone[1]]
        outside = [n for n in lift.columns if n not in inside]
        if inside and outside:
            lin, lout = lift[inside].mean(axis=1), lift[outside].mean(axis=1)
            out["fig2-lift"] = judge_family(
                "γ = 1 lifts M_ret, mostly in zone II",
                [
                    (_vs(lin, np.zeros(len(lin)), "retained_mass", ("lift in zone II", "0")), "higher"),
                    (_vs(lin, lout, "retained_mass", ("lift in zone II", "lift outside")), "higher"),
                ],
            )
    out["fig2-alone"] = _alone(ends)
    return out


def _alone(ends: pd.DataFrame) -> Sentence:
    """F-GRPO Fig. 2's "N = 131,072 alone keeps M_ret ≈ 1 throughout", per seed on the lowest M_ret over the run's
    steps (γ = 0): not lower than :data:`KEEPS` at the largest N, lower than it at every other N (one family)."""
    rows = ends[ends["gamma"] == 0].groupby(["seed", "group_size"])["retained_mass"].min().unstack("group_size")
    ns = list(rows.columns)
    keeps = np.full(len(rows), KEEPS)
    parts = [(_vs(rows[ns[-1]], keeps, "retained_mass", (f"lowest M_ret N={ns[-1]}", f"{KEEPS:g}")), "not lower")]
    parts += [(_vs(rows[n], keeps, "retained_mass", (f"lowest M_ret N={n}", f"{KEEPS:g}")), "lower") for n in ns[:-1]]
    return judge(f"N = {ns[-1]} alone keeps M_ret ≈ 1 throughout", parts)


def brorl_verdicts(means: SimulatedMeans) -> dict:
    """BroRL Fig. 3's and §4.1's claims judged over seeds by the noise rule: ``key → Sentence``.

    Per seed: ΔQ_pos (end − start) by N, its gain per doubling between neighbouring N, the share of improved correct
    actions and the size of the worst single-action drop. ``brorl-faster``: each N's ΔQ_pos against the next
    smaller N's (one family); ``brorl-regress``: Q_pos at the end against the start at each N ≤ 16 — "sometimes
    regresses" holds when one of them is lower; ``brorl-concave``: the ``faster`` parts plus each gain per doubling
    not above the one before it (one family); ``brorl-drops``: the largest N's worst drop against the smallest N's,
    lower, and below :data:`VANISHED` on every seed; ``brorl-improved``: each N's share against the next smaller N's.
    """
    ends, last = means.ends, means.final_step
    start, final = _wide(ends, 0, "q_pos"), _wide(ends, last, "q_pos")
    gains = final - start
    ns = list(gains.columns)
    out = {}
    steps = [(_vs(gains[b], gains[a], "q_pos", (f"ΔQ_pos N={b}", f"N={a}")), "higher") for a, b in zip(ns, ns[1:])]
    out["brorl-faster"] = judge_family("larger N raises Q_pos faster", steps)
    small = [n for n in ns if n <= 16]
    out["brorl-regress"] = judge_any(
        "small N sometimes regresses",
        [[(_vs(final[n], start[n], "q_pos", (f"end N={n}", "start")), "lower")] for n in small],
    )
    logn = np.log2(np.asarray(ns, dtype=float))
    slopes = gains.diff(axis=1).iloc[:, 1:] / np.diff(logn)
    bends = [
        (_vs(slopes.iloc[:, i + 1], slopes.iloc[:, i], "q_pos", (f"gain/doubling {ns[i + 1]}→{ns[i + 2]}",
                                                                    f"{ns[i]}→{ns[i + 1]}")), "not higher")
        for i in range(slopes.shape[1] - 1)
    ]  # fmt: skip
    out["brorl-concave"] = judge_family("gains are monotone but concave in N", steps + bends)
    drop = np.abs(np.minimum(_wide(ends, last, "worst_drop"), 0.0))
    d = _vs(drop[ns[-1]], drop[ns[0]], "worst_drop", (f"|worst drop| N={ns[-1]}", f"N={ns[0]}"))
    zero = np.zeros(len(drop))
    gone = _vs(drop[ns[-1]], zero, "worst_drop", (f"|worst drop| N={ns[-1]}", "0"))
    out["brorl-drops"] = judge("worst drops vanish at large N", [(d, "lower"), (gone, "same")])
    share = _wide(ends, last, "frac_correct_improved")
    out["brorl-improved"] = judge_family(
        "larger N improves more correct actions",
        [(_vs(share[b], share[a], "frac_correct_improved", (f"improved N={b}", f"N={a}")), "higher")
         for a, b in zip(ns, ns[1:])],
    )  # fmt: skip
    return out
