"""The report's "The paper's protocol" section: the protocol ladder and the noise of a one-seed Table 2, as text.

Numbers and verdicts come from :mod:`tailmiss.studies.protocol.claims` over
:func:`tailmiss.studies.protocol.data.protocol_data`; this module only writes them.
"""

from __future__ import annotations

import numpy as np

from tailmiss.studies import ledger, rule
from tailmiss.studies.context import Context
from tailmiss.studies.protocol import claims as pc
from tailmiss.studies.protocol import noise as nc
from tailmiss.studies.protocol.data import protocol_data
from tailmiss.studies.rule import Verdict, compare
from tailmiss.studies.text import Section, blocks, table

__all__ = ["HEADING", "DEFERRED_WHY", "write", "protocol_text"]

HEADING = "## The paper's protocol: does Table 2's dip appear, and could one seed show it?"
"""The start of the section's heading line."""


def _verdict(v) -> str:
    """A verdict as the ledger writes it (refuted in bold)."""
    return f"**{v}**" if v == Verdict.REFUTED else str(v)


def _ms(mean: float, sd: float, digits: int = 3) -> str:
    return f"{mean:.{digits}f}" if not np.isfinite(sd) else f"{mean:.{digits}f}±{sd:.{digits}f}"


def _grpo(t):
    return t[(t["method"] == "grpo") & (t["gamma"] == 0)].sort_values("group_size")


def _n(label: str) -> str:
    return label.removeprefix("GRPO ")


def _vs(d) -> str:
    """``a − b: number (test, df, p)``."""
    return f"{_n(d.a)} − {_n(d.b)} {d.describe()}"


def _ladder_rows(claims: pc.ProtocolClaims) -> list[list[str]]:
    rows = []
    for rung in pc.RUNGS:
        t, v = claims.tables[rung.name], claims.verdicts[rung.name]
        g = _grpo(t).set_index("group_size")
        curve = ", ".join(_ms(g.loc[n, "pass256"], g.loc[n, "pass256_sd"]) for n in g.index)
        dnll = ", ".join(_ms(g.loc[n, "dnll"], g.loc[n, "dnll_sd"], 2) for n in (2, 8, 32) if n in g.index)
        gaps = v.dnll.cell()
        reach = "; ".join(f"γ={gm:g}: {s.cell()}: {_verdict(s.verdict)}" for gm, s in v.reach.items())
        rows.append(
            [
                f"`{rung.name}`",
                rung.ingredient,
                str(int(g["seeds"].min())),
                curve,
                str(v.pass256_shape.worst_n),
                _verdict(v.dip),
                _dip_cell(v),
                dnll,
                _verdict(v.dnll_order),
                gaps,
                reach or "—",
            ]
        )
    return rows


def _dip_cell(v) -> str:
    """(a)'s sentence in a table cell (how many parts hold and the one that decides it)."""
    return "—" if v.dip_sentence is None else v.dip_sentence.cell(most=2)


def _best_lines(claims: pc.ProtocolClaims) -> list[str]:
    """(a) per rung: every comparison of its one Holm family."""
    return [
        f"- `{rung.name}`: " + (s.cell(most=20) if (s := claims.verdicts[rung.name].dip_sentence) is not None else "—")
        for rung in pc.RUNGS
    ]


def _paper_rows(claims: pc.ProtocolClaims) -> list[list[str]]:
    t = claims.tables["selection"]
    rows = []
    for _, r in t.iterrows():
        paper = pc.PAPER_PASS256.get(int(r["group_size"])) if r["gamma"] == 0 else None
        rows.append(
            [
                r["label"],
                _ms(r["pass1"], r["pass1_sd"]),
                _ms(r["pass256"], r["pass256_sd"]),
                f"{paper / 100:.3f}" if paper else ("0.703 (γ=0.5)" if r["gamma"] == 0.5 else "—"),
                _ms(r["dnll"], r["dnll_sd"], 2),
                _ms(r["mret"], r["mret_sd"]),
                _ms(r["rare256"], r["rare256_sd"]),
                f"{r['step']:.0f}±{r['step_sd']:.0f}" if np.isfinite(r["step_sd"]) else f"{r['step']:.0f}",
            ]
        )
    return rows


