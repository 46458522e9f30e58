r"""Does a real run sit in the tail-miss regime? Reading per-rollout logs and diagnosing them.

Submodules
----------
rollout_log
    The per-rollout log schema (``step``, ``prompt_id``, ``reward`` [, ``correct``]), its CSV / JSONL /
    parquet readers and the TRL and verl adapters; success flags and group counts :math:`(N, X)`.
mixture
    The mixture of Lemma 3.1 curves over a run's groups and its exact peak :math:`N^*`.
rates
    The prompts' success rates fitted to a run's groups (beta-binomial) and what groups of any size would do
    under them: active share, Lemma 3.1 risk, focal-weighted signal and drift, exactly.
advice
    The tail-miss verdict of a run and of each phase, and the advice for a rollout budget (group size, prompts
    per step, focal gamma) under a stated objective.
simcheck
    The advice checked by the categorical simulator started from the fitted success rates (imports torch).
analysis
    Per group and per step: :math:`\hat\mu = X/N` (F-GRPO Eq. 11), the inactive share (Eq. 7), Lemma 3.1's
    tail-miss risk with the group size :math:`N^*` at which it peaks, and the focal weight (Eq. 12).

numpy / pandas and :mod:`tailmiss.analytic` only: importing this package never imports torch. The figure
lives in :mod:`tailmiss.studies.diagnose_figure`, the command in ``tailmiss diagnose``.
"""

from tailmiss.diagnose import analysis, rollout_log
from tailmiss.diagnose.advice import (
    ADVICE_GAMMAS,
    DEFAULT_ADVICE_RHO,
    N_SHAPE_CAVEAT,
    Advice,
    Spend,
    Verdict,
    advise,
    check_advice_settings,
    judge,
    verdicts,
)
from tailmiss.diagnose.analysis import (  # noqa: F401 (exported by analysis.__all__)
    DEFAULT_GAMMAS,
    DEFAULT_RHOS,
    RESULT_FILES,
    Diagnosis,
    check_same_log,
    default_folder,
    diagnose,
    gamma_key,
    group_columns,
    n_star_key,
    per_step,
    pooled_risk,
    rho_grid,
    rho_key,
    step_metrics,
    write_diagnosis,
)
from tailmiss.diagnose.rates import RISK_LEVEL, SHARE_LEVEL, RateFit, SpendOutcome, fit_rates, spend_outcomes
from tailmiss.diagnose.rollout_log import (  # noqa: F401 (exported by rollout_log.__all__)
    FORMATS,
    SCHEMA_COLUMNS,
    CutLineWarning,
    RepeatedRowsWarning,
    RolloutLog,
    group_counts,
    read_rollouts,
    success_flags,
)
from tailmiss.diagnose.summary import (
    DiagnoseSummary,
    FocalRow,
    RiskRow,
    advice_text,
    focal_text,
    side_text,
    summary_json,
    verdict_text,
)

__all__ = [
    "ADVICE_GAMMAS",
    "DEFAULT_ADVICE_RHO",
    "N_SHAPE_CAVEAT",
    "RISK_LEVEL",
    "SHARE_LEVEL",
    "Advice",
    "Spend",
    "Verdict",
    "RateFit",
    "SpendOutcome",
    "advise",
    "judge",
    "verdicts",
    "fit_rates",
    "spend_outcomes",
    "check_advice_settings",
    "advice_text",
    "verdict_text",
    "focal_text",
    "DiagnoseSummary",
    "RiskRow",
    "FocalRow",
    "side_text",
    "summary_json",
    *(name for name in analysis.__all__ if name != "check_grids"),  # not check_grids (taken from .analysis)
    *rollout_log.__all__,
]
