"""The paper's protocol in the trainer (epochs over a finite set, correct-only scoring, per-prompt evaluations) and
the protocol ladder's claims (checkpoint selection, verdict rules, single-seed probabilities)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import torch

from tailmiss.experiments.presets import LLM_SWEEPS, PROTOCOL_LADDER
from tailmiss.llm.config import RLConfig
from tailmiss.llm.evaluate import answer_distribution, exact_metrics
from tailmiss.llm.model import GPT, ModelConfig
from tailmiss.llm.rollouts import step_prompts, training_pool
from tailmiss.llm.tasks import MultiSolutionTask
from tailmiss.studies.protocol import claims as pc
from tailmiss.studies.protocol import noise as nc
from tailmiss.studies.rule import Outcome, Verdict

# ---- trainer options ----------------------------------------------------------------------------------------------


def test_epochs_visit_every_pool_prompt_once_per_epoch_in_a_new_order():
    task = MultiSolutionTask()
    cfg = RLConfig(train_prompts=12, prompts_per_step=4, pool_order="epochs", steps=9, seed=3)
    pool = training_pool(task, 12, 0)
    assert cfg.steps_per_epoch == 3
    orders = []
    for epoch in range(3):
        seen = [p for step in range(3 * epoch, 3 * epoch + 3) for p in step_prompts(task, cfg, step)]
        assert sorted(map(str, seen)) == sorted(map(str, pool))  # each pool prompt once
        orders.append(tuple(map(str, seen)))
    assert len(set(orders)) == 3  # a new order each epoch
    other = cfg.replace(seed=4)
    assert [str(p) for p in step_prompts(task, other, 0)] != [str(p) for p in step_prompts(task, cfg, 0)]


def test_random_pool_order_is_unchanged_by_the_new_option():
    task = MultiSolutionTask()
    cfg = RLConfig(train_prompts=12, prompts_per_step=4, steps=9, seed=3)
    draws = [tuple(map(str, step_prompts(task, cfg, s))) for s in range(6)]
    assert len(set(draws)) > 1 and cfg.steps_per_epoch is None


@pytest.mark.parametrize(
    "changes, match",
    [
        (dict(pool_order="epochs"), "needs a training pool"),
        (dict(pool_order="epochs", train_prompts=10, prompts_per_step=4), "multiple of prompts_per_step"),
        (dict(pool_order="cycled"), "pool_order"),
        (dict(eval_answers="some"), "eval_answers"),
        (dict(eval_per_prompt=1), "eval_per_prompt"),
    ],
)
def test_protocol_options_are_checked(changes, match):
    with pytest.raises(ValueError, match=match):
        RLConfig(**changes)


def test_correct_only_scoring_gives_the_full_scorings_numbers():
    torch.manual_seed(0)
    task = MultiSolutionTask()
    model = GPT(ModelConfig(n_layer=1, n_head=2, n_embd=16), len(task.vocab), task.prompt_len + task.max_answer_len)
    prompts = task.prompts("test", 6, seed=0, distinct=True)
    # float64 forward passes: a chunk's batch composition then changes no digit that matters
    f64 = torch.float64
    full = answer_distribution(model, task, prompts, dtype=f64)
    only = answer_distribution(model, task, prompts, dtype=f64, correct_only=True)
    assert only.complete is False and bool(torch.isnan(only.off_format).all())
    for i in range(len(prompts)):
        want = full.logp[i][full.correct[i]].sort().values
        got = only.logp[i][only.correct[i]].sort().values
        assert torch.allclose(got, want, atol=1e-12, rtol=0)
    ref_model = GPT(ModelConfig(n_layer=1, n_head=2, n_embd=16), len(task.vocab), task.prompt_len + task.max_answer_len)
    a = exact_metrics(full, answer_distribution(ref_model, task, prompts, dtype=f64))
    b = exact_metrics(only, answer_distribution(ref_model, task, prompts, dtype=f64, correct_only=True))
    for key in ("mu_pos_mean", "retained_mass_mean", "dnll_rare"):
        assert b[key] == pytest.approx(a[key], abs=1e-12)
    assert b["exact_pass_at_k"] == pytest.approx(a["exact_pass_at_k"], abs=1e-12)


def test_per_prompt_evaluations_are_kept_and_survive_a_resume(tmp_path):
    from tailmiss.llm.checkpoint import RunFolder
    from tailmiss.llm.config import SFTConfig
    from tailmiss.llm.sft import train_sft
    from tailmiss.llm.train import train_rl

    sft = SFTConfig(
        name="s", model=ModelConfig(n_layer=1, n_head=2, n_embd=16), steps=20, eval_every=20, checkpoint_every=20
    )
    train_sft(sft, tmp_path / "s", device="cpu", progress=False)
    cfg = RLConfig(
        name="r",
        group_size=4,
        prompts_per_step=2,
        train_prompts=4,
        pool_order="epochs",
        steps=6,
        eval_every=2,
        eval_prompts=5,
        eval_answers="correct",
        eval_per_prompt=True,
        checkpoint_every=2,
    )
    whole = train_rl(cfg, tmp_path / "s", tmp_path / "whole", device="cpu", progress=False)
    data = RunFolder(whole).prompt_evals()
    history = pd.read_csv(whole / "history.csv").dropna(subset=["mu_pos"])
    assert data["step"].tolist() == history["step"].tolist() == [0, 2, 4, 6]
    assert data["mu_pos"].shape == (4, 5)
    assert np.allclose(data["mu_pos"].mean(1), history["mu_pos"], atol=1e-9)
    assert history["off_format"].isna().all()

    class Stop(Exception):
        pass

    def stop_at(step):
        if step == 3:
            raise Stop

    with pytest.raises(Stop):
        train_rl(cfg, tmp_path / "s", tmp_path / "cut", device="cpu", progress=False, on_step=stop_at)
    resumed = train_rl(cfg, tmp_path / "s", tmp_path / "cut", device="cpu", progress=False, resume=True)
    again = RunFolder(resumed).prompt_evals()
    assert again["step"].tolist() == data["step"].tolist()
    assert np.array_equal(again["mu_pos"], data["mu_pos"])


# ---- presets -------------------------------------------------------------------------------------------------------


def _changes(a, b) -> set:
    """The training settings that differ (evaluation settings change no training step)."""
    da, db = ({k: v for k, v in d.items() if k != "optim"} | d["optim"] for d in (a.rl.to_dict(), b.rl.to_dict()))
    return {k for k in set(da) | set(db) if k not in ("name", "eval_every") and da.get(k) != db.get(k)}


def test_each_protocol_rung_changes_one_ingredient_against_the_rung_it_names():
    sweeps = {r.name: LLM_SWEEPS[r.sweep] for r in pc.RUNGS}
    assert {r.sweep for r in pc.RUNGS} == set(PROTOCOL_LADDER)
    today, difficulty = sweeps["today"], sweeps["difficulty"]
    assert _changes(today, difficulty) == set() and today.sft.task != difficulty.sft.task
    assert _changes(difficulty, sweeps["on-policy"]) == {"minibatches"} and sweeps["on-policy"].rl.minibatches == 1
    assert _changes(difficulty, sweeps["epochs"]) == {"train_prompts", "pool_order", "warmup_steps"}
    assert sweeps["epochs"] is sweeps["selection"] is sweeps["trained-on"]  # selection and scoring: no new runs
    by_name = {r.name: r for r in pc.RUNGS}
    assert (by_name["selection"].selection, by_name["trained-on"].scoring) == ("best", "trained-on")
    assert all(r.against in by_name for r in pc.RUNGS if r.against)
    today_rl = LLM_SWEEPS["multisolution-nsweep"].rl
    assert (today.rl.minibatches, today.rl.train_prompts) == (today_rl.minibatches, today_rl.train_prompts)
    paper = LLM_SWEEPS["paper-protocol"]
    assert len(paper.seeds) >= 10 and all(len(s.seeds) >= 5 for s in sweeps.values())
    assert paper.rl.minibatches == 4 and paper.rl.optim.weight_decay == 0.01 and paper.rl.optim.grad_clip == 1.0
    assert paper.rl.optim.lr_schedule == "constant" and paper.rl.optim.warmup_steps > 0
    assert paper.rl.eval_every == paper.rl.steps_per_epoch and paper.rl.steps // paper.rl.steps_per_epoch == 10
    assert paper.rl.resolved_loss().aggregation == "token-mean"
    assert paper.rl.eval_prompts == nc.SMALL_BENCHMARK + 500
    levels = np.sort(paper.sft.task._levels)
    assert (levels < 1 / 256).sum() >= 2 and levels.max() > 0.9  # hard prompts below 1/256 and easy ones


# ---- checkpoint selection and verdicts ------------------------------------------------------------------------------


def _history(rows):
    return pd.DataFrame(
        [
            dict(
                label=label,
                method="grpo",
                gamma=g,
                group_size=n,
                seed=s,
                step=step,
                mu_pos=p1,
                exact_pass_at_256=p256,
                rare_pass_at_256=0.1,
                retained_mass=0.5,
                dnll_rare=0.3,
                pool_mu_pos=p1 + 0.1,
                pool_exact_pass_at_256=p256,
                pool_rare_pass_at_256=0.2,
                pool_retained_mass=0.4,
                pool_dnll_rare=0.5,
            )
            for label, g, n, s, step, p1, p256 in rows
        ]
    )


def test_selection_takes_the_best_held_out_pass1_and_limits_focal_runs_to_the_baseline_compute():
    h = _history(
        [
            ("GRPO N=8", 0.0, 8, 0, 0, 0.9, 0.1),  # step 0 is never chosen
            ("GRPO N=8", 0.0, 8, 0, 8, 0.5, 0.2),
            ("GRPO N=8", 0.0, 8, 0, 16, 0.6, 0.3),
            ("GRPO N=8", 0.0, 8, 0, 24, 0.55, 0.4),
            ("F-GRPO", 0.5, 8, 0, 8, 0.4, 0.5),
            ("F-GRPO", 0.5, 8, 0, 16, 0.45, 0.6),
            ("F-GRPO", 0.5, 8, 0, 24, 0.7, 0.7),  # best, but after the baseline's selected step 16
        ]
    )
    dapo = _history([("DAPO N=8", 0.0, 8, 0, 8, 0.1, 0.1), ("DAPO N=8", 0.0, 8, 0, 24, 0.9, 0.1)])
    h = pd.concat([h, dapo.assign(method="dapo")], ignore_index=True)  # another method's baseline is not F-GRPO's
    best = pc.select_checkpoints(h, "best").set_index("label")
    assert best.loc["DAPO N=8", "step"] == 24
    assert best.loc["GRPO N=8", "step"] == 16 and best.loc["GRPO N=8", "pass256"] == 0.3
    assert best.loc["F-GRPO", "step"] == 16 and best.loc["F-GRPO", "pass256"] == 0.6
    final = pc.select_checkpoints(h, "final").set_index("label")
    assert (final["step"] == 24).all()
    pool = pc.select_checkpoints(h, "best", "trained-on").set_index("label")
    assert pool.loc["GRPO N=8", "step"] == 16 and pool.loc["GRPO N=8", "dnll"] == 0.5
    with pytest.raises(ValueError, match="selection"):
        pc.select_checkpoints(h, "last")


_SHARED = np.array([-0.02, 0.01, 0.0, 0.015, -0.005])
"""A seed effect that every N shares (the same SFT model and seed): the paired rule cancels it."""


def _chosen(pass256, dnll=None, focal=None, seeds=5, shared=None, jitter=0.002, dnll_shared=None):
    """Selected checkpoints (one row per run): per N (and per focal γ at N = 8) a mean or per-seed values, plus the
    shared seed effect ``shared`` and a small per-run jitter."""
    rng = np.random.default_rng(0)
    shared = _SHARED[:seeds] if shared is None else np.asarray(shared)
    dnll_shared = np.zeros(seeds) if dnll_shared is None else np.asarray(dnll_shared)
    rows = []
    runs = [(f"GRPO N={n}", 0.0, n, v, (dnll or {}).get(n, 0.5)) for n, v in pass256.items()]
    runs += [(f"F γ={g}", g, 8, v, 0.5) for g, v in (focal or {}).items()]
    for label, g, n, v, d in runs:
        p = np.broadcast_to(v, seeds) + shared + rng.normal(0, jitter, seeds)
        dn = np.broadcast_to(d, seeds) + dnll_shared + rng.normal(0, jitter, seeds)
        for s in range(seeds):
            row = dict(label=label, method="grpo", gamma=g, group_size=n, seed=s, step=8, pass1=0.4)
            rows.append(row | dict(pass256=p[s], rare256=0.1, mret=0.5, dnll=dn[s]))
    return pd.DataFrame(rows)


_TABLE2 = {2: 0.75, 4: 0.71, 8: 0.64, 16: 0.67, 32: 0.70}


def test_rung_verdicts_follow_the_noise_rule():
    R = Verdict
    v = pc.rung_verdicts(_chosen(_TABLE2, dnll={2: 0.19, 8: 0.68, 32: 0.52}, focal={0.5: 0.703}))
    assert v.dip == R.REPRODUCED and v.pass256_shape.worst_n == 8
    # the dip, tested without picking the trough: N=2 not lower than every N, and for N = 8 or 16 both ends higher,
    # every test one Holm family
    parts = v.dip_sentence.parts
    pairs = [(p.difference.a, p.difference.b, p.wanted) for p in parts]
    assert pairs[:4] == [("GRPO N=2", f"GRPO N={n}", "not lower") for n in (4, 8, 16, 32)]
    assert ("GRPO N=32", "GRPO N=8", "higher") in pairs and ("GRPO N=32", "GRPO N=16", "higher") in pairs
    assert {p.difference.test for p in parts} == {"paired t"} and {p.family for p in parts} == {len(parts)}
    assert {p.family for d in (v.dnll,) for p in d.parts} == {2}  # Holm families
    assert v.dnll_order == R.REPRODUCED and v.focal_reach == {0.5: R.REPRODUCED}
    assert v.reach[0.5].parts[0].difference.mean == pytest.approx(0.003, abs=0.003)
    # seed noise of its own per run (no shared effect): the recovery is a tie, so the dip is only partly there
    p8, p32 = [0.60, 0.70, 0.58, 0.68, 0.64], [0.74, 0.62, 0.75, 0.66, 0.73]
    d8, d32 = [0.45, 0.58, 0.47, 0.55, 0.5], [0.52, 0.47, 0.53, 0.48, 0.5]
    noisy = _chosen({2: 0.75, 8: p8, 32: p32}, shared=np.zeros(5), jitter=0.0, dnll={2: 0.5, 8: d8, 32: d32})
    nv = pc.rung_verdicts(noisy)
    recovery = next(p for p in nv.dip_sentence.parts if p.difference.a == "GRPO N=32")
    assert recovery.outcome == Outcome.TIE and recovery.status == "open" and nv.dip == R.PARTLY
    assert nv.dnll_order == R.NOT_RESOLVED
    # monotone: N = 32 is below the interior N beyond noise (refuted); F-GRPO "reaching" GRPO's worst is vacuous
    mono = pc.rung_verdicts(_chosen({2: 0.8, 8: 0.7, 32: 0.6}, dnll={2: 0.6, 8: 0.4, 32: 0.2}, focal={0.5: 0.65}))
    assert mono.dip == R.REFUTED and mono.focal_reach[0.5] == R.NOT_RESOLVED and mono.dnll_order == R.REFUTED
    # one seed (or two): the rule cannot tell, whatever the numbers
    one = pc.rung_verdicts(_chosen(_TABLE2, dnll={2: 0.19, 8: 0.68, 32: 0.52}, focal={0.5: 0.6}, seeds=2))
    assert one.dip == one.dnll_order == one.focal_reach[0.5] == R.CANNOT_TELL
    with pytest.raises(ValueError, match="N = 2, 8 and 32"):
        pc.rung_verdicts(_chosen({2: 0.7, 8: 0.6}))


def test_dnll_gaps_beyond_twice_the_combined_sd_are_not_resolved_when_seed_effects_oppose():
    """Fails on the old rule (each gap beyond twice the combined seed sd → ordered): seed effects that go opposite
    ways at neighbouring N make the paired differences spread, and three seeds do not resolve them."""
    e = np.array([-0.06, 0.0, 0.06])
    frame = _chosen({2: 0.75, 8: 0.64, 32: 0.70}, dnll={2: 0.3, 8: 0.7, 32: 0.5}, seeds=3, jitter=0.0)
    sign = frame["group_size"].map({2: -1.0, 32: 1.0, 8: -1.0})
    frame["dnll"] += sign * e[frame["seed"]]
    g = frame.groupby("group_size")["dnll"]
    for lo, hi in ((2, 32), (32, 8)):  # the old rule's test: beyond twice the combined seed sd
        assert abs(g.mean()[hi] - g.mean()[lo]) > 2 * np.hypot(g.std()[hi], g.std()[lo])
    v = pc.rung_verdicts(frame)
    assert [p.outcome for p in v.dnll.parts] == [Outcome.TIE, Outcome.TIE]
    assert v.dnll_order == Verdict.NOT_RESOLVED


def test_dnll_gaps_within_the_seed_spread_are_resolved_when_every_n_shares_the_seed_effect():
    """Fails on the old rule (gaps within twice the combined sd → cannot tell): the SFT model and the seed are
    shared across N, so their effect cancels in the paired differences."""
    shared = np.array([-0.2, -0.1, 0.0, 0.1, 0.2])
    frame = _chosen(_TABLE2, dnll={2: 0.19, 8: 0.68, 32: 0.52}, dnll_shared=shared)
    t = pc.rung_table(frame).set_index("label")
    assert t.loc["GRPO N=32", "dnll"] - t.loc["GRPO N=2", "dnll"] < 2 * np.hypot(
        *t.loc[["GRPO N=32", "GRPO N=2"], "dnll_sd"]
    )
    v = pc.rung_verdicts(frame)
    assert [p.outcome for p in v.dnll.parts] == [Outcome.HIGHER, Outcome.HIGHER]
    assert v.dnll_order == Verdict.REPRODUCED


def test_a_recovery_below_the_old_margin_counts_when_the_paired_rule_resolves_it():
    """Fails on the old rule (recovery by more than 0.05): 0.03 over the worst N on every seed is beyond noise and δ."""
    v = pc.rung_verdicts(_chosen({2: 0.75, 4: 0.71, 8: 0.64, 16: 0.65, 32: 0.67}))
    assert not v.pass256_shape.recovers  # the old margin
    recovery = next(p for p in v.dip_sentence.parts if (p.difference.a, p.difference.b) == ("GRPO N=32", "GRPO N=8"))
    assert recovery.outcome == Outcome.HIGHER and v.dip == Verdict.REPRODUCED


def test_a_reach_below_grpo_n32_beyond_noise_is_refuted():
    """Fails on the old rule (not below by more than twice the combined seed sd → reaches): ten seeds with a seed
    effect of sd 0.05 shared by every run, F-GRPO N = 8 0.045 below GRPO N = 32 on each."""
    shared = np.random.default_rng(1).normal(0, 0.05, 10)
    frame = _chosen(_TABLE2, focal={0.5: 0.655}, seeds=10, shared=shared)
    t = pc.rung_table(frame).set_index("label")
    gap = t.loc["F γ=0.5", "pass256"] - t.loc["GRPO N=32", "pass256"]
    assert gap > -2 * np.hypot(*t.loc[["F γ=0.5", "GRPO N=32"], "pass256_sd"])  # the old rule: reaches
    v = pc.rung_verdicts(frame)
    d = v.reach[0.5].parts[0].difference
    assert d.outcome == Outcome.LOWER and d.seeds == 10 and d.mean == pytest.approx(-0.045, abs=0.003)
    assert v.focal_reach[0.5] == Verdict.REFUTED


def test_ingredient_effects_name_what_each_rung_changes():
    a = pc.rung_verdicts(_chosen({2: 0.8, 8: 0.7, 32: 0.6}))
    b = pc.rung_verdicts(_chosen({2: 0.75, 8: 0.64, 32: 0.70}))
    assert (a.dip, b.dip) == (Verdict.REFUTED, Verdict.REPRODUCED)
    effects = pc.ingredient_effects({"today": a, "difficulty": b, "on-policy": a, "epochs": b})
    assert [(e.rung, e.against, e.dip) for e in effects] == [
        ("difficulty", "today", "creates"),
        ("on-policy", "difficulty", "removes"),
        ("epochs", "difficulty", "none"),
    ]


# ---- App. Q: the same-config rate against the test's own size ------------------------------------------------------


def test_rate_difference_matches_newcombe_and_fisher():
    from scipy import stats

    d = pc.rate_difference(56 / 70, 70, 48 / 80, 80)  # Newcombe (1998), example (a): method 10
    assert (d.low, d.high) == pytest.approx((0.0524, 0.3339), abs=1e-4)
    assert d.p == pytest.approx(stats.fisher_exact([[56, 14], [48, 32]])[1])
    assert d.mean == pytest.approx(0.2) and d.outcome == Outcome.HIGHER and d.delta == 0.05
    assert pc.rate_difference(0.08, 20_000, 0.05, 20_000).outcome == Outcome.BELOW_DELTA  # resolved, below δ
    assert pc.rate_difference(0.1, 10, 0.05, 100).outcome == Outcome.TIE
    assert "Fisher exact" in d.describe()


def _same(significant, pairs, null=None, tests=2000):
    frame = pd.DataFrame(dict(benchmark=["30", "500"], pairs=pairs, significant=significant))
    if null is not None:
        frame = frame.assign(null_significant=null, null_tests=tests, form="corrected")
    return frame


def test_appq_verdict_from_the_same_config_rate_against_the_tests_own_size():
    """App. Q's verdict comes from numbers (it was the literal word "partly")."""
    refuted = pc.appq_verdict(_same([0.06, 0.30], [225, 225], null=[0.05, 0.05]))
    assert refuted.verdict == Verdict.REFUTED and "500-prompt" in refuted.reason
    assert refuted.diffs["500"].outcome == Outcome.HIGHER and refuted.diffs["500"].family == 2
    kept = pc.appq_verdict(_same([0.05, 0.045], [450, 450], null=[0.05, 0.05]))
    assert kept.verdict == Verdict.REPRODUCED and all(d.high < 0.05 for d in kept.diffs.values())
    few = pc.appq_verdict(_same([0.1, 0.0], [9, 9], null=[0.05, 0.05]))
    assert few.verdict == Verdict.NOT_RESOLVED and "too few pairs" in few.reason
    plain = pc.appq_verdict(_same([0.4, 0.4], [90, 90]))  # without the null columns: nothing to compare with
    assert plain.verdict == Verdict.NOT_RESOLVED and "own size" in plain.reason and not plain.diffs


