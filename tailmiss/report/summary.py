"""What a written report found, in a few lines for the terminal: the end of ``tailmiss repro``.

:func:`report_summary` reads back the numbers a report was just written from (every one from a cache the report
filled, so nothing is trained or simulated again): where Lemma 3.1's tail miss peaks (F-GRPO, arXiv 2602.06717 v2,
§3, at Fig. 5's initial policy), how much of its rare-correct mass the simulator's GRPO retains (F-GRPO Fig. 2), the
narrowing regime's held-out pass@256 from the SFT model through GRPO to F-GRPO by prompt type, and the claims
ledger's counts. :meth:`ReportSummary.lines` writes them as a short table, :meth:`ReportSummary.to_dict` as JSON.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from tailmiss.studies.context import Context

__all__ = ["ReportSummary", "report_summary", "ledger_counts", "FIG5_MU_POS", "FIG5_TAU"]

FIG5_MU_POS, FIG5_TAU = 0.64, 6.3e-5
"""F-GRPO Fig. 5's initial policy: the correct mass μ_pos and the rare-correct mass τ at which the report's theory
section finds the tail miss's peak."""

_COUNTS = re.compile(r"one row each: (\d+) claims \(([^)]*)\)\.")
_NARROWING_ROWS = ("GRPO N=8", "F-GRPO γ=0.5 N=8", "F-GRPO γ=1 N=8", "GRPO N=8 low-LR")
"""The narrowing regime's arms the summary shows (those the report has), after the SFT model."""


def ledger_counts(report_text: str) -> dict:
    """The claims ledger's counts as its opening sentence states them (``"one row each: 49 claims (closed forms: 10
    reproduced; the learning regime: 3 reproduced, 5 refuted, …; …)"``): ``{"claims": 49, "parts": {part: {verdict
    word: claims}}}``, the parts being the closed forms, each regime, and the claims not tested. A claim judged in
    both regimes counts in both. ``ValueError`` when ``report_text`` has no ledger."""
    found = _COUNTS.search(report_text)
    if found is None:
        raise ValueError("the report has no claims ledger (no 'one row each: N claims (...)' sentence)")
    parts = {}
    for part in found.group(2).split("; "):
        name, _, counts = part.partition(": ")
        parts[name] = {w: int(n) for n, _, w in (c.partition(" ") for c in counts.split(", "))}
    return {"claims": int(found.group(1)), "parts": parts}


@dataclass(frozen=True)
class ReportSummary:
    """What a report found (:func:`report_summary`).

    Attributes
    ----------
    report : Path
        The report written.
    figures : tuple of Path
        The figures written beside it (empty with ``--no-figures``).
    quick : bool
        Whether it is the quick report (the first look).
    tail_miss : dict
        ``mu_pos``, ``tau``, ``n_star``, ``peak``: Lemma 3.1's largest
        P(active group, no rare-correct rollout) over N and where it is.
    simulator : dict or None
        The simulator's F-GRPO Fig. 2 preset: ``preset``, ``min_mret`` (GRPO's
        lowest final retained mass over N) at ``n``, ``zone`` (zone II, or
        None) and ``lift_in`` / ``lift_out`` (γ = 1 − γ = 0 retained mass,
        inside / outside zone II). None when the report has no simulation.
    narrowing : list of dict
        Held-out pass@256 of the narrowing regime, one dict per arm (the SFT
        model first): ``label``, ``all``, ``minority``, ``rest``, ``seeds``.
        Empty when the report leaves the regime out.
    ledger : dict
        The claims ledger's counts (:func:`ledger_counts`): ``claims``, the
        number of claims, and ``parts``, part -> verdict word -> claims, for
        the closed forms, each regime and the claims not tested.
    study_answer : list of dict
        In the first look, the full narrowing study's answer by γ as the committed evidence archive holds it
        (:func:`tailmiss.studies.narrowing.archived.archived_answers`): ``gamma``, ``against``, ``word``,
        ``frontier``, ``end``, ``gain256`` (None when not judged), ``seeds``, ``steps``. Empty in a full report
        (its section says it) or when the archive holds neither the plateau nor the end-point runs.
    """

    report: Path
    figures: tuple[Path, ...]
    quick: bool
    tail_miss: dict
    simulator: dict | None
    narrowing: list = field(default_factory=list)
    ledger: dict = field(default_factory=dict)
    study_answer: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """The summary as plain JSON types."""
        return {
            "report": str(self.report),
            "figures": [str(p) for p in self.figures],
            "quick": self.quick,
            "tail_miss": self.tail_miss,
            "simulator": self.simulator,
            "narrowing": self.narrowing,
            "ledger": self.ledger,
            "study_answer": self.study_answer,
        }

    def lines(self) -> list[str]:
        """The summary as a short table for the terminal."""
        t = self.tail_miss
        out = [
            f"What the {'first look' if self.quick else 'report'} found:",
            f"  theory     Lemma 3.1's tail miss peaks at N* = {t['n_star']:,} (P = {t['peak']:.3f}; F-GRPO Fig. 5's "
            f"mu_pos = {t['mu_pos']:g}, tau = {t['tau']:g})",
        ]
        s = self.simulator
        if s is not None:
            zone = f"zone II N = {s['zone'][0]:,.0f}-{s['zone'][1]:,.0f}" if s["zone"] else "no zone II"
            out.append(
                f"  simulator  {s['preset']}: GRPO retains least rare-correct mass at N = {s['n']:,} (M_ret "
                f"{s['min_mret']:.3f}; {zone}); F-GRPO gamma = 1 adds {s['lift_in']:+.3f} inside the zone, "
                f"{s['lift_out']:+.3f} outside"
            )
        if self.narrowing:
            out.append("  narrowing  held-out pass@256        all   minority  rest   seeds")
            for r in self.narrowing:
                cells = f"{r['all']:.3f}  {r['minority']:.3f}     {r['rest']:.3f}  {r['seeds']}"
                out.append(f"             {r['label']:<20} {cells}")
            if min(r["seeds"] for r in self.narrowing[1:]) < 3:
                out.append(
                    "             under three seeds the noise rule cannot tell; the full study (tailmiss repro "
                    "--only narrowing) answers with 5-10"
                )
        else:
            out.append("  narrowing  not in this report")
        out += self._answer_lines()
        if self.ledger:
            out.append(f"  ledger     {self.ledger['claims']} claims, by where they are judged:")
            width = max(len(part) for part in self.ledger["parts"])
            for part, counts in self.ledger["parts"].items():
                words = ", ".join(f"{n} {w}" for w, n in counts.items())
                out.append(f"             {part:<{width}}  {words}")
        out.append(f"  report     {self.report}")
        if self.figures:
            folders = sorted({str(p.parent) for p in self.figures})
            out.append(f"  figures    {len(self.figures)} files in {', '.join(folders)}")
        return out

    def _answer_lines(self) -> list[str]:
        """The full study's answer by γ, from the archive, labelled as such."""
        if not self.study_answer:
            return []
        out = [
            f"  answer     the full study, read from the committed evidence archive (not these runs), "
            f"{self.study_answer[0]['steps']:,} steps; is F-GRPO more than GRPO at the rate lr x m_gamma?"
        ]
        for a in self.study_answer:
            gain = "not judged" if a["gain256"] is None else f"{a['gain256']:+.3f}"
            seeds = a["seeds"]
            out.append(
                f"             gamma = {a['gamma']:g}: {a['word']} (frontier {a['frontier']}, end point {a['end']}; "
                f"pass@256 at the end point {gain}; {len(seeds)} seeds, {min(seeds)}-{max(seeds)})"
            )
        return out


