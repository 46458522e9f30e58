r"""The counterfactual pool: what the minority loses when RL never trains on it, by a rule written before its runs.

The attribution (:mod:`tailmiss.experiments.attribution`) reads one step: at the SFT model the rest's groups push the
held-out minority's correct mass down and the minority's own groups lift it. The counterfactual pool asks the same of
whole runs. GRPO and F-GRPO γ = 1 at N = 8 are trained with the study's recipe, SFT model and seeds 0-4 on the
rest's training prompts alone (``RLConfig.train_types = ("rest",)``; preset ``narrowing-counterfactual``, tag
``rest-only``). The study's runs of the same arm and seed (``narrowing``) trained on both types. Both score the same
held-out prompts, the minority's included (``eval_seed`` 0).

The rule, committed before the runs:

* *Loss.* A run's minority loss is the SFT model's held-out minority pass@256 minus the run's at its last
  evaluation (step 400). :math:`L_{with}` is the study's run, :math:`L_{without}` the counterfactual run, per arm and
  seed.
* *Remaining share.* :math:`\bar L_{without} / \bar L_{with}` over the five seeds: the share of the minority's loss
  that remains when it is never trained on. It is reported, not judged.
* *Word.* Per arm, the minority's final pass@256, *without − with*, paired by seed, is judged by the report's noise
  rule (:mod:`tailmiss.studies.rule`, pass@k's threshold 0.01); the two arms form one Holm family:

  * *lower*: "the minority loses more without its own prompts" (its own groups held part of it up);
  * *higher*: "it loses less without them" (its own groups pushed it down too);
  * otherwise, Schuirmann's two one-sided paired tests within ±0.01 (Holm over the two arms) showing the difference
    inside the bound: "it loses as much without them" (the rest's groups account for the loss);
  * else *cannot tell*.

* The minority's pass@1 and the rest's pass@256 are reported beside the word, and are not part of it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tailmiss.studies.equivalence import EquivalenceOutcome, equivalent_values, holm_equivalence
from tailmiss.studies.rule import Outcome, compare_values, holm

__all__ = [
    "COUNTERFACTUAL",
    "ARMS",
    "TAG",
    "BOUND",
    "counterfactual_rows",
    "counterfactual_table",
    "counterfactual_lines",
    "HEADING",
    "counterfactual_part",
]

COUNTERFACTUAL = "narrowing-counterfactual"
"""The counterfactual runs' family."""
ARMS = ("GRPO N=8", "F-GRPO γ=1 N=8")
"""The study's arms that the counterfactual pool trains again without the minority."""
TAG = "rest-only"
"""The counterfactual arms' tag: ``"<arm> rest-only"``."""
HEADING = "### Where the minority's loss comes from: the counterfactual pool"
"""The part's heading."""
BOUND = 0.01
"""The equivalence bound of the minority's final pass@256 (pass@k's practical threshold)."""
_WORDS = {
    "lower": "the minority loses more without its own prompts",
    "higher": "the minority loses less without its own prompts",
    "same": "the minority loses as much without its own prompts",
    "cannot tell": "cannot tell",
}


def _last(typed: pd.DataFrame, label: str, kind: str) -> pd.DataFrame:
    rows = typed[(typed["label"] == label) & (typed["type"] == kind)]
    return rows[rows["step"] == rows.groupby("seed")["step"].transform("max")].set_index("seed").sort_index()


def counterfactual_rows(study: pd.DataFrame, counterfactual: pd.DataFrame) -> pd.DataFrame:
    """One row per arm of :data:`ARMS` and seed both sweeps ran: the SFT model's (``sft``, ``sft_pass1``), the study
    run's (``*_with``) and the counterfactual run's (``*_without``) held-out minority pass@256 and pass@1 at their last
    evaluation, and the rest's pass@256 (``rest_*``).

    Parameters
    ----------
    study, counterfactual : DataFrame
        :func:`tailmiss.experiments.prompt_types.by_type` of the study's sweep (``narrowing``) and of
        :data:`COUNTERFACTUAL`: ``label, seed, step, type, mu_pos, pass256``.
    """
    out = []
    for arm in ARMS:
        start = study[(study["label"] == arm) & (study["step"] == 0)].set_index(["seed", "type"])
        parts = {
            (side, kind): _last(frame, label, kind)
            for side, frame, label in (("with", study, arm), ("without", counterfactual, f"{arm} {TAG}"))
            for kind in ("minority", "rest")
        }
        seeds = sorted(set(parts["with", "minority"].index) & set(parts["without", "minority"].index))
        for seed in seeds:
            row = {"arm": arm, "seed": int(seed), "sft": float(start.loc[(seed, "minority"), "pass256"])}
            for side in ("with", "without"):
                row[f"pass256_{side}"] = float(parts[side, "minority"].loc[seed, "pass256"])
                row[f"pass1_{side}"] = float(parts[side, "minority"].loc[seed, "mu_pos"])
                row[f"rest_{side}"] = float(parts[side, "rest"].loc[seed, "pass256"])
            row["sft_pass1"] = float(start.loc[(seed, "minority"), "mu_pos"])
            out.append(row)
    return pd.DataFrame(out)


