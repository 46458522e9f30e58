"""Tests of evaluation: exact answer masses against teacher forcing and sampling, exact metrics, sampled pass@k."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tailmiss import analytic
from tailmiss.llm.evaluate import (
    AnswerDistribution,
    answer_distribution,
    exact_metrics,
    sample_correct_counts,
    sampled_pass_at_k,
)
from tailmiss.llm.model import GPT, ModelConfig, answer_logprobs, generate, with_dtype
from tailmiss.llm.tasks import EOS, PAD, AnswerSet, MazeTask, MultiSolutionTask
from tailmiss.llm.tasks.base import cut_at_eos

DIGIT0 = 4
TASK = MultiSolutionTask(num_digits=2)  # 100 well-formed answers per prompt


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models on a shared 2-core machine: thread hand-offs cost more than they save."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _untrained(task=TASK, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(ModelConfig(n_layer=2, n_head=4, n_embd=32), len(task.vocab), task.prompt_len + task.max_answer_len)


@pytest.fixture(scope="module")
def trained() -> GPT:
    """A tiny model after 80 SFT steps: mostly well-formed answers, correct shares spread over (0, 1)."""
    model = _untrained(seed=1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    prompts = TASK.prompts("train", 256, seed=0)
    for _ in range(80):
        ids, mask = TASK.sft_batch([prompts[i] for i in rng.integers(0, len(prompts), 64)], rng)
        logits = model(ids[:, :-1])  # (B, T-1, vocab)
        loss = F.cross_entropy(logits[mask[:, 1:]], ids[:, 1:][mask[:, 1:]])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval().requires_grad_(False)


class _RaggedTask(MultiSolutionTask):
    """Task (a) with answer sets of different sizes and lengths, to exercise padding and length masks.

    Per prompt: ``<eos>`` alone, each single digit, and each pair of allowed digits: 1 + 10 + |S|^2 answers
    of 1, 2 or 3 tokens, right-padded with ``<pad>``.
    """

    def enumerate_answers(self, prompt) -> AnswerSet:
        allowed = [DIGIT0 + d for d in prompt.allowed]
        rows = [[EOS]] + [[DIGIT0 + d, EOS] for d in range(10)] + [[a, b, EOS] for a in allowed for b in allowed]
        tokens = torch.tensor([r + [PAD] * (self.max_answer_len - len(r)) for r in rows])
        return AnswerSet(
            tokens=tokens,
            lengths=torch.tensor([len(r) for r in rows]),
            correct=torch.tensor([self.reward(prompt, r) == 1.0 for r in rows]),
        )


def _brute_force_logp(model: GPT, task, prompts) -> list[torch.Tensor]:
    """log pi(a | x) of every enumerated answer by full-forward float64 teacher forcing, one prompt at a time."""
    model64 = with_dtype(model, torch.float64)
    out = []
    for prompt in prompts:
        answers = task.enumerate_answers(prompt)
        ids = task.encode_prompts([prompt]).expand(len(answers.tokens), -1)
        with torch.no_grad():
            lp = answer_logprobs(model64, ids, answers.tokens)  # (M, L)
        valid = torch.arange(answers.tokens.shape[1])[None, :] < answers.lengths[:, None]
        out.append(torch.where(valid, lp, 0.0).sum(1))
    return out


# -- answer_distribution -------------------------------------------------------------------------------------


# float64 scoring is exact to rounding; the default scores in the model's float32 and normalises in float64
_ATOL = {torch.float64: 1e-12, None: 2e-5}


@pytest.mark.parametrize("dtype", [torch.float64, None])
@pytest.mark.parametrize("batch_size", [1, 250, 16384])
def test_answer_distribution_equals_brute_force_teacher_forcing(trained, batch_size, dtype):
    prompts = TASK.prompts("test", 4, seed=0, distinct=True)
    dist = answer_distribution(trained, TASK, prompts, batch_size=batch_size, dtype=dtype)
    assert dist.logp.shape == dist.correct.shape == dist.lengths.shape == (4, 100)
    assert dist.logp.dtype == torch.float64
    for i, want in enumerate(_brute_force_logp(trained, TASK, prompts)):
        torch.testing.assert_close(dist.logp[i], want, rtol=0, atol=_ATOL[dtype])
        assert torch.equal(dist.correct[i], TASK.enumerate_answers(prompts[i]).correct)
    assert (dist.lengths == 3).all()
    assert next(trained.parameters()).dtype == torch.float32  # a float64 score runs on a copy
    assert not trained.training  # the caller's mode is kept


@pytest.mark.parametrize("dtype", [torch.float64, None])
@pytest.mark.parametrize("batch_size", [1, 40, 16384])
def test_answer_distribution_pads_ragged_answer_sets(batch_size, dtype):
    task = _RaggedTask(num_digits=2, min_allowed=2, max_allowed=4)
    model = _untrained(task, seed=3)
    prompts = [p for p in task.prompts("train", 40, seed=1) if len(p.allowed) in (2, 4)][:1]
    prompts += [p for p in task.prompts("train", 40, seed=1) if len(p.allowed) == 3][:1]
    dist = answer_distribution(model, task, prompts, batch_size=batch_size, dtype=dtype)
    sizes = [1 + 10 + len(p.allowed) ** 2 for p in prompts]
    assert dist.logp.shape == (2, max(sizes)) and sizes[0] != sizes[1]
    assert model.training  # train mode restored after scoring
    for i, want in enumerate(_brute_force_logp(model, task, prompts)):
        m = sizes[i]
        torch.testing.assert_close(dist.logp[i, :m], want, rtol=0, atol=_ATOL[dtype])
        assert torch.isneginf(dist.logp[i, m:]).all()  # padding columns hold no mass
        assert not dist.correct[i, m:].any() and (dist.lengths[i, m:] == 1).all()
        assert torch.equal(dist.lengths[i, :m], task.enumerate_answers(prompts[i]).lengths)
        assert int(dist.correct[i].sum()) == len(prompts[i].allowed) ** 2


def test_prefix_tree_holds_each_live_prefix_once():
    """Task (a) with 2 digits: 1 + 10 + 100 next-token laws per prompt, children adjacent to their parent's order."""
    from tailmiss.llm.evaluate import _forest, _tree

    prompts = TASK.prompts("test", 3, seed=0, distinct=True)
    trees = [_tree(TASK.enumerate_answers(p)) for p in prompts]
    assert trees[0] is trees[1]  # one answer set, built once
    forest = _forest(trees, "cpu")
    assert [forest.size(d) for d in range(forest.depth)] == [3, 30, 300]
    for d in (1, 2):
        assert bool((forest.parent[d][1:] >= forest.parent[d][:-1]).all())  # sorted by parent
        assert torch.equal(torch.bincount(forest.parent[d]), torch.full((forest.size(d - 1),), 10))
    answers = TASK.enumerate_answers(prompts[0]).tokens
    node = forest.node[2][:100]  # prompt 0's answers: node of (d1, d2) has last token d2 and parent node d1
    assert torch.equal(forest.token[2][node], answers[:, 1])
    assert torch.equal(forest.token[1][forest.parent[2][node]], answers[:, 0])


