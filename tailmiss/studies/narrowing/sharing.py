"""Why it narrows: the ladder on the narrowing task (a table policy, a factorized one and the transformer).

Every rung starts from the study's SFT model (a table or factorized policy holds its exact per-prompt answer
distributions, :func:`tailmiss.experiments.ladder.derive_policy`), trains on a fixed pool of 64 prompts that is also
its evaluation set, and is read by prompt type. The table is the categorical simulator's policy: one softmax per
prompt, so an update on one prompt moves no other. If narrowing comes from shared parameters (the rest's update
teaching "use the listed digits" everywhere, the minority's correct answers included), the table keeps the minority's
coverage and the transformer loses it.

**Rules** (the report's noise rule, :mod:`tailmiss.studies.rule`): a rung *narrows* a prompt type when the type's
final pass@256 is *lower* than the SFT model's, per seed (paired: every seed starts from the SFT model), and *does not
narrow* when it is shown *not lower* (within the margin, or higher); a tie shows neither (*cannot tell*, as too few
seeds); the focal weight's effect on a rung is F-GRPO (γ = 1) − GRPO on the type's final pass@256, paired by seed
(:func:`tailmiss.studies.rule.compare`), every rung and type of one ladder one Holm family
(:func:`tailmiss.studies.rule.holm`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from tailmiss.studies.rule import Difference, Sentence, Verdict, compare, compare_values, holm, judge

__all__ = ["RUNG_NAMES", "SharingClaims", "sharing_claims", "simulator_by_type", "narrowing", "narrows_word"]

RUNG_NAMES = {"table": "table (the simulator's policy)", "factorized": "factorized", "transformer": "transformer"}
"""The rungs' models, in the ladder's order."""


@dataclass(frozen=True)
class SharingClaims:
    """The ladder's table (one row per rung, γ and prompt type: SFT and final pass@1 / pass@256, the change, whether
    it narrows), the focal weight's effect per rung and type, and the answer to "does narrowing need shared
    parameters?" (the transformer narrows the minority and the table does not)."""

    table: pd.DataFrame
    focal: dict
    """``(rung, type) -> Difference`` (F-GRPO γ = 1 − GRPO, final pass@256), every rung and type one Holm family."""
    needs_sharing: bool | None
    """From :attr:`needs`: True when it is reproduced, False when refuted, else None (a rung missing, a tie, too few
    seeds)."""
    needs: Sentence | None = None
    """"Narrowing needs shared parameters": the transformer's minority final − SFT pass@256 *lower* and the table's
    *not lower*, one Holm family."""
    steps: int = 0
    """The ladder's RL steps (its last evaluation)."""


def narrowing(d: Difference) -> Verdict:
    """Does a type narrow, from ``d`` (final − SFT pass@256, paired by seed)? *reproduced* when it is *lower*,
    *refuted* when it is shown *not lower* (it keeps or widens), else *cannot tell* (a tie, too few seeds)."""
    if judge("narrows", [(d, "lower")]).verdict == Verdict.REPRODUCED:
        return Verdict.REPRODUCED
    if judge("keeps", [(d, "not lower")]).verdict == Verdict.REPRODUCED:
        return Verdict.REFUTED
    return Verdict.CANNOT_TELL


def narrows_word(verdict) -> str:
    """A table cell for "does it narrow?": ``yes``, a bold ``**no**`` (shown not to), or ``cannot tell`` (a tie or
    too few seeds: never a *no*)."""
    return {Verdict.REPRODUCED: "yes", Verdict.REFUTED: "**no**"}.get(verdict, "cannot tell")


