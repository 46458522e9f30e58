r"""Is a run in the tail-miss regime, and how should it spend its rollouts? A verdict and advice for a budget.

**Verdict.** A solved group (:math:`X > 0`) is *at risk* when F-GRPO Lemma 3.1 at its own
:math:`(\hat\mu, \rho\hat\mu, N)` is at least :data:`~tailmiss.diagnose.rates.RISK_LEVEL` (0.25): one in four
updates of that prompt would be active yet never sample its rare-correct set. The run, or a phase of it
(its steps cut in thirds: early, middle, late), is *in the tail-miss regime* when at least
:data:`~tailmiss.diagnose.rates.SHARE_LEVEL` (half) of its solved groups are at risk. Out of it, rare solutions
are protected by inactivity (the run's :math:`N` below the peak :math:`N^*` of the groups' Lemma 3.1 mixture)
or by coverage (above it), F-GRPO §3.1.

**Advice.** A budget of :math:`B` rollouts per step can be spent as :math:`P = \lfloor B/N \rfloor` prompts of
:math:`N` rollouts, :math:`N = 2, 4, 8, \dots \le B` (and the run's own :math:`N`), with a focal
:math:`\gamma \in \{0, 0.5, 1\}`. Each spend is predicted from the prompts' success rates fitted to the late
phase (the policy as it is now; :func:`tailmiss.diagnose.rates.fit_rates`): the share of active groups, Lemma
3.1's risk, the expected rare-correct sets missed per step :math:`P \cdot` risk, the verdict's share at risk,
the learning signal (focal-weighted active groups per step) and the drift away from missed rare sets
(:class:`~tailmiss.diagnose.rates.SpendOutcome`). The stated objective, for the question "how often does an
update push probability away from a rare-correct solution":

1. a run whose current spend is out of the regime keeps it (rule 1);
2. else, among the spends that keep at least half the current learning signal, the one with the least drift away
   from missed rare sets per unit of signal (:attr:`Spend.drift_per_signal`), when it is at least
   :data:`CLEAR_GAIN` (10 %) below the current spend's (rule 2); the focal weight competes here, since it scales
   the drift and the signal of each group by its :math:`g`;
3. else the current spend is kept: no spend of this budget does clearly better (rule 3).

The closed form is a per-prompt sampling argument. Where this toolkit's own transformer runs disagree with its
group-size shape (:data:`N_SHAPE_CAVEAT`), the advice says so beside any change of :math:`N`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss._checks import check_integer, check_interval, check_nonnegative
from tailmiss.diagnose.mixture import pooled_risk
from tailmiss.diagnose.rates import (
    RISK_LEVEL,
    SHARE_LEVEL,
    RateFit,
    SpendOutcome,
    fit_rates,
    plug_in_risk,
    spend_outcomes,
    wilson_interval,
)

__all__ = [
    "ADVICE_GAMMAS",
    "DEFAULT_ADVICE_RHO",
    "N_SHAPE_CAVEAT",
    "PHASES",
    "MAX_ADVICE_N",
    "CLEAR_GAIN",
    "Verdict",
    "Spend",
    "Advice",
    "phase_of_steps",
    "modal_size",
    "judge",
    "verdicts",
    "spends_for_budget",
    "advise",
    "AT_RISK",
    "share_at_risk_by_step",
    "short_groups",
    "check_advice_settings",
]

DEFAULT_ADVICE_RHO = 0.05
"""The rare share the verdict and the advice are given for unless asked otherwise (F-GRPO Fig. 5's scale)."""
ADVICE_GAMMAS = (0.0, 0.5, 1.0)
"""Focal exponents compared for a budget (γ = 0.5 is F-GRPO's usual choice, Table 7)."""
PHASES = ("early", "middle", "late")
"""The phases a run's distinct steps are cut into, in thirds and in order (:func:`phase_of_steps`); the verdict is
given for the whole run and for each phase present (:func:`verdicts`)."""
CLEAR_GAIN = 0.10
"""How much lower a spend's drift per unit of signal must be than the current spend's to be advised instead."""
MAX_ADVICE_N = 4096
"""The largest power-of-two group size compared (a larger budget is still spent on groups of at most this size)."""
N_SHAPE_CAVEAT = (
    "the group-size advice is Lemma 3.1's per-prompt sampling argument; in this toolkit's own small transformer "
    "(paper_repro.md: the ladder and the bridge) retained rare mass fell with N at equal steps on every transformer "
    "rung and the simulator's regimes did not match the transformer's at any simulator rate, so a change of N is "
    "not a prediction of retained mass in a shared-parameter model"
)
"""What the toolkit's own evidence says of the closed-form N shape in shared-parameter models (tailmiss repro's
ladder: no large-N regime on any transformer rung; bridge: regimes disagree at lr 0.01, 0.03, 0.1)."""


@dataclass(frozen=True)
class Verdict:
    r"""The tail-miss verdict of a run or one phase of it, for one rare share :math:`\rho`.

    ``in_regime`` is None when no group solved its prompt (no correct mass to take a rare share of). ``n_star`` is
    the peak of the solved groups' Lemma 3.1 mixture over one common N (None when every solved group is
    all-correct); ``protected_by`` says what keeps a run out of the regime: ``"inactivity"`` (its N below
    ``n_star``), ``"coverage"`` (above), ``"both sides"`` (sizes on both sides) or None. ``interval`` is the 95 %
    Wilson interval of the share at risk over the solved groups, taken as independent draws (groups of one prompt
    at different steps are not, so it is a lower bound on the uncertainty); ``edge`` is True when it contains
    :data:`~tailmiss.diagnose.rates.SHARE_LEVEL`: the verdict then follows the rule but the groups cannot tell.
    """

    phase: str
    first_step: int
    last_step: int
    groups: int
    solved_groups: int
    share_at_risk: float | None
    mean_risk: float | None
    group_size: int
    n_star: int | None
    rho: float
    in_regime: bool | None
    protected_by: str | None
    interval: tuple[float, float] | None = None

    @property
    def edge(self) -> bool:
        """The share's 95 % interval holds the regime line: the rule's verdict, but not one the groups resolve."""
        return self.interval is not None and self.interval[0] <= SHARE_LEVEL <= self.interval[1]


def phase_of_steps(steps) -> np.ndarray:
    """Each step's phase: its rank among the run's distinct steps cut in thirds (``early``, ``middle``, ``late``).

    With fewer than three distinct steps the late phase gets the last one, the early phase the first.
    """
    steps = np.asarray(steps)
    distinct = np.unique(steps)
    third = np.floor(np.arange(distinct.size) * 3 / distinct.size).astype(np.int64)
    third[-1] = 2  # the last step is always late: the policy as it is now
    lookup = dict(zip(distinct.tolist(), third.tolist()))
    return np.array([PHASES[lookup[s]] for s in steps.tolist()], dtype=object)


def modal_size(n) -> int:
    """The most common group size in ``n`` (the smaller of equally common ones)."""
    sizes, counts = np.unique(n, return_counts=True)
    return int(sizes[np.argmax(counts)])  # ties: the smaller size


def judge(groups: pd.DataFrame, rho: float, phase: str = "run") -> Verdict:
    r"""The verdict of a set of groups (columns ``step``, ``n``, ``x``) for rare share ``rho``.

    References
    ----------
    F-GRPO Lemma 3.1 (Eq. 8) and §3.1.
    """
    n = groups["n"].to_numpy(np.int64)
    x = groups["x"].to_numpy(np.int64)
    solved = x > 0
    size = modal_size(n)
    steps = groups["step"].to_numpy()
    if not solved.any():
        return Verdict(
            phase, int(steps.min()), int(steps.max()), int(n.size), 0, None, None, size, None, rho, None, None
        )
    risk = plug_in_risk(x[solved], n[solved], rho)
    share = float(np.mean(risk >= RISK_LEVEL))
    n_star = pooled_risk(x[solved] / n[solved], rho)["n_star"]
    in_regime = share >= SHARE_LEVEL
    protected = None
    if not in_regime and n_star is not None:
        below, above = (n[solved] < n_star).any(), (n[solved] > n_star).any()
        protected = "both sides" if below and above else "inactivity" if below else "coverage" if above else None
    return Verdict(
        phase,
        int(steps.min()),
        int(steps.max()),
        int(n.size),
        int(solved.sum()),
        share,
        float(risk.mean()),
        size,
        n_star,
        float(rho),
        in_regime,
        protected,
        wilson_interval(int(np.sum(risk >= RISK_LEVEL)), int(solved.sum())),
    )


def verdicts(groups: pd.DataFrame, rho: float) -> tuple[Verdict, ...]:
    """The whole run's verdict, then one per phase present (early, middle, late)."""
    phases = phase_of_steps(groups["step"].to_numpy())
    out = [judge(groups, rho, "run")]
    for name in PHASES:
        part = groups[phases == name]
        if len(part):
            out.append(judge(part, rho, name))
    return tuple(out)


@dataclass(frozen=True)
class Spend:
    """One way to spend the budget: ``prompts`` groups of ``group_size`` rollouts, focal ``gamma``, predicted.

    ``missed_per_step`` is ``prompts × risk``, ``signal_per_step`` and ``drift_per_step`` the per-group
    ``signal`` and ``drift`` of :attr:`outcome` times ``prompts``.
    """

    prompts: int
    outcome: SpendOutcome
    current: bool

    @property
    def group_size(self) -> int:
        return self.outcome.group_size

    @property
    def gamma(self) -> float:
        return self.outcome.gamma

    @property
    def rollouts(self) -> int:
        return self.prompts * self.group_size

    @property
    def missed_per_step(self) -> float:
        return self.prompts * self.outcome.risk

    @property
    def signal_per_step(self) -> float:
        return self.prompts * self.outcome.signal

    @property
    def drift_per_step(self) -> float:
        return self.prompts * self.outcome.drift

    @property
    def drift_per_signal(self) -> float:
        return self.outcome.drift / self.outcome.signal if self.outcome.signal > 0 else float("inf")


@dataclass(frozen=True)
class Advice:
    """The spends of one budget compared (:func:`advise`), the one recommended, and why.

    ``rule``: 1 kept (out of the regime), 2 changed, 3 kept for want of a clearly better spend (the module's
    objective); ``caveat``: :data:`N_SHAPE_CAVEAT` when the advice changes N, else None.
    """

    budget: int
    rho: float
    fit: RateFit
    fitted_on: str
    spends: tuple[Spend, ...]
    current: Spend
    best: Spend
    rule: int
    caveat: str | None

    def table(self) -> pd.DataFrame:
        """One row per spend: the predictions, and which is current and recommended."""
        rows = []
        for s in self.spends:
            o = s.outcome
            rows.append(
                {
                    "group_size": s.group_size,
                    "prompts": s.prompts,
                    "gamma": s.gamma,
                    "rollouts": s.rollouts,
                    "active_share": o.active,
                    "risk": o.risk,
                    "share_at_risk": o.share_at_risk,
                    "in_regime": o.in_regime,
                    "miss_share": o.miss_share,
                    "missed_per_step": s.missed_per_step,
                    "signal_per_step": s.signal_per_step,
                    "drift_per_step": s.drift_per_step,
                    "drift_per_signal": s.drift_per_signal,
                    "current": s.current,
                    "advised": s is self.best,
                }
            )
        return pd.DataFrame(rows)


def spends_for_budget(budget: int, run_n: int, run_gamma: float = 0.0, gammas=ADVICE_GAMMAS) -> list[tuple]:
    """``(group_size, prompts, gamma)`` of every spend compared: N = 2, 4, ... <= min(budget, :data:`MAX_ADVICE_N`)
    and the run's own N (when it fits the budget), each with ``budget // N`` prompts, times the γ grid and the run's
    own γ."""
    if budget < 2:
        raise ValueError(f"budget must be at least 2 rollouts per step, got {budget}")
    top = int(np.log2(min(budget, MAX_ADVICE_N)))
    sizes = {2**k for k in range(1, top + 1)} | ({run_n} if 2 <= run_n <= budget else set())
    gammas = sorted(set(gammas) | {float(run_gamma)})
    return [(n, budget // n, g) for n in sorted(sizes) for g in gammas]


def _best(spends: list[Spend], current: Spend) -> tuple[Spend, int]:
    if not current.outcome.in_regime:
        return current, 1
    floor = 0.5 * current.signal_per_step
    keeping = [s for s in spends if s.signal_per_step >= floor - 1e-12]
    # least drift per unit of signal; ties: nearer the run's N, then the smaller gamma
    best = min(
        keeping,
        # rounded: a focal weight that scales every group alike (N = 2) ties with gamma 0 up to float rounding
        key=lambda s: (round(s.drift_per_signal, 9), abs(np.log(s.group_size / current.group_size)), s.gamma),
    )
    if best.drift_per_signal <= (1 - CLEAR_GAIN) * current.drift_per_signal:
        return best, 2
    return current, 3


def advise(
    groups: pd.DataFrame,
    rho: float = DEFAULT_ADVICE_RHO,
    budget: int | None = None,
    run_gamma: float = 0.0,
    gammas=ADVICE_GAMMAS,
) -> Advice:
    r"""Compare the ways to spend ``budget`` rollouts per step and name the best under the module's objective.

    Parameters
    ----------
    groups : DataFrame
        The run's groups (columns ``step``, ``n``, ``x``), e.g.
        :attr:`tailmiss.diagnose.Diagnosis.groups <tailmiss.diagnose.analysis.Diagnosis.groups>`.
    rho : float
        Rare share :math:`\rho \in (0, 1)` of the correct mass.
    budget : int, optional
        Rollouts per step; default the run's own (the median over steps of its logged rollouts).
    run_gamma : float
        The focal :math:`\gamma` the run used (0: GRPO), to mark its current spend.
    gammas : sequence of float
        Focal exponents compared.

    Returns
    -------
    Advice

    References
    ----------
    F-GRPO Lemma 3.1 (Eq. 8), Eqs. 7 and 12-13, Prop. 3.2, Cor. H.2.
    """
    late = groups[phase_of_steps(groups["step"].to_numpy()) == "late"]
    fitted_on = "late phase"
    if (late["n"] == 1).all():
        late, fitted_on = groups, "whole run"
    fit = fit_rates(late["n"].to_numpy(), late["x"].to_numpy())
    run_n = modal_size(groups["n"].to_numpy(np.int64))
    if budget is None:
        budget = int(np.median(groups.groupby("step")["n"].sum().to_numpy()))
    budget = int(budget)
    by_size: dict[int, list[SpendOutcome]] = {}
    spends = []
    for n, prompts, gamma in spends_for_budget(budget, run_n, run_gamma, gammas):
        if n not in by_size:
            by_size[n] = spend_outcomes(fit, n, rho, sorted(set(gammas) | {float(run_gamma)}))
        outcome = next(o for o in by_size[n] if o.gamma == gamma)
        spends.append(Spend(prompts, outcome, current=(n == run_n and gamma == float(run_gamma))))
    current = next((s for s in spends if s.current), None)
    if current is None:  # the run's N exceeds the budget asked: judge the run's own spend beside the others
        outcome = spend_outcomes(fit, run_n, rho, [float(run_gamma)])[0]
        current = Spend(max(1, budget // run_n), outcome, current=True)
        spends.append(current)
    best, rule = _best(spends, current)
    caveat = N_SHAPE_CAVEAT if best.group_size != current.group_size else None
    return Advice(budget, float(rho), fit, fitted_on, tuple(spends), current, best, rule, caveat)


AT_RISK = "share_at_risk"
"""Per-step column: the share of the step's solved groups at risk at the advice's rho (the verdict's rule)."""


def share_at_risk_by_step(columns: pd.DataFrame, rho: float, steps: pd.Series) -> np.ndarray:
    """Per step of ``steps``: the share of its solved groups at risk at ``rho`` (NaN for a step with none)."""
    solved = columns[columns["x"] > 0]
    at_risk = plug_in_risk(solved["x"].to_numpy(), solved["n"].to_numpy(), rho) >= RISK_LEVEL
    share = pd.Series(at_risk, index=solved.index).groupby(solved["step"]).mean()
    return share.reindex(steps.to_numpy()).to_numpy(np.float64)


def short_groups(columns: pd.DataFrame, dropped: int) -> np.ndarray:
    """Groups smaller than their step's most common size, when rows were dropped that can account for them all.

    A run of N = 8 whose log lost ``dropped`` rows (unscored rollouts, a cut-off last line) has groups of 7: they
    are counted at their own size, but the run's size stays 8. Without dropped rows, or with more missing rows
    than were dropped, the sizes are the run's own (mixed) and nothing is marked.
    """
    if dropped <= 0:
        return np.zeros(len(columns), dtype=bool)
    usual = columns.groupby("step")["n"].transform(modal_size).to_numpy()
    missing = usual - columns["n"].to_numpy()
    short = missing > 0
    return short if missing[short].sum() <= dropped else np.zeros(len(columns), dtype=bool)


def check_advice_settings(advice_rho, budget, run_gamma) -> None:
    """``ValueError`` naming a bad advice setting: ``advice_rho`` in (0, 1), ``budget`` >= 2 (or None),
    ``run_gamma`` >= 0 (or None: read from the log); checked before a log is read."""
    check_interval("advice_rho", advice_rho, 0.0, 1.0, lo_open=True, hi_open=True)
    if budget is not None:
        check_integer("budget", budget, 2)
    if run_gamma is not None:
        check_nonnegative("run_gamma", run_gamma)
