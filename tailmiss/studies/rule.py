r"""The one rule for "beyond noise", used by every section of the report and by its claims ledger.

Two rows (runs of two configs, or two sets of per-seed values) are compared on one metric by
:mod:`tailmiss.studies.comparison` (re-exported here): paired by seed where they share seeds (a two-sided paired
t-test), by Welch's t-test otherwise, at α = :data:`ALPHA`; *identical* when every per-seed difference is within
:data:`IDENTICAL_TOL` (one run twice, never evidence), *cannot tell* below :data:`MIN_SEEDS` seeds, *higher* /
*lower* when resolved and at least the metric's practical threshold δ (:data:`THRESHOLDS`), else a *tie* (below δ
or not resolved). Each :class:`Difference` also carries the one-sided tests at its margin Δ (:func:`margin`: δ, or
near the top of a success rate a share of what is left to gain).

A paper's sentence is judged from its parts (:func:`judge`), each a comparison and what the sentence wants of it
(:data:`WANTED`): *higher* / *lower* beyond noise and δ; *not lower* / *not higher* (the paper's "reaches", "keeps")
shown by the one-sided test at Δ; *same* by both (Schuirmann's two one-sided tests). A tie shows none of these.
The sentence is one Holm family (:func:`holm`'s procedure over every test it makes); sentences about *some* N or
*most* methods are judged in the same family (:func:`judge_any`, :func:`judge_clauses`). The verdict is one
:class:`Verdict`, the only vocabulary from the claims to the ledger, and :func:`rule_text` states every convention
at the top of the report.

References
----------
D. J. Schuirmann (1987), "A comparison of the two one-sided tests procedure and the power approach for assessing the
equivalence of average bioavailability", *J. Pharmacokinet. Biopharm.* 15:657-680. S. Holm (1979), "A simple
sequentially rejective multiple test procedure", *Scand. J. Statist.* 6:65-70.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tailmiss.studies.comparison import (
    ALPHA,
    IDENTICAL_TOL,
    MIN_SEEDS,
    NEAR_BOUND_SHARE,
    THRESHOLDS,
    Difference,
    Outcome,
    Word,
    compare,
    compare_values,
    holm,
    holm_adjusted,
    identical_runs,
    margin,
    outcome_of,
    practical_threshold,
)

__all__ = [
    "ALPHA",
    "MIN_SEEDS",
    "IDENTICAL_TOL",
    "THRESHOLDS",
    "NEAR_BOUND_SHARE",
    "Outcome",
    "Verdict",
    "Difference",
    "practical_threshold",
    "margin",
    "compare_values",
    "compare",
    "holm",
    "identical_runs",
    "WANTED",
    "Part",
    "Sentence",
    "judge",
    "judge_any",
    "judge_clauses",
    "QUANTIFIERS",
    "judge_family",
    "both_readings",
    "rule_text",
]


class Verdict(Word):
    """A verdict on one of the paper's claims: the one vocabulary from the claims to the ledger."""

    REPRODUCED = "reproduced"
    REFUTED = "refuted"
    PARTLY = "partly"
    NOT_RESOLVED = "not resolved"
    CANNOT_TELL = "cannot tell"
    NOT_TESTABLE = "not testable"
    CAVEAT = "caveat"

    @classmethod
    def of(cls, value) -> Verdict:
        """``True`` reproduced, ``False`` refuted, ``None`` not resolved; a :class:`Verdict` as is."""
        if isinstance(value, Verdict):
            return value
        if value is None:
            return cls.NOT_RESOLVED
        if isinstance(value, (bool, np.bool_)):
            return cls.REPRODUCED if value else cls.REFUTED
        raise TypeError(f"a verdict is a Verdict, True, False or None, got {value!r}")


WANTED = ("higher", "lower", "not lower", "not higher", "same")
"""What a part of a sentence can want of its difference ``a − b``: beyond noise and δ up or down; not lower or not
higher by more than the margin (a sentence's "reaches", "keeps"); within the margin either way ("same")."""


