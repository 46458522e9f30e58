"""Any shared law in the simulator, and the bridge to the trainer's shared rung: a brute-force step with an offset,
answer features and a prompt subset; the trainer's SharedPolicy as a law; the two in law over seeds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from tailmiss.experiments.ladder import policy_prompts, write_policy_run
from tailmiss.experiments.shared_bridge import law_of_policy
from tailmiss.llm.config import RLConfig, SFTConfig
from tailmiss.llm.model import ModelConfig
from tailmiss.llm.optim import OptimConfig
from tailmiss.llm.rollouts import training_pool
from tailmiss.llm.tabular import tabular_from_distribution
from tailmiss.llm.tasks import MultiSolutionTask
from tailmiss.llm.train import train_rl
from tailmiss.objectives import LossConfig
from tailmiss.sim import CountSampler, SimConfig
from tailmiss.sim.shared import SharedLaw, row_seed, simulate_law, trained_prompts

TASK = MultiSolutionTask(num_digits=2)
OFF = 0.02


def _random_law(p=5, a=9, f=3, g=4, per_step=None, seed=0) -> SharedLaw:
    rng = np.random.default_rng(seed)
    correct = rng.random((p, a)) < 0.4
    correct[:, 0] = True  # every prompt has a correct action
    correct[:, -1] = False  # and an incorrect one
    return SharedLaw(
        prompt_features=rng.normal(size=(p, f)),
        correct=correct,
        weight=0.3 * rng.normal(size=(f, g)),
        offset=rng.normal(size=(p, a)),
        answer_features=rng.normal(size=(a, g)),
        prompt_types=tuple("minority" if x % 2 else "rest" for x in range(p)),
        prompts_per_step=per_step,
    )


def _sim(law: SharedLaw, **changes) -> SimConfig:
    base = dict(
        name="law",
        num_actions=law.num_actions,
        num_correct=1,
        init="zero",
        reward_correct=1.0,
        reward_incorrect=0.0,
        advantage="std",
        std_kind="bessel",
        surrogate="logprob",
        optimizer="sgd",
        lr=0.4,
        group_sizes=(6,),
        gammas=(1.0,),
        seeds=(7,),
        steps=1,
        log_every=1,
        dtype="float64",
    )
    return SimConfig(**{**base, **changes})


def _counts_of_step_zero(law: SharedLaw, sim: SimConfig) -> torch.Tensor:
    """The draws of step 0 of the sweep's one run on every prompt: the simulator's counter-based sampler on the
    starting law, prompt x from seed row_seed(s, x)."""
    (n, _, seed) = sim.runs()[0]
    p0 = torch.softmax(torch.tensor(law.logits()), dim=1)
    sampler = CountSampler(
        [n] * law.num_prompts, [row_seed(seed, x) for x in range(law.num_prompts)], law.num_actions, "cpu"
    )
    return sampler.counts(p0, 0).to(torch.float64)


def _brute_force_step(law: SharedLaw, sim: SimConfig, counts: torch.Tensor, active) -> np.ndarray:
    """One SGD ascent step on W by autograd of Σ_{x active} g_x/N Σ_a c_xa A_xa log p(a | x) through
    z = c + Φ W Ψᵀ (g = (1 - X/N)^γ, F-GRPO Eq. 13; A the std-normalised advantage, Bessel), then every prompt's
    softmax."""
    (n, gamma, _) = sim.runs()[0]
    w = torch.tensor(law.weight, requires_grad=True)
    z = torch.tensor(law.offset) + torch.tensor(law.prompt_features) @ w @ torch.tensor(law.answer_features).T
    logp = torch.log_softmax(z, dim=1)
    objective = 0.0
    for x in active:
        correct = torch.tensor(law.correct[x])
        k = float(counts[x, correct].sum())
        mu = k / n
        sigma = np.sqrt(mu * (1 - mu) * n / (n - 1))
        adv = torch.where(
            correct, torch.tensor(1.0 - mu, dtype=torch.float64), torch.tensor(-mu, dtype=torch.float64)
        ) / (sigma + sim.adv_eps)
        objective = objective + (1.0 - mu) ** gamma / n * (counts[x] * adv * logp[x]).sum()
    objective.backward()
    with torch.no_grad():
        return torch.softmax(torch.tensor(law.logits((w + sim.lr * w.grad).numpy())), dim=1).numpy()


@pytest.mark.parametrize("per_step", [None, 2])
def test_one_step_of_a_law_is_the_brute_force_softmax_step(per_step):
    """An offset, dense prompt and answer features and (or not) a subset of the prompts: one SGD step of
    simulate_law equals autograd of the step's prompts' group objectives through the log-linear softmax, and X/N is
    logged on the trained prompts alone."""
    law = _random_law(per_step=per_step)
    sim = _sim(law)
    result = simulate_law(law, sim, progress=False, keep_final=True)
    counts = _counts_of_step_zero(law, sim)
    mixed = [(counts[x, law.correct[x]].sum() % 6) != 0 for x in range(law.num_prompts)]
    assert sum(mixed) >= 2  # some groups carry a signal: the step has something to test
    active = np.arange(law.num_prompts) if per_step is None else trained_prompts(7, 0, law.num_prompts, per_step)
    mu_hat = result.history[result.history["step"] == 0].sort_values("prompt")["mu_hat"].to_numpy()
    want_mu = np.full(law.num_prompts, np.nan)
    want_mu[active] = [float(counts[x, law.correct[x]].sum()) / 6 for x in active]
    np.testing.assert_array_equal(mu_hat, want_mu)
    want = _brute_force_step(law, sim, counts, active)
    np.testing.assert_allclose(result.final_probs[0], want, rtol=1e-10, atol=1e-13)


def test_prompts_per_step_draws_each_prompt_alike_and_the_seed_fixes_them():
    picks = np.stack([trained_prompts(3, step, 10, 4) for step in range(2000)])
    assert all(len(set(row)) == 4 for row in picks)
    share = np.bincount(picks.ravel(), minlength=10) / 2000
    assert np.abs(share - 0.4).max() < 0.05  # 4 of 10, uniformly (sd of a share: 0.011)
    np.testing.assert_array_equal(trained_prompts(3, 5, 10, 4), picks[5])
    assert not np.array_equal(trained_prompts(4, 5, 10, 4), picks[5])


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"correct": np.ones((5, 9))}, "bool matrix"),
        ({"weight": np.zeros((3, 5))}, r"weight must be a matrix of shape \(3, 4\)"),
        ({"offset": np.zeros((4, 9))}, "offset must be a matrix"),
        ({"answer_features": np.zeros((8, 4))}, "answer_features must be a matrix"),
        ({"prompt_types": ("a",)}, "one label per prompt"),
        ({"prompts_per_step": 6}, "prompts_per_step must be an integer in 1..5"),
        ({"offset": np.full((5, 9), np.inf)}, "offset must be finite"),
    ],
)
def test_bad_laws_are_refused_by_name(changes, needle):
    law = _random_law()
    fields = dict(law.__dict__)
    fields.update(changes)
    with pytest.raises(ValueError, match=needle):
        SharedLaw(**fields)


def test_simulate_law_refuses_a_simulator_of_another_size():
    law = _random_law()
    with pytest.raises(ValueError, match=r"sim.num_actions \(10\) must equal the law's actions \(9\)"):
        simulate_law(law, _sim(law, num_actions=10), progress=False)


# ---- the trainer's shared rung as a law ------------------------------------------------------------------------

STEPS, SEEDS, EVAL_AT = 30, 40, (10, 20, 30)


def _rl(seed: int, lr: float) -> RLConfig:
    return RLConfig(
        name=f"law-{seed}",
        group_size=4,
        gamma=0.5,
        prompts_per_step=2,
        train_prompts=4,
        minibatches=1,
        steps=STEPS,
        optim=OptimConfig(kind="adamw", lr=lr, weight_decay=0.0, grad_clip=1e30),
        # a constant denominator (rows × L): Adam ignores a constant factor
        loss=LossConfig(aggregation="token-sum-norm", norm_length=TASK.max_answer_len),
        eval_every=10,
        eval_split="train",
        eval_prompts=4,
        eval_seed=0,
        checkpoint_every=1000,
        seed=seed,
    )


@pytest.fixture(scope="module")
def shared_start(tmp_path_factory):
    root = tmp_path_factory.mktemp("shared-law")
    rl = _rl(0, 0.05)
    held = policy_prompts(rl, TASK)
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(len(held), 100))  # far from the teacher, so that the shared term has work to do
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True) * (1 - OFF)
    model = tabular_from_distribution(
        "shared", TASK, held, torch.tensor(np.log(probs)), torch.full((len(held),), OFF, dtype=torch.float64)
    )
    init = write_policy_run(
        model, TASK, SFTConfig(name="init", task=TASK, model=ModelConfig(kind="shared")), root / "i"
    )
    return root, init, model, list(training_pool(TASK, rl.train_prompts, rl.pool_seed))


def test_the_law_of_a_shared_policy_is_its_law(shared_start):
    _, _, model, pool = shared_start
    law = law_of_policy(model, TASK, pool, 2)
    rows = [i for i, k in enumerate(model.prompt_keys.tolist()) if k in TASK.encode_prompts(pool).tolist()]
    np.testing.assert_allclose(law.logits(), model.action_logits().detach().double()[rows].numpy(), atol=1e-6)
    for x, p in enumerate(pool):
        np.testing.assert_array_equal(law.correct[x, :-1], TASK.enumerate_answers(p).correct.numpy())
    assert not law.correct[:, -1].any() and law.prompts_per_step == 2
    with pytest.raises(ValueError, match="holds no row"):
        law_of_policy(model, TASK, TASK.prompts("test", 1, seed=5), 1)


def _trainer_runs(shared_start, lr) -> pd.DataFrame:
    root, init, _, _ = shared_start
    torch.set_num_threads(1)
    rows = []
    for seed in range(SEEDS):
        out = train_rl(_rl(seed, lr), init, root / f"s{seed}", progress=False)
        h = pd.read_csv(out / "history.csv")
        rows.append(h[h["step"].isin(EVAL_AT)][["step", "pool_mu_pos", "pool_retained_mass"]].assign(seed=seed))
    return pd.concat(rows).rename(columns={"pool_mu_pos": "q_pos", "pool_retained_mass": "retained_mass"})


def _law_runs(shared_start, lr) -> pd.DataFrame:
    _, _, model, pool = shared_start
    law = law_of_policy(model, TASK, pool, 2)
    sim = _sim(law, optimizer="adam", lr=lr, group_sizes=(4,), gammas=(0.5,), seeds=tuple(range(SEEDS)))
    h = simulate_law(law, sim.replace(steps=STEPS, log_every=10), progress=False).history
    per_run = h.groupby(["seed", "step"], as_index=False)[["q_pos", "retained_mass"]].mean()
    return per_run[per_run["step"].isin(EVAL_AT)]


def _z_scores(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    out = {}
    for metric in ("q_pos", "retained_mass"):
        for step in EVAL_AT:
            x, y = (f.loc[f["step"] == step, metric].to_numpy() for f in (a, b))
            out[(metric, step)] = (x.mean() - y.mean()) / np.sqrt(x.var(ddof=1) / len(x) + y.var(ddof=1) / len(y))
    return out


def test_the_trainers_shared_rung_follows_the_shared_simulator_in_law(shared_start):
    """Q_pos and M_ret (means over the pool's 4 prompts, 2 trained a step) of the SharedPolicy trained by the RL
    loop against simulate_law from its law: 40 seeds each, N = 4, γ = 0.5, Adam; every z-score of the seed means at
    steps 10, 20, 30 is below 4 in size, and against the simulator at half the rate some is above 4 (the test can
    see a wrong update)."""
    trainer = _trainer_runs(shared_start, 0.05)
    assert trainer["q_pos"].std() > 0 and trainer["retained_mass"].mean() < 0.99  # the policy moved
    same = _z_scores(trainer, _law_runs(shared_start, 0.05))
    assert max(abs(v) for v in same.values()) < 4, same
    wrong = _z_scores(trainer, _law_runs(shared_start, 0.025))
    assert max(abs(v) for v in wrong.values()) > 4, wrong