def _claims(same, focal=0.655):
    """A :class:`ProtocolClaims` from hand-made selected checkpoints (every rung the same) and noise tables."""
    frame = _chosen(_TABLE2, dnll={2: 0.19, 8: 0.68, 32: 0.52}, focal={0.5: focal}, seeds=10,
                    shared=np.random.default_rng(1).normal(0, 0.05, 10))  # fmt: skip
    verdicts = {r.name: pc.rung_verdicts(frame) for r in pc.RUNGS}
    spread = pd.DataFrame(
        [
            dict(scoring=s, group_size=n, mean=0.7, sd=0.05, seeds=10)
            for s in ("exact-30", "sampled-30")
            for n in _TABLE2
        ]
    )
    single = pd.DataFrame([dict(scoring=s, seeds=10, monotone=False, worst_n=8, p_table2=0.01, p_interior=0.2,
                                pooled_sd=0.05, seeds_needed=11) for s in ("exact-30", "sampled-30")])  # fmt: skip
    noise = nc.NoiseClaims(pd.DataFrame(), spread, single, same, {"30": 40}, 1024, 100)
    return pc.ProtocolClaims(
        {r.name: pc.rung_table(frame) for r in pc.RUNGS},
        {r.name: frame for r in pc.RUNGS},
        verdicts,
        pc.ingredient_effects(verdicts),
        noise,
        pc.appq_verdict(same),
        {r.sweep: r.sweep for r in pc.RUNGS},
        False,
    )


