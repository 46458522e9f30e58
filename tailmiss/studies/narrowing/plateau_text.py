"""The narrowing section's answer to "is F-GRPO more than a slower GRPO?", from the plateau runs (verdicts from
:mod:`tailmiss.studies.narrowing.plateau_claims`)."""

from __future__ import annotations

import numpy as np

from tailmiss.analytic import lr_matched_scale
from tailmiss.studies.narrowing.plateau import (
    PASS1_BOUND,
    PASS256_BOUND,
    PLATEAU_GAIN,
    PLATEAU_LEVELS,
    PLATEAU_QUARTER,
)
from tailmiss.studies.narrowing.plateau_claims import (
    COMPARISONS,
    PLATEAU_GRPO,
    SLOWER,
    SPEED,
    PlateauClaims,
    focal,
    seed_summary,
)
from tailmiss.studies.rule import Verdict
from tailmiss.studies.text import table

__all__ = ["HEADING", "plateau_lines", "answer_sentence", "arms_table", "pairs_table", "fall_sentence", "seed_range"]

HEADING = "### Is F-GRPO more than a slower GRPO? The frontier to the plateau, on fresh seeds"
"""The part's heading (figure ``focal-frontier.png``, lower row)."""
_SCALE = {
    PLATEAU_GRPO: "lr",
    **{SLOWER[g]: f"lr × m_{g:g} = {lr_matched_scale(g):.3f} lr" for g in SLOWER},
}


def _ms(mean: float, sd: float) -> str:
    return f"{mean:.3f}" if not np.isfinite(sd) else f"{mean:.3f}±{sd:.3f}"


def seed_range(seeds) -> str:
    """``10-14`` for a run of consecutive seeds (three or more), else the seeds listed."""
    seeds = sorted(seeds)
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def arms_table(p: PlateauClaims) -> list[str]:
    """Every arm's rate, end point (seed mean ± sd), final pass@256 by prompt type and plateau check."""
    scale = dict(_SCALE)
    if SPEED in p.rates:
        scale[SPEED] = f"lr × {p.rates[SPEED]:g} (speed-matched)"
    typed = p.regime.set_index(["label", "type"]) if len(p.regime) else None
    rows = []
    for label, check in p.checks.items():
        cells = [_ms(*seed_summary(p.points, label, m)) for m in ("pass1", "pass256")]
        for kind in ("minority", "rest"):
            have = typed is not None and (label, kind) in typed.index
            cells.append(_ms(typed.loc[(label, kind), "final_pass256"], np.nan) if have else "—")
        rows.append([label, scale.get(label, "lr"), *cells, check.describe()])
    return [
        table(
            ["arm", "rate", "pass@1 (end)", "pass@256 (end)", "minority pass@256", "rest pass@256", "plateau"],
            rows,
        ),
        "",
    ]


def _not_judged(p: PlateauClaims, pair) -> str:
    """``not judged: GRPO N=8 low-LR-m2 has not plateaued``."""
    late = [x for x in pair if not p.checks[x].plateaued]
    return f"not judged: {' and '.join(late)} {'have' if len(late) > 1 else 'has'} not plateaued"


def pairs_table(p: PlateauClaims) -> list[str]:
    """Every pair's frontier, end point and reading, comparison by comparison."""
    rows = []
    for name, pairs in COMPARISONS.items():
        for pair in pairs:
            if pair not in p.frontiers:
                continue
            end = p.ends.get(pair)
            rows.append(
                [
                    f"{pair[0]} − {pair[1]}",
                    name,
                    p.frontiers[pair].describe(),
                    end.describe() if end is not None else _not_judged(p, pair),
                    f"**{p.answers[pair]}**",
                ]
            )
    return [
        table(
            ["pair", "against", "frontier (levels to the plateau)", "end point", "F-GRPO more than this GRPO?"], rows
        ),
        "",
    ]


def answer_sentence(p: PlateauClaims, gamma: float) -> str:
    """``γ = 1: yes against GRPO at lr × m_1 (...), ...``: one γ's answers against each slower GRPO, with the words
    behind them."""
    parts = []
    for name, pairs in COMPARISONS.items():
        for pair in pairs:
            if pair[0] != focal(gamma) or pair not in p.answers:
                continue
            f = p.frontiers[pair]
            span = f"pass@1 {f.covered[0]:.3f}-{f.covered[1]:.3f}" if f.levels else "no level"
            parts.append(
                f"**{p.answers[pair]}** against {name} (frontier {f.word} over {span}; end point {p.end_word(pair)})"
            )
    return f"γ = {gamma:g}: " + "; ".join(parts) + "." if parts else ""


def plateau_lines(p: PlateauClaims | None) -> list[str]:
    """The part's markdown lines (none without plateau runs: the first look has none)."""
    if p is None:
        return []
    return [HEADING, "", *_intro(p), *_tables(p, fall_sentence(p)), *_answers(p)]


