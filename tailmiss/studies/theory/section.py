"""The report's theory section: the closed-form claims of F-GRPO and BroRL beside ours, as text."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.rule import Verdict
from tailmiss.studies.text import Section, table, yes
from tailmiss.studies.theory.claims import TheoryClaims, theory_claims

__all__ = ["HEADING", "theory_section", "write"]

HEADING = "## Theory"
"""The start of the section's heading line."""


def _lemma_rows(c: TheoryClaims) -> list[list[str]]:
    """Lemma 3.1: Fig. 1(a), Fig. 3 and Fig. 5."""
    rows = []
    cells = "; ".join(f"ρ={rho:g}: " + ", ".join(f"{v:.4f}" for v in vals) for rho, vals in c.fig1a_values.items())
    rows.append(
        [
            "Fig. 1(a)",
            f"Lemma 3.1 is 0 at N=1, rises, then falls (μ={c.fig1a_mu:g}; markers at N=2, 8, 32)",
            f"N=1, 2, 8, 32 → {cells}; non-monotone: {yes(c.fig1a_nonmonotone)}",
            "`tailmiss figures make fig1a`",
        ]
    )
    peaks = [
        f"μ={mu_p}: " + ", ".join(f"N*={a} ({b:.3f})" for a, b in zip(n_star, peak))
        for mu_p, n_star, peak in c.fig3_peaks
    ]
    rows.append(
        [
            "Fig. 3",
            "a smaller ρ moves the peak right and up; no closed-form argmax",
            "ρ = 0.01, 0.05, 0.1, 0.2 → " + "; ".join(peaks) + f". Right and up: {yes(c.fig3_moves_right_and_up)}",
            "`tailmiss figures make fig3`; `tailmiss analytic peak --mu-pos 0.5 --rho 0.01`",
        ]
    )
    init = c.fig5_init
    rows.append(
        [
            "Fig. 5",
            "tail miss < 1e-3 at N=2^17 for a non-anchor action (μ=0.64, τ=6.3e-5)",
            f"{c.fig5_p17:.3g} (exact init μ={init.q_pos:.5f}, τ={init.tau_leaf:.4g}: {c.fig5_p17_init:.3g}); "
            f"peak N*={c.fig5_n_star} ({c.fig5_peak:.5f}). Below 1e-3: {yes(c.fig5_below)}",
            "`tailmiss analytic tail-miss --mu-pos 0.64 --tau 6.3e-5 -n 131072`",
        ]
    )
    return rows


def _update_rows(c: TheoryClaims) -> list[list[str]]:
    """Focal magnitudes (Fig. 4), the LR-matched scale (App. N), BroRL's coupling and Prop. 3.2's worked example."""
    rows = []
    rows.append(
        [
            "Fig. 4",
            "focal weighting shrinks updates of high-success groups; |A−| unbounded at γ=0",
            f"max g|A−|: γ=0 {c.fig4_max_grpo:.2f} (grows as μ̂→1), γ=0.5 {c.fig4_max_half:.3f} (≤ 1), "
            f"γ=1 {c.fig4_max_one:.3f} (≤ 0.5)",
            "`tailmiss figures make fig4`",
        ]
    )
    m = c.lr_scales
    rows.append(
        [
            "App. N",
            "GRPO low-LR control at 6.8e-7 = m_0.5 × 1e-6",
            f"m_γ for γ=0, 0.5, 1, 2: {', '.join(f'{x:.5f}' for x in m)}; m_0.5 × 1e-6 = {m[1] * 1e-6:.3g}",
            "`tailmiss.analytic.lr_matched_scale`",
        ]
    )
    rows.append(
        [
            "BroRL Thm. 1 / Cor. 3",
            "the unsampled coupling shrinks with N; large N makes ΔQ_pos ≥ 0",
            "E[Q_pos U_neg,2 − Q_neg U_pos,2] at init, N = 2, 512, 51200, 131072: "
            + ", ".join(f"{x:+.3e}" for x in c.coupling)
            + f"; first positive at N = {c.coupling_flip}",
            "`tailmiss.analytic.expected_unsampled_coupling`",
        ]
    )
    mb, uc = c.mass_balance, c.unsampled_change
    rows.append(
        [
            "Prop. 3.2",
            "ΔQ_u,pos < 0 while ΔQ_pos > 0 in reward-positive batches",
            f"worked example (R 1/0): ΔQ_pos = {mb.delta_q_pos:.4f} (terms {mb.sampled_correct:.4f}, "
            f"{mb.sampled_incorrect:.4f}, {mb.unsampled:.4f}), ΔQ_u,pos = {uc.delta_q_u_pos:.4f}",
            "`tailmiss.analytic.mass_balance`, `unsampled_correct_change`",
        ]
    )
    return rows


def theory_section(claims: TheoryClaims | None = None) -> str:
    """Markdown for the closed-form claims (deterministic; checked against the committed report); ``claims`` when the
    caller already holds them (:func:`~tailmiss.studies.theory.claims.theory_claims`)."""
    c = theory_claims() if claims is None else claims
    rows = _lemma_rows(c) + _update_rows(c)
    return f"{HEADING} (closed forms)\n\n" + table(["paper item", "paper", "ours", "command"], rows) + "\n"


def write(ctx=None, deferred: tuple[str, ...] = ()) -> Section:
    """The theory section and its ledger rows (the closed forms, judged by
    :func:`tailmiss.studies.ledger.theory_records`); deterministic, so ``ctx`` and ``deferred`` are not read."""
    claims = theory_claims()
    rows = [(key, ours, Verdict.of(v)) for key, ours, v in ledger.theory_records(claims)]
    return Section(theory_section(claims), rows)
