"""The narrowing section's part "Is F-GRPO more than a slower GRPO?": the pass@1-pass@256 frontier, pair by pair,
and the study's answer (verdicts from :mod:`tailmiss.studies.narrowing.frontier` via
:mod:`tailmiss.studies.narrowing.claims`)."""

from __future__ import annotations

from tailmiss.studies.narrowing import claims as nc
from tailmiss.studies.text import table

__all__ = ["frontier_lines"]


def frontier_lines(c: nc.NarrowingClaims) -> list[str]:
    """The part's markdown lines from :class:`~tailmiss.studies.narrowing.claims.NarrowingClaims` ``c``."""
    word, main = nc.answer(c)
    rows = []
    for (a, b), v in c.frontier.items():
        levels = ", ".join(f"{x:.3f}" for x in v.levels) or "none (a run never raises pass@1)"
        diffs = "; ".join(f"{d.mean:+.3f} ({d.outcome})" for d in v.diffs) or "—"
        rows.append([f"{a} against {b}", levels, diffs, f"**{v.word}**"])
    later = c.plateau is not None
    heading = (
        "### The pass@1–pass@256 frontier at 400 steps (figure `focal-frontier.png`, upper row)"
        if later
        else "### Is F-GRPO more than a slower GRPO? The pass@1–pass@256 frontier (figure `focal-frontier.png`)"
    )
    out = [
        heading,
        "",
        *(
            [
                "The study's runs (seeds 0-9; GRPO N = 8's seeds 0-2 are the search's runs), read as the study read "
                "them before the plateau runs; the section's answer is read to the plateau, on fresh seeds, in the "
                "next part.",
                "",
            ]
            if later
            else []
        ),
        "Each run's held-out pass@256 is read where its pass@1 first reaches each of 5 levels, evenly spaced from "
        "the SFT model's pass@1 to the lowest pass@1 that every run of the pair reaches (fixed before any "
        "comparison). At each level the two rows are compared paired by seed by the noise rule, the levels one Holm "
        "family: *above* when some level is higher and none lower, *on* when none is resolved, *below*, *crosses*.",
        "",
        table(["pair", "matched pass@1 levels", "pass@256 difference at each level", "verdict"], rows),
        "",
    ]
    if main is not None:
        by_gamma = ", ".join(
            f"γ = {a.split('γ=')[1].split(' ')[0]} {v.word}"
            for (a, b), v in c.frontier.items()
            if a.startswith("F-GRPO") and b == nc.GRPO
        )
        where = (
            f"F-GRPO (γ = 0.5) lies **{word}**"
            if word != "cannot tell"
            else "**cannot tell** whether F-GRPO (γ = 0.5) lies above, on or below"
        )
        lead = "At 400 steps" if later else "**The answer**"
        out.append(f"{lead}: {where} GRPO N = 8's frontier: {main.describe()} (by γ: {by_gamma}). " + _low_lr_line(c))
        out.append("")
    return out


def _lies(word: str) -> str:
    """``lies above`` ..., or ``cannot be placed against`` for the frontier rule's *cannot tell*."""
    return "cannot be placed against" if word == "cannot tell" else f"lies {word}"


def _low_lr_line(c: nc.NarrowingClaims) -> str:
    low = c.frontier.get((nc.LOW_LR, nc.GRPO))
    against = c.frontier.get((nc.FOCAL, nc.LOW_LR))
    if low is None or against is None:
        return ""
    return (
        f"GRPO at the matched lower rate (lr × m_0.5, F-GRPO App. N) {_lies(low.word)} GRPO's frontier "
        f"({low.describe()}), and F-GRPO {_lies(against.word)} the low-LR runs' ({against.describe()})."
    )
