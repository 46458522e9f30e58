"""The narrowing section's answer across settings (from :mod:`tailmiss.studies.narrowing.settings`)."""

from __future__ import annotations

import math

from tailmiss.studies.narrowing.end_point import StudyAnswer
from tailmiss.studies.narrowing.plateau_claims import GAMMAS
from tailmiss.studies.narrowing.plateau_text import seed_range
from tailmiss.studies.narrowing.settings import SettingRow
from tailmiss.studies.rule import Verdict
from tailmiss.studies.text import table

__all__ = ["HEADING", "settings_lines", "cell"]

HEADING = "### Where is the focal weight more than a slower GRPO? Across settings (figure `focal-map`)"
_LOSES = {
    Verdict.REPRODUCED: "loses coverage",
    Verdict.REFUTED: "**does not lose coverage here**",
}


def cell(a: StudyAnswer | None, row: SettingRow) -> str:
    """``**yes** (dominates; pass@256 +0.041; seeds 15-44)``, or why no γ is judged."""
    if row.narrows != Verdict.REPRODUCED:
        return "— (no γ judged)"
    if a is None:
        return "— (not trained)"
    gain = f"pass@256 {a.end.pass256.mean:+.3f}" if a.end is not None else f"{' and '.join(a.late)} not plateaued"
    return f"**{a.word}** ({a.end_word}; {gain}; seeds {seed_range(a.seeds)})"


def _grpo(row: SettingRow) -> str:
    word = _LOSES.get(row.narrows, "cannot tell whether it loses coverage")
    cov = row.coverage()
    change = row.grpo.change
    numbers = f"{cov[0]:.3f} → {cov[1]:.3f}" if cov is not None else ""
    if change is not None and math.isfinite(change.mean):
        numbers += f" ({change.describe()})"
    return f"{word}: {numbers}" if numbers else word


def settings_lines(rows: list[SettingRow]) -> list[str]:
    """The part's markdown lines: the rules, then one row per setting (none with fewer than two settings: the study's
    own answer is given above)."""
    if len(rows) < 2:
        return []
    head = ["setting", "GRPO N = 8: held-out pass@256 SFT → end", *(f"γ = {g:g}" for g in GAMMAS)]
    body = [[f"{r.name} (`{r.family}`)", _grpo(r), *(cell(r.cells.get(g), r) for g in GAMMAS)] for r in rows]
    return [
        HEADING,
        "",
        "The study's recipe and arms (without the speed-matched one) at other settings of the task, at the study's "
        "learning rate (not tuned per setting), seeds 10-14. The rules were written with the presets, before any run "
        "(`tailmiss/experiments/narrowing_presets.py`): where GRPO N = 8 does not lose coverage (its final held-out "
        "pass@256 not lower than the SFT model's by the noise rule) no γ is judged; elsewhere each γ is set against "
        "GRPO at lr × m_γ by the plateau runs' rules, the three γ of a setting one Holm family. A cell gives whether "
        "F-GRPO is more than that slower GRPO, the end point's word and the end point's pass@256 difference.",
        "",
        table(head, body),
        "",
    ]