def test_untrained_model_puts_mass_off_format():
    prompts = TASK.prompts("test", 3, seed=0, distinct=True)
    dist = answer_distribution(_untrained(), TASK, prompts)
    torch.testing.assert_close(
        dist.probs.sum(1) + dist.off_format, torch.ones(3, dtype=torch.float64), rtol=0, atol=1e-12
    )
    # near-uniform next-token laws over 15 tokens: well-formed mass about (10/15)^2 / 15 = 3%
    assert (dist.off_format > 0.5).all()
    assert ((dist.mu_pos > 0) & (dist.mu_pos <= dist.probs.sum(1))).all()


def test_trained_model_masses_sum_to_one(trained):
    prompts = TASK.prompts("test", 8, seed=0, distinct=True)
    dist = answer_distribution(trained, TASK, prompts)
    torch.testing.assert_close(
        dist.probs.sum(1) + dist.off_format, torch.ones(8, dtype=torch.float64), rtol=0, atol=1e-12
    )
    assert (dist.off_format >= 0).all() and (dist.off_format < 0.2).all()  # SFT taught the format


def test_answer_distribution_needs_an_enumerable_task():
    task = MazeTask(size=5)
    model = GPT(ModelConfig(1, 2, 16), len(task.vocab), task.prompt_len + task.max_answer_len)
    with pytest.raises(ValueError, match="finite answer space"):
        answer_distribution(model, task, task.prompts("train", 1, seed=0))