def _ns(noise: nc.NoiseClaims) -> list[int]:
    return sorted(int(n) for n in noise.spread["group_size"].unique())


def _noise_rows(noise: nc.NoiseClaims) -> list[list[str]]:
    rows = []
    for scoring, frame in noise.spread.groupby("scoring", sort=True):
        frame = frame.sort_values("group_size")
        rows.append([scoring, *(_ms(m, s) for m, s in zip(frame["mean"], frame["sd"]))])
    return rows


def _single_rows(noise: nc.NoiseClaims) -> list[list[str]]:
    return [
        [
            r["scoring"],
            str(r["seeds"]),
            f"{'monotone' if r['monotone'] else 'interior minimum'} (worst N = {r['worst_n']})",
            f"{r['p_table2']:.3f}",
            f"{r['p_interior']:.3f}",
            f"{r['pooled_sd']:.3f}",
            str(r["seeds_needed"]),
        ]
        for _, r in noise.single_seed.sort_values("scoring").iterrows()
    ]


def _focal_and_selection(claims: pc.ProtocolClaims) -> list[str]:
    """Two readings of the paper-protocol table: F-GRPO against GRPO at the same N, and what selection chose."""
    chosen = claims.chosen["selection"]
    out = []
    if "GRPO N=8" in set(chosen["label"]):
        focal = chosen[(chosen["gamma"] > 0) & (chosen["group_size"] == 8)]
        for label in dict.fromkeys(focal["label"]):
            parts = []
            for metric, name in (("pass256", "pass@256"), ("pass1", "pass@1")):
                d = compare(chosen, label, "GRPO N=8", metric)
                parts.append(f"{name} {d.describe()}: {d.outcome}")
            out.append(f"{label} against GRPO N=8 on the paper's protocol: " + ", ".join(parts) + ".")
    last = claims.chosen["epochs"]
    same = (chosen["step"].to_numpy() == last["step"].to_numpy()).mean() if len(chosen) == len(last) else np.nan
    if np.isfinite(same):
        why = ": held-out pass@1 still rises at the end of these runs, so selection changes nothing here"
        out.append(f"Checkpoint selection chose the last epoch in {same:.0%} of the runs{why if same == 1 else ''}.")
    return out


def _appq_sentence(claims: pc.ProtocolClaims) -> str:
    """App. Q's verdict from the same-config rate against the test's own size."""
    q, same = claims.appq, claims.noise.same_config
    calls = " and ".join(
        f"{r['significant']:.0%} of {r['pairs']} on the {r['benchmark']}-prompt set" for _, r in same.iterrows()
    )
    head = f"The App. Q test calls same-config, different-seed pairs significant at α = 0.05 in {calls}"
    if not q.diffs:
        return f"{head}; App. Q's use of the test is not resolved here: {q.reason}."
    beside = " and ".join(f"{d.rate_b:.1%} of {d.n_b} tests ({b} prompts)" for b, d in q.diffs.items())
    head += f", against its own size {beside} under its null (two independent answer draws from the same masses)"
    if q.verdict == Verdict.REFUTED:
        return (
            f"{head}: {q.reason}. It accounts for sampling one checkpoint's answers, not for training another seed, "
            "so a one-run comparison it calls significant is not evidence of a method difference (App. Q: **refuted**)."
        )
    return f"{head}: {q.reason} (App. Q: {q.verdict})."


def _appq_table(claims: pc.ProtocolClaims) -> tuple[list[str], list[list[str]]]:
    """App. Q's rows per benchmark: same-config rate, and where measured the test's own size and the difference."""
    same, q = claims.noise.same_config, claims.appq
    head = ["benchmark prompts", "same-config pairs", "called significant"]
    if q.diffs:
        head += ["test's own size (tests)", "seed contribution [95 % interval] (test)", "outcome"]
    head += ["form"] if "form" in same else []
    rows = []
    for _, r in same.iterrows():
        row = [str(r["benchmark"]), str(r["pairs"]), f"{r['significant']:.1%}"]
        d = q.diffs.get(str(r["benchmark"]))
        if q.diffs:
            row += [f"{d.rate_b:.1%} ({d.n_b})", d.describe(), str(d.outcome)] if d else ["—", "—", "—"]
        rows.append(row + ([str(r["form"])] if "form" in same else []))
    return head, rows


