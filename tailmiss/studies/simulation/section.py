"""The report's simulation section: F-GRPO Fig. 2 and BroRL Fig. 3 claims beside ours, as text."""

from __future__ import annotations

from tailmiss.analytic.regimes import ZONE_THRESHOLD
from tailmiss.studies import ledger
from tailmiss.studies.context import Context
from tailmiss.studies.rule import Verdict, both_readings
from tailmiss.studies.simulation.claims import (
    KEEPS,
    VANISHED,
    Fig2Claims,
    brorl_claims,
    brorl_verdicts,
    fig2_claims,
    fig2_verdicts,
)
from tailmiss.studies.simulation.data import simulated_means
from tailmiss.studies.text import Section, table

__all__ = ["HEADING", "write"]

HEADING = "## Simulation"
"""The start of the section's heading line."""


def _word(verdict) -> str:
    word = str(verdict)
    return f"**{word}**" if word == "refuted" else word


def _rule(v: dict, key: str) -> str:
    """`` → verdict`` of claim ``key`` by the noise rule over seeds (its parts' outcomes in brackets)."""
    if key not in v:
        return " → cannot tell (no γ = 1 runs or no zone II)"
    s = v[key]
    return f" → by the noise rule over seeds ({s.cell(most=2)}): {_word(s.verdict)}"


def _fig2_rows(label: str, c: Fig2Claims, v: dict) -> list[list[str]]:
    zone = "none" if c.zone is None else f"N ∈ ({c.zone[0]:.0f}, {c.zone[1]:.0f})"
    return [
        [label, "Q_pos rises for every N", "final against initial Q_pos, every (N, γ)" + _rule(v, "fig2-rises")],
        [
            label,
            "M_ret is non-monotone in N, lowest at intermediate N",
            f"min M_ret = {c.min_mret:.3f} at N = {c.argmin}; ends {c.ends[0]:.3f} / {c.ends[1]:.3f}; "
            f"zone II (γ=0 M_ret < {ZONE_THRESHOLD:g}): {zone}; both ends against the minimum"
            + _rule(v, "fig2-nonmono"),
        ],
        [
            label,
            "γ = 1 lifts M_ret, mostly in zone II",
            f"mean ΔM_ret (γ=1 − γ=0): {c.lift_in:+.3f} inside zone II, {c.lift_out:+.3f} outside; the lift inside "
            "against 0 and against the lift outside" + _rule(v, "fig2-lift"),
        ],
        [
            label,
            f"N = {c.nmax} alone keeps M_ret ≈ 1 throughout",
            f"min over steps of M_ret at N = {c.nmax}, γ=0: {c.largest_min_mret:.3f}; N whose seed mean stays ≥ "
            f"{KEEPS:g} at every step: {', '.join(map(str, c.keepers)) or 'none'}; per seed, the lowest M_ret at "
            f"N = {c.nmax} not lower than {KEEPS:g} and at every other N lower" + _rule(v, "fig2-alone"),
        ],
    ]


def _final_values(c: Fig2Claims, preset: str) -> str:
    """The table of final Q_pos, M_ret and entropy by N and γ (mean over seeds) of one Fig. 2 preset."""
    final = c.final.pivot(index="group_size", columns="gamma", values=["q_pos", "retained_mass", "entropy"])
    table_rows = [
        [int(n)]
        + [
            f"{final[(m, g)].loc[n]:.3f}"
            for m in ("q_pos", "retained_mass", "entropy")
            for g in (0.0, 1.0)
            if (m, g) in final.columns
        ]
        for n in final.index
    ]
    gammas = [g for g in (0.0, 1.0) if ("q_pos", g) in final.columns]
    header = ["N"] + [f"{m} γ={g:g}" for m in ("Q_pos", "M_ret", "entropy") for g in gammas]
    return f"Final values, `{preset}` (mean over seeds):\n\n" + table(header, table_rows) + "\n"


def _by_n(b, values, spec: str) -> str:
    """``"N: value"`` for each group size of the BroRL sweep ``b``, each value in the format ``spec``."""
    return ", ".join(f"{int(n)}: {v:{spec}}" for n, v in zip(b.group_sizes, values))


def _brorl_rows(b, vb: dict) -> list[list[str]]:
    """BroRL Fig. 3's and §4.1's claims beside ours, each with its verdict by the noise rule."""
    return [
        [
            "BroRL Fig. 3",
            "larger N raises Q_pos faster",
            f"ΔQ_pos by N {_by_n(b, b.gains, '+.4f')}; each N against the next smaller" + _rule(vb, "brorl-faster"),
        ],
        [
            "BroRL §4.1",
            "small N is slow and noisy and sometimes regresses",
            "end against start Q_pos at N ≤ 16 (“sometimes regresses”: one of them lower)" + _rule(vb, "brorl-regress"),
        ],
        [
            "BroRL §4.1",
            "gains are monotone but concave in N",
            "ΔQ_pos per doubling of N between neighbouring N: "
            + ", ".join(f"{x:+.4f}" for x in b.slopes)
            + "; increasing gains and a gain per doubling never above the one before"
            + _rule(vb, "brorl-concave"),
        ],
        [
            "BroRL Fig. 3",
            "worst drops vanish at large N",
            f"final worst drop by N {_by_n(b, b.worst_drop, '.2e')}; the largest N's against the smallest N's, and "
            f"below {VANISHED:g} on every seed" + _rule(vb, "brorl-drops"),
        ],
        [
            "BroRL Fig. 3",
            "larger N improves more correct actions",
            f"final % improved {_by_n(b, [100 * f for f in b.improved], '.1f')}; each N against the next smaller"
            + _rule(vb, "brorl-improved"),
        ],
    ]