@dataclass(frozen=True)
class Part:
    """One part of a sentence: its :class:`Difference` (unadjusted), what the sentence wants of it, the p of the test
    that decides it, Holm-adjusted in the sentence's family, and whether it holds (:func:`judge`)."""

    difference: Difference
    wanted: str
    p: float
    """The deciding test's p after Holm in the sentence (NaN without a test)."""
    family: int
    """Tests in the sentence's family."""
    status: str
    """``"holds"``, ``"fails"``, ``"open"`` (neither shown) or ``"unknown"`` (too few seeds, identical runs)."""
    outcome: Outcome
    """The two-sided outcome after Holm in the sentence (the one that refutes a margin part)."""

    @property
    def word(self) -> str:
        """What the part found: the outcome for higher / lower, else ``not lower`` / ``not higher`` / ``same`` when
        shown, the resolved direction when refuted, ``not shown`` when open."""
        if self.status == "unknown" or self.wanted in ("higher", "lower"):
            return str(self.outcome)
        if self.status == "holds":
            return self.wanted
        return str(self.outcome) if self.status == "fails" else "not shown"

    def describe(self) -> str:
        """The pair, the metric, the number, its interval, the test and its p, the outcome: one ledger cell's part."""
        d = self.difference
        head = f"{d.a} − {d.b} {d.metric} {d.mean:+.4f}"
        if d.test == "none":
            return f"{head} ({self.word}, {d.seeds} seed{'s' * (d.seeds != 1)})"
        lo, hi = d.ci
        p = f"p {self.p:.2g}" if self.family == 1 else f"Holm p {self.p:.2g} of {self.family}"
        test = {
            "not lower": f"one-sided at −{d.margin:.3g}",
            "not higher": f"one-sided at +{d.margin:.3g}",
            "same": f"two one-sided at ±{d.margin:.3g}",
        }.get(self.wanted, "")
        what = f"{d.test}, {d.seeds} seeds" + (f"; {test}" if test else "") + f", {p}"
        return f"{head} [{lo:+.4f}, {hi:+.4f}] ({what}): {self.word}"


@dataclass(frozen=True)
class Sentence:
    """One of the paper's sentences, its parts (:class:`~tailmiss.studies.rule.Part`: each a wanted direction of a
    :class:`Difference`, decided in the sentence's one Holm family) and a verdict."""

    text: str
    parts: tuple
    verdict: Verdict

    @property
    def differences(self) -> tuple:
        """Its parts' differences, in order."""
        return tuple(p.difference for p in self.parts)

    def cell(self, most: int = 4) -> str:
        """Every part described (:meth:`~tailmiss.studies.rule.Part.describe`), for the ledger's cell and the
        section's bullet alike; a sentence of more than ``most`` parts is summed up (how many hold, are open, fail,
        cannot be told) with the part that decides it described: the first that fails, else the first open or unknown
        one, else the holding part of the largest p."""
        if len(self.parts) <= most:
            return "; ".join(p.describe() for p in self.parts)
        counts = {s: sum(p.status == s for p in self.parts) for s in ("holds", "open", "fails", "unknown")}
        said = {"unknown": "cannot tell"}
        tally = ", ".join(f"{n} {said.get(s, s)}" for s, n in counts.items() if n)
        decisive = next((p for p in self.parts if p.status == "fails"), None)
        decisive = decisive or next((p for p in self.parts if p.status in ("open", "unknown")), None)
        decisive = decisive or max(self.parts, key=lambda p: p.p)
        return f"{len(self.parts)} comparisons, one Holm family: {tally}; deciding: {decisive.describe()}"


def _primary_p(d: Difference, wanted: str) -> float:
    """The raw p of the test that decides a part wanting ``wanted`` of ``d``."""
    if wanted in ("higher", "lower"):
        return d.p
    if wanted == "not lower":
        return d.p_not_lower
    if wanted == "not higher":
        return d.p_not_higher
    return max(d.p_not_lower, d.p_not_higher)


def _status(d: Difference, wanted: str, p: float, outcome: Outcome) -> str:
    if outcome in (Outcome.CANNOT_TELL, Outcome.IDENTICAL):
        return "unknown"
    if wanted in ("higher", "lower"):
        if outcome == Outcome(wanted):
            return "holds"
        return "fails" if outcome.resolved else "open"
    if p < ALPHA:
        return "holds"
    against = {"not lower": (Outcome.LOWER,), "not higher": (Outcome.HIGHER,)}.get(
        wanted, (Outcome.LOWER, Outcome.HIGHER)
    )
    return "fails" if outcome in against else "open"


def _judged(parts: list) -> list[Part]:
    """``parts`` (``(Difference, wanted)``) decided as one Holm family (:func:`judge`)."""
    for _, wanted in parts:
        if wanted not in WANTED:
            raise ValueError(f"a part wants one of {', '.join(WANTED)}, got {wanted!r}")
    untested = [d.test == "none" for d, _ in parts]
    primary = holm_adjusted([math.nan if u else _primary_p(d, w) for u, (d, w) in zip(untested, parts)])
    two_sided = holm_adjusted([math.nan if u else d.p for u, (d, _) in zip(untested, parts)])
    family = sum(not u for u in untested)
    out = []
    for (d, wanted), p, p2, u in zip(parts, primary, two_sided, untested):
        outcome = d.outcome if u else outcome_of(d.mean, p2, d.delta)
        out.append(Part(d, wanted, p, family, _status(d, wanted, p, outcome), outcome))
    return out