def _conclusion(claims: pc.ProtocolClaims) -> str:
    v = claims.verdicts["selection"]
    noise = claims.noise
    sampled = noise.single_seed[noise.single_seed["scoring"].str.startswith("sampled")]
    worst_p = sampled.sort_values("p_table2").iloc[-1] if len(sampled) else None
    same = noise.same_config
    lines = [
        "**What this miniature can and cannot say about Table 2.** "
        + (
            "Under the paper's protocol GRPO's pass@256 is best at N = 2, dips near N = 8 and recovers at N = 32 "
            f"beyond the seed noise ({_dip_cell(v)}), as in Table 2."
            if v.dip == Verdict.REPRODUCED
            else f"Under the paper's protocol Table 2's dip is {_verdict(v.dip)} (worst N by the seed means "
            f"{v.pass256_shape.worst_n}; {_dip_cell(v)})."
        )
    ]
    if worst_p is not None:
        pattern = (
            f"(interior minimum, dip ≥ {nc.PAPER_DIP:.3f} from N = 2, recovery ≥ {nc.PAPER_RECOVERY:.3f} at N = 32)"
        )
        best_int = sampled.sort_values("p_interior").iloc[-1]
        shows = (
            f"with probability up to {worst_p['p_table2']:.3f} (`{worst_p['scoring']}`)"
            if worst_p["p_table2"] > 0
            else "in none of the one-seed-per-N sweeps these seeds make"
        )
        lines.append(
            f"Scored the paper's way (one seed per N, {noise.n_samples} samples per prompt, the unbiased estimator), "
            f"a single-seed sweep shows a Table-2-like pattern {pattern} {shows}; any interior minimum that recovers "
            f"appears with probability {best_int['p_interior']:.3f} (`{best_int['scoring']}`)"
            + (", where the seed-mean curve has none." if best_int["monotone"] else ".")
        )
    if len(same):
        lines.append(_appq_sentence(claims))
    need = " and ".join(
        f"about {v} (per-problem spread of the {k}-prompt set)" for k, v in noise.problems_needed.items() if v
    )
    if need:
        lines.append(
            f"To resolve the paper's recovery margin ({nc.PAPER_RECOVERY:.3f}) between GRPO N = 8 and N = 32 "
            f"(two-sided 5 %, 80 % power), the sampling of problems alone asks for {need} problems, and each "
            "scoring's seed spread asks for the seeds per N in the table above."
        )
    lines.extend(_focal_and_selection(claims))
    lines.append(
        "What it cannot say: the model has 0.1M parameters and a digit task, trained for tens of steps, where the "
        "paper trains 7B models on math; the mechanisms (seed noise, sampling noise, checkpoint selection) carry "
        "over, the sizes of their effects need not."
    )
    return " ".join(lines)


