"""F-GRPO Table 2's dip over the group size N, judged by the one noise rule (:mod:`tailmiss.studies.rule`).

"GRPO pass@256 is best at N = 2, worst near N = 8, partly recovered at N = 32" makes three statements about a curve
over N. Picking the trough from the data and testing the recovery from it would test a minimum chosen to look low;
here the sentence is tested without picking: the smallest N is *not lower* than every other N, and for some N near 8
(:data:`TROUGH_NEAR`) both the smallest and the largest N lie *higher* than it. Every comparison is one Holm family
(:func:`~tailmiss.studies.rule.judge_any`), so the dip of a sweep, of a protocol rung, of the narrowing regime and of
the shared rung's ladder are read by one rule, with no spread threshold of their own.
"""

from __future__ import annotations

from tailmiss.studies.rule import Sentence, compare, judge_any

__all__ = ["TROUGH_NEAR", "dip_sentence"]

TROUGH_NEAR = (8, 16)
"""Where Table 2's "worst near N = 8" may lie (N = 8-16, as its OOD columns say)."""


def dip_sentence(rows, labels: dict[int, str], metric: str, text: str) -> Sentence | None:
    """Table 2's dip on ``metric``: ``rows`` (columns ``label``, ``seed`` and the metric) hold a run per N, labelled
    ``labels[N]``.

    The smallest N − every other N *not lower*, and for some N of :data:`TROUGH_NEAR` strictly inside the sweep the
    smallest and the largest N − that N *higher*, one Holm family. None with fewer than three N or no N near 8 inside
    the sweep.
    """
    ns = sorted(labels)
    near = [n for n in TROUGH_NEAR if n in ns[1:-1]]
    if len(ns) < 3 or not near:
        return None
    best = [(compare(rows, labels[ns[0]], labels[n], metric), "not lower") for n in ns[1:]]
    troughs = {
        n: [
            (compare(rows, labels[ns[0]], labels[n], metric), "higher"),
            (compare(rows, labels[ns[-1]], labels[n], metric), "higher"),
        ]
        for n in near
    }
    return judge_any(text, [best + troughs[n] for n in near])