def _study_answer() -> list[dict]:
    from dataclasses import asdict

    from tailmiss.studies.narrowing.archived import archived_answers

    def plain(a) -> dict:  # JSON has no NaN: a gain not judged is null
        return {**asdict(a), "seeds": list(a.seeds), "gain256": a.gain256 if math.isfinite(a.gain256) else None}

    return [plain(a) for a in archived_answers()]


def _simulator(ctx: Context) -> dict:
    from tailmiss.studies.simulation.claims import fig2_claims
    from tailmiss.studies.simulation.data import simulated_means

    means = simulated_means("fgrpo-fig2", ctx)
    c = fig2_claims(means)
    return {
        "preset": means.preset,
        "min_mret": float(c.min_mret),
        "n": int(c.argmin),
        "zone": [float(z) for z in c.zone] if c.zone else None,
        "lift_in": float(c.lift_in),
        "lift_out": float(c.lift_out),
    }


def _narrowing(ctx: Context) -> list[dict]:
    from tailmiss.studies.narrowing.data import narrowing_data
    from tailmiss.studies.narrowing.regime import regime_table

    data = narrowing_data(ctx, finals=False)
    table, _ = regime_table(data.histories["narrowing"], data.typed["narrowing"])
    cells = table.set_index(["label", "type"])
    labels = [label for label in _NARROWING_ROWS if (label, "all") in cells.index]
    if not labels:
        return []
    first = labels[0]
    rows = [
        {
            "label": "SFT model",
            **{kind: float(cells.loc[(first, kind), "sft_pass256"]) for kind in ("all", "minority", "rest")},
            "seeds": 1,
        }
    ]
    for label in labels:
        rows.append(
            {
                "label": label,
                **{kind: float(cells.loc[(label, kind), "final_pass256"]) for kind in ("all", "minority", "rest")},
                "seeds": int(cells.loc[(label, "all"), "seeds"]),
            }
        )
    return rows


def report_summary(report: str | Path, ctx: Context, figures=(), deferred: tuple[str, ...] = ()) -> ReportSummary:
    """What the report at ``report`` found, read back from the caches of ``ctx`` it was written from.

    Parameters
    ----------
    report : path
        The written report (its ledger's counts are read from it).
    ctx : Context
        The context the report was written with (quick or full, its caches).
    figures : sequence of path
        The figures written beside it.
    deferred : tuple of str
        The studies the report left out (their numbers are not read).

    Returns
    -------
    ReportSummary
    """
    from tailmiss import analytic

    report = Path(report)
    n_star, peak = analytic.tail_miss_peak(FIG5_MU_POS, FIG5_TAU)
    return ReportSummary(
        report=report,
        figures=tuple(Path(p) for p in figures),
        quick=ctx.quick,
        tail_miss={"mu_pos": FIG5_MU_POS, "tau": FIG5_TAU, "n_star": int(n_star), "peak": float(peak)},
        simulator=_simulator(ctx),
        narrowing=[] if "narrowing" in deferred else _narrowing(ctx),
        ledger=ledger_counts(report.read_text()),
        study_answer=_study_answer() if ctx.quick and "narrowing" not in deferred else [],
    )