@pytest.mark.parametrize("null, appq", [([0.05, 0.05], "refuted"), (None, "not resolved")])
def test_the_protocol_section_records_verdicts_computed_from_its_numbers(null, appq):
    from tailmiss.studies.protocol.section import protocol_text

    claims = _claims(_same([0.06, 0.30], [225, 225], null=null))
    section = protocol_text(claims)
    text = section.text
    got = {key: (ours, verdict.value) for key, ours, verdict in section.rows}
    assert set(got) == {"t2-protocol", "t2-reach", "appQ"}
    assert got["t2-protocol"][1] == "reproduced" and got["t2-reach"][1] == "refuted" and got["appQ"][1] == appq
    reach = claims.verdicts["selection"].reach[0.5].parts[0]
    assert reach.describe() in got["t2-reach"][0] and "10 seeds" in got["t2-reach"][0]
    assert claims.verdicts["selection"].dip_sentence.cell() in text and reach.describe() in text
    assert "the report's noise rule" in text and "δ: pass@256 0.01" in text
    assert "App. L.4" in text and "L.3/L.4" not in text and "§" not in text and "twice the combined" not in text
    if null is not None:
        assert claims.appq.diffs["500"].describe() in text and "| corrected |" in text
    else:
        assert "not measured" in got["appQ"][0]


