"""The narrowing section's part "F-GRPO Table 3 in this regime": the controls at N = 8, what each moves, why DS-GRPO
hardly varies over seeds and β, and Table 3's sentences (verdicts from :mod:`tailmiss.studies.narrowing.claims`)."""

from __future__ import annotations

import numpy as np

from tailmiss.studies.narrowing import claims as nc
from tailmiss.studies.text import table

__all__ = ["controls_lines"]


def _ms(mean: float, sd: float, digits: int = 3) -> str:
    return f"{mean:.{digits}f}" if not np.isfinite(sd) else f"{mean:.{digits}f}±{sd:.{digits}f}"


def controls_lines(c: nc.NarrowingClaims) -> list[str]:
    """The part's markdown lines from :class:`~tailmiss.studies.narrowing.claims.NarrowingClaims` ``c``."""
    eff = c.effects.set_index("label") if c.effects is not None else None
    rows = []
    for r in c.controls.itertuples():
        name = f"{r.label} (as {c.copies[r.label]})" if r.label in c.copies else r.label
        e = eff.loc[r.label] if eff is not None and r.label in eff.index else None
        moves = (
            f"{e['entropy']:.3f} / {e['kl_ref']:.3f} / {e['clip_frac']:.1e}"
            if e is not None and {"entropy", "kl_ref", "clip_frac"} <= set(e.index)
            else "—"
        )
        cells = [_ms(r.pass1, r.pass1_sd), _ms(r.pass256, r.pass256_sd), _ms(r.dnll, r.dnll_sd, 2)]
        rows.append([name, *cells, moves, str(r.seeds)])
    out = [
        "### F-GRPO Table 3 in this regime: the controls at N = 8",
        "",
        "Each at its selected checkpoint; the last-but-one column is the mean over training of the policy's entropy "
        "(nats per token), its KL to the SFT model and the clipped share of tokens (what each control moves).",
        "",
        table(["run", "pass@1", "pass@256", "ΔNLL_rare", "entropy / KL / clipped", "seeds"], rows),
        "",
    ]
    out += _moves(c)
    out += _ds(c)
    for _, s in c.sentences:
        out.append(f"- “{s.text}” (one Holm family): {s.cell(most=12)} → **{s.verdict}**.")
    return out + [""]


def _moves(c: nc.NarrowingClaims) -> list[str]:
    """How much each regulariser moved what it acts on, and how often CISPO clipped (against GRPO N = 8)."""
    if c.effects is None or "entropy_ratio" not in c.effects:
        return []
    e = c.effects.set_index("label")
    words = []
    for label, col, what in (
        ("GRPO N=8 entropy", "entropy_ratio", "entropy"),
        ("GRPO N=8 entropy-1e-2", "entropy_ratio", "entropy"),
        ("GRPO N=8 KL", "kl_ref_ratio", "KL to the SFT model"),
        ("GRPO N=8 KL-1e-2", "kl_ref_ratio", "KL to the SFT model"),
    ):
        if label in e.index and np.isfinite(e.loc[label, col]):
            words.append(f"{label.removeprefix('GRPO N=8 ')} moves the mean {what} to {e.loc[label, col]:.2f}× GRPO's")
    if "CISPO N=8" in e.index and "clip_frac" in e:
        share, grpo = float(e.loc["CISPO N=8", "clip_frac"]), float(e.loc[nc.GRPO, "clip_frac"])
        copy = " (marked as GRPO's and counted as no evidence)" if "CISPO N=8" in c.copies else ""
        words.append(f"CISPO clips a share {share:.1e} of tokens per step on average{copy}, GRPO's PPO clip {grpo:.1e}")
    return [f"- What the controls move: {'; '.join(words)}.", ""] if words else []


def _ds(c: nc.NarrowingClaims) -> list[str]:
    """Why DS-GRPO's pass@256 barely varies over seeds and β: β cancels in all-correct groups, and every seed ends
    with the rest covered and the minority lost (the final step, by prompt type)."""
    t = c.typed.set_index(["label", "type"])
    arms = [a for a in ("GRPO N=8 DS", "GRPO N=8 DS-2e-1") if (a, "minority") in t.index and (a, "rest") in t.index]
    if not arms:
        return []
    cells = "; ".join(
        f"{a}: rest {_ms(t.loc[(a, 'rest'), 'pass256'], t.loc[(a, 'rest'), 'pass256_sd'])}, minority "
        f"{_ms(t.loc[(a, 'minority'), 'pass256'], t.loc[(a, 'minority'), 'pass256_sd'])}"
        for a in arms
    )
    return [
        "- Why DS-GRPO's pass@256 hardly varies over seeds or β: with the std-normalised advantage an all-correct "
        "group's rewards differ only by the bonus −β log π, so centring and dividing by their sd removes β (its "
        "advantages are the standardised −log π at any β > 0: `tests/test_reward_transforms.py`), and in a mixed "
        "group the bonus moves a correct reward by β |log π|, small against the 0/1 gap; no β of this form can move "
        "the all-correct groups, which dominate late in training. At the final step (seed mean ± sd by prompt type) "
        f"{cells}: every seed covers the rest and loses the minority, so pass@256 sits near the rest's share of the "
        "held-out prompts whatever the seed.",
        "",
    ]