def _verdict(states: list[str]) -> Verdict:
    if "fails" in states:
        return Verdict.REFUTED
    if "unknown" in states:
        return Verdict.CANNOT_TELL
    if all(s == "holds" for s in states):
        return Verdict.REPRODUCED
    return Verdict.PARTLY if "holds" in states else Verdict.NOT_RESOLVED


def judge(text: str, parts) -> Sentence:
    """The verdict on a sentence whose ``parts`` are ``(Difference, wanted)`` (``wanted`` one of :data:`WANTED`).

    The sentence is one Holm family: each part's deciding test (the two-sided t for *higher* / *lower*, the one-sided
    t at the margin Δ for *not lower* / *not higher*, both one-sided tests for *same*: :func:`margin`) is adjusted with
    the others', from the unadjusted p-values whatever adjustment the differences carry; the two-sided tests are
    adjusted the same way for the outcome that refutes a margin part. A part *holds* when its test is resolved its
    way (a *higher* part also needs δ), *fails* when the two-sided test resolves the other way beyond δ, and is
    *open* otherwise: a tie that is not shown within the margin holds nothing.

    The verdict: *refuted* when a part fails; *cannot tell* when a part cannot be told (too few seeds, identical runs)
    and none fails; *reproduced* when every part holds; *partly* when some hold and the rest are open; *not resolved*
    when every part is open.
    """
    parts = list(parts)
    if not parts:
        raise ValueError(f"the sentence {text!r} has no parts to judge")
    judged = _judged(parts)
    return Sentence(text, tuple(judged), _verdict([p.status for p in judged]))


def judge_any(text: str, alternatives) -> Sentence:
    """The verdict on a sentence that holds when *any* of its ``alternatives`` holds, each a list of
    ``(Difference, wanted)`` that must all hold ("sometimes regresses": one N lower; "lowest at intermediate N"
    tested without picking the trough: some interior N below both ends).

    Every part of every alternative is one Holm family (a part two alternatives share counts once). The verdict:
    *reproduced* when an alternative holds whole; *refuted* when every alternative fails; else *cannot tell* when one
    cannot be told, *partly* when one holds in part, *not resolved* otherwise. The sentence's parts are every
    alternative's, in order, each once.
    """
    alternatives = [list(a) for a in alternatives]
    if not alternatives or not all(alternatives):
        raise ValueError(f"the sentence {text!r} needs alternatives with parts to judge")
    unique: dict = {}
    for a in alternatives:
        for d, wanted in a:
            unique.setdefault((id(d), wanted), (d, wanted))
    judged = dict(zip(unique, _judged(list(unique.values()))))
    verdicts = [_verdict([judged[(id(d), w)].status for d, w in a]) for a in alternatives]
    if Verdict.REPRODUCED in verdicts:
        verdict = Verdict.REPRODUCED
    elif all(v == Verdict.REFUTED for v in verdicts):
        verdict = Verdict.REFUTED
    else:
        verdict = next((v for v in (Verdict.CANNOT_TELL, Verdict.PARTLY) if v in verdicts), Verdict.NOT_RESOLVED)
    return Sentence(text, tuple(judged.values()), verdict)


def both_readings(verdicts) -> Verdict:
    """One verdict for a claim judged under two readings of the paper's setup (F-GRPO App. J's surrogate and
    optimiser): their verdict when they agree, else *partly* (the claim holds under one reading and not the other),
    and *cannot tell* when either cannot be told. The ledger's cell gives both readings' parts and verdicts."""
    verdicts = [Verdict.of(v) for v in verdicts]
    if Verdict.CANNOT_TELL in verdicts:
        return Verdict.CANNOT_TELL
    return verdicts[0] if all(v == verdicts[0] for v in verdicts) else Verdict.PARTLY


QUANTIFIERS = ("all", "any", "most")
"""How a clause of a sentence counts its groups: every one, at least one, more than half."""


def _group(states: list[str]) -> str:
    """A group of parts that must all hold: ``"holds"``, ``"fails"``, ``"unknown"``, ``"partly"`` (some hold, the
    rest are open) or ``"open"``."""
    if "fails" in states:
        return "fails"
    if "unknown" in states:
        return "unknown"
    if all(s == "holds" for s in states):
        return "holds"
    return "partly" if "holds" in states else "open"


def _clause(quantifier: str, groups: list[str]) -> str:
    n, holds, fails = len(groups), groups.count("holds"), groups.count("fails")
    if quantifier == "any":
        if holds:
            return "holds"
        if fails == n:
            return "fails"
    elif quantifier == "most":
        if 2 * holds > n:
            return "holds"
        if 2 * fails >= n:
            return "fails"
    else:
        if fails:
            return "fails"
        if holds == n:
            return "holds"
    if "unknown" in groups:
        return "unknown"
    return "partly" if holds or "partly" in groups else "open"


