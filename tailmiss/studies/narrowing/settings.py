"""Where is the focal weight more than a slower GRPO? The study's answer beside other settings of the task.

The rules were written with the runs' presets, before any run (:mod:`tailmiss.experiments.narrowing_presets`, *Across
settings*); this module applies them.

* **Does GRPO lose coverage at the setting?** GRPO N = 8's final held-out pass@256 against the SFT model's, paired
  by seed (:func:`~tailmiss.studies.narrowing.regime.regime_table`, all prompts), by the noise rule
  (:func:`~tailmiss.studies.narrowing.sharing.narrowing`): *lower* loses coverage. Where it is shown *not lower* the
  row reads "GRPO does not lose coverage here", and where the rule cannot tell, so; either way no γ is judged (a
  claim about the narrowing regime is judged where the regime is).
* **Each γ** against GRPO at lr × m_γ (F-GRPO App. N's scale for that γ) by the plateau runs' rules
  (:func:`~tailmiss.studies.narrowing.plateau_claims.plateau_claims` over that comparison alone: plateau, frontier
  levels, end point; the three γ of a setting one Holm family), its cell the answer (*yes*, *no*, *partly*, *cannot
  tell*), the end point's word and its pass@256 difference.
* **The study's own setting** (strength 0.5, share 0.25) is the first row: its answers as the section gives them
  (:func:`~tailmiss.studies.narrowing.end_point.study_answers`: the end point on seeds 15-44 for γ = 0.5 and 1, the
  plateau runs' seeds 10-14 for γ = 2), its GRPO's loss of coverage on the end point's seeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from tailmiss.studies.narrowing.end_point import StudyAnswer, study_answers
from tailmiss.studies.narrowing.plateau_claims import COMPARISONS, PLATEAU_GRPO, PlateauClaims, plateau_claims
from tailmiss.studies.rule import Verdict

__all__ = ["AGAINST", "SettingRow", "setting_row", "study_row", "setting_rows"]

AGAINST = "GRPO at lr × m_γ"
"""The comparison every setting is read by (:data:`~tailmiss.studies.narrowing.plateau_claims.COMPARISONS`)."""


@dataclass(frozen=True)
class SettingRow:
    """One setting of the task: whether GRPO loses coverage there, and each γ's answer where it does."""

    name: str
    """``strength 0.25, share 0.25`` (and ``(the study's)`` for its own)."""
    family: str
    """The sweep whose GRPO N = 8 says whether coverage is lost (the end point's for the study's row)."""
    grpo: PlateauClaims
    """Those runs read by the plateau runs' rules (their
    :attr:`~tailmiss.studies.narrowing.plateau_claims.PlateauClaims.narrows`, ``change`` and ``regime``)."""
    cells: dict = field(default_factory=dict)
    """γ -> :class:`~tailmiss.studies.narrowing.end_point.StudyAnswer` against GRPO at lr × m_γ (empty unless GRPO
    loses coverage here)."""

    @property
    def narrows(self) -> Verdict:
        return self.grpo.narrows

    def coverage(self) -> tuple[float, float] | None:
        """GRPO N = 8's held-out pass@256 (all prompts): the SFT model's and the seed mean at the end (None without
        its scores by prompt type)."""
        r = self.grpo.regime
        if not len(r):
            return None
        row = r[(r["label"] == PLATEAU_GRPO) & (r["type"] == "all")]
        return (float(row["sft_pass256"].iloc[0]), float(row["final_pass256"].iloc[0])) if len(row) else None


def setting_row(family: str, history: pd.DataFrame, typed: pd.DataFrame, strength: float, share: float) -> SettingRow:
    """One setting's row from its sweep (module docstring).

    Parameters
    ----------
    family : str
        The sweep (``narrowing-settings-str0.25``, ...).
    history : DataFrame
        Its history (``label``, ``seed``, ``step``, ``mu_pos``, ``exact_pass_at_256``, ``gamma``, ``group_size``).
    typed : DataFrame
        Its runs' held-out metrics by prompt type (:func:`~tailmiss.studies.narrowing.data.by_type`): GRPO's loss of
        coverage is read there.
    strength, share : float
        The task's ``conflict_strength`` and ``conflict_share``.
    """
    claims = plateau_claims(history, typed, comparisons={AGAINST: COMPARISONS[AGAINST]})
    cells = {}
    if claims.narrows == Verdict.REPRODUCED:
        cells = {a.gamma: a for a in study_answers(None, claims, comparisons=(AGAINST,), families=("", family))}
    return SettingRow(f"strength {strength:g}, share {share:g}", family, claims, cells)


def study_row(
    answers: list[StudyAnswer], grpo: PlateauClaims, family: str, strength: float, share: float
) -> SettingRow:
    """The study's own row: ``answers`` (the section's, :func:`~tailmiss.studies.narrowing.end_point.study_answers`)
    against GRPO at lr × m_γ, and whether GRPO loses coverage on the runs ``grpo`` (the end point's)."""
    cells = {}
    if grpo.narrows == Verdict.REPRODUCED:
        cells = {a.gamma: a for a in answers if a.against == AGAINST}
    return SettingRow(f"strength {strength:g}, share {share:g} (the study's)", family, grpo, cells)


def setting_rows(answers: list[StudyAnswer], endpoint: PlateauClaims, data) -> tuple[SettingRow, ...]:
    """The study's own row (``answers``; GRPO's loss of coverage on the end point's runs ``endpoint``), then one per
    setting ``data`` holds (:class:`~tailmiss.studies.narrowing.data.NarrowingData`'s ``settings``)."""
    from tailmiss.studies.narrowing.data import END_POINT

    task = data.tasks["narrowing"]
    rows = [study_row(answers, endpoint, END_POINT, task.conflict_strength, task.conflict_share)]
    for family, (history, typed, other) in data.settings.items():
        rows.append(setting_row(family, history, typed, other.conflict_strength, other.conflict_share))
    return tuple(rows)