def test_single_seed_probabilities_match_enumeration_by_hand():
    values = np.array([[0.80, 0.76], [0.60, 0.70], [0.70, 0.64]])  # N = 2, 8, 32 by two seeds
    p_t2, p_int = nc._pattern_probabilities(values, [2, 8, 32])
    table2 = interior = 0
    for s in itertools.product(range(2), repeat=3):
        c = values[np.arange(3), s]
        inner = int(np.argmin(c)) == 1
        interior += inner and c[2] > c.min()
        table2 += inner and c[0] - c.min() >= nc.PAPER_DIP and c[2] - c.min() >= nc.PAPER_RECOVERY
    assert p_t2 == pytest.approx(table2 / 8) and p_int == pytest.approx(interior / 8)
    assert 0 < p_t2 < p_int < 1


def test_noise_claims_score_the_paper_way_and_count_same_config_significance():
    rng = np.random.default_rng(0)
    rows, per_prompt = [], {}
    for n in (2, 8, 32):
        for seed in range(3):
            label = f"GRPO N={n}"
            rows.append(dict(label=label, method="grpo", gamma=0.0, group_size=n, seed=seed, step=4))
            mu = rng.uniform(0.0005, 0.01, size=(2, 40)) * (0.3 if n == 8 else 1.0)
            per_prompt[(label, seed)] = (np.array([0, 4]), mu)
    claims = nc.noise_claims(pd.DataFrame(rows), per_prompt, n_samples=1024, iterations=100, m=256)
    assert set(claims.scores["scoring"]) == {"exact-30", "exact-10", "sampled-30", "sampled-10"}
    exact = claims.scores[(claims.scores["scoring"] == "exact-30") & (claims.scores["group_size"] == 8)]
    mu0 = per_prompt[("GRPO N=8", 0)][1][1, :30]
    assert exact[exact["seed"] == 0]["pass256"].item() == pytest.approx(np.mean(1 - (1 - mu0) ** 256))
    sampled = claims.scores[claims.scores["scoring"] == "sampled-30"].set_index(["group_size", "seed"])["pass256"]
    exact_all = claims.scores[claims.scores["scoring"] == "exact-30"].set_index(["group_size", "seed"])["pass256"]
    assert abs((sampled - exact_all).mean()) < 0.03  # the estimator is unbiased: 9 runs average out its noise
    assert claims.same_config["pairs"].tolist() == [9, 9]  # 3 pairs of seeds at each of 3 N
    # beside each share, the test's own rejection rate under its null at the same masses, one null per pair
    same = claims.same_config
    assert same["null_tests"].tolist() == [9, 9] and set(same["form"]) == {"corrected"}
    assert same[["significant", "null_significant"]].apply(lambda c: c.between(0, 1)).all().all()
    nc._LAST.clear()  # computed again, not the kept claims
    again = nc.noise_claims(pd.DataFrame(rows), per_prompt, n_samples=1024, iterations=100, m=256)
    pd.testing.assert_frame_equal(again.same_config, same)  # the per-pair seeds are deterministic
    with pytest.raises(ValueError, match="'pivot'"):
        nc.noise_claims(pd.DataFrame(rows), per_prompt, iterations=100, form="pivot")
    single = claims.single_seed.set_index("scoring")
    assert single.loc["exact-30", "worst_n"] == 8 and not single.loc["exact-30", "monotone"]
    assert set(claims.problems_needed) == {"30", "10"}
    assert nc.benchmarks(530) == {"30": slice(0, 30), "500": slice(30, None)}
    with pytest.raises(ValueError, match="both hold 30"):
        nc.benchmarks(60)