def _record(claims: pc.ProtocolClaims) -> list:
    """Table 2's dip and F-GRPO's reach under the paper's protocol, and App. Q's test, for the claims ledger: each
    verdict from the rule and the numbers the section prints (this section's reach replaces the small-transformer
    section's, written before it)."""
    rows = []
    v = claims.verdicts["selection"]
    g = _grpo(claims.tables["selection"])
    curve = ", ".join(f"{int(n)}: {p:.3f}" for n, p in zip(g["group_size"], g["pass256"]))
    seeds = f"{int(g['seeds'].min())} seeds, paired"
    rows += ledger.row(
        "t2-protocol",
        f"paper's protocol, GRPO pass@256 by N {curve} ({seeds}); {_dip_cell(v)}",
        v.dip,
    )
    if v.reach:
        gamma = 0.5 if 0.5 in v.reach else min(v.reach)
        s = v.reach[gamma]
        rows += ledger.row(
            "t2-reach",
            f"paper's protocol, {s.cell()}"
            + (" (N = 32 is GRPO's worst: vacuous)" if v.pass256_shape.worst_n == 32 else ""),
            s.verdict,
        )
    q, same = claims.appq, claims.noise.same_config
    if q.diffs:
        rates = "; ".join(
            f"{b} prompts: {d.rate_a:.1%} of {d.n_a} vs {d.rate_b:.1%}, seeds − null share {d.describe()}: {d.outcome}"
            for b, d in q.diffs.items()
        )
        ours = f"same-config pairs called significant vs the test's own size: {rates}"
    else:
        calls = ", ".join(
            f"{r['significant']:.0%} of {r['pairs']} ({r['benchmark']} prompts)" for _, r in same.iterrows()
        )
        ours = f"same-config pairs called significant: {calls or '—'}"
    rows += ledger.row("appQ", f"{ours} ({q.reason})", q.verdict)
    return rows


def _intro(claims: pc.ProtocolClaims) -> str:
    """The paragraph under the heading: Table 2's numbers, the rungs' presets and the rule behind the verdicts."""
    names = claims.names
    return (
        "F-GRPO Table 2 (Qwen2.5-7B, math; v2 gives no seed count): GRPO pass@256 "
        + " / ".join(f"{v:.1f}" for v in pc.PAPER_PASS256.values())
        + " at N = 2 … 32, ΔNLL_rare 0.19 / 0.44 / 0.68 / 0.66 / 0.52 (N=2 < N=32 < N=8), F-GRPO N = 8 70.3 / 0.46. "
        "Each rung below changes one ingredient of the paper's protocol (F-GRPO Table 5) against the rung it names "
        "(the path today → difficulty → epochs → selection ends at the paper's protocol); every rung has the same "
        "budget and scores the same held-out prompts (exact correct masses). Presets: "
        + ", ".join(f"`{names[r]}`" for r in dict.fromkeys(rung.sweep for rung in pc.RUNGS))
        + ". Each comparison below is judged by the report's noise rule, paired by seed (every N of a rung shares "
        f"the seeds and the SFT model; δ: pass@256 {rule.practical_threshold('pass256'):g}, ΔNLL_rare "
        f"{rule.practical_threshold('dnll'):g}), and printed a − b with its test. (a) pass@256 best at N = 2 (N = 2 "
        "not lower than any other N, one Holm family), its seed-mean worst N strictly inside, and N = 32 higher than "
        "that worst N; (b) ΔNLL_rare N=2 < N=32 < N=8: N = 32 − N = 2 and N = 8 − N = 32 both higher (one Holm "
        "family); (c) F-GRPO N = 8 not lower than GRPO N = 32 on pass@256 (a resolved lower refutes it; where N = 32 "
        "is GRPO's worst N a reach is vacuous: not resolved). Each sentence is *reproduced* when every part goes its "
        "way, *refuted* when one goes the other way beyond noise and δ, *partly* / *not resolved* on ties, *cannot "
        "tell* with fewer than three seeds."
    )


