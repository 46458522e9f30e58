"""The claims ledger at the top of ``paper_repro.md``: every claim of F-GRPO and of BroRL §4.1, one row each.

:data:`CATALOGUE` lists the claims, read from ``claims.toml`` beside this module (F-GRPO Lemma 3.1, Prop. 3.2,
Lemma H.1, Figs 1-7, Tables 1-14, App. N and Q; BroRL's mass balance, Cor. 3, Fig. 3 and its trends), each with the
section that shows it. While :func:`tailmiss.report.render_report` writes the sections, each section returns its
verdicts as rows (:func:`row`: the same numbers and rules its own rows print); the closed forms are judged here
(:func:`theory_records`). A claim no section judged is written as *not testable at this scale* with the catalogue's
reason, or as left out of this report (a section the first look defers). Verdicts: *reproduced* (the section's rule
says yes), *refuted* (no), *partly*, *not resolved* (the rule cannot tell: one seed, a tie, a vacuous comparison).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tailmiss.io import read_toml
from tailmiss.studies.rule import Verdict, rule_text

__all__ = [
    "LEDGER_HEADING",
    "CATALOGUE",
    "CATALOGUE_PATH",
    "Claim",
    "row",
    "checkable",
    "verdict_word",
    "theory_records",
    "ledger_section",
]

LEDGER_HEADING = "## Claims ledger: every claim of F-GRPO and BroRL §4.1"
"""The heading line of the claims ledger's section, by which the report and its stamps find that section."""

THEORY, SIM, LLM, LADDER, PROTOCOL, CONTROLS, NARROWING, SHARING = (
    "Theory",
    "Simulation",
    "Small transformer",
    "Why the regimes differ",
    "The paper's protocol",
    "Controls and γ sensitivity",
    "The narrowing regime",
    "Sharing across prompts",
)


@dataclass(frozen=True)
class Claim:
    """One claim of a paper: where it is stated, what it says, which section of the report shows it, and why it
    cannot be tested at this scale when no section judges it."""

    key: str
    source: str
    sentence: str
    section: str
    untestable: str = ""
    note: str = ""
    """The verdict cell of a row that is not a claim (a setting the report follows)."""


CATALOGUE_PATH = Path(__file__).with_name("claims.toml")
"""The catalogue's file: one ``[[claim]]`` table per claim (the fields of :class:`Claim`), in the report's order."""


def _catalogue(path: Path) -> tuple[Claim, ...]:
    """The claims of ``path``; ``ValueError`` names a repeated key or a section the report does not have."""
    claims = tuple(Claim(**fields) for fields in read_toml(path)["claim"])
    sections = {THEORY, SIM, LLM, LADDER, PROTOCOL, CONTROLS, NARROWING, SHARING}
    for c in claims:
        if c.section not in sections:
            raise ValueError(
                f"{path.name}: claim {c.key!r} names the section {c.section!r}, not one of {sorted(sections)}"
            )
    keys = [c.key for c in claims]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{path.name}: claim keys repeat: {sorted({k for k in keys if keys.count(k) > 1})}")
    return claims


CATALOGUE: tuple[Claim, ...] = _catalogue(CATALOGUE_PATH)
"""Every claim, in the order of the report's sections (read from :data:`CATALOGUE_PATH`)."""


def verdict_word(verdict) -> str:
    """The ledger's word for a :class:`~tailmiss.studies.rule.Verdict` (``True`` reproduced, ``False``
    refuted, ``None`` not resolved are read as the same verdicts)."""
    return Verdict.of(verdict).value


_KEYS = frozenset(c.key for c in CATALOGUE)


def row(key: str, ours: str, verdict: Verdict) -> list[tuple[str, str, Verdict]]:
    """A section's ledger row on claim ``key``: its number and the :class:`~tailmiss.studies.rule.Verdict` of the
    section's rule, as a one-row list (``rows += row(...)``).

    ``TypeError`` for anything but a :class:`Verdict` (a claim's verdict comes from a rule, never from a literal
    word); ``ValueError`` for a key the catalogue does not hold.
    """
    if not isinstance(verdict, Verdict):
        raise TypeError(f"the verdict on {key!r} must be a Verdict, got {verdict!r}")
    if key not in _KEYS:
        raise ValueError(f"unknown ledger claim {key!r}")
    return [(key, ours, verdict)]


_PAIR = re.compile(r"\S − \S")
_SIGNED = re.compile(r"[+\-−]\d")
_EVIDENCE = re.compile(r"\bp (?:= )?\d|\bp [<≤]|Holm p|\[[+\-−]?\d|cannot tell|identical")
_NO_JUDGEMENT = re.compile(r"cannot tell \([^)]{8,}\)")


