"""The typed summary of a diagnosed run (:class:`~tailmiss.diagnose.summary.DiagnoseSummary`) and its JSON form,
``diagnose.json``."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss.diagnose.advice import CLEAR_GAIN, Advice, Verdict
from tailmiss.diagnose.rates import RISK_LEVEL, SHARE_LEVEL

__all__ = [
    "RiskRow",
    "FocalRow",
    "DiagnoseSummary",
    "sides_of",
    "side_text",
    "verdict_text",
    "advice_text",
    "focal_text",
    "summary_json",
]


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
    """What :func:`~tailmiss.diagnose.analysis.diagnose` found, typed; :func:`summary_json` writes it as
    ``diagnose.json``."""

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
    verdicts: tuple[Verdict, ...] = ()
    """The whole run's tail-miss verdict, then one per phase (:func:`tailmiss.diagnose.advice.verdicts`)."""
    advice: Advice | None = None
    """The budget's spends compared (:func:`tailmiss.diagnose.advice.advise`); None without a solved group or with
    groups of one rollout only."""
    dropped: tuple[tuple[str, int], ...] = ()
    """Rows not counted in any group, by reason (unscored, a cut-off last line)."""
    short_groups: int = 0
    """Groups smaller than their step's usual size where rows were dropped (counted at their own size)."""
    run_gamma: float = 0.0
    """The run's focal gamma the advice takes as current."""
    run_gamma_source: str = "assumed (GRPO)"
    """Where it comes from: ``"given"``, ``"the log's focal weights"`` or ``"assumed (GRPO)"``."""


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
    out = {
        k: v for k, v in dataclasses.asdict(s).items() if k not in ("tail_miss", "focal_weights", "verdicts", "advice")
    }
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
    out["verdict_rule"] = VERDICT_RULE
    out["verdicts"] = [{**dataclasses.asdict(v), "edge": v.edge, "text": verdict_text(v)} for v in s.verdicts]
    if s.advice is not None:
        a = s.advice
        out["advice"] = {
            "budget": a.budget,
            "rho": a.rho,
            "fit": {**dataclasses.asdict(a.fit), "mean": a.fit.mean, "fitted_on": a.fitted_on},
            "objective": OBJECTIVE,
            "rule": a.rule,
            "text": advice_text(a),
            "caveat": a.caveat,
            "spends": a.table().to_dict(orient="records"),
        }
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


VERDICT_RULE = (
    f"a solved group (X > 0) is at risk when Lemma 3.1 at its own (mu_hat, rho*mu_hat, N) is >= {RISK_LEVEL:g}; "
    f"the run (or phase) is in the tail-miss regime when >= {SHARE_LEVEL:.0%} of its solved groups are at risk"
)
OBJECTIVE = (
    "keep a spend that is out of the regime; else, among the spends that keep at least half the current learning "
    "signal (focal-weighted active groups per step), the least drift away from missed rare sets per unit of signal, "
    f"if at least {CLEAR_GAIN:.0%} below the current spend's; else keep the current spend"
)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def verdict_text(v: Verdict) -> str:
    """One line: in the tail-miss regime or not (or at its edge), with the numbers that decide it."""
    if v.in_regime is None:
        return f"{v.phase}: no group solved its prompt: no correct mass to lose, no verdict"
    lo, hi = v.interval
    share = (
        f"{_pct(v.share_at_risk)} (95% interval {lo:.0%}-{hi:.0%}) of {v.solved_groups} solved groups at risk "
        f"(rho = {v.rho:g})"
    )
    word = "in the tail-miss regime" if v.in_regime else "not in the tail-miss regime"
    if v.edge:
        word += f", at its edge (the interval holds {SHARE_LEVEL:.0%})"
    star = "" if v.n_star is None else f", N* = {v.n_star}"
    why = f", protected by {v.protected_by}" if v.protected_by and not v.in_regime else ""
    return f"{v.phase}: {word}: {share}, N = {v.group_size}{star}{why}"


def focal_text(a: Advice, group_size: int, gamma: float) -> str:
    """The focal weight's effect at ``group_size``: drift and signal per step against γ = 0, e.g. ``-53%/-29%``."""
    at = {s.gamma: s for s in a.spends if s.group_size == group_size}
    base, this = at.get(0.0), at.get(gamma)
    if base is None or this is None or base.drift_per_step <= 0 or base.signal_per_step <= 0:
        return "-"
    drift = this.drift_per_step / base.drift_per_step - 1
    signal = this.signal_per_step / base.signal_per_step - 1
    return f"{drift:+.0%}/{signal:+.0%}"


def _spend_text(s) -> str:
    return f"N = {s.group_size} x {s.prompts} prompts" + (f", gamma = {s.gamma:g}" if s.gamma else "")


def advice_text(a: Advice) -> str:
    """One sentence of advice: what to do with the budget, why (the objective's rule), and what it costs."""
    cur, best = a.current, a.best
    if a.rule == 1:
        return (
            f"Keep {_spend_text(cur)}: predicted out of the tail-miss regime at rho = {a.rho:g} "
            f"({_pct(cur.outcome.share_at_risk)} of solved groups at risk; {_pct(cur.outcome.miss_share)} of active "
            f"groups miss the rare set, {cur.missed_per_step:.2g} per step)."
        )
    if a.rule == 3:
        return (
            f"Keep {_spend_text(cur)}: in the tail-miss regime at rho = {a.rho:g} "
            f"({_pct(cur.outcome.share_at_risk)} of solved groups at risk), but no spend of {a.budget} rollouts that "
            f"keeps half the learning signal lowers the drift per unit of signal by {CLEAR_GAIN:.0%} or more."
        )
    drift = best.drift_per_signal / cur.drift_per_signal - 1
    signal = best.signal_per_step / cur.signal_per_step - 1
    return (
        f"Spend the {a.budget} rollouts as {_spend_text(best)}: drift away from missed rare sets per unit of signal "
        f"{drift:+.0%} ({_pct(best.outcome.miss_share)} of active groups miss the rare set instead of "
        f"{_pct(cur.outcome.miss_share)}; {best.missed_per_step:.2g} missed per step instead of "
        f"{cur.missed_per_step:.2g}), for {signal:+.0%} learning signal."
    )
