"""The claims ledger at the top of ``paper_repro.md``: every claim of F-GRPO and of BroRL §4.1, one row each.

:data:`CATALOGUE` lists the claims, read from ``claims.toml`` beside this module (F-GRPO Lemma 3.1, Prop. 3.2,
Lemma H.1, Figs 1-7, Tables 1-14, App. N and Q; BroRL's mass balance, Cor. 3, Fig. 3 and its trends), each with the
section that shows it. While :func:`tailmiss.report.render_report` writes the sections, each section returns its
verdicts as rows (:func:`row`: the same numbers and rules its own rows print); the closed forms are judged here
(:func:`theory_records`). :func:`ledger_section` writes three tables: the closed forms; the claims about training,
one column per regime of :data:`REGIMES` (the learning regime, where coverage rises through per-prompt sharpening,
and the narrowing regime, where interference between prompts loses it), as equals; and the claims not testable at
this scale (with the catalogue's reason) or left out of this report (a section the first look defers). Verdicts:
*reproduced* (the section's rule says yes), *refuted* (no), *partly*, *not resolved* (the rule cannot tell: one
seed, a tie, a vacuous comparison).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tailmiss.io import read_toml
from tailmiss.studies.rule import Verdict, rule_text

__all__ = [
    "LEDGER_HEADING",
    "REGIMES",
    "Regime",
    "regime_of",
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


@dataclass(frozen=True)
class Regime:
    """A regime the ledger judges claims in: its name, what coverage does there, its mechanism, and the report's
    sections whose rows are its verdicts."""

    name: str
    coverage: str
    mechanism: str
    sections: tuple[str, ...]

    @property
    def header(self) -> str:
        """The regime's column header: its name, what coverage does, and its mechanism."""
        return f"{self.name} ({self.coverage}): {self.mechanism}"


REGIMES = (
    Regime("the learning regime", "coverage rises", "per-prompt sharpening", (SIM, LLM, PROTOCOL, CONTROLS)),
    Regime(
        "the narrowing regime", "coverage falls", "interference between prompts through shared parameters",
        (NARROWING, SHARING),
    ),
)  # fmt: skip
"""The two regimes, as equals: where RL raises coverage and acts on each prompt's own rare answers (the simulator's
independent prompts, the transformer's sweeps, the paper's protocol, the controls), and where a hidden conflict
between prompts makes GRPO lose coverage (the narrowing study and the sharing ladder). the theory section's closed forms
belong to neither."""


def regime_of(section: str) -> Regime | None:
    """The regime whose verdicts ``section``'s ledger rows are (None for the theory section's closed forms).

    ``section`` may carry a ``"## "`` prefix and a subtitle after ``":"`` or ``" ("``; ``ValueError`` for a section
    that belongs to no regime (the ladder "Why the regimes differ" compares them and judges no claim)."""
    base = section.split(":")[0].split(" (")[0].removeprefix("## ")
    if base == THEORY:
        return None
    for regime in REGIMES:
        if base in regime.sections:
            return regime
    raise ValueError(f"the ledger section {section!r} belongs to no regime (Theory or one of {_regime_sections()})")


def _regime_sections() -> list[str]:
    return [s for r in REGIMES for s in r.sections]


def _judged(rows: list) -> dict:
    """``(claim key, regime name or None) -> (ours, verdict, section)``: in each regime (and for the closed forms)
    the last row given on a claim wins."""
    judged = {}
    for key, ours, verdict, where in rows:
        regime = regime_of(where)
        judged[key, regime.name if regime else None] = (ours, verdict, where.split(":")[0].removeprefix("## "))
    return judged


def _word(verdict: str) -> str:
    return f"**{verdict}**" if verdict == "refuted" else verdict


def _cell(judged: tuple | None, quick: bool) -> str:
    """A regime's cell: its verdict, the section and its numbers; ``—`` when no section of the regime judged it."""
    if judged is None:
        return "—"
    ours, verdict, where = judged
    return f"{_word(verdict)} ({where}{', quick' if quick else ''}): {ours}".replace("\n", " ")


def _counts(words: list[str]) -> str:
    counts = {w: sum(1 for v in words if v.strip("*").startswith(w)) for w in _COUNTED}
    return ", ".join(f"{n} {w}" for w, n in counts.items() if n)