def _classify(rows: list[list[int]]) -> np.ndarray:
    """Index 0..99 of each sampled well-formed answer (its two digits in base 10), 100 for off-format."""
    out = np.full(len(rows), 100)
    for j, row in enumerate(rows):
        cut = cut_at_eos(row)
        if cut is not None and len(cut) == 3 and all(DIGIT0 <= t < DIGIT0 + 10 for t in cut[:2]):
            out[j] = 10 * (cut[0] - DIGIT0) + (cut[1] - DIGIT0)
    return out


def test_exact_masses_match_sampling(trained):
    n = 4000
    prompts = TASK.prompts("test", 2, seed=3, distinct=True)
    dist = answer_distribution(trained, TASK, prompts)
    ids = TASK.encode_prompts(prompts).repeat_interleave(n, dim=0)
    tokens, _ = generate(trained, ids, TASK.max_answer_len, EOS, PAD, generator=torch.Generator().manual_seed(5))
    for i, prompt in enumerate(prompts):
        cells = _classify(tokens[i * n : (i + 1) * n].tolist())
        freq = np.bincount(cells, minlength=101) / n
        exact = np.append(dist.probs[i].numpy(), dist.off_format[i].item())
        assert exact[:100].max() > 0.02 and (exact > 1e-3).sum() >= 10  # a spread law, not one answer
        # each of the 101 cells within 5 binomial standard errors, plus 1/n for cells of almost no mass
        se = np.sqrt(exact * (1 - exact) / n)
        assert (np.abs(freq - exact) <= 5 * se + 1 / n).all(), np.abs(freq - exact) / (se + 1e-12)
        # the sampled correct share agrees with mu_pos, judged by the verifier itself
        rewards = np.array([TASK.reward(prompt, r) for r in tokens[i * n : (i + 1) * n].tolist()])
        mu = dist.mu_pos[i].item()
        assert 0.05 < mu < 0.95
        assert abs(rewards.mean() - mu) <= 5 * math.sqrt(mu * (1 - mu) / n)


# -- exact_metrics on hand-built distributions -----------------------------------------------------------------

# Two prompts, five answers each. Prompt 0: three correct answers (reference masses 0.4, 0.1, 0.05) and two
# incorrect (0.3, 0.1), so 0.05 is off-format. Prompt 1: two correct (0.35, 0.25), three incorrect.
REF_P = [[0.4, 0.1, 0.05, 0.3, 0.1], [0.35, 0.25, 0.2, 0.1, 0.05]]
CUR_P = [[0.5, 0.02, 0.08, 0.2, 0.1], [0.3, 0.3, 0.1, 0.1, 0.1]]
CORRECT = [[True, True, True, False, False], [True, True, False, False, False]]
LENGTHS = [[3, 3, 4, 3, 2], [2, 2, 2, 2, 2]]


def _dist(probs, correct=CORRECT, lengths=LENGTHS) -> AnswerDistribution:
    return AnswerDistribution(
        logp=torch.tensor(probs, dtype=torch.float64).log(),
        correct=torch.tensor(correct),
        lengths=torch.tensor(lengths),
    )


