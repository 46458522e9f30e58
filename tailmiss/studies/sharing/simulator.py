"""The shared simulator beside the transformer on the narrowing task: its rules and its claims.

The simulator runs the shared rung's law from its start (:mod:`tailmiss.experiments.shared_bridge`): the SFT model's
exact answer distributions on the ladder's pool, the digit features, the ladder's update. Its runs are read as the
ladder's are (:func:`tailmiss.experiments.prompt_types.by_type`) and judged by :data:`RULES`, written before the
simulator's first run on this task (2026-12-03).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tailmiss.experiments.sweep_config import Variant
from tailmiss.studies.narrowing.sharing import SharingClaims, sharing_claims
from tailmiss.studies.rule import Difference, Sentence, Verdict, compare_values, judge

__all__ = ["RULES", "SIMULATOR", "SimulatorBridge", "simulator_bridge", "AGAINST"]

SIMULATOR = "shared simulator"
"""The simulator's name in the section's tables."""
AGAINST = ("transformer", "shared")
"""The rungs the simulator is compared with: the transformer (the prediction) and the trainer's shared rung (the
same law: a check of the bridge itself)."""
RULES = (
    "**Rules for the shared simulator** (written before its first run on this task): it starts from the shared "
    "rung's law (the SFT model's exact distributions on the pool's 64 prompts, the same features, W = 0) and runs "
    "the ladder's update (`tailmiss.experiments.shared_bridge`: N = 8, γ = 0 and 1, 16 prompts a step drawn without "
    "replacement, the ladder's steps, Adam at the shared rung's rate), on 20 seeds of its own. It *narrows* a prompt "
    "type by the ladder's rule (final pass@256 lower than the start by the noise rule; shown not lower: it does not; "
    "a tie: cannot tell). It *predicts the transformer's narrowing* of a type when its word under GRPO (narrows or "
    "not) is the transformer's, both judged; it *predicts the transformer's minority loss* in kind when both narrow "
    "the minority under GRPO, and in size when, besides, its final minority pass@256 is the transformer's within the "
    "margin (two one-sided Welch tests), one Holm family. Sizes: simulator − rung on each type's final pass@256, by "
    "the noise rule's Welch test (the seeds are not paired): *higher*, *lower* or a tie, and a tie is not *the "
    "same*. Against the transformer this is the prediction's error; against the trainer's shared rung, which runs "
    "the same law on other random streams, it checks the bridge (the trainer also clips the gradient norm at 1 and "
    "divides by its step's response tokens, which the simulator does not). The focal weight's effect in the "
    "simulator: F-GRPO (γ = 1) − GRPO on the minority's final pass@256, paired by seed. (Amended 2026-12-06 after "
    "the runs, as the report's rule requires: narrowing was a fall of more than two seed sds, and the minority's "
    "loss was predicted in kind alone.)"
)
"""The rules, in the report's words."""


@dataclass(frozen=True)
class SimulatorBridge:
    """The simulator's claims on the narrowing task.

    Attributes
    ----------
    claims : SharingClaims
        The simulator read as a rung (its table rows and its focal effect per type).
    versus : dict
        ``(against, label, type) -> Difference``: simulator − rung (:data:`AGAINST`) on the type's final pass@256.
    words : dict
        ``type -> (simulator narrows, transformer narrows)`` under GRPO, each a
        :func:`~tailmiss.studies.narrowing.sharing.narrowing` verdict.
    predicts : Sentence or None
        "It predicts the transformer's minority loss": both minority changes *lower* (in kind) and the final minority
        pass@256 *same* (in size), one Holm family (None without the transformer).
    predicts_minority : bool or None
        In kind: True when both narrow the minority under GRPO, False when either is shown not to, else None.
    """

    claims: SharingClaims
    versus: dict
    words: dict
    predicts_minority: bool | None
    predicts: Sentence | None = None


def _finals(typed: pd.DataFrame, label: str, kind: str) -> np.ndarray:
    part = typed[(typed["label"] == label) & (typed["type"] == kind)]
    last = part.groupby("seed")["step"].transform("max")
    return part[part["step"] == last].sort_values("seed")["pass256"].to_numpy()


def simulator_bridge(sim: pd.DataFrame, ladder: dict) -> SimulatorBridge:
    """The claims of the simulator ``sim`` (:func:`tailmiss.experiments.shared_bridge.typed_history`) against
    ``ladder`` (rung name → its :func:`~tailmiss.experiments.prompt_types.by_type`), by :data:`RULES`."""
    claims = sharing_claims({SIMULATOR: sim})
    rungs = {name.split("-")[0]: typed for name, typed in ladder.items()}
    versus: dict[tuple[str, str, str], Difference] = {}
    for against in AGAINST:
        if against not in rungs:
            continue
        for label in [x for x in dict.fromkeys(sim["label"]) if x in set(rungs[against]["label"])]:
            for kind in ("minority", "rest"):
                a, b = _finals(sim, label, kind), _finals(rungs[against], label, kind)
                if a.size and b.size:
                    versus[(against, label, kind)] = compare_values(
                        a, b, "pass256", paired=False, labels=(SIMULATOR, against)
                    )
    grpo = Variant("grpo", 0.0, 8).label
    words = {}
    table = claims.table
    trans = sharing_claims({"transformer": rungs["transformer"]}).table if "transformer" in rungs else table[:0]
    for kind in ("minority", "rest"):
        mine = table[(table["type"] == kind) & (table["label"] == grpo)]["narrows"]
        theirs = trans[(trans["type"] == kind) & (trans["label"] == grpo)]["narrows"]
        words[kind] = (mine.iloc[0] if len(mine) else None, theirs.iloc[0] if len(theirs) else None)
    pair = words["minority"]
    kind = None
    if all(w == Verdict.REPRODUCED for w in pair):
        kind = True
    elif Verdict.REFUTED in pair:
        kind = False
    sentence = None
    size = versus.get(("transformer", grpo, "minority"))
    changes = [_change(t, grpo, "minority") for t in (table, trans)]
    if size is not None and all(c is not None for c in changes):
        parts = [(changes[0], "lower"), (changes[1], "lower"), (size, "same")]
        sentence = judge("the shared simulator predicts the transformer's minority loss, in kind and in size", parts)
    return SimulatorBridge(claims, versus, words, kind, sentence)


def _change(table: pd.DataFrame, label: str, kind: str):
    """The final − SFT pass@256 :class:`~tailmiss.studies.rule.Difference` of ``label`` on ``kind`` (None if absent)."""
    rows = table[(table["type"] == kind) & (table["label"] == label)]
    return rows["change"].iloc[0] if len(rows) else None
