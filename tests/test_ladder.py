"""The ladder: table and factorized policies, the table-vs-simulator law test, ladder sweeps and their analysis."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from tailmiss.analytic.regimes import n_shape, zones
from tailmiss.experiments.ladder import (
    Ladder,
    Rung,
    policy_prompts,
    write_policy_run,
)
from tailmiss.llm.checkpoint import LoadedRun
from tailmiss.llm.config import RLConfig, SFTConfig
from tailmiss.llm.evaluate import answer_distribution
from tailmiss.llm.model import ModelConfig, answer_logprobs, generate
from tailmiss.llm.optim import OptimConfig
from tailmiss.llm.tabular import FactorizedPolicy, TablePolicy, tabular_from_distribution
from tailmiss.llm.tasks import EOS, PAD, MultiSolutionTask
from tailmiss.llm.train import train_rl
from tailmiss.objectives import LossConfig
from tailmiss.sim.config import SimConfig
from tailmiss.sim.engine import simulate
from tailmiss.studies.ladder.claims import focal_table, matched_table, shape_table
from tailmiss.studies.rule import Verdict

TASK = MultiSolutionTask(num_digits=2)
OFF = 0.02


def _teacher(prompts):
    logp = torch.tensor(np.log(np.stack([TASK.teacher_answer_probs(p) for p in prompts]) * (1 - OFF)))
    return logp, torch.full((len(prompts),), OFF, dtype=torch.float64)


@pytest.fixture(scope="module")
def prompts():
    return TASK.prompts("train", 3, seed=0, distinct=True)


# ---- the policies --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["table", "factorized"])
def test_policy_scores_its_distribution_exactly(kind, prompts):
    logp, off = _teacher(prompts)
    model = tabular_from_distribution(kind, TASK, prompts, logp, off)
    dist = answer_distribution(model, TASK, prompts)
    # the teacher is a product of per-position laws, so both parameterisations hold it (float32 weights)
    np.testing.assert_allclose(dist.logp.numpy(), logp.numpy(), atol=1e-5)
    np.testing.assert_allclose(dist.off_format.numpy(), OFF, atol=1e-6)


@pytest.mark.parametrize("kind", ["table", "factorized"])
def test_sampled_token_logprobs_sum_to_the_answer_logprob(kind, prompts):
    logp, off = _teacher(prompts)
    model = tabular_from_distribution(kind, TASK, prompts, logp, off)
    ids = TASK.encode_prompts(prompts).repeat_interleave(200, 0)
    tokens, sampled_lp = generate(model, ids, TASK.max_answer_len, EOS, PAD, generator=torch.Generator().manual_seed(1))
    lp = answer_logprobs(model, ids, tokens)
    mask = (torch.cumsum((tokens == EOS).long(), 1) - (tokens == EOS).long()) == 0
    torch.testing.assert_close((lp * mask).sum(1), sampled_lp.sum(1), rtol=0, atol=1e-5)
    assert torch.isfinite(lp).all()


def test_table_samples_follow_the_table(prompts):
    """Token-by-token sampling from the table's exact conditionals has the table's law (chi-square)."""
    from scipy import stats

    logp, off = _teacher(prompts[:1])
    model = tabular_from_distribution("table", TASK, prompts[:1], logp, off)
    n = 20000
    ids = TASK.encode_prompts(prompts[:1]).repeat_interleave(n, 0)
    tokens, _ = generate(model, ids, TASK.max_answer_len, EOS, PAD, generator=torch.Generator().manual_seed(3))
    digits = tokens[:, :2] - 4
    well = (tokens[:, 2] == EOS) & (digits >= 0).all(1) & (digits < 10).all(1)
    index = torch.where(well, digits[:, 0] * 10 + digits[:, 1], torch.full_like(digits[:, 0], 100))
    counts = torch.bincount(index, minlength=101).numpy()
    probs = np.append(np.exp(logp[0].numpy()), OFF)
    expected = n * probs
    big = expected > 5  # pool the sparse tail into one cell
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    assert stats.chisquare(obs, exp).pvalue > 1e-4


def test_unknown_prompt_is_refused(prompts):
    logp, off = _teacher(prompts[:1])
    model = tabular_from_distribution("table", TASK, prompts[:1], logp, off)
    with pytest.raises(ValueError, match="only for the prompts it was built on"):
        model(TASK.encode_prompts(prompts[1:2]))


def test_bad_inputs_name_the_problem(prompts):
    logp, off = _teacher(prompts)
    with pytest.raises(ValueError, match="kind must be one of"):
        tabular_from_distribution("lookup", TASK, prompts, logp, off)
    with pytest.raises(ValueError, match="distinct"):
        tabular_from_distribution("table", TASK, [prompts[0], prompts[0]], logp[:2], off[:2])
    with pytest.raises(ValueError, match="logits must be"):
        TablePolicy(TASK.encode_prompts(prompts), torch.zeros(5, 3, dtype=torch.long), torch.zeros(2, 5), 15)
    with pytest.raises(ValueError, match="kind must be one of"):
        ModelConfig(kind="mlp")
    with pytest.raises(ValueError, match="not trained by SFT"):
        from tailmiss.llm.sft import train_sft

        train_sft(SFTConfig(task=TASK, model=ModelConfig(kind="table")), "/nonexistent/never-written")


def test_factorized_policy_is_a_product_of_position_laws(prompts):
    logp, off = _teacher(prompts)
    model = tabular_from_distribution("factorized", TASK, prompts, logp, off)
    assert isinstance(model, FactorizedPolicy)
    probs = model.logits.detach().double().softmax(-1)  # (R, L, V)
    ans = TASK.enumerate_answers(prompts[0]).tokens  # (100, 3)
    product = probs[0, 0, ans[:, 0]] * probs[0, 1, ans[:, 1]] * probs[0, 2, ans[:, 2]]
    dist = answer_distribution(model, TASK, prompts[:1])
    np.testing.assert_allclose(dist.probs[0].numpy(), product.numpy(), rtol=1e-9)


# ---- one algorithm, two code paths: the table in the RL loop follows the simulator in law ------------

SEEDS = 40
STEPS = 30
EVAL_AT = (10, 20, 30)


def _law_rl(seed: int, group_size: int, gamma: float, optimizer: str, lr: float) -> RLConfig:
    return RLConfig(
        name=f"law-{seed}",
        group_size=group_size,
        gamma=gamma,
        prompts_per_step=1,
        train_prompts=1,
        minibatches=1,
        steps=STEPS,
        optim=OptimConfig(kind=optimizer, lr=lr, weight_decay=0.0, grad_clip=1e30),
        # a constant denominator (rows × L), as the simulator's 1/N: Adam ignores the constant factor L
        loss=LossConfig(aggregation="token-sum-norm", norm_length=TASK.max_answer_len),
        eval_every=10,
        eval_prompts=1,
        eval_seed=0,
        checkpoint_every=1000,
        seed=seed,
    )


def _law_runs(tmp_path, group_size, gamma, optimizer, lr):
    rl = _law_rl(0, group_size, gamma, optimizer, lr)
    held = policy_prompts(rl, TASK)
    logp, off = _teacher(held)
    model = tabular_from_distribution("table", TASK, held, logp, off)
    init = write_policy_run(
        model, TASK, SFTConfig(name="law-init", task=TASK, model=ModelConfig(kind="table")), tmp_path / "init"
    )
    torch.set_num_threads(1)
    rows = []
    for seed in range(SEEDS):
        out = train_rl(_law_rl(seed, group_size, gamma, optimizer, lr), init, tmp_path / f"s{seed}", progress=False)
        h = pd.read_csv(out / "history.csv")
        h = h[h["step"].isin(EVAL_AT)]
        rows.append(h[["step", "pool_mu_pos", "pool_retained_mass"]].assign(seed=seed))
    llm = pd.concat(rows).rename(columns={"pool_mu_pos": "q_pos", "pool_retained_mass": "retained_mass"})
    # the simulator from the same logits (correct actions first; the off-format action is incorrect)
    correct = np.append(TASK.enumerate_answers(held[0]).correct.numpy(), False)
    z = np.append(logp[0].numpy(), np.log(OFF))
    order = np.concatenate([np.flatnonzero(correct), np.flatnonzero(~correct)])
    return llm, z[order], int(correct.sum())


def _sim(z, num_correct, group_size, gamma, optimizer, lr):
    cfg = SimConfig(
        name="law",
        num_actions=len(z),
        num_correct=num_correct,
        init="logits",
        logits=tuple(float(x) for x in z),
        reward_correct=1.0,
        reward_incorrect=0.0,
        advantage="std",
        std_kind="bessel",
        adv_eps=1e-6,
        surrogate="logprob",
        optimizer="adam" if optimizer == "adamw" else "sgd",
        lr=lr,
        group_sizes=(group_size,),
        gammas=(gamma,),
        seeds=tuple(range(SEEDS)),
        steps=STEPS,
        log_every=10,
        dtype="float64",
    )
    hist = simulate(cfg, device="cpu", progress=False).history
    return hist[hist["step"].isin(EVAL_AT)]


def _z_scores(llm: pd.DataFrame, sim: pd.DataFrame) -> dict:
    out = {}
    for metric in ("q_pos", "retained_mass"):
        for step in EVAL_AT:
            a = llm.loc[llm["step"] == step, metric].to_numpy()
            b = sim.loc[sim["step"] == step, metric].to_numpy()
            se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
            out[(metric, step)] = (a.mean() - b.mean()) / se
    return out


@pytest.mark.parametrize(
    "optimizer, lr, sim_lr",
    [
        ("adamw", 0.05, 0.05),
        # plain SGD is not scale-free: the trainer's loss carries the extra 1/L of its token-sum denominator
        ("sgd", 6.0, 6.0 / TASK.max_answer_len),
    ],
)
def test_table_rl_follows_the_simulator_in_law(tmp_path, optimizer, lr, sim_lr):
    """Q_pos and M_ret of the table policy trained by the RL loop vs `tailmiss.sim` from the same logits.

    40 seeds each, N = 4, γ = 0.5, one prompt per step: every z-score of the seed means at steps 10, 20, 30
    is below 4 in size; the same comparison against the simulator at half the rate must fail (the test
    has the power to see a wrong update).
    """
    llm, z, c = _law_runs(tmp_path, 4, 0.5, optimizer, lr)
    assert llm["q_pos"].std() > 0 and llm["retained_mass"].mean() < 0.99  # the policy moved
    same = _z_scores(llm, _sim(z, c, 4, 0.5, optimizer, sim_lr))
    assert max(abs(v) for v in same.values()) < 4, same
    wrong = _z_scores(llm, _sim(z, c, 4, 0.5, optimizer, sim_lr / 2))
    assert max(abs(v) for v in wrong.values()) > 4, wrong


# ---- ladders -------------------------------------------------------------------------------------


def test_ladder_validates_its_setup():
    sft = SFTConfig(task=TASK)
    rl = RLConfig(train_prompts=8, prompts_per_step=4, eval_seed=0)
    with pytest.raises(ValueError, match="fixed training pool"):
        Ladder("x", sft, rl.replace(train_prompts=0), (Rung("table", "adamw", 0.1),), (2, 4))
    with pytest.raises(ValueError, match="eval_seed"):
        Ladder("x", sft, rl.replace(eval_seed=None), (Rung("table", "adamw", 0.1),), (2, 4))
    with pytest.raises(ValueError, match="rung optimizer"):
        Rung("table", "lion", 0.1)
    with pytest.raises(ValueError, match="rung lr"):
        Rung("table", "sgd", -1.0)
    with pytest.raises(ValueError, match="budget"):
        Ladder("x", sft, rl, (Rung("table", "adamw", 0.1),), (2, 4), budget="tokens")
    lad = Ladder("x", sft, rl.replace(steps=80), (Rung("table", "adamw", 0.1),), (2, 8, 32), budget="rollouts")
    assert [lad.steps_for(n) for n in (2, 8, 32)] == [320, 80, 20]
    ((rung, sweep),) = lad.sweeps()
    assert {cfg.steps for _, _, cfg in sweep.runs()} == {320, 80, 20}
    assert sweep.sft.model.kind == "table" and sweep.sft.name != sft.name
    with pytest.raises(ValueError, match="must not exceed the training pool"):
        RLConfig(train_prompts=2, prompts_per_step=4)


def test_regimes_shape_and_zones():
    assert zones([2, 8, 32, 128], [0.9, 0.4, 0.3, 0.7]) == ["I", "II", "II", "III"]
    dip = n_shape([2, 8, 32, 128], [0.9, 0.4, 0.3, 0.7])
    assert dip.worst_n == 32 and dip.recovers
    flat = n_shape([2, 8, 32, 128], [0.9, 0.8, 0.7, 0.69])
    assert not flat.recovers and flat.spearman == -1.0
    noisy = n_shape([2, 8, 32], [0.9, 0.5, 0.6], sd=[0.0, 0.2, 0.2])
    assert not noisy.recovers  # 0.1 above the dip is inside twice the seed spread
    rising = n_shape([2, 8, 32], [0.5, 0.7, 0.9])
    assert rising.worst_n == 2 and not rising.recovers  # a monotone trend is no dip-and-recovery
    peak = n_shape([2, 8, 32], [0.1, 0.5, 0.2], lower_is_worse=False)
    assert peak.worst_n == 8 and peak.recovers


def _fake_final():
    rows = []
    for seed in range(3):
        for n, m in zip((2, 8, 32), (0.9, 0.5, 0.8)):
            for g, bump in ((0.0, 0.0), (1.0, 0.1)):
                rows.append(
                    dict(
                        rung="r",
                        set="pool",
                        group_size=n,
                        gamma=g,
                        seed=seed,
                        retained_mass=m + bump + 0.01 * seed,
                        q_pos=0.9,
                        dnll_rare=0.1,
                        rare_hit_at_256=0.5,
                        step=10,
                    )
                )
    return pd.DataFrame(rows)


def test_shape_and_focal_tables():
    final = _fake_final()
    shape = shape_table(final)
    base = shape[shape["gamma"] == 0].iloc[0]
    assert base["worst_n"] == 8 and base["recovers"] and base["zones"] == ("I", "I", "I")
    recovery = base["recovery"]  # the noise rule: N = 8 below both ends, paired, in one Holm family
    assert recovery.verdict == Verdict.REPRODUCED
    assert all(d.test == "paired t" for d in recovery.differences) and len(recovery.differences) == 2
    focal = focal_table(final)
    np.testing.assert_allclose(focal["mean"], 0.1)
    np.testing.assert_allclose(focal["sd"], 0.0, atol=1e-12)
    assert (focal["outcome"] == "higher").all() and (focal["family"] == 3).all() and (focal["dof"] == 2).all()


def test_matched_table_reads_mret_where_qpos_reaches_the_target():
    rows = []
    for n, speed in ((2, 1.0), (8, 2.0)):
        for step in range(0, 11):
            q = min(0.5 + speed * 0.02 * step, 1.0)
            rows.append(
                dict(
                    rung="r",
                    set="pool",
                    group_size=n,
                    gamma=0.0,
                    seed=0,
                    step=step,
                    q_pos=q,
                    retained_mass=1 - (q - 0.5),
                )
            )
    m = matched_table(pd.DataFrame(rows), fraction=0.5)
    # N=2 gains 0.2 (the smaller gain): target 0.5 + 0.1; both runs have M_ret 0.9 there
    np.testing.assert_allclose(m["target"], 0.6)
    np.testing.assert_allclose(m["mean"], 0.9, atol=1e-12)


def test_a_table_run_round_trips_through_its_checkpoint(tmp_path, prompts):
    logp, off = _teacher(prompts)
    model = tabular_from_distribution("table", TASK, prompts, logp, off)
    cfg = SFTConfig(name="t", task=TASK, model=ModelConfig(kind="table"))
    write_policy_run(model, TASK, cfg, tmp_path / "t")
    run = LoadedRun(tmp_path / "t")
    assert isinstance(run.model, TablePolicy)
    torch.testing.assert_close(run.model.logits, model.logits)


# ---- the trainer's ladder options: a fixed prompt pool, a fixed evaluation set, SGD, DAPO's dynamic sampling ----


def test_a_fixed_pool_is_shared_by_seeds_and_drawn_without_replacement():
    from tailmiss.llm.rollouts import step_prompts, training_pool

    cfg = RLConfig(train_prompts=6, prompts_per_step=4, pool_seed=3)
    pool = training_pool(TASK, 6, 3)
    keys = {tuple(TASK.prompt_tokens(p)) for p in pool}
    assert len(keys) == 6 and all(TASK.split_of(p) == "train" for p in pool)
    for seed in (0, 1):
        for step in range(5):
            picks = [tuple(TASK.prompt_tokens(p)) for p in step_prompts(TASK, cfg.replace(seed=seed), step)]
            assert len(set(picks)) == 4 and set(picks) <= keys
    fresh = step_prompts(TASK, cfg.replace(train_prompts=0), 0)
    assert len(fresh) == 4 and not {tuple(TASK.prompt_tokens(p)) for p in fresh} <= keys


def test_eval_seed_fixes_the_evaluation_prompts_across_run_seeds():
    a, b = RLConfig(seed=1, eval_seed=0), RLConfig(seed=2, eval_seed=0)
    assert a.eval_prompt_seed == b.eval_prompt_seed == 0
    assert RLConfig(seed=5).eval_prompt_seed == 5  # the default keeps the old behaviour
    with pytest.raises(ValueError, match="optimizer kind must be one of"):
        OptimConfig(kind="adam")


def test_sgd_optimizer_and_no_decay_on_vectors():
    from tailmiss.llm.optim import PlainOptimizer, make_optimizer

    logp, off = _teacher(TASK.prompts("train", 2, seed=0, distinct=True))
    model = tabular_from_distribution("table", TASK, TASK.prompts("train", 2, seed=0, distinct=True), logp, off)
    opt = make_optimizer(model, OptimConfig(kind="sgd", lr=2.0, weight_decay=0.0))
    # on the CPU torch.optim's arithmetic without torch.optim (tests/test_llm_optimizer.py: the same bits)
    assert isinstance(opt, PlainOptimizer) and opt.kind == "sgd" and opt.param_groups[0]["lr"] == 2.0
    assert make_optimizer(model, RLConfig().optim).kind == "adamw"


def test_dynamic_sampling_variant_is_its_own_row():
    from tailmiss.experiments.sweep import LLMSweep, Variant

    ds = Variant("dapo", 0.5, 8, dynamic_sampling=True)
    assert ds.label == "F-DAPO+DS γ=0.5 N=8" and ds.slug.endswith("-ds")
    assert Variant("grpo", 0.0, 8, steps=40).label == "GRPO N=8 T=40"
    sweep = LLMSweep("ds", SFTConfig(task=TASK), RLConfig(), (Variant("dapo", 0.0, 8), ds))
    cfgs = {v: cfg for v, _, cfg in sweep.runs()}
    assert cfgs[ds].dynamic_sampling and not cfgs[Variant("dapo", 0.0, 8)].dynamic_sampling
    with pytest.raises(ValueError, match="dynamic_sampling must be true or false"):
        Variant("dapo", 0.0, 8, dynamic_sampling=1)
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        Variant("dapo", 0.0, 8, steps=0)


def test_sweep_toml_round_trips_the_new_variant_fields(tmp_path):
    from tailmiss.experiments.sweep import LLMSweep, Variant, load_sweep

    sweep = LLMSweep(
        "rt",
        SFTConfig(task=TASK),
        RLConfig(train_prompts=8, prompts_per_step=4, eval_seed=0, optim=OptimConfig(kind="sgd")),
        (Variant("dapo", 0.5, 8, dynamic_sampling=True), Variant("grpo", 0.0, 4, steps=30)),
    )
    sweep.to_toml(tmp_path / "s.toml")
    assert load_sweep(tmp_path / "s.toml") == sweep


@pytest.mark.parametrize("kind", ["table", "factorized"])
def test_policy_siblings_equal_appending_each_alternative(kind, prompts):
    """The network-free policies speak the transformer's siblings mode (exact scoring's deepest level)."""
    logp, off = _teacher(prompts)
    model = tabular_from_distribution(kind, TASK, prompts, logp, off)
    ids = TASK.encode_prompts(prompts)  # (B, P)
    first = torch.full((len(prompts), 1), TASK.vocab.encode(["3"])[0])
    cache = model.new_cache(len(prompts), ids.shape[1] + 2)
    model(torch.cat([ids, first], dim=1), cache, 0)
    alternatives = torch.tensor([TASK.vocab.encode(list("0359"))] * len(prompts))
    got = model(alternatives, cache, ids.shape[1] + 1, siblings=True)
    for j in range(alternatives.shape[1]):
        want = model(torch.cat([ids, first, alternatives[:, j : j + 1]], dim=1))[:, -1]
        torch.testing.assert_close(got[:, j], want, rtol=0, atol=0)