def ledger_section(rows: list, deferred: dict | None = None, quick: bool = False) -> str:
    """The ledger as markdown, each claim of :data:`CATALOGUE` once, in three tables.

    The closed forms (the theory section: our number and verdict); the claims about training, one column per regime of
    :data:`REGIMES` headed by its mechanism, each cell the verdict of that regime's sections with their numbers
    (``—`` where no section of the regime judges the claim); and the claims not testable at this scale with the
    catalogue's reason (and the settings the report follows). ``rows`` are ``(key, ours, verdict, section)``;
    ``deferred`` maps a claim's key to the command that adds its section (one the first look leaves out); ``quick``
    marks each judged cell as quick evidence.
    """
    from tailmiss.studies.text import table

    judged = _judged(rows)
    closed, trained, untested = [], [], []
    for c in CATALOGUE:
        home = regime_of(c.section)
        found = {r.name: judged.get((c.key, r.name)) for r in REGIMES}
        if (c.key, None) in judged:
            ours, verdict, _ = judged[c.key, None]
            closed.append([c.source, c.sentence, ours.replace("\n", " "), _word(verdict)])
        elif any(found.values()) or (home is not None and _waits(c, deferred)):
            cells = [_cell(found[r.name], quick) for r in REGIMES]
            if not any(found.values()):
                cells[REGIMES.index(home)] = _waiting(c, deferred)
            trained.append([c.source, c.sentence, *cells])
        elif _waits(c, deferred):
            closed.append([c.source, c.sentence, "—", _waiting(c, deferred)])
        else:
            why = c.note or f"not testable at this scale: {c.untestable}"
            untested.append([c.source, c.sentence, why, c.section])
    words = {"closed forms": [r[3] for r in closed]}
    words |= {r.name: [row[2 + i] for row in trained if row[2 + i] != "—"] for i, r in enumerate(REGIMES)}
    words["untested"] = [r[2] for r in untested]
    summary = "; ".join(f"{part}: {_counts(w)}" for part, w in words.items() if w)
    return (
        f"{LEDGER_HEADING}\n\nEvery claim of F-GRPO (arXiv 2602.06717 v2; numbers follow v2, with v1's figure and "
        "lemma numbers in brackets where they differ) and of BroRL §4.1 (arXiv 2510.01180), one row each: "
        + f"{len(CATALOGUE)} claims ("
        + summary
        + "). Every verdict comes from the one noise rule below, applied by the section named, over seeds: "
        "*reproduced* (every part of the sentence goes its way), ***refuted*** (a part goes the other way beyond "
        "noise and δ), *partly* (some parts hold, the rest are ties), *not resolved* (ties), *cannot tell* (too few "
        "seeds, or a comparison with a copy of another run), *caveat* (a caution of the paper's, shown beside our "
        "numbers, not a prediction to reproduce), *not testable* (with the reason).\n\n"
        "The claims about training are judged in two regimes, as equals, one column each headed by its mechanism: "
        + "; ".join(f"*{r.name}* ({r.coverage}; {', '.join(r.sections)}): {r.mechanism}" for r in REGIMES)
        + ". A cell gives that regime's verdict, the section that judged it and its numbers; — where no section of the "
        "regime judges the claim. The closed forms hold or fail in either regime.\n\n"
        + rule_text()
        + "\n\n### The closed forms\n\n"
        + table(["source", "the paper's claim", "ours", "verdict"], closed)
        + "\n\n### The claims about training, by regime\n\n"
        + table(["source", "the paper's claim", *(r.header for r in REGIMES)], trained)
        + "\n\n### Not testable at this scale, and settings\n\n"
        + table(["source", "the paper's claim", "why", "section"], untested)
        + "\n"
    )


def _waits(c: Claim, deferred: dict | None) -> bool:
    """Whether claim ``c``, judged by no section, waits for its section (rather than being untestable or a
    setting)."""
    return bool(deferred and c.key in deferred) or not (c.untestable or c.note)


def _waiting(c: Claim, deferred: dict | None) -> str:
    """The verdict cell of a claim no section judged that is not untestable: the command that adds its section, or
    that its section was not written."""
    if deferred and c.key in deferred:
        return f"not in this report: `{deferred[c.key]}` adds it"
    return "not judged: its section was not written in this report"


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
