"""The shared policy of the ladder: z(x, a) = c(x, a) + phi(x)^T W psi(a), trained through W alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tailmiss.experiments.ladder import write_policy_run
from tailmiss.llm.checkpoint import LoadedRun
from tailmiss.llm.config import SFTConfig
from tailmiss.llm.evaluate import answer_distribution
from tailmiss.llm.model import ModelConfig, answer_logprobs
from tailmiss.llm.tabular import SharedPolicy, TablePolicy, tabular_from_distribution
from tailmiss.llm.tasks import EOS, MultiSolutionTask

TASK = MultiSolutionTask(num_digits=2)
OFF = 0.02


@pytest.fixture(scope="module")
def prompts():
    return TASK.prompts("train", 6, seed=0, distinct=True)


def _answer_count(prompts):
    logp = torch.tensor(np.log(np.stack([TASK.teacher_answer_probs(p) for p in prompts])))
    return logp.shape[1]


def _random_law(prompts, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(len(prompts), _answer_count(prompts)))
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True) * (1 - OFF)
    return torch.tensor(np.log(p)), torch.full((len(prompts),), OFF, dtype=torch.float64)


def _loss(model, prompts, actions, adv):
    """Sum_i A_i log p(a_i | x_i) through the policy's token-by-token interface."""
    ids = TASK.encode_prompts(prompts)
    tokens = model.answers[actions]
    lp = answer_logprobs(model, ids, tokens)
    mask = (torch.cumsum((tokens == EOS).long(), 1) - (tokens == EOS).long()) == 0
    return ((lp * mask).sum(1) * adv).sum()


def test_the_shared_policy_starts_at_the_table_law(prompts):
    logp, off = _random_law(prompts)
    shared = tabular_from_distribution("shared", TASK, prompts, logp, off)
    table = tabular_from_distribution("table", TASK, prompts, logp, off)
    assert isinstance(shared, SharedPolicy) and not shared.weight.any()
    torch.testing.assert_close(shared.action_probs(), table.action_probs(), rtol=0, atol=0)
    dist = answer_distribution(shared, TASK, prompts)
    np.testing.assert_allclose(dist.logp.numpy(), logp.numpy(), atol=1e-5)
    np.testing.assert_allclose(dist.off_format.numpy(), OFF, atol=1e-6)
    # the default features: a constant and the prompt's tokens; one-hot tokens per answer position
    assert shared.weight.shape == (len(TASK.vocab) + 1, TASK.max_answer_len * len(TASK.vocab))


def test_the_gradient_is_the_log_linear_softmax_gradient(prompts):
    """d/dW sum_i A_i log p(a_i|x_i) = sum_i A_i phi(x_i) (psi(a_i) - E_p[psi | x_i])^T (brute force in float64)."""
    logp, off = _random_law(prompts, seed=1)
    model = tabular_from_distribution("shared", TASK, prompts, logp, off)
    rng = np.random.default_rng(2)
    with torch.no_grad():
        model.weight.normal_(0, 0.3, generator=torch.Generator().manual_seed(3))
    rows = torch.tensor(rng.integers(0, len(prompts), 40))
    actions = torch.tensor(rng.integers(0, model.answers.shape[0], 40))
    adv = torch.tensor(rng.normal(size=40), dtype=torch.float32)
    batch = [prompts[int(r)] for r in rows]
    model.zero_grad()
    _loss(model, batch, actions, adv).backward()

    phi, psi = model.prompt_features.double(), model.answer_features.double()
    z = model.offset.double() + phi @ model.weight.detach().double() @ psi.T
    p = z.softmax(-1)
    expected = torch.zeros_like(model.weight, dtype=torch.float64)
    for r, a, g in zip(rows.tolist(), actions.tolist(), adv.double().tolist()):
        expected += g * torch.outer(phi[r], psi[a] - p[r] @ psi)
    torch.testing.assert_close(model.weight.grad.double(), expected, rtol=1e-4, atol=1e-4)
    # and the token-by-token log-probabilities are the softmax's
    lp = torch.log_softmax(z, -1)[rows, actions]
    ids = TASK.encode_prompts(batch)
    tokens = model.answers[actions]
    mask = (torch.cumsum((tokens == EOS).long(), 1) - (tokens == EOS).long()) == 0
    got = (answer_logprobs(model, ids, tokens) * mask).sum(1)
    torch.testing.assert_close(got.double(), lp, rtol=0, atol=1e-4)