def judge_clauses(text: str, clauses) -> Sentence:
    """The verdict on a sentence of ``clauses``, each ``(quantifier, groups)``: a quantifier of :data:`QUANTIFIERS`
    over groups, each a list of ``(Difference, wanted)`` that must all hold ("γ = 2 sometimes adds pass@256 but more
    often costs pass@1": *any* method's pass@256 higher and *most* methods' pass@1 lower).

    Every part of every clause is one Holm family (a part two groups share counts once; :func:`judge`'s tests). A group
    holds when all its parts hold, fails when one fails, is unknown when one cannot be told, holds in part when some
    parts hold and the rest are open, else is open. A clause of *all* holds when every group holds, fails when one
    fails; of *any* holds when one holds, fails when all fail; of *most* holds when more than half hold, fails when at
    least half fail; otherwise it is unknown when a group cannot be told, holds in part when a group holds or holds in
    part, else is open. The verdict: *refuted* when a clause fails; *cannot tell* when one is unknown; *reproduced*
    when all hold; *partly* when some hold (or hold in part); else *not resolved* (as :func:`judge`'s).
    """
    clauses = [(q, [list(g) for g in groups]) for q, groups in clauses]
    if not clauses or not all(groups and all(groups) for _, groups in clauses):
        raise ValueError(f"the sentence {text!r} needs clauses of groups of parts to judge")
    for q, _ in clauses:
        if q not in QUANTIFIERS:
            raise ValueError(f"a clause counts its groups with one of {', '.join(QUANTIFIERS)}, got {q!r}")
    unique: dict = {}
    for _, groups in clauses:
        for g in groups:
            for d, wanted in g:
                unique.setdefault((id(d), wanted), (d, wanted))
    judged = dict(zip(unique, _judged(list(unique.values()))))
    states = [_clause(q, [_group([judged[(id(d), w)].status for d, w in g]) for g in groups]) for q, groups in clauses]
    if "fails" in states:
        verdict = Verdict.REFUTED
    elif "unknown" in states:
        verdict = Verdict.CANNOT_TELL
    elif all(st == "holds" for st in states):
        verdict = Verdict.REPRODUCED
    elif any(st in ("holds", "partly") for st in states):
        verdict = Verdict.PARTLY
    else:
        verdict = Verdict.NOT_RESOLVED
    return Sentence(text, tuple(judged.values()), verdict)


judge_family = judge
"""Every sentence is one Holm family (:func:`judge`): the name kept for the sections that say so."""


def rule_text() -> str:
    """The rule and every convention it follows, for the top of the report: the tests, the families, the
    thresholds and margins, and how a row's verdict follows from its parts."""
    deltas = ", ".join(f"{name} {value:g}" for name, value in THRESHOLDS.items())
    return (
        "**The noise rule** (one for the whole report, `tailmiss.studies.rule`). *Tests*: two rows are compared on "
        "one metric over seeds, paired by seed where they share seeds (paired t-test), by Welch's t-test otherwise, "
        f"at α = {ALPHA}; fewer than {MIN_SEEDS} seeds on a side *cannot tell*; runs equal to within "
        f"{IDENTICAL_TOL:g} on every seed are *identical* and count as no evidence. *Parts*: a sentence of a paper "
        "is split into parts, each a comparison and what the sentence wants of it. *higher* / *lower* holds when "
        "the two-sided test resolves the difference that way and it is at least the metric's practical threshold "
        f'δ ({deltas}); a resolved difference below δ is *tie (below δ)*. *not lower* (the paper\'s "reaches", '
        '"keeps") holds only when a one-sided test shows the difference above −Δ, *not higher* below +Δ, '
        "*same* both (two one-sided tests): a tie is not a success. The margin Δ is δ, and for a success rate "
        f"(pass@k, rare hit, M_ret, Q_pos) at most {NEAR_BOUND_SHARE:g} of what is left to gain above the better "
        'of the two rows (so "keeps pass@1" at 0.99 must exclude a loss of 0.001). A part *fails* when the '
        "two-sided test resolves it the other way beyond δ, and is *open* otherwise. *Families*: each sentence is "
        "one family, every test it makes in it, corrected by Holm's method; a sentence about some N "
        '("lowest at intermediate N", "sometimes regresses") tests every candidate in that family, never one '
        "picked from the seed means first. *Verdicts*: *reproduced* when every "
        "part holds, *partly* when some hold and the rest are open, *refuted* when a part fails, *not resolved* "
        "when every part is open, *cannot tell* when a part cannot be told and none fails; a claim read under two "
        "readings of the paper's setup keeps the verdict they share, else *partly*. Every cell names each "
        "comparison, its number, its 95 % interval, its test and adjusted p, and its outcome (a sentence of many "
        "parts: how many hold, are open and fail, and the part that decides it)."
    )
