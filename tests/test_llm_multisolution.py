"""Tests of task (a), the multi-solution digit task: teacher law, difficulty levels, verifier, answers, prompts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tailmiss.io import read_toml, write_toml
from tailmiss.llm.tasks import BOS, EOS, PAD, SEP, DigitSetPrompt, MultiSolutionTask, make_task
from tailmiss.llm.tasks.base import Task
from tailmiss.llm.tasks.multisolution import _DIGIT0
from tailmiss.llm.tasks.narrowing import NarrowingTask

DIGIT0 = 4  # id of "0": after <pad> <bos> <sep> <eos>
EMPTY = 14  # id of "_"


def _digits(*ds: int) -> list[int]:
    return [DIGIT0 + d for d in ds]


def _all_prompts(task: MultiSolutionTask):
    """Every prompt the task can draw: ordered tuples of min_allowed..max_allowed distinct digits."""
    for m in range(task.min_allowed, task.max_allowed + 1):
        for allowed in itertools.permutations(range(10), m):
            yield DigitSetPrompt(allowed)


def _direct_reward(task: MultiSolutionTask, prompt: DigitSetPrompt, answer) -> float:
    """The verifier restated: cut at the first EOS; then exactly K digits of the allowed set and EOS."""
    ids = [int(x) for x in answer]
    if EOS not in ids:
        return 0.0
    ids = ids[: ids.index(EOS) + 1]
    ok = len(ids) == task.num_digits + 1 and all(t - DIGIT0 in prompt.allowed for t in ids[:-1])
    return float(ok)


# -- constructor -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"num_digits": 0}, "num_digits"),
        ({"num_digits": 5}, "num_digits"),
        ({"num_digits": True}, "num_digits"),
        ({"num_digits": 2.0}, "num_digits"),
        ({"min_allowed": 0}, "min_allowed"),
        ({"min_allowed": 3, "max_allowed": 2}, "max_allowed"),
        ({"max_allowed": 10}, "max_allowed"),
        ({"mu_mean": 0}, "mu_mean"),
        ({"mu_mean": 1}, "mu_mean"),
        ({"mu_mean": True}, "mu_mean"),
        ({"difficulty_concentration": 0}, "difficulty_concentration"),
        ({"difficulty_concentration": -1.0}, "difficulty_concentration"),
        ({"mu_min": 0.5, "mu_max": 0.5}, "mu_max"),
        ({"mu_min": 0.6, "mu_max": 0.5}, "mu_max"),
        ({"mu_min": 0.0}, "mu_min"),
        ({"mu_max": 1.0}, "mu_max"),
        ({"zipf_exponent": -1}, "zipf_exponent"),
        ({"zipf_exponent": float("inf")}, "zipf_exponent"),
        ({"zipf_exponent": float("nan")}, "zipf_exponent"),
        ({"difficulty_seed": -1}, "difficulty_seed"),
        ({"heldout_fraction": 1.0}, "heldout_fraction"),
        ({"heldout_fraction": -0.1}, "heldout_fraction"),
    ],
)
def test_constructor_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        MultiSolutionTask(**kwargs)


def test_constructor_rejects_infinite_concentration():
    with pytest.raises(ValueError, match="difficulty_concentration"):
        MultiSolutionTask(difficulty_concentration=float("inf"))


@pytest.mark.parametrize("field", ["difficulty_concentration", "zipf_exponent"])
def test_constructor_rejects_bools(field):
    with pytest.raises(ValueError, match=field):
        MultiSolutionTask(**{field: True})


def test_vocabulary_and_lengths():
    task = MultiSolutionTask(num_digits=2, max_allowed=3)
    assert task.vocab.tokens == ("<pad>", "<bos>", "<sep>", "<eos>", *map(str, range(10)), "_")
    assert task.vocab.encode(["0", "9", "_"]) == [DIGIT0, DIGIT0 + 9, EMPTY]
    assert task.prompt_len == 3 + 2 and task.max_answer_len == 2 + 1


# -- the teacher -------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_digits", [1, 2, 3, 4])
@pytest.mark.parametrize("alpha", [0.0, 1.0, 1.5, 3.0])
def test_teacher_digit_probs(num_digits, alpha):
    task = MultiSolutionTask(num_digits=num_digits, zipf_exponent=alpha)
    for prompt in task.prompts("train", 30, seed=num_digits):
        probs = task.teacher_digit_probs(prompt)
        allowed = list(prompt.allowed)
        others = [d for d in range(10) if d not in allowed]
        mu = task.target_mu_pos(prompt)
        eps = 1.0 - mu ** (1.0 / num_digits)
        assert probs.dtype == np.float64 and probs.shape == (10,) and (probs > 0).all()
        np.testing.assert_allclose(probs.sum(), 1.0, rtol=0, atol=1e-12)
        np.testing.assert_allclose(probs[allowed].sum(), 1.0 - eps, rtol=1e-12)
        np.testing.assert_allclose(probs[others], eps / len(others), rtol=1e-12)  # the error mass is uniform
        np.testing.assert_allclose(probs[allowed].sum() ** num_digits, mu, rtol=0, atol=1e-12)
        # Zipf ratios: w_r / w_0 = (r + 1)^-alpha; the favourite over the runner-up is 2^alpha
        np.testing.assert_allclose(probs[allowed[0]] / probs[allowed[1]], 2.0**alpha, rtol=1e-12)
        ranks = np.arange(len(allowed))
        np.testing.assert_allclose(probs[allowed] / probs[allowed[0]], (ranks + 1.0) ** -alpha, rtol=1e-12)


def test_teacher_digit_probs_golden():
    # zipf_exponent 1 over two allowed digits: weights 1, 1/2 -> shares 2/3, 1/3 of the allowed mass;
    # with one digit (K = 1) the allowed mass is mu itself and the other 8 digits share 1 - mu.
    task = MultiSolutionTask(num_digits=1, zipf_exponent=1.0)
    prompt = DigitSetPrompt((7, 2))
    mu = task.target_mu_pos(prompt)
    want = np.full(10, (1.0 - mu) / 8)
    want[7], want[2] = mu * 2 / 3, mu / 3
    np.testing.assert_allclose(task.teacher_digit_probs(prompt), want, rtol=1e-12)


@pytest.mark.parametrize("num_digits", [1, 2, 3])
def test_teacher_answer_probs(num_digits):
    task = MultiSolutionTask(num_digits=num_digits)
    for prompt in task.prompts("train", 10, seed=5):
        probs = task.teacher_answer_probs(prompt)
        answers = task.enumerate_answers(prompt)
        assert probs.shape == (10**num_digits,)
        np.testing.assert_allclose(probs.sum(), 1.0, rtol=0, atol=1e-12)
        correct = answers.correct.numpy()
        np.testing.assert_allclose(probs[correct].sum(), task.target_mu_pos(prompt), rtol=0, atol=1e-12)
        # brute force: each answer's probability is the product of its digits' probabilities
        digit_p = task.teacher_digit_probs(prompt)
        rows = answers.tokens[:, :-1].numpy() - DIGIT0
        np.testing.assert_allclose(probs, np.prod(digit_p[rows], axis=1), rtol=1e-12)


# -- difficulty levels ----------------------------------------------------------------------------------


def _levels(task: MultiSolutionTask) -> np.ndarray:
    """The correct share of each first-listed digit (the level is chosen by that digit alone)."""
    return np.array([task.target_mu_pos(DigitSetPrompt((d, (d + 1) % 10))) for d in range(10)])


def test_default_levels_span_the_documented_range():
    task = MultiSolutionTask()
    levels = _levels(task)
    assert ((task.mu_min <= levels) & (levels <= task.mu_max)).all()
    assert levels.min() <= 0.01 and levels.max() >= 0.9
    assert 0.55 <= levels.mean() <= 0.7
    assert len(np.unique(levels)) >= 5  # a real spread of difficulties, not one level


@pytest.mark.parametrize("kwargs", [{"mu_min": 0.2, "mu_max": 0.8}, {"mu_mean": 0.3, "difficulty_concentration": 5.0}])
def test_levels_respect_the_clip_range(kwargs):
    task = MultiSolutionTask(**kwargs)
    levels = _levels(task)
    assert ((task.mu_min <= levels) & (levels <= task.mu_max)).all()


def test_level_depends_on_the_first_digit_only_and_the_seed_permutes_levels():
    task = MultiSolutionTask()
    for d in range(10):
        shares = {task.target_mu_pos(DigitSetPrompt((d, *rest))) for rest in [(0,), (5, 3), (9, 8, 1)] if d not in rest}
        assert len(shares) == 1
    other = MultiSolutionTask(difficulty_seed=1)
    np.testing.assert_allclose(np.sort(_levels(other)), np.sort(_levels(task)), rtol=0, atol=0)
    assert not np.array_equal(_levels(other), _levels(task))


def test_levels_increase_with_mu_mean():
    means = [_levels(MultiSolutionTask(mu_mean=m)).mean() for m in (0.2, 0.5, 0.8)]
    assert means[0] < means[1] < means[2]


@pytest.mark.parametrize("num_digits", [2, 3])
def test_prompts_average_at_least_five_correct_answers(num_digits):
    task = MultiSolutionTask(num_digits=num_digits)
    counts = [int(task.enumerate_answers(p).correct.sum()) for p in task.prompts("train", 300, seed=0)]
    assert np.mean(counts) >= 5


# -- SFT data -----------------------------------------------------------------------------------------


def test_sft_answers_follow_the_teacher_law():
    n = 20_000
    task = MultiSolutionTask(num_digits=2)
    prompt = DigitSetPrompt((2, 6, 9))  # first digit 2 sits at a middle level
    mu = task.target_mu_pos(prompt)
    assert 0.1 < mu < 0.9
    rng = np.random.default_rng(0)
    answers = [task.sft_answer(prompt, rng) for _ in range(n)]
    assert all(len(a) == task.num_digits + 1 and a[-1] == EOS for a in answers)
    digits = np.array([a[:-1] for a in answers]) - DIGIT0
    assert digits.min() >= 0 and digits.max() <= 9
    want = task.teacher_digit_probs(prompt)
    for pos in range(task.num_digits):  # every position has the teacher law
        freq = np.bincount(digits[:, pos], minlength=10) / n
        z = np.abs(freq - want) / np.sqrt(want * (1 - want) / n)
        assert z.max() < 4.5, (freq, want)
    rewards = np.array([task.reward(prompt, a) for a in answers])
    direct = np.array([float(set(a[:-1]) <= set(_digits(*prompt.allowed))) for a in answers])
    np.testing.assert_array_equal(rewards, direct)
    assert abs(rewards.mean() - mu) < 4.5 * np.sqrt(mu * (1 - mu) / n)


def test_sft_batch_layout():
    task = MultiSolutionTask(num_digits=3, max_allowed=4)
    prompts = task.prompts("train", 5, seed=1)
    ids, mask = task.sft_batch(prompts, np.random.default_rng(2))
    assert ids.shape == mask.shape == (5, task.prompt_len + task.max_answer_len)
    assert torch.equal(ids[:, : task.prompt_len], task.encode_prompts(prompts))
    assert not mask[:, : task.prompt_len].any() and mask[:, task.prompt_len :].all()
    assert (ids[:, -1] == EOS).all()


def _looped_batch(task, prompts, rng):
    """The batch the base class builds: one ``sft_answer`` per prompt, in order."""
    return Task.sft_batch(task, prompts, rng)


_BATCH_TASKS = [
    MultiSolutionTask(),
    MultiSolutionTask(num_digits=2, min_allowed=1, max_allowed=3),
    MultiSolutionTask(mu_mean=0.4, difficulty_concentration=0.3, mu_min=2e-4, heldout_fraction=0.2, incorrect="blank"),
    NarrowingTask(),
    NarrowingTask(conflict_rule="no-favourite", conflict_strength=1.0),
    NarrowingTask(conflict_visible=True, conflict_share=0.5),
    NarrowingTask(incorrect="blank", conflict_strength=0.25),
]


@settings(max_examples=40, deadline=None)
@given(
    which=st.integers(0, len(_BATCH_TASKS) - 1),
    size=st.integers(0, 70),
    prompt_seed=st.integers(0, 2**31),
    draw_seed=st.integers(0, 2**31),
)
def test_sft_batch_matches_the_loop_bit_for_bit(which, size, prompt_seed, draw_seed):
    """The array-built SFT batch is the per-prompt loop's, id for id, and leaves the generator where the loop
    leaves it (the SFT cache key stays: the same data from the same seeds)."""
    task = _BATCH_TASKS[which]
    prompts = task.prompts("train", size, seed=prompt_seed)
    rng_a, rng_b = np.random.default_rng(draw_seed), np.random.default_rng(draw_seed)
    ids, mask = task.sft_batch(prompts, rng_a)
    ids_loop, mask_loop = _looped_batch(task, prompts, rng_b)
    assert ids.dtype == ids_loop.dtype and mask.dtype == mask_loop.dtype
    assert torch.equal(ids, ids_loop) and torch.equal(mask, mask_loop)
    assert rng_a.random() == rng_b.random()


def test_sft_batch_digit_frequencies_follow_the_teacher():
    """Over many draws of one prompt, each position's digit frequencies match the teacher's law (the batch is
    not just equal to the loop but right: a 5-sigma band per digit)."""
    task = NarrowingTask(conflict_strength=0.5)
    (prompt,) = [p for p in task.prompts("train", 200, seed=3) if task.prompt_type(p) == "minority"][:1]
    ids, _ = task.sft_batch([prompt] * 20_000, np.random.default_rng(0))
    digits = ids[:, task.prompt_len : task.prompt_len + task.num_digits].numpy() - _DIGIT0
    law = task.teacher_digit_probs(prompt)
    for pos in range(task.num_digits):
        freq = np.bincount(digits[:, pos], minlength=10) / len(digits)
        assert np.all(np.abs(freq - law) <= 5 * np.sqrt(law * (1 - law) / len(digits)) + 1e-12)


# -- verifier --------------------------------------------------------------------------------------------

PROMPT = DigitSetPrompt((3, 1, 4))
TASK2 = MultiSolutionTask(num_digits=2)


@pytest.mark.parametrize(
    ("answer", "reward"),
    [
        (_digits(3, 1) + [EOS], 1.0),
        (_digits(4, 4) + [EOS], 1.0),
        (_digits(3, 5) + [EOS], 0.0),  # 5 is not allowed
        (_digits(3) + [EOS], 0.0),  # too short
        (_digits(3, 1, 4) + [EOS], 0.0),  # too long
        (_digits(3, 1), 0.0),  # no EOS
        ([EOS], 0.0),
        ([], 0.0),
        (_digits(3) + [EMPTY, EOS], 0.0),  # "_" is not a digit
        (_digits(3) + [SEP, EOS], 0.0),
        ([BOS, *_digits(3, 1), EOS], 0.0),
        ([PAD, *_digits(3), EOS], 0.0),
        (_digits(3) + [15, EOS], 0.0),  # outside the vocabulary
        (_digits(3) + [-1, EOS], 0.0),
        ([10**30, *_digits(3), EOS], 0.0),
        (_digits(3, 1) + [EOS, 99, -7, SEP], 1.0),  # tokens after the first EOS are ignored
        (_digits(3, 1) + [EOS, EOS], 1.0),
        (_digits(3, 5) + [EOS] + _digits(3, 1) + [EOS], 0.0),
    ],
)
def test_reward_golden(answer, reward):
    assert TASK2.reward(PROMPT, answer) == reward


@settings(deadline=None)
@given(answer=st.lists(st.integers(-3, 20), max_size=6) | st.lists(st.sampled_from([EOS, *range(4, 15)]), max_size=5))
def test_reward_never_raises_and_matches_the_rule(answer):
    got = TASK2.reward(PROMPT, answer)
    assert got in (0.0, 1.0)
    assert got == _direct_reward(TASK2, PROMPT, answer)


@settings(deadline=None)
@given(tail=st.lists(st.integers(-(2**40), 2**40), max_size=6))
def test_tokens_after_the_first_eos_are_ignored(tail):
    for answer in (_digits(1, 4) + [EOS], _digits(1, 7) + [EOS], [EOS]):
        assert TASK2.reward(PROMPT, answer + tail) == TASK2.reward(PROMPT, answer)


# -- enumerate_answers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_digits", [1, 2, 3])
def test_enumerate_answers(num_digits):
    task = MultiSolutionTask(num_digits=num_digits)
    for prompt in [*task.prompts("train", 4, seed=9), DigitSetPrompt((0, 9))]:
        answers = task.enumerate_answers(prompt)
        m = 10**num_digits
        assert answers.tokens.shape == (m, num_digits + 1) and answers.tokens.dtype == torch.long
        assert torch.equal(answers.lengths, torch.full((m,), num_digits + 1))
        assert (answers.tokens[:, -1] == EOS).all()
        # lexicographic: row i spells i in base 10 with K digits (so the rows are distinct)
        want = torch.tensor([_digits(*map(int, f"{i:0{num_digits}d}")) + [EOS] for i in range(m)])
        assert torch.equal(answers.tokens, want)
        assert len({tuple(r) for r in answers.tokens.tolist()}) == m
        assert int(answers.correct.sum()) == len(prompt.allowed) ** num_digits
        rewards = torch.tensor([task.reward(prompt, r) for r in answers.tokens.tolist()])
        assert torch.equal(rewards == 1.0, answers.correct)


# -- prompts and splits -------------------------------------------------------------------------------------


def test_prompts_are_deterministic_by_seed():
    task = MultiSolutionTask()
    assert task.prompts("train", 50, seed=3) == task.prompts("train", 50, seed=3)
    assert task.prompts("train", 50, seed=3) != task.prompts("train", 50, seed=4)
    assert task.prompts("test", 20, seed=3) == task.prompts("test", 20, seed=3)
    assert task.prompts("train", 0, seed=3) == []


def test_prompt_tokens_layout():
    task = MultiSolutionTask(min_allowed=2, max_allowed=4)
    assert task.prompt_tokens(DigitSetPrompt((7, 2))) == [BOS, *_digits(7, 2), EMPTY, EMPTY, SEP]
    assert task.prompt_tokens(DigitSetPrompt((0, 5, 1, 9))) == [BOS, *_digits(0, 5, 1, 9), SEP]
    for prompt in task.prompts("train", 200, seed=0):
        ids = task.prompt_tokens(prompt)
        m = len(prompt.allowed)
        assert len(ids) == task.prompt_len and ids[0] == BOS and ids[-1] == SEP
        assert ids[1 : 1 + m] == _digits(*prompt.allowed) and ids[1 + m : -1] == [EMPTY] * (task.max_allowed - m)
        assert task.min_allowed <= m <= task.max_allowed and len(set(prompt.allowed)) == m
    assert task.encode_prompts(task.prompts("train", 3, seed=0)).shape == (3, task.prompt_len)


def test_splits_are_respected_and_disjoint():
    task = MultiSolutionTask(heldout_fraction=0.2)
    train = task.prompts("train", 300, seed=0)
    test = task.prompts("test", 100, seed=0)
    assert all(task.split_of(p) == "train" for p in train)
    assert all(task.split_of(p) == "test" for p in test)
    assert not set(train) & set(test)


def test_heldout_share_over_every_prompt():
    # brute force over all 90 + 720 + 5040 ordered prompts: the hash split holds heldout_fraction of them
    task = MultiSolutionTask(heldout_fraction=0.1)
    splits = [task.split_of(p) for p in _all_prompts(task)]
    n, share = len(splits), splits.count("test") / len(splits)
    assert n == 5850
    assert abs(share - 0.1) < 4.5 * np.sqrt(0.1 * 0.9 / n)


def test_distinct_prompts():
    task = MultiSolutionTask()
    prompts = task.prompts("train", 500, seed=1, distinct=True)
    assert len(set(prompts)) == 500
    small = MultiSolutionTask(min_allowed=1, max_allowed=1, heldout_fraction=0.0)  # only 10 prompts exist
    assert len(set(small.prompts("train", 10, seed=0, distinct=True))) == 10
    with pytest.raises(ValueError, match="distinct"):
        small.prompts("train", 11, seed=0, distinct=True)
    assert len(small.prompts("train", 11, seed=0)) == 11  # i.i.d. draws may repeat


def test_prompts_reject_bad_arguments():
    task = MultiSolutionTask()
    with pytest.raises(ValueError, match="split"):
        task.prompts("valid", 3, seed=0)
    for n in (-1, 2.0, True):
        with pytest.raises(ValueError, match="n must"):
            task.prompts("train", n, seed=0)
    with pytest.raises(ValueError, match="test"):  # no held-out prompts at all
        MultiSolutionTask(heldout_fraction=0.0).prompts("test", 1, seed=0)


# -- table round trip -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs", [{}, {"num_digits": 2, "zipf_exponent": 0.5, "mu_min": 0.1, "difficulty_seed": 7, "heldout_fraction": 0}]
)
def test_to_dict_round_trips_through_make_task(kwargs, tmp_path):
    task = MultiSolutionTask(**kwargs)
    table = task.to_dict()
    assert table["name"] == "multisolution"
    again = make_task(table)
    assert again == task and type(again) is MultiSolutionTask
    assert again.prompts("train", 20, seed=0) == task.prompts("train", 20, seed=0)
    write_toml(tmp_path / "task.toml", {"task": table})
    assert make_task(read_toml(tmp_path / "task.toml")["task"]) == task
    assert make_task(task) is task


def test_make_task_rejects_unknown_keys_and_names():
    with pytest.raises(ValueError, match="num_digitz"):
        make_task({"name": "multisolution", "num_digitz": 2})
    with pytest.raises(ValueError, match="multisolutoin"):
        make_task({"name": "multisolutoin"})
    with pytest.raises(ValueError, match="name"):
        make_task({"num_digits": 2})
    with pytest.raises(ValueError, match="num_digits"):  # the constructor's own checks still apply
        make_task({"name": "multisolution", "num_digits": 9})


@pytest.mark.parametrize("name", [["multisolution"], {"a": 1}])
def test_make_task_rejects_an_unhashable_name(name):
    with pytest.raises(ValueError, match="name"):
        make_task({"name": name})
