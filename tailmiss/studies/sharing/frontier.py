"""The frontier on the narrowing ladder's pool: is F-GRPO more than a slower GRPO for the shared rung, its simulator
and the transformer?

Runs: ``narrowing-ladder-frontier`` (the shared rung and the transformer, GRPO and F-GRPO γ = 1 at N = 8 at their
rates) and ``narrowing-ladder-frontier-low`` (GRPO at half their rates: F-GRPO App. N's :math:`m_1`), 1,600 steps on
the ladder's pool, seeds 10-14; the shared simulator the same arms from the shared rung's start on its own 20 seeds.
Judged on all of the pool's prompts by the narrowing study's plateau rules (:mod:`tailmiss.studies.narrowing.plateau`)
and :data:`RULES`, written before any of these runs (2026-12-03).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from tailmiss.studies.narrowing.plateau import (
    EndPointVerdict,
    PlateauCheck,
    PlateauFrontier,
    end_point_family,
    plateau_frontier,
    plateaued,
)

__all__ = ["RULES", "FOCAL", "GRPO", "LOW", "PAIRS", "FrontierRow", "plateau_history", "frontier_rows", "reproduces"]

FOCAL, GRPO, LOW = "F-GRPO γ=1 N=8", "GRPO N=8", "GRPO N=8 low-LR"
"""The arms: F-GRPO γ = 1, GRPO, and GRPO at half the rate (F-GRPO App. N's m_1), all at N = 8."""
PAIRS = ((FOCAL, GRPO), (FOCAL, LOW))
"""The comparisons, each read F-GRPO − the other; one Holm family per policy."""
RESOLVED = ("above", "below", "crosses")
"""Frontier words that a resolved level stands behind."""
RULES = (
    "**Rules for the frontier** (written before its runs): the shared rung and the transformer train GRPO and F-GRPO "
    "(γ = 1) at N = 8 at their rates, and GRPO at half the rate (F-GRPO App. N's m_1 = 0.5: *low-LR*), 1,600 steps on "
    "the ladder's pool, scored every 20 steps, seeds 10-14 (presets `narrowing-ladder-frontier` and "
    "`narrowing-ladder-frontier-low`); the shared simulator runs the same arms from the shared rung's start on its 20 "
    "seeds. Per policy, on all 64 prompts, F-GRPO against GRPO and against GRPO low-LR (one Holm family) by the "
    "narrowing study's plateau rules: whether each arm has plateaued (its per-seed pass@1 gain over the last quarter "
    "shown below 0.005 by the noise rule), the *frontier* word at 8 matched pass@1 levels up to the highest pass@1 "
    "three seeds reach in both arms (above, on, below, crosses, cannot tell; *on* means no level resolved, not "
    "equal), and the *end-point* word when both arms have plateaued (dominates, is dominated, same point: pass@1 "
    "within ±0.02 and pass@256 within ±0.01 by two one-sided tests; cannot tell). A policy *reproduces the "
    "transformer's frontier answer* on a pair when the transformer's frontier word is resolved (above, below or "
    "crosses) and its end point is judged (not *cannot tell*), and the policy's two words are the transformer's; *no* "
    "when a word of the policy's is judged and differs; *cannot tell* otherwise, a word of the policy's not judged "
    "included. Amended 2026-12-06, after the runs, as the report's rule requires of every section: the plateau is a "
    "test (it was the seed mean against 0.005), the levels rise to what three seeds reach in both arms (it was three "
    "of each), and a missing judgement of the policy's reads *cannot tell* (it read *no*)."
)
"""The rules, in the report's words."""


def plateau_history(typed: pd.DataFrame) -> pd.DataFrame:
    """A by-type frame (:func:`tailmiss.studies.narrowing.data.by_type`) over all prompts in the plateau rules' form
    (``label``, ``seed``, ``step``, ``mu_pos``, ``exact_pass_at_256``)."""
    part = typed[typed["type"] == "all"]
    return part[["label", "seed", "step", "mu_pos"]].assign(exact_pass_at_256=part["pass256"].to_numpy())


@dataclass(frozen=True)
class FrontierRow:
    """One policy's comparison of one pair: the arms' plateau checks, the frontier and the end point (None when an
    arm has not plateaued)."""

    policy: str
    a: str
    b: str
    plateau: tuple[PlateauCheck, PlateauCheck]
    frontier: PlateauFrontier
    end: EndPointVerdict | None

    @property
    def end_word(self) -> str:
        return self.end.word if self.end is not None else "not judged (an arm has not plateaued)"


def frontier_rows(policies: dict) -> list[FrontierRow]:
    """Every policy's :data:`PAIRS` from ``policies`` (name → its :func:`plateau_history`, holding the three arms;
    a policy without them is left out)."""
    rows = []
    for name, history in policies.items():
        if not {FOCAL, GRPO, LOW} <= set(history["label"]):
            continue
        checks = {label: plateaued(history, label) for label in (FOCAL, GRPO, LOW)}
        judged = [p for p in PAIRS if checks[p[0]].plateaued and checks[p[1]].plateaued]
        ends = dict(zip(judged, end_point_family(history, judged))) if judged else {}
        for a, b in PAIRS:
            rows.append(
                FrontierRow(name, a, b, (checks[a], checks[b]), plateau_frontier(history, a, b), ends.get((a, b)))
            )
    return rows


def reproduces(mine: FrontierRow, theirs: FrontierRow) -> bool | None:
    """Whether ``mine`` reproduces ``theirs`` (the transformer's answer on the same pair) by :data:`RULES` (None:
    cannot tell)."""
    if theirs.frontier.word not in RESOLVED or theirs.end is None or theirs.end.word == "cannot tell":
        return None
    if mine.frontier.word in RESOLVED and mine.frontier.word != theirs.frontier.word:
        return False
    if mine.end is not None and mine.end.word != "cannot tell" and mine.end.word != theirs.end.word:
        return False
    if mine.frontier.word not in RESOLVED or mine.end is None or mine.end.word == "cannot tell":
        return None  # a word of the policy's not judged: cannot tell, never no
    return True