def _rows(rung: str, typed: pd.DataFrame) -> list[dict]:
    last = typed.groupby(["label", "seed"])["step"].transform("max")
    out = []
    for (label, kind), part in typed.groupby(["label", "type"], sort=False):
        start = part[part["step"] == 0].groupby("seed")[["mu_pos", "pass256"]].mean()
        end = part[part["step"] == last.loc[part.index]].groupby("seed")[["mu_pos", "pass256"]].mean()
        change = end["pass256"] - start["pass256"]
        sd = float(end["pass256"].std(ddof=1)) if len(end) > 1 else float("nan")
        seeds = end.index.intersection(start.index)
        d = compare_values(end.loc[seeds, "pass256"], start.loc[seeds, "pass256"], "pass256", paired=True,
                           labels=(f"{label} final", "SFT"))  # fmt: skip
        out.append(
            {
                "rung": rung,
                "label": label,
                "type": kind,
                "seeds": len(end),
                "sft_pass1": float(start["mu_pos"].mean()),
                "final_pass1": float(end["mu_pos"].mean()),
                "sft_pass256": float(start["pass256"].mean()),
                "final_pass256": float(end["pass256"].mean()),
                "final_pass256_sd": sd,
                "change256": float(change.mean()),
                "change": d,
                "narrows": narrowing(d),
            }
        )
    return out


def _final(typed: pd.DataFrame, kind: str) -> pd.DataFrame:
    part = typed[typed["type"] == kind]
    last = part.groupby(["label", "seed"])["step"].transform("max")
    return part[part["step"] == last]


def sharing_claims(ladder: dict) -> SharingClaims:
    """The ladder's claims from ``ladder`` (rung name -> :func:`tailmiss.experiments.prompt_types.by_type` of its
    runs)."""
    rows, focal = [], {}
    for rung, typed in ladder.items():
        rows += _rows(rung, typed)
        labels = set(typed["label"])
        if {"GRPO N=8", "F-GRPO γ=1 N=8"} <= labels:
            for kind in ("minority", "rest"):
                final = _final(typed, kind)
                focal[(rung, kind)] = compare(final, "F-GRPO γ=1 N=8", "GRPO N=8", "pass256")
    focal = dict(zip(focal, holm(focal.values()), strict=True))  # every rung and type: one family
    table = pd.DataFrame(rows)
    needs = None
    kinds = {r.split("-")[0]: r for r in ladder}
    if {"table", "transformer"} <= set(kinds) and len(table):
        minority = table[(table["type"] == "minority") & (table["label"] == "GRPO N=8")].set_index("rung")
        if {kinds["table"], kinds["transformer"]} <= set(minority.index):
            parts = [
                (minority.loc[kinds["transformer"], "change"], "lower"),
                (minority.loc[kinds["table"], "change"], "not lower"),
            ]
            needs = judge(
                "narrowing needs shared parameters: the transformer narrows the minority, the table does not", parts
            )
    answer = None if needs is None else {Verdict.REPRODUCED: True, Verdict.REFUTED: False}.get(needs.verdict)
    steps = max((int(t["step"].max()) for t in ladder.values() if len(t)), default=0)
    return SharingClaims(table, focal, answer, needs=needs, steps=steps)


def simulator_by_type(bridge: pd.DataFrame) -> pd.DataFrame:
    """The categorical simulator beside the transformer, by prompt type and N (γ = 0): the SFT model's ``mu_pos0``
    and the final ``q_pos`` (the correct mass) and ``retained_mass``, means over the type's prompts, then seed mean
    and sd; one row per source, N and type."""
    rows = bridge[bridge["gamma"] == 0]
    keys = ["source", "group_size", "type"]
    per_seed = rows.groupby([*keys, "seed"], as_index=False)[["mu_pos0", "q_pos", "retained_mass"]].mean()
    g = per_seed.groupby(keys)[["mu_pos0", "q_pos", "retained_mass"]]
    return g.mean().join(g.std(ddof=1).add_suffix("_sd")).join(g.size().rename("seeds")).reset_index()


def describe(d: Difference) -> str:
    """``+0.012 (paired t, df 2, p 0.3) → tie``."""
    return f"{d.describe()} → {d.outcome}"