def checkable(ours: str) -> bool:
    """Whether a ledger cell lets a reader check its verdict: a comparison named (``a − b``), a signed number, and
    the evidence behind its outcome (a p-value, an interval, or why none: *cannot tell*, *identical*); or, where
    nothing could be compared, *cannot tell* with the reason in brackets."""
    return all(x.search(ours) for x in (_PAIR, _SIGNED, _EVIDENCE)) or bool(_NO_JUDGEMENT.search(ours))


def _lemma31_row(mc_groups: int) -> tuple:
    """Lemma 3.1's row: its closed form against a Monte Carlo of ``mc_groups`` groups."""
    import numpy as np

    from tailmiss import analytic

    mu, tau, n = 0.5, 0.005, 8
    regions = np.random.default_rng(0).multinomial(n, [tau, mu - tau, 1 - mu], size=mc_groups)
    hits = (regions[:, 0] == 0) & (regions[:, 1] > 0) & (regions[:, 2] > 0)
    freq, exact = hits.mean(), float(analytic.tail_miss_probability(mu, tau, n))
    se = np.sqrt(exact * (1 - exact) / mc_groups)
    return (
        "lemma31",
        f"N = {n}, μ = {mu}, τ = {tau}: closed form {exact:.4f}, Monte Carlo {freq:.4f} over "
        f"{mc_groups:,} groups (|Δ| = {abs(freq - exact) / se:.1f} se)",
        abs(freq - exact) < 3 * se,
    )


def _batch_mood_rises() -> bool:
    """Lemma H.1 on a random 40-action policy: whether E[S_R | X = k] is non-decreasing for both reward pairs."""
    import numpy as np

    from tailmiss import analytic

    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(40))
    correct = np.arange(40) < 12
    ks = np.arange(17)
    moods = {rw: analytic.expected_batch_mood(probs, correct, 16, ks, 1.0, rw) for rw in (0.0, -1.0)}
    return all(bool(np.all(np.diff(m) >= -1e-15)) for m in moods.values())


def theory_records(claims=None, mc_groups: int = 200_000) -> list:
    """The closed-form claims' rows (deterministic): Lemma 3.1 against a Monte Carlo of ``mc_groups`` groups, the
    theory section's claims (``claims``, :func:`~tailmiss.studies.theory.claims.theory_claims` when not given),
    Lemma H.1 on
    a random policy and BroRL's mass balance on the worked example."""
    from tailmiss.studies.theory.claims import SIGN_GRID, theory_claims

    c = theory_claims() if claims is None else claims
    lemma31 = _lemma31_row(mc_groups)
    rising = _batch_mood_rises()
    mb, uc = c.mass_balance, c.unsampled_change
    parts = mb.sampled_correct + mb.sampled_incorrect + mb.unsampled
    m = c.lr_scales
    return [
        lemma31,
        ("fig1a", "0 at N = 1, then rises and falls for ρ = 0.05, 0.1, 0.2", c.fig1a_nonmonotone),
        ("fig3", "peaks move right and up as ρ falls (μ = 0.8, 0.5, 0.2)", c.fig3_moves_right_and_up),
        ("fig5", f"{c.fig5_p17:.3g} at N = 2^17", c.fig5_below),
        (
            "prop32",
            f"worked example: ΔQ_pos = {mb.delta_q_pos:+.4f}, ΔQ_u,pos = {uc.delta_q_u_pos:+.4f}",
            bool(mb.delta_q_pos > 0 and uc.delta_q_u_pos < 0),
        ),
        (
            "lemmaH1",
            "E[S_R | X = k], k = 0…16, on a random 40-action policy (12 correct): non-decreasing for "
            f"(R_c, R_w) = (1, 0) and (1, −1): {'yes' if rising else 'no'}",
            rising,
        ),
        (
            "fig4",
            f"max g|A−| γ = 0 {c.fig4_max_grpo:.2f} (grows as μ̂ → 1), γ = 0.5 {c.fig4_max_half:.3f}, γ = 1 "
            f"{c.fig4_max_one:.3f}",
            bool(c.fig4_max_grpo > 5 and c.fig4_max_half <= 1 and c.fig4_max_one <= 0.5),
        ),
        ("appN", f"m_0.5 × 1e-6 = {m[1] * 1e-6:.3g}", bool(abs(m[1] * 1e-6 - 6.8e-7) < 0.01e-7)),
        (
            "massbalance",
            f"worked example: {mb.sampled_correct:.4f} + {mb.sampled_incorrect:.4f} + {mb.unsampled:.4f} "
            f"= ΔQ_pos {mb.delta_q_pos:.4f} (first order; `tests/test_analytic.py::"
            "test_first_order_terms_match_exact_softmax_step` checks it against an exact softmax step)",
            bool(abs(parts - mb.delta_q_pos) < 1e-12),
        ),
        (
            "cor3",
            f"coupling at N = 2 … 131072: {c.coupling[0]:+.2e} … {c.coupling[-1]:+.2e}, first positive at N = "
            f"{c.coupling_flip} (bisected on the integers; its sign changes {c.coupling_sign_changes} time(s) over "
            f"{len(SIGN_GRID)} N from 2 to 2^17)",
            bool(c.coupling[0] < 0 < c.coupling[-1]),
        ),
    ]


