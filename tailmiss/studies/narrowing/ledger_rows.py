"""The narrowing section's ledger rows: each claim's numbers and verdict, from
:class:`~tailmiss.studies.narrowing.claims.NarrowingClaims`."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.narrowing import claims as nc
from tailmiss.studies.narrowing.plateau_claims import answer_verdict

__all__ = ["ledger_rows"]


def ledger_rows(c: nc.NarrowingClaims) -> list:
    """The section's ledger rows (:func:`tailmiss.studies.ledger.row`), each with the numbers behind its verdict."""
    rows = []
    s = c.pass1_sentence
    if s is not None:
        rows += ledger.row("t2-pass1", "; ".join(f"{d.a} − {d.b}: {d.mean:+.3f}" for d, _ in s.parts), s.verdict)
    if c.rungs is not None:
        r = c.rungs
        rows += ledger.row("t2-dip", f"worst N {r.pass256_shape.worst_n}; recovery {r.recovery.mean:+.3f}", r.dip)
        rows += ledger.row("t2-dnll", "; ".join(f"{d.mean:+.2f}" for d, _ in r.dnll.parts), r.dnll.verdict)
        if 0.5 in r.reach:
            d = r.reach[0.5].parts[0][0]
            rows += ledger.row("t2-reach", f"F-GRPO N = 8 − GRPO N = 32, pass@256 {d.mean:+.3f}", r.reach[0.5].verdict)
    for key, sentence in c.sentences:
        rows += ledger.row(key, "; ".join(f"{d.metric} {d.mean:+.3f}" for d, _ in sentence.parts), sentence.verdict)
    sensitivity = c.sensitivity
    rows += ledger.row("t67-usual", "GRPO's γ ∈ {0.5, 1, 2} by pass@1", sensitivity.usual)
    rows += ledger.row("t67-two", "GRPO γ = 2 − γ = 0.5", sensitivity.two_verdict)
    if sensitivity.growth:
        d = next(iter(sensitivity.growth.values()))
        rows += ledger.row("t1214", f"lead at k = 256 − at k = 1: {d.mean:+.3f}", sensitivity.lead)
    if c.fig1bc is not None:
        rows += ledger.row("fig1bc", "; ".join(f"{d.mean:+.3f}" for d, _ in c.fig1bc.parts), c.fig1bc.verdict)
    rows += _appn(c)
    return rows


def _appn(c: nc.NarrowingClaims) -> list:
    """The ledger's App. N row: from the plateau runs (F-GRPO γ = 0.5 against GRPO at lr × m_0.5, the frontier and the
    end point together) when the report has them, else from the 400-step frontier."""
    p = c.plateau
    if p is not None and p.main in p.answers:
        a, b = p.main
        end = p.ends[p.main].describe() if p.ends[p.main] is not None else "not judged"
        text = (
            f"{a} − {b}, seeds {min(p.seeds)}-{max(p.seeds)} to step {p.steps}: frontier "
            f"{p.frontiers[p.main].describe()}; end point {end} → more than a slower GRPO: {p.answers[p.main]}"
        )
        return ledger.row("appN-frontier", text, answer_verdict(p.answers[p.main]))
    word, main = nc.answer(c)
    if main is None:
        return []
    return ledger.row("appN-frontier", f"F-GRPO γ = 0.5 against GRPO N = 8: {main.describe()}", nc.frontier_word(main))