def test_one_hot_prompt_features_reduce_to_the_table(prompts):
    """phi one-hot per prompt, psi the identity, c = 0 and W = the table's logits: the same law, gradient and step."""
    logp, off = _random_law(prompts, seed=4)
    table = tabular_from_distribution("table", TASK, prompts, logp, off)
    R, A = table.logits.shape
    features = {"prompt_features": torch.eye(R), "answer_features": torch.eye(A)}
    keys, answers, vocab = table.prompt_keys, table.answers, len(TASK.vocab)
    shared = SharedPolicy(keys, answers, torch.zeros(R, A), vocab, table.logits, **features)
    torch.testing.assert_close(shared.action_probs(), table.action_probs(), rtol=0, atol=1e-6)
    rng = np.random.default_rng(5)
    rows, actions = rng.integers(0, R, 30), torch.tensor(rng.integers(0, A, 30))
    adv = torch.tensor(rng.normal(size=30), dtype=torch.float32)
    batch = [prompts[int(r)] for r in rows]
    for model in (table, shared):
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        opt.zero_grad()
        (-_loss(model, batch, actions, adv)).backward()
        opt.step()
    torch.testing.assert_close(shared.weight, table.logits, rtol=0, atol=1e-6)
    torch.testing.assert_close(shared.action_probs(), table.action_probs(), rtol=0, atol=1e-6)


def _shares_a_token(a, b):
    return bool(set(TASK.prompt_tokens(a)) & set(TASK.prompt_tokens(b)))


def test_an_update_on_one_prompt_moves_the_prompts_that_share_its_tokens(prompts):
    logp, off = _random_law(prompts, seed=6)
    before = {}
    after = {}
    for kind in ("table", "shared"):
        model = tabular_from_distribution(kind, TASK, prompts, logp, off)
        before[kind] = model.action_probs()
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        (-_loss(model, [prompts[0]], torch.tensor([3]), torch.tensor([1.0]))).backward()
        opt.step()
        after[kind] = model.action_probs()
    moved = (after["shared"] - before["shared"]).abs().amax(1)
    assert float(moved[0]) > 1e-3
    # the table moves the updated prompt only; the shared policy moves every prompt (the constant feature)
    torch.testing.assert_close(after["table"][1:], before["table"][1:], rtol=0, atol=0)
    assert bool((moved[1:] > 1e-4).all())
    # and a prompt sharing a token with the updated one moves more than the smallest move among those that share none
    share = [i for i in range(1, len(prompts)) if _shares_a_token(prompts[0], prompts[i])]
    other = [i for i in range(1, len(prompts)) if i not in share]
    if share and other:
        assert float(moved[share].max()) > float(moved[other].min())


def test_a_shared_run_round_trips_through_its_checkpoint(tmp_path, prompts):
    logp, off = _random_law(prompts, seed=7)
    model = tabular_from_distribution("shared", TASK, prompts, logp, off)
    with torch.no_grad():
        model.weight.add_(0.1)
    cfg = SFTConfig(name="s", task=TASK, model=ModelConfig(kind="shared"))
    write_policy_run(model, TASK, cfg, tmp_path / "s")
    run = LoadedRun(tmp_path / "s")
    assert isinstance(run.model, SharedPolicy)
    torch.testing.assert_close(run.model.action_probs(), model.action_probs(), rtol=0, atol=0)
    assert issubclass(SharedPolicy, TablePolicy)


def test_bad_shapes_name_the_problem(prompts):
    logp, off = _random_law(prompts)
    table = tabular_from_distribution("table", TASK, prompts, logp, off)
    R, A = table.logits.shape
    keys, answers = table.prompt_keys, table.answers
    with pytest.raises(ValueError, match="offset"):
        SharedPolicy(keys, answers, torch.zeros(R, A + 1), len(TASK.vocab))
    with pytest.raises(ValueError, match="features"):
        SharedPolicy(keys, answers, torch.zeros(R, A), len(TASK.vocab), prompt_features=torch.zeros(R + 1, 3))
    with pytest.raises(ValueError, match="weight"):
        SharedPolicy(keys, answers, torch.zeros(R, A), len(TASK.vocab), weight=torch.zeros(2, 2))
