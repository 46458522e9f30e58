"""The narrowing section's part "Why it narrows": the ladder on the narrowing task and the categorical simulator
beside the transformer, by prompt type (numbers from :mod:`tailmiss.studies.narrowing.sharing`)."""

from __future__ import annotations

import numpy as np

from tailmiss.studies.narrowing.sharing import RUNG_NAMES, narrows_word
from tailmiss.studies.narrowing.sharing import describe as describe_difference
from tailmiss.studies.text import table

__all__ = ["sharing_lines"]


def _ms(mean: float, sd: float, digits: int = 3) -> str:
    return f"{mean:.{digits}f}" if not np.isfinite(sd) else f"{mean:.{digits}f}±{sd:.{digits}f}"


def sharing_lines(c) -> list[str]:
    """The part's markdown lines from :class:`~tailmiss.studies.narrowing.claims.NarrowingClaims` ``c``."""
    sh = c.sharing
    if sh.table.empty:
        return []
    rows = []
    for r in sh.table[sh.table["type"] != "all"].itertuples():
        model = RUNG_NAMES.get(r.rung.split("-")[0], r.rung)
        rows.append(
            [
                model,
                r.label,
                r.type,
                f"{r.sft_pass1:.3f} → {r.final_pass1:.3f}",
                f"{r.sft_pass256:.3f} → {_ms(r.final_pass256, r.final_pass256_sd)}",
                f"{r.change256:+.3f}",
                narrows_word(r.narrows),
                str(r.seeds),
            ]
        )
    focal = [
        f"{RUNG_NAMES.get(rung.split('-')[0], rung)}, {kind}: {describe_difference(d)}"
        for (rung, kind), d in sh.focal.items()
    ]
    needs = "" if sh.needs is None else f" ({sh.needs.cell()})"
    answer = {
        True: "**yes**: the transformer narrows the minority and the table does not",
        False: "**no**: the table narrows the minority too, or the transformer is shown not to",
        None: "cannot tell (a rung is missing, a tie, or too few seeds)",
    }[sh.needs_sharing] + needs
    return [
        "### Why it narrows: the ladder on the narrowing task, and what the simulator predicts",
        "",
        "The table (the categorical simulator's policy: one softmax per prompt), the factorized policy and the "
        f"transformer, each from the {'first look' if c.quick else 'study'}'s SFT model (exact per-prompt "
        f"distributions), trained {sh.steps} steps on "
        "a fixed pool of 64 prompts that is also the evaluation set, GRPO and F-GRPO (γ = 1) at N = 8. A type "
        "*narrows* when its final pass@256 is lower than the SFT model's by the noise rule (paired by seed), does not "
        "when it is shown not lower (within the margin), and a tie or too few seeds cannot tell.",
        "",
        table(["policy", "run", "prompts", "pass@1", "pass@256", "change", "narrows", "seeds"], rows),
        "",
        f"Does narrowing need shared parameters? {answer}. The focal weight (F-GRPO − GRPO, final pass@256; every "
        "rung and type one Holm family): " + "; ".join(focal) + ".",
        "",
        *_simulator(c),
    ]


def _simulator(c) -> list[str]:
    t = c.simulator
    if t is None:
        return [
            "The categorical simulator's per-prompt prediction beside the transformer (the bridge by prompt type) is "
            "in the full study only: it scores every run's 256 held-out prompts over all 1,000 answers and simulates "
            "each prompt, more than the rest of this quick section costs.",
            "",
        ]
    if t.empty:
        return []
    rows = [
        [
            "simulator" if r.source == "sim" else "transformer",
            f"N = {r.group_size}",
            r.type,
            f"{r.mu_pos0:.3f} → {_ms(r.q_pos, r.q_pos_sd)}",
            _ms(r.retained_mass, r.retained_mass_sd),
            str(int(r.seeds)),
        ]
        for r in t.sort_values(["type", "group_size", "source"]).itertuples()
    ]
    return [
        "The categorical simulator (`tailmiss.experiments.bridge`: one categorical policy per held-out prompt over "
        "its 1,000 answers, started from the SFT model's exact distribution and updated by the same GRPO step, Adam "
        "on the logits at lr 1e-2) beside the transformer's runs of the study, by prompt type (GRPO):",
        "",
        table(["source", "N", "prompts", "correct mass SFT → final", "M_ret", "seeds"], rows),
        "",
    ]