# ---- the difficulty mixture's blank token --------------------------------------------------------------------------


def test_blank_teacher_puts_its_incorrect_mass_on_the_blank_token():
    task = MultiSolutionTask(mu_mean=0.4, difficulty_concentration=0.3, mu_min=2e-4, incorrect="blank")
    prompt = next(p for p in task.prompts("train", 200, seed=0) if task.target_mu_pos(p) < 0.1)
    probs = task.teacher_digit_probs(prompt)
    eps = 1 - task.target_mu_pos(prompt) ** (1 / task.num_digits)
    assert probs.sum() == pytest.approx(1 - eps) and probs[[d for d in range(10) if d not in prompt.allowed]].sum() == 0
    rng = np.random.default_rng(0)
    answers = [task.sft_answer(prompt, rng) for _ in range(4000)]
    blank = task.vocab.encode(["_"])[0]
    rate = np.mean([t == blank for a in answers for t in a[:-1]])
    assert rate == pytest.approx(eps, abs=0.02)
    assert all(task.reward(prompt, a) == 0.0 for a in answers if blank in a)
    correct = np.mean([task.reward(prompt, a) for a in answers])
    assert correct == pytest.approx(task.target_mu_pos(prompt), abs=0.02)
    # the default teacher is unchanged: its incorrect digits lie outside the allowed set
    plain = MultiSolutionTask()
    assert plain.teacher_digit_probs(prompt).sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="incorrect"):
        MultiSolutionTask(incorrect="blanks")