def test_exact_metrics_golden_rare_share_one_tenth():
    m = exact_metrics(_dist(CUR_P), _dist(REF_P), ks=(1, 2, 4), rare_share=0.1)
    np.testing.assert_allclose(m["mu_pos"], [0.6, 0.6], rtol=1e-12)
    np.testing.assert_allclose(m["off_format"], [0.1, 0.1], rtol=1e-12)
    # prompt 0 loses 0.1 - 0.02 on answer 1 of its 0.55; prompt 1 loses 0.35 - 0.3 of its 0.6
    np.testing.assert_allclose(m["retained_mass"], [1 - 0.08 / 0.55, 1 - 0.05 / 0.6], rtol=1e-12)
    # rare set of prompt 0: budget 0.1 * 0.55 = 0.055 holds 0.05 (answer 2) but not 0.05 + 0.1;
    # prompt 1: budget 0.06 holds not even its smallest correct answer, 0.25
    np.testing.assert_array_equal(m["rare_count"], [1, 0])
    np.testing.assert_allclose(m["tau_rare"], [0.08, 0.0], rtol=1e-12)
    np.testing.assert_allclose(m["tau_rare_ref"], [0.05, 0.0], rtol=1e-12)
    # only prompt 0's answer 2 (4 tokens): -log(0.08)/4 - (-log(0.05)/4)
    np.testing.assert_allclose(m["dnll_rare"], math.log(0.05 / 0.08) / 4, rtol=1e-12)
    np.testing.assert_allclose(m["mu_pos_mean"], 0.6, rtol=1e-12)
    np.testing.assert_allclose(m["off_format_mean"], 0.1, rtol=1e-12)
    np.testing.assert_allclose(m["retained_mass_mean"], (2 - 0.08 / 0.55 - 0.05 / 0.6) / 2, rtol=1e-12)
    assert sorted(m["exact_pass_at_k"]) == [1, 2, 4]
    for k, want in {1: 0.6, 2: 0.84, 4: 0.9744}.items():  # 1 - 0.4^k on both prompts
        np.testing.assert_allclose(m["exact_pass_at_k"][k], want, rtol=1e-12)


def test_exact_metrics_golden_rare_share_one_half():
    m = exact_metrics(_dist(CUR_P), _dist(REF_P), ks=(1,), rare_share=0.5)
    # budgets 0.275 and 0.3: prompt 0 takes 0.05 and 0.1 (answers 2, 1), prompt 1 takes 0.25 (answer 1)
    np.testing.assert_array_equal(m["rare_count"], [2, 1])
    np.testing.assert_allclose(m["tau_rare"], [0.08 + 0.02, 0.3], rtol=1e-12)
    np.testing.assert_allclose(m["tau_rare_ref"], [0.05 + 0.1, 0.25], rtol=1e-12)
    pooled = [math.log(0.05 / 0.08) / 4, math.log(0.1 / 0.02) / 3, math.log(0.25 / 0.3) / 2]
    np.testing.assert_allclose(m["dnll_rare"], np.mean(pooled), rtol=1e-12)


def test_exact_metrics_without_reference():
    m = exact_metrics(_dist(CUR_P), ks=(1, 3), rare_share=0.1)
    np.testing.assert_allclose(m["retained_mass"], [1.0, 1.0], rtol=0, atol=0)
    assert m["dnll_rare"] == 0.0
    np.testing.assert_array_equal(m["rare_count"], [1, 0])  # the current model's own tail: 0.02 <= 0.06
    np.testing.assert_allclose(m["tau_rare"], m["tau_rare_ref"], rtol=0, atol=0)
    np.testing.assert_allclose(m["exact_pass_at_k"][3], 1 - 0.4**3, rtol=1e-12)


def test_exact_metrics_without_any_rare_answer_gives_nan():
    m = exact_metrics(_dist(CUR_P[1:], CORRECT[1:], LENGTHS[1:]), _dist(REF_P[1:], CORRECT[1:], LENGTHS[1:]))
    assert m["rare_count"].tolist() == [0] and m["tau_rare"].tolist() == [0.0]
    assert math.isnan(m["dnll_rare"])


