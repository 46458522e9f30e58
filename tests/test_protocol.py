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
from tailmiss.results.claims import noise as nc
from tailmiss.results.claims import protocol as pc

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
    da, db = a.rl.to_dict(), b.rl.to_dict()
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
    assert paper.rl.minibatches == 4 and paper.rl.weight_decay == 0.01 and paper.rl.grad_clip == 1.0
    assert paper.rl.lr_schedule == "constant" and paper.rl.warmup_steps > 0
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


def _table(pass256, sd=0.01, dnll=None, focal=None):
    rows = []
    for n, v in pass256.items():
        d = (dnll or {}).get(n, 0.5)
        rows.append(dict(label=f"GRPO N={n}", method="grpo", gamma=0.0, group_size=n, seeds=5))
        rows[-1].update(pass256=v, pass256_sd=sd, dnll=d, dnll_sd=0.01)
    for g, v in (focal or {}).items():
        rows.append(dict(label=f"F γ={g}", method="grpo", gamma=g, group_size=8, seeds=5))
        rows[-1].update(pass256=v, pass256_sd=sd, dnll=0.5, dnll_sd=0.01)
    return pd.DataFrame(rows)


def test_rung_verdicts_follow_their_stated_rules():
    dip = _table({2: 0.75, 4: 0.71, 8: 0.64, 16: 0.67, 32: 0.70}, dnll={2: 0.19, 8: 0.68, 32: 0.52}, focal={0.5: 0.703})
    v = pc.rung_verdicts(dip)
    assert v.dip and v.pass256_shape.worst_n == 8
    assert v.dnll_order is True
    assert v.focal_reach[0.5] is True and v.focal_margin[0.5] == pytest.approx(0.003)
    # within twice the combined seed spread: the recovery does not count, the order cannot be told
    noisy = pc.rung_verdicts(_table({2: 0.75, 8: 0.64, 32: 0.70}, sd=0.05, dnll={2: 0.5, 8: 0.51, 32: 0.5}))
    assert not noisy.dip and noisy.dnll_order is None
    # monotone: N = 32 is GRPO's worst, so F-GRPO "reaching" it is vacuous
    mono = pc.rung_verdicts(_table({2: 0.8, 8: 0.7, 32: 0.6}, dnll={2: 0.6, 8: 0.4, 32: 0.2}, focal={0.5: 0.65}))
    assert not mono.dip and mono.focal_reach[0.5] is None and mono.dnll_order is False
    # one seed: no spread, so neither the order nor the reach is judged (a -0.0001 difference is not a "no")
    one = _table({2: 0.75, 8: 0.64, 32: 0.70}, dnll={2: 0.19, 8: 0.68, 32: 0.52}, focal={0.5: 0.6999})
    one[["pass256_sd", "dnll_sd"]] = np.nan
    single = pc.rung_verdicts(one)
    assert single.dnll_order is None and single.focal_reach[0.5] is None and single.dip


def test_ingredient_effects_name_what_each_rung_changes():
    a = pc.rung_verdicts(_table({2: 0.8, 8: 0.7, 32: 0.6}))
    b = pc.rung_verdicts(_table({2: 0.75, 8: 0.64, 32: 0.70}))
    effects = pc.ingredient_effects({"today": a, "difficulty": b, "on-policy": a, "epochs": b})
    assert [(e.rung, e.against, e.dip) for e in effects] == [
        ("difficulty", "today", "creates"),
        ("on-policy", "difficulty", "removes"),
        ("epochs", "difficulty", "none"),
    ]


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
