"""The narrowing regime: a miniature where GRPO loses coverage (a conflict between prompts the policy cannot resolve
from the prompt), the paper's LLM claims judged there, and whether F-GRPO is more than a slower GRPO."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.narrowing import figures, section
from tailmiss.studies.narrowing.counterfactual import COUNTERFACTUAL
from tailmiss.studies.narrowing.data import END_POINT, NARROWING_FAMILIES, PLATEAU, SETTINGS_READ, narrowing_units
from tailmiss.studies.record import Study
from tailmiss.studies.runs import SETTINGS_FAMILIES

__all__ = ["STUDY"]

STUDY = Study.of(
    section,
    figures,
    ledger.NARROWING,
    families=(*NARROWING_FAMILIES, PLATEAU, END_POINT, COUNTERFACTUAL, *SETTINGS_READ),
    claims=("appN-frontier",),
    units=narrowing_units,
    pending=tuple(f for f in SETTINGS_FAMILIES if f not in SETTINGS_READ),
)
"""The narrowing study's record (:class:`~tailmiss.studies.record.Study`): its section, figures and ledger rows, the
sweep and ladder families it reads (:data:`~tailmiss.studies.narrowing.data.NARROWING_FAMILIES`, the plateau
runs, :data:`~tailmiss.studies.narrowing.data.PLATEAU`, and the end point's,
:data:`~tailmiss.studies.narrowing.data.END_POINT`) and the claim only it judges; the first look shows its quick
version (``narrowing-quick``)."""
