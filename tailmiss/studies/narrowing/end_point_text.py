"""The narrowing section's end point on enough fresh seeds, and the study's answer by γ (from
:mod:`tailmiss.studies.narrowing.end_point`)."""

from __future__ import annotations

from tailmiss.studies.narrowing.end_point import StudyAnswer
from tailmiss.studies.narrowing.end_point_seeds import END_POINT_MOST_SEEDS, END_POINT_POWER, SeedCount
from tailmiss.studies.narrowing.plateau import PASS1_BOUND
from tailmiss.studies.narrowing.plateau_claims import PlateauClaims
from tailmiss.studies.narrowing.plateau_text import arms_table, fall_sentence, pairs_table, seed_range

__all__ = ["HEADING", "end_point_lines", "answer_lines"]

HEADING = "### The end point on enough fresh seeds (preset `narrowing-endpoint`)"


def _count(count: SeedCount | None, seeds: tuple[int, ...]) -> str:
    """What the seed rule measured on seeds 10-14 and what it set."""
    if count is None:
        return f"These runs train seeds {seed_range(seeds)}."
    spreads = ", ".join(f"{p.sd_pass1:.3f} ({p.a} − {p.b})" for p in count.pairs)
    weakest = min(
        ((w, p) for p in count.pairs for w in count.power_at(p) if w is not None), key=lambda x: x[0], default=None
    )
    power = (
        f"; at {count.count} the weakest wanted test ({weakest[1].a} − {weakest[1].b}) has power {weakest[0]:.2f}"
        if weakest is not None
        else ""
    )
    rule = (
        f"the fewest seeds at which every wanted test reaches power {END_POINT_POWER}, at most {END_POINT_MOST_SEEDS}"
    )
    chosen = (
        f"**{count.count} fresh seeds** ({seed_range(count.seeds)})"
        if count.reached
        else f"none up to {END_POINT_MOST_SEEDS} does, so the count is the most, **{count.count} fresh seeds** "
        f"({seed_range(count.seeds)})"
    )
    return (
        f"On seeds 10-14 the end points' paired spread of pass@1 was too wide to show two arms the same point within "
        f"±{PASS1_BOUND}. A rule committed before these runs (`tailmiss.studies.narrowing.end_point_seeds`) read "
        f"that spread (the sd of the paired pass@1 differences: {spreads}) and asks for {rule}: {chosen}{power}. "
        f"These runs train GRPO N = 8, F-GRPO γ = 0.5 and 1 and GRPO at lr × m_0.5 and lr × m_1 on seeds "
        f"{seed_range(seeds)} with the plateau runs' recipe, and are read by the plateau runs' rules on these seeds "
        "alone (the reading in `tailmiss/studies/narrowing/end_point.py`, written "
        "before any of them was read): each comparison's two γ one Holm family."
    )


def end_point_lines(e: PlateauClaims | None, count: SeedCount | None) -> list[str]:
    """The part's markdown lines (none without the end-point runs)."""
    if e is None:
        return []
    out = [HEADING, "", _count(count, e.seeds), ""]
    fall = fall_sentence(e)
    if fall:
        out += [fall, ""]
    return out + arms_table(e) + pairs_table(e)


def answer_lines(answers: list[StudyAnswer]) -> list[str]:
    """**The study's answer, by γ**: one sentence per γ, each pair's words and numbers and the runs it rests on."""
    if not answers:
        return []
    by_gamma: dict[float, list[StudyAnswer]] = {}
    for a in answers:
        by_gamma.setdefault(a.gamma, []).append(a)
    out = [
        "**The study's answer, by γ** (is F-GRPO more than a slower GRPO? each pair from the runs with the most "
        "seeds that train it; the ledger reads γ = 0.5 against GRPO at lr × m_0.5, the paper's control):",
        "",
    ]
    out += [f"- γ = {g:g}: " + "; ".join(a.sentence() for a in group) + "." for g, group in by_gamma.items()]
    return out + [""]