def _ladder_parts(claims: pc.ProtocolClaims) -> list[str]:
    """The protocol ladder's table, (a)'s families, each ingredient's effect and the paper-protocol table."""
    seeds_paper = int(claims.tables["selection"]["seeds"].max())
    return [
        "### The protocol ladder (figure `protocol.png`)",
        "",
        table(
            [
                "rung",
                "adds",
                "seeds",
                "GRPO pass@256 by N = " + ", ".join(map(str, _ns(claims.noise))),
                "worst N (seed means)",
                "(a) dip",
                "(a) its family",
                "ΔNLL_rare N = 2, 8, 32",
                "(b) order",
                "(b) gaps",
                "(c) F-GRPO N=8 − GRPO N=32",
            ],
            _ladder_rows(claims),
        ),
        "",
        "(a) per rung, every comparison of its one Holm family (N = 2 not lower than each other N; some N of 8 and 16 "
        "below N = 2 and N = 32):",
        "",
        *_best_lines(claims),
        "",
        "What each ingredient does to each property (creates / removes / none, against the named rung):",
        "",
        "| rung | against | ingredient | (a) dip | (b) ΔNLL order | (c) F-GRPO reach (γ = 0.5) |",
        "|---|---|---|---|---|---|",
        *(
            f"| `{e.rung}` | `{e.against}` | {e.ingredient} | {e.dip} | {e.dnll_order} | {e.focal_reach} |"
            for e in claims.effects
        ),
        "",
        f"The paper's protocol (`selection` rung, {seeds_paper} seeds), beside Table 2 (pass@256 as a fraction):",
        "",
        table(
            ["run", "pass@1", "pass@256", "paper pass@256", "ΔNLL_rare", "M_ret", "rare hit@256", "selected step"],
            _paper_rows(claims),
        ),
    ]


def _noise_parts(claims: pc.ProtocolClaims) -> list[str]:
    """The noise part: the seed spread by scoring, every one-seed-per-N sweep, and App. Q's table."""
    return [
        "### Could one seed show it? (figure `noise.png`)",
        "",
        f"GRPO's selected checkpoints on the paper-protocol rung, pass@256 scored exactly (`exact-P`) and the paper's "
        f"way (`sampled-P`: {claims.noise.n_samples} answers per prompt drawn from the checkpoint's exact correct "
        "masses, the unbiased estimator of F-GRPO App. L.4, Eq. 27; P prompts). Seed mean ± sd by N = 2, 4, 8, 16, 32:",
        "",
        table(["scoring", "N=2", "N=4", "N=8", "N=16", "N=32"], _noise_rows(claims.noise)),
        "",
        "Every one-seed-per-N sweep that these seeds make (seeds^5 of them):",
        "",
        table(
            [
                "scoring",
                "seeds",
                "seed-mean curve",
                "P(Table-2-like)",
                "P(interior min + recovery)",
                "pooled seed sd",
                "seeds per N to resolve 0.06",
            ],
            _single_rows(claims.noise),
        ),
        "",
        "App. Q (`tailmiss.analytic.significance.paired_subsampling_test`, m = 256 of "
        f"n = {claims.noise.n_samples}, two-sided α = 0.05, {claims.noise.iterations:,} subsamples per pair) on pairs "
        "of seeds of one GRPO config, beside the test's own size (the share of tests it calls significant under its "
        "null: two independent answer draws from the same masses); their difference is what training another seed "
        "adds (Fisher's exact test, α = 0.05, one Holm family over the benchmarks, δ "
        f"{rule.practical_threshold('share'):g}: `tailmiss.studies.protocol.claims.rate_difference`). App. Q's use of "
        "the test (a one-run comparison it calls significant is evidence of a method difference) is refuted when the "
        "same-config rate is higher on some benchmark, reproduced when no benchmark's is and every interval's upper "
        "end is below δ (enough pairs to rule out a seed excess of δ), not resolved otherwise:",
        "",
        table(*_appq_table(claims)),
    ]


def protocol_text(claims: pc.ProtocolClaims) -> Section:
    """The section's body from computed claims, and its ledger rows."""
    text = blocks(HEADING, _intro(claims), _ladder_parts(claims), _noise_parts(claims), _conclusion(claims))
    return Section(text, _record(claims))


DEFERRED_WHY = (
    "Its findings rest on 10 seeds of 80 steps (the dip's shape and what one seed can show); the quick "
    "version trains 8 steps with one to three seeds, where GRPO's pass@256 hardly moves with N."
)
"""Why the report may leave this study out (and the first look does), in its deferral note."""


def write(ctx: Context, deferred: tuple[str, ...] = ()) -> Section:
    """The section and its ledger rows, from the cached protocol sweeps (run if missing); the study's writer
    (``deferred`` is not read: the section has no parts to leave out)."""
    return protocol_text(pc.protocol_claims(protocol_data(ctx)))