def _judged(rows: list) -> tuple[dict, dict]:
    """Each claim's row (the last one given wins; one of :data:`NARROWING` wins over any other, the regime the
    paper's LLM claims are about) and the other regime's row beside it (the learning regime's, as the contrast)."""
    judged, contrast = {}, {}
    for key, ours, verdict, where in rows:
        new = (ours, verdict, where)
        old = judged.get(key)
        if old is not None and old[2] == NARROWING and where != NARROWING:
            contrast[key] = new
            continue
        if old is not None and where == NARROWING and old[2] != NARROWING:
            contrast[key] = old
        judged[key] = new
    return judged, contrast


def ledger_section(rows: list, deferred: dict | None = None) -> str:
    """The ledger as markdown: one row per claim of :data:`CATALOGUE`, judged by ``rows`` (``(key, ours, verdict,
    section)``; for a claim the narrowing regime judges, its verdict, with the learning regime's beside it as the
    contrast); ``deferred`` maps a claim's key to the command that adds its section (one the first look leaves
    out)."""
    from tailmiss.studies.text import table

    judged, contrast = _judged(rows)
    out = []
    for c in CATALOGUE:
        if c.key in judged:
            ours, verdict, where = judged[c.key]
            where = where.split(":")[0].removeprefix("## ") or c.section
        elif deferred and c.key in deferred:
            ours, verdict, where = "—", f"not in this report: `{deferred[c.key]}` adds it", c.section
        elif c.note:
            ours, verdict, where = "—", c.note, c.section
        elif c.untestable:
            ours, verdict, where = "—", f"not testable at this scale: {c.untestable}", c.section
        else:
            ours, verdict, where = "—", "not judged: its section was not written in this report", c.section
        word = f"**{verdict}**" if verdict == "refuted" else verdict
        other = contrast.get(c.key)
        beside = f"{other[1]} ({other[2]}: {other[0]})" if other else "—"
        out.append([c.source, c.sentence, ours.replace("\n", " "), word, where, beside.replace("\n", " ")])
    counts = {w: sum(1 for r in out if r[3].strip("*").startswith(w)) for w in _COUNTED}
    summary = ", ".join(f"{n} {w}" for w, n in counts.items() if n)
    return (
        f"{LEDGER_HEADING}\n\nEvery claim of F-GRPO (arXiv 2602.06717 v2; numbers follow v2, with v1's figure and "
        "lemma numbers in brackets where they differ) and of BroRL §4.1 (arXiv 2510.01180), one row each ("
        + summary
        + "). Every verdict comes from the one noise rule below, applied by the section named, over seeds: "
        "*reproduced* (every part of the sentence goes its way), ***refuted*** (a part goes the other way beyond "
        "noise and δ), *partly* (some parts hold, the rest are ties), *not resolved* (ties), *cannot tell* (too few "
        "seeds, or a comparison with a copy of another run), *caveat* (a caution of the paper's, shown beside our "
        "numbers, not a prediction to reproduce), *not testable* (with the reason). The paper's LLM claims are about "
        "a regime where RL loses coverage; where the narrowing regime judges a claim, its verdict is the row's and "
        "the learning regime's (where RL raises coverage) stands beside it as the contrast.\n\n"
        + rule_text()
        + "\n\n"
        + table(["source", "the paper's claim", "ours", "verdict", "section", "the learning regime (contrast)"], out)
        + "\n"
    )


_COUNTED = (
    "reproduced",
    "refuted",
    "partly",
    "not resolved",
    "cannot tell",
    "caveat",
    "not testable",
    "not in this report",
    "not judged",
    "a setting",
)