def write(ctx: Context, deferred: tuple[str, ...] = ()) -> Section:
    """Markdown for the simulation claims (F-GRPO Fig. 2, BroRL Fig. 3), from the cached (or freshly run) presets,
    and its ledger rows; the study's writer (``deferred`` is not read)."""
    parts = [f"{HEADING} (F-GRPO Fig. 2, BroRL Fig. 3)\n"]
    fig2 = simulated_means("fgrpo-fig2", ctx)
    prob = simulated_means("fgrpo-fig2-prob", ctx)
    c_log, c_prob = fig2_claims(fig2), fig2_claims(prob)
    parts.append(
        "App. J names no optimizer and its surrogate reads like (1/N)Σ r̃ p. Both readings run below "
        f"(`{fig2.preset}`: log-prob surrogate + Adam; `{prob.preset}`: probability "
        "surrogate + AdamW). Figures: `fig2.png` and `fig2-prob.png`, made by "
        "`tailmiss figures make fig2 fig2-prob`. The log-prob reading gives the paper's picture (its cells say where "
        "it does not); the literal reading contradicts it (Q_pos falls at small N and M_ret collapses even at the "
        "largest N), so its **no** cells are the finding, not a regression.\n"
    )
    v_log, v_prob = fig2_verdicts(fig2, c_log), fig2_verdicts(prob, c_prob)
    ledger_rows = _record_fig2((c_log, v_log), (c_prob, v_prob))
    rows = _fig2_rows("Fig. 2, log-prob + Adam", c_log, v_log) + _fig2_rows("Fig. 2, prob + AdamW", c_prob, v_prob)
    parts.append(table(["setup", "paper", "ours"], rows) + "\n")
    parts.append(_final_values(c_log, fig2.preset))

    brorl = simulated_means("brorl-fig3", ctx)
    b = brorl_claims(brorl)
    vb = brorl_verdicts(brorl)
    ledger_rows += _record_brorl(b, vb)
    brows = _brorl_rows(b, vb)
    parts.append(
        f"BroRL preset `{brorl.preset}`, {brorl.num_seeds} seeds (`tailmiss figures make brorl-fig3`):\n\n"
        + table(["figure", "paper", "ours"], brows)
        + "\n"
    )
    return Section("\n".join(parts), ledger_rows)


_READINGS = (
    "log-prob surrogate + Adam, no weight decay (the reading that follows the figure)",
    "literal probability surrogate + AdamW, weight decay 0.01",
)


def _record_fig2(*readings) -> list:
    """F-GRPO Fig. 2's verdicts for the claims ledger, under both readings of App. J (each named with its
    assumptions, its comparisons and its verdict): :func:`tailmiss.studies.rule.both_readings` merges them."""
    rows = []
    for key in ("fig2-rises", "fig2-nonmono", "fig2-lift", "fig2-alone"):
        words, verdicts = [], []
        for name, (_, v) in zip(_READINGS, readings):
            if key in v:
                verdicts.append(v[key].verdict)
                words.append(f"{name}: {v[key].cell(most=2)}: {v[key].verdict}")
            else:
                verdicts.append(Verdict.CANNOT_TELL)
                words.append(f"{name}: no γ = 1 runs or no zone II: cannot tell")
        rows += ledger.row(key, "; ".join(words), both_readings(verdicts))
    return rows


def _record_brorl(b, v: dict) -> list:
    """BroRL Fig. 3's and §4.1's verdicts for the claims ledger, each by the noise rule over the preset's seeds."""
    rows = []
    gains = ", ".join(f"{int(n)}: {g:+.4f}" for n, g in zip(b.group_sizes, b.gains))
    slopes = ", ".join(f"{x:+.4f}" for x in b.slopes)
    improved = ", ".join(f"{int(n)}: {100 * f:.1f}" for n, f in zip(b.group_sizes, b.improved))
    heads = {
        "brorl-faster": f"ΔQ_pos by N {gains}",
        "brorl-regress": "end − start Q_pos at N ≤ 16",
        "brorl-concave": f"gain per doubling {slopes}",
        "brorl-drops": f"final worst drop at N = {int(b.group_sizes[-1])}: {b.worst_drop[-1]:.2e}",
        "brorl-improved": f"% improved {improved}",
    }
    for key, head in heads.items():
        rows += ledger.row(key, f"{head}; {v[key].cell(most=2)}", v[key].verdict)
    return rows
