r"""Does a real run sit in the tail-miss regime? Reading per-rollout logs and diagnosing them.

Submodules
----------
rollout_log
    The per-rollout log schema (``step``, ``prompt_id``, ``reward`` [, ``correct``]), its CSV / JSONL /
    parquet readers and the TRL and verl adapters; success flags and group counts :math:`(N, X)`.
mixture
    The mixture of Lemma 3.1 curves over a run's groups and its exact peak :math:`N^*`.
analysis
    Per group and per step: :math:`\hat\mu = X/N` (F-GRPO Eq. 11), the inactive share (Eq. 7), Lemma 3.1's
    tail-miss risk with the group size :math:`N^*` at which it peaks, and the focal weight (Eq. 12).

numpy / pandas and :mod:`tailmiss.analytic` only: importing this package never imports torch. The figure
lives in :mod:`tailmiss.figures.diagnose`, the command in ``tailmiss diagnose``.
"""

from tailmiss.diagnose.analysis import (
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
from tailmiss.diagnose.rollout_log import (
    FORMATS,
    SCHEMA_COLUMNS,
    CutLineWarning,
    RolloutLog,
    group_counts,
    read_rollouts,
    success_flags,
)
from tailmiss.diagnose.summary import DiagnoseSummary, FocalRow, RiskRow, side_text, summary_json

__all__ = [
    "DEFAULT_RHOS",
    "DEFAULT_GAMMAS",
    "RESULT_FILES",
    "Diagnosis",
    "DiagnoseSummary",
    "RiskRow",
    "FocalRow",
    "side_text",
    "summary_json",
    "rho_key",
    "rho_grid",
    "gamma_key",
    "n_star_key",
    "group_columns",
    "per_step",
    "step_metrics",
    "pooled_risk",
    "diagnose",
    "default_folder",
    "check_same_log",
    "write_diagnosis",
    "FORMATS",
    "SCHEMA_COLUMNS",
    "CutLineWarning",
    "RolloutLog",
    "read_rollouts",
    "success_flags",
    "group_counts",
]