def _intro(p: PlateauClaims) -> list[str]:
    """The runs, the seeds and the rules, as the preset's docstring states them."""
    return [
        "The 400-step runs above stop below the plateau where the arms separate, and GRPO N = 8's seeds 0-2 there are "
        "the search's runs that picked the regime (its strength-0.5 runs have the study's configs). These runs "
        "(preset `narrowing-plateau`) carry the frontier's arms to their plateau from the same SFT model: GRPO, "
        "F-GRPO γ = 0.5, 1, 2, and GRPO at the slower rates lr × m_γ (F-GRPO App. N's scale, one per γ) and at the "
        "rate matched to F-GRPO γ = 1's pass@1 speed, all at N = 8, "
        f"{p.steps} steps, held-out pass@1 and pass@256 scored exactly every 20 steps, on seeds {seed_range(p.seeds)}"
        + (
            ", which no earlier run used (the search used 0-2, the study 0-9, its controls 0-4). "
            if min(p.seeds, default=0) >= 10
            else " (**not** fresh: earlier runs used seeds 0-9; a stand-in sweep, not the study's). "
        )
        + "The rules were committed "
        "before the runs (the docstring of `tailmiss/experiments/narrowing_presets.py`), with two amendments the "
        "docstring of `tailmiss/studies/narrowing/plateau.py` states: an arm has *plateaued* when its per-seed "
        f"pass@1 gains over the last {PLATEAU_QUARTER:.0%} of its steps are shown not higher than +{PLATEAU_GAIN} by "
        "the noise rule's one-sided test (amended on 2026-12-06, **after** these seeds were first trained and read "
        "on another host: as first written the seed-mean gain was compared with the margin without a test, and "
        "+0.0052 and +0.0048 read apart on noise); "
        f"the frontier is read at {PLATEAU_LEVELS} pass@1 levels up to the highest pass@1 that three seeds reach in "
        "both arms (amended before any of these runs was read), each level on "
        "the seeds that reach it (the levels one Holm family); at the *end point* (each "
        f"run's final evaluation) pass@1 is *equivalent* when two one-sided paired t-tests exclude ±{PASS1_BOUND} "
        f"and pass@256 is judged by the noise rule (and *same* within ±{PASS256_BOUND}), the three γ of one "
        "comparison one Holm family: a *dominates* b with pass@256 higher and pass@1 equivalent or higher, *is "
        "dominated* with pass@256 lower and pass@1 equivalent or lower, *same point* with both equivalent, *cannot "
        "tell* otherwise. *More than a slower GRPO?* reads the two together: *yes* when the end point dominates and "
        "the frontier is nowhere below, *no* when it is the same point or dominated and the frontier is nowhere "
        "above, *partly* when they disagree or the frontier is above while the end points cannot be compared.",
        "",
    ]


def fall_sentence(p: PlateauClaims) -> str:
    """GRPO N = 8's fall on the fresh seeds (the regime checked on seeds the search never saw)."""
    if not len(p.regime):  # read without the runs' scores by prompt type
        return ""
    whole = p.regime[(p.regime["label"] == PLATEAU_GRPO) & (p.regime["type"] == "all")]
    if not len(whole):
        return ""
    w = whole.iloc[0]
    g8 = p.regime[p.regime["label"] == PLATEAU_GRPO].set_index("type")
    types = (
        f" (minority {g8.loc['minority', 'sft_pass256']:.3f} → {g8.loc['minority', 'final_pass256']:.3f}, "
        f"rest {g8.loc['rest', 'sft_pass256']:.3f} → {g8.loc['rest', 'final_pass256']:.3f})"
        if {"minority", "rest"} <= set(g8.index)
        else ""
    )
    word = {
        Verdict.REPRODUCED: ": it narrows on seeds the search never saw",
        Verdict.REFUTED: ": it does **not** narrow here (shown not lower)",
    }.get(p.narrows, ": the noise rule cannot tell whether it narrows here")
    change = f" ({p.change.a} − {p.change.b} {p.change.describe()}: {p.change.outcome})" if p.change is not None else ""
    return (
        f"On these seeds GRPO N = 8 takes held-out pass@256 from {w['sft_pass256']:.3f} (SFT) to "
        f"{_ms(w['final_pass256'], w['final_pass256_sd'])} at step {p.steps}{types}{word}{change}."
    )


def _tables(p: PlateauClaims, fall: str) -> list[str]:
    """The fall on these seeds, every arm's end point, and every pair's words."""
    out = []
    if fall:
        out += [fall, ""]
    out += arms_table(p)
    out += pairs_table(p)
    return out


def _answers(p: PlateauClaims) -> list[str]:
    """One sentence per γ (:func:`answer_sentence`)."""
    out = []
    sentences = [answer_sentence(p, g) for g in SLOWER]
    sentences = [s for s in sentences if s]
    if sentences:
        out.append(
            f"**On seeds {seed_range(p.seeds)}, by γ** (each against the slower GRPO runs; where the end-point runs "
            "below train a pair, the study's answer is theirs):"
        )
        out.append("")
        out += [f"- {s}" for s in sentences]
        out.append("")
    return out