def test_noise_claims_asked_again_are_a_copy_of_the_kept_ones_and_new_inputs_are_computed(monkeypatch):
    """The section and its figures ask for the same App. Q claims: the second ask runs no test and returns a copy
    (editing it leaves the kept claims as they were); another input (one mass moved) runs them again."""
    rng = np.random.default_rng(1)
    rows, per_prompt = [], {}
    for n in (2, 8):
        for seed in range(3):
            rows.append(dict(label=f"GRPO N={n}", method="grpo", gamma=0.0, group_size=n, seed=seed, step=4))
            per_prompt[(f"GRPO N={n}", seed)] = (np.array([0, 4]), rng.uniform(0.001, 0.01, size=(2, 40)))
    calls = []
    real = nc._same_config
    monkeypatch.setattr(nc, "_same_config", lambda *a: calls.append(1) or real(*a))
    nc._LAST.clear()
    first = nc.noise_claims(pd.DataFrame(rows), per_prompt, iterations=50)
    first.same_config.loc[:, "pairs"] = -1
    second = nc.noise_claims(pd.DataFrame(rows), per_prompt, iterations=50)
    assert len(calls) == 1 and (second.same_config["pairs"] == 6).all()  # 3 pairs of seeds at 2 N
    moved = dict(per_prompt)
    steps, mu = moved[("GRPO N=8", 0)]
    moved[("GRPO N=8", 0)] = (steps, mu + np.eye(2, 40) * 1e-3)
    nc.noise_claims(pd.DataFrame(rows), moved, iterations=50)
    nc.noise_claims(pd.DataFrame(rows), per_prompt, iterations=60)
    assert len(calls) == 3