def test_exact_metrics_rejects_mismatched_reference():
    cur = _dist(CUR_P)
    narrow = _dist([r[:4] for r in REF_P], [c[:4] for c in CORRECT], [n[:4] for n in LENGTHS])
    with pytest.raises(ValueError, match="same prompts"):
        exact_metrics(cur, narrow)
    with pytest.raises(ValueError, match="same prompts"):
        exact_metrics(cur, _dist(REF_P[:1], CORRECT[:1], LENGTHS[:1]))
    flipped = [[not c for c in row] for row in CORRECT]
    with pytest.raises(ValueError, match="same prompts"):
        exact_metrics(cur, _dist(REF_P, flipped))


@pytest.mark.parametrize("rare_share", [0.05, 0.2, 0.6])
def test_exact_metrics_equal_a_direct_loop_on_random_distributions(rare_share):
    """Brute-force twin: every metric recomputed answer by answer with plain Python loops."""
    rng = np.random.default_rng(7)
    n_prompts, n_answers = 12, 9
    p0 = rng.dirichlet(np.full(n_answers + 1, 0.7), size=n_prompts)[:, :n_answers]  # last cell: off-format
    p = rng.dirichlet(np.full(n_answers + 1, 0.7), size=n_prompts)[:, :n_answers]
    correct = rng.random((n_prompts, n_answers)) < 0.6
    correct[:, 0] = True  # every prompt has a correct answer
    lengths = rng.integers(1, 5, size=(n_prompts, n_answers))
    m = exact_metrics(_dist(p, correct, lengths), _dist(p0, correct, lengths), ks=(1, 5), rare_share=rare_share)
    dnll, retained, tau, count = [], [], [], []
    for x in range(n_prompts):
        c = [a for a in range(n_answers) if correct[x, a]]
        mu0 = sum(p0[x, a] for a in c)
        retained.append(1 - sum(max(0.0, p0[x, a] - p[x, a]) for a in c) / mu0)
        rare, cum = [], 0.0
        for a in sorted(c, key=lambda a: p0[x, a]):
            cum += p0[x, a]
            if cum > rare_share * mu0:
                break
            rare.append(a)
        tau.append(sum(p[x, a] for a in rare))
        count.append(len(rare))
        dnll += [(-math.log(p[x, a]) + math.log(p0[x, a])) / lengths[x, a] for a in rare]
    assert sum(count) > 0
    np.testing.assert_allclose(m["retained_mass"], retained, rtol=1e-12)
    np.testing.assert_array_equal(m["rare_count"], count)
    np.testing.assert_allclose(m["tau_rare"], tau, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(m["dnll_rare"], np.mean(dnll), rtol=1e-12)
    mu = (p * correct).sum(1)
    np.testing.assert_allclose(m["mu_pos"], mu, rtol=1e-12)
    np.testing.assert_allclose(m["off_format"], 1 - p.sum(1), rtol=1e-12)
    for k in (1, 5):
        np.testing.assert_allclose(m["exact_pass_at_k"][k], np.mean(1 - (1 - mu) ** k), rtol=1e-12)


# -- sampled pass@k ---------------------------------------------------------------------------------------------


def test_sampled_pass_at_k_golden():
    # n = 4 samples; c = 0, 1, 2, 4 correct. pass@2 = 1 - C(4-c, 2)/C(4, 2) = 0, 1/2, 5/6, 1.
    got = sampled_pass_at_k(np.array([0, 1, 2, 4]), 4, ks=(1, 2, 4, 8, 16))
    assert sorted(got) == [1, 2, 4]  # k > n dropped
    np.testing.assert_allclose(got[1], (0 + 0.25 + 0.5 + 1) / 4, rtol=1e-12)
    np.testing.assert_allclose(got[2], (0 + 0.5 + 5 / 6 + 1) / 4, rtol=1e-12)
    np.testing.assert_allclose(got[4], 3 / 4, rtol=1e-12)


def test_sampled_pass_at_k_is_the_mean_of_the_unbiased_estimator():
    counts = np.random.default_rng(0).integers(0, 65, size=20)
    got = sampled_pass_at_k(counts, 64, ks=(1, 2, 4, 8, 16, 32, 64, 128, 256))
    assert sorted(got) == [1, 2, 4, 8, 16, 32, 64]
    for k, value in got.items():
        np.testing.assert_allclose(value, np.mean(analytic.pass_at_k(64, counts, k)), rtol=1e-12)
        np.testing.assert_allclose(
            value, np.mean([1 - math.comb(64 - c, k) / math.comb(64, k) for c in counts]), rtol=1e-12
        )


def test_sampled_pass_at_k_agrees_with_exact_pass_at_k(trained):
    n, ks = 512, (1, 4, 16)
    prompts = TASK.prompts("test", 8, seed=2, distinct=True)
    dist = answer_distribution(trained, TASK, prompts)
    mu = dist.mu_pos.numpy()
    assert mu.min() > 0.02 and mu.max() < 0.98 and np.ptp(mu) > 0.2  # nontrivial, varied prompts
    exact = exact_metrics(dist, ks=ks)["exact_pass_at_k"]
    counts = sample_correct_counts(trained, TASK, prompts, n, torch.Generator().manual_seed(0))
    sampled = sampled_pass_at_k(counts, n, ks)
    for k in ks:
        # Standard error of the mean over prompts of the unbiased estimator. It is a U-statistic of order k
        # whose kernel is a Bernoulli(pi_k) indicator, pi_k = 1 - (1 - mu)^k; Hoeffding (1948) bounds its
        # variance by (k / n) pi_k (1 - pi_k). The exact pi_k are known, so the bound needs no estimate.
        pi = 1 - (1 - mu) ** k
        se = math.sqrt(np.sum(k * pi * (1 - pi) / n)) / len(mu)
        assert abs(sampled[k] - exact[k]) <= 4 * se, (k, sampled[k], exact[k], se)
    # the check can fail: exact pass@k from a wrong mass is rejected at the same tolerance, be it mu_pos
    # shifted by 0.05 or the whole well-formed mass (every answer counted as correct)
    se1 = math.sqrt(np.sum(mu * (1 - mu) / n)) / len(mu)
    assert 4 * se1 < 0.05 / 2
    well_formed = dist.probs.sum(1).numpy()
    for wrong in (mu + 0.05, mu - 0.05, well_formed):
        assert abs(sampled[1] - np.mean(wrong)) > 4 * se1
    pi4 = 1 - (1 - well_formed) ** 4
    assert abs(sampled[4] - np.mean(pi4)) > 4 * math.sqrt(np.sum(4 * pi4 * (1 - pi4) / n)) / len(mu)


def test_sample_correct_counts_is_deterministic_and_matches_generate(trained):
    n = 64
    prompts = TASK.prompts("test", 3, seed=4, distinct=True)
    a = sample_correct_counts(trained, TASK, prompts, n, torch.Generator().manual_seed(9))
    b = sample_correct_counts(trained, TASK, prompts, n, torch.Generator().manual_seed(9))
    assert a.dtype == np.int64 and a.shape == (3,)
    np.testing.assert_array_equal(a, b)
    assert ((a >= 0) & (a <= n)).all()
    # brute-force twin: one generate call on the repeated prompts, same generator, scored by the verifier
    ids = TASK.encode_prompts(prompts).repeat_interleave(n, dim=0)
    tokens, _ = generate(trained, ids, TASK.max_answer_len, EOS, PAD, generator=torch.Generator().manual_seed(9))
    rows = tokens.tolist()
    want = [sum(TASK.reward(p, r) for r in rows[i * n : (i + 1) * n]) for i, p in enumerate(prompts)]
    np.testing.assert_array_equal(a, want)
    # a small batch_size splits the prompts over several generate calls: still one count per prompt
    seen = []
    c = sample_correct_counts(
        trained, TASK, prompts, n, torch.Generator().manual_seed(9), batch_size=n, progress=seen.append
    )
    assert seen == [1, 1, 1] and ((c >= 0) & (c <= n)).all()