def counterfactual_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per arm (module docstring): seeds, the means of ``sft``, ``pass256_with`` and ``pass256_without``, the
    losses and the share remaining, the paired difference *without − with* (``diff``, Holm over the arms), its
    equivalence within :data:`BOUND` (``same``), the ``word``, and the minority's pass@1 and the rest's pass@256
    means beside."""
    arms = [a for a in ARMS if a in set(rows["arm"])]
    subs = [rows[rows["arm"] == a].sort_values("seed") for a in arms]
    diffs = holm(
        compare_values(s["pass256_without"], s["pass256_with"], "pass256", paired=True, labels=(f"{a} {TAG}", a))
        for a, s in zip(arms, subs)
    )
    sames = holm_equivalence(
        equivalent_values(s["pass256_without"], s["pass256_with"], "pass256", BOUND, labels=(f"{a} {TAG}", a))
        for a, s in zip(arms, subs)
    )
    out = []
    for arm, s, d, e in zip(arms, subs, diffs, sames):
        loss_with, loss_without = (
            float((s["sft"] - s["pass256_with"]).mean()),
            float((s["sft"] - s["pass256_without"]).mean()),
        )
        if d.outcome in (Outcome.HIGHER, Outcome.LOWER):
            word = str(d.outcome)
        elif e.outcome == EquivalenceOutcome.EQUIVALENT:
            word = "same"
        else:
            word = "cannot tell"
        out.append(
            {
                "arm": arm,
                "seeds": len(s),
                "sft": float(s["sft"].mean()),
                "pass256_with": float(s["pass256_with"].mean()),
                "pass256_without": float(s["pass256_without"].mean()),
                "loss_with": loss_with,
                "loss_without": loss_without,
                "remaining": loss_without / loss_with if loss_with > 0 else math.nan,
                "diff": d,
                "same": e,
                "word": word,
                "pass1_with": float(s["pass1_with"].mean()),
                "pass1_without": float(s["pass1_without"].mean()),
                "rest_with": float(s["rest_with"].mean()),
                "rest_without": float(s["rest_without"].mean()),
            }
        )
    return pd.DataFrame(out)


def counterfactual_lines(table: pd.DataFrame) -> list[str]:
    """The section's part: one table row per arm and one sentence per arm with its word and numbers."""
    lines = [
        "| arm | seeds | SFT | with the minority | without it | loss with | loss without | share remaining "
        "| without − with | minority pass@1 with / without | rest pass@256 with / without |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        remaining = "n/a (no loss)" if np.isnan(r.remaining) else f"{r.remaining:.2f}"
        lines.append(
            f"| {r.arm} | {r.seeds} | {r.sft:.3f} | {r.pass256_with:.3f} | {r.pass256_without:.3f} "
            f"| {r.loss_with:+.3f} | {r.loss_without:+.3f} | {remaining} | {r.diff.describe()} | {r.pass1_with:.3f} / "
            f"{r.pass1_without:.3f} | {r.rest_with:.3f} / {r.rest_without:.3f} |"
        )
    lines.append("")
    for r in table.itertuples():
        lines.append(
            f"* **{r.arm}: {_WORDS[r.word]}.** Without − with, minority pass@256: {r.diff.describe()}; "
            f"equivalence within ±{BOUND:g}: {r.same.describe()}."
        )
    if len(table) > 1:
        arms = " and ".join(f"{r.pass256_with:.3f} under {r.arm}" for r in table.itertuples())
        bare = " and ".join(f"{r.pass256_without:.3f}" for r in table.itertuples())
        lines += [
            "",
            f"Side by side (described, not judged): trained on both types the minority ends at {arms}; trained on "
            f"the rest alone, at {bare}.",
        ]
    return lines


def counterfactual_part(table: pd.DataFrame | None) -> list[str]:
    """The section's part (none without the table: the first look trains no counterfactual run)."""
    if table is None or table.empty:
        return []
    return [
        HEADING,
        "",
        "GRPO and F-GRPO γ = 1 at N = 8 trained again with the study's recipe, SFT model and seeds 0-4, on the rest's "
        'training prompts alone (preset `narrowing-counterfactual`, `train_types = ("rest",)`), against the study\'s '
        "runs of the same arm and seed, which trained on both types and score the same held-out prompts. Minority "
        "held-out pass@256 (exact) at step 400; *loss*: the SFT model's minus the run's; *share remaining*: the mean "
        "loss without the minority's prompts over the mean loss with them. The word is the noise rule's on *without − "
        "with*, paired by seed, or *same* when two one-sided tests show it within ±0.01, the two arms one Holm family "
        "(rule written before the runs: `tailmiss.studies.narrowing.counterfactual`).",
        "",
        *counterfactual_lines(table),
        "",
    ]
