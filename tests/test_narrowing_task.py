"""The narrowing task (task (a) with a conflict between prompt types) and its own code scope."""

from __future__ import annotations

import numpy as np
import pytest

from tailmiss import store
from tailmiss.llm.tasks import EOS, MultiSolutionTask, make_task
from tailmiss.llm.tasks.narrowing import CONFLICT_RULES, PROMPT_TYPES, NarrowingTask

_DIGIT0 = 4

HIDDEN = NarrowingTask(conflict_share=0.25, conflict_strength=0.5)
VISIBLE = NarrowingTask(conflict_share=0.25, conflict_strength=0.5, conflict_visible=True)
NO_FAV = NarrowingTask(conflict_share=0.25, conflict_strength=0.5, conflict_rule="no-favourite")
NONE = NarrowingTask(conflict_share=0.0)


def test_table_round_trips():
    for task in (HIDDEN, VISIBLE, NO_FAV, NONE, NarrowingTask(incorrect="blank", num_digits=2)):
        table = task.to_dict()
        assert table["name"] == "narrowing"
        assert make_task(table) == task


def test_without_conflict_it_is_task_a():
    base = MultiSolutionTask()
    for split in ("train", "test"):
        prompts = base.prompts(split, 200, seed=3, distinct=True)
        assert NONE.prompts(split, 200, seed=3, distinct=True) == prompts
        for p in prompts[:50]:
            assert NONE.prompt_tokens(p) == base.prompt_tokens(p)
            assert np.array_equal(NONE.teacher_answer_probs(p), base.teacher_answer_probs(p))
            assert np.array_equal(NONE.enumerate_answers(p).correct, base.enumerate_answers(p).correct)


def test_rest_prompts_keep_task_a():
    base = MultiSolutionTask()
    rest = [p for p in HIDDEN.prompts("train", 300, seed=0) if HIDDEN.prompt_type(p) == "rest"]
    for p in rest[:60]:
        assert np.array_equal(HIDDEN.teacher_digit_probs(p), base.teacher_digit_probs(p))
        assert np.array_equal(HIDDEN.enumerate_answers(p).correct, base.enumerate_answers(p).correct)


def test_prompt_type_share_and_independence_of_visibility():
    prompts = HIDDEN.prompts("train", 4000, seed=0)
    types = [HIDDEN.prompt_type(p) for p in prompts]
    assert set(types) == set(PROMPT_TYPES)
    assert abs(types.count("minority") / len(types) - 0.25) < 0.03
    assert types == [VISIBLE.prompt_type(p) for p in prompts]
    assert HIDDEN.minority_mask(prompts).tolist() == [t == "minority" for t in types]
    assert all(NONE.prompt_type(p) == "rest" for p in prompts[:200])
    # the visible control and task (a) hold out the same prompts as the hidden task
    assert [HIDDEN.split_of(p) for p in prompts] == [VISIBLE.split_of(p) for p in prompts]
    assert [HIDDEN.split_of(p) for p in prompts] == [MultiSolutionTask().split_of(p) for p in prompts]


@pytest.mark.parametrize("n", [1, 7, 80, 256, 400])
@pytest.mark.parametrize("share", [0.1, 0.25, 0.5])
def test_heldout_draw_is_stratified(n, share):
    task = NarrowingTask(conflict_share=share)
    prompts = task.prompts("test", n, seed=0, distinct=True)
    assert len(prompts) == n == len({tuple(task.prompt_tokens(p)) for p in prompts})
    assert all(task.split_of(p) == "test" for p in prompts)
    assert int(task.minority_mask(prompts).sum()) == round(share * n)
    assert task.prompts("test", n, seed=0, distinct=True) == prompts  # deterministic
    # a stratified draw keeps each type's prompts in task (a)'s order
    plain = MultiSolutionTask().prompts("test", min(4 * n + 64, 500), seed=0, distinct=True)
    for kind in PROMPT_TYPES:
        mine = [p for p in prompts if task.prompt_type(p) == kind]
        theirs = [p for p in plain if task.prompt_type(p) == kind]
        assert mine == theirs[: len(mine)]
    assert list(zip(task._stream("test", 50, 0, True), range(50))) == list(zip(plain, range(50)))


def test_marker_only_when_visible():
    for p in HIDDEN.prompts("train", 300, seed=2):
        hidden, visible = HIDDEN.prompt_tokens(p), VISIBLE.prompt_tokens(p)
        assert hidden == MultiSolutionTask().prompt_tokens(p)
        assert len(visible) == VISIBLE.prompt_len == HIDDEN.prompt_len + 1
        assert VISIBLE.vocab.decode([visible[1]])[0] == ("!" if HIDDEN.prompt_type(p) == "minority" else "_")
        assert visible[:1] + visible[2:] == hidden
    assert len(VISIBLE.vocab) == len(HIDDEN.vocab) + 1


@pytest.mark.parametrize(
    "task",
    [
        HIDDEN,
        VISIBLE,
        NO_FAV,
        NarrowingTask(conflict_share=0.5, num_digits=2),
        NarrowingTask(conflict_share=0.5, num_digits=2, conflict_rule="no-favourite", conflict_visible=True),
        NarrowingTask(conflict_share=0.3, incorrect="blank"),
    ],
)
def test_verifier_agrees_with_enumeration(task):
    prompts = task.prompts("train", 60, seed=4) + task.prompts("test", 60, seed=4)
    seen = set()
    for p in prompts:
        kind = task.prompt_type(p)
        seen.add(kind)
        answers = task.enumerate_answers(p)
        assert [task.reward(p, row.tolist()) == 1.0 for row in answers.tokens] == answers.correct.tolist()
        if kind == "rest":
            allowed = set(p.allowed)
        elif task.conflict_rule == "complement":
            allowed = set(range(10)) - set(p.allowed)
        else:
            allowed = set(p.allowed[1:])
        assert set(task.correct_digits(p)) == allowed
        assert int(answers.correct.sum()) == len(allowed) ** task.num_digits
        fav = [_DIGIT0 + p.allowed[0]] * task.num_digits + [EOS]
        assert task.reward(p, fav) == (0.0 if kind == "minority" else 1.0)
        if task.conflict_rule == "complement" and kind == "minority":  # disjoint from the rest rule's answers
            assert not any(task.reward(p, [_DIGIT0 + d] * task.num_digits + [EOS]) for d in p.allowed)
    assert seen == set(PROMPT_TYPES)


def _exact_correct_mass(task, p) -> float:
    return float(task.teacher_answer_probs(p)[task.enumerate_answers(p).correct.numpy()].sum())


@pytest.mark.parametrize("rule", CONFLICT_RULES)
@pytest.mark.parametrize("strength", [0.0, 0.5, 1.0])
def test_teacher_correct_mass_matches_monte_carlo(strength, rule):
    task = NarrowingTask(conflict_share=0.25, conflict_strength=strength, conflict_rule=rule)
    prompts = task.prompts("train", 400, seed=7)
    rng = np.random.default_rng(0)
    for kind in PROMPT_TYPES:
        group = [p for p in prompts if task.prompt_type(p) == kind]
        exact = np.mean([_exact_correct_mass(task, p) for p in group])
        hits = [task.reward(p, task.sft_answer(p, rng)) for p in group for _ in range(200)]
        se = np.sqrt(exact * (1 - exact) / len(hits))
        assert abs(np.mean(hits) - exact) < 4 * se + 1e-3, (kind, np.mean(hits), exact)


def test_teacher_follows_strength():
    p = next(p for p in HIDDEN.prompts("train", 500, seed=0) if HIDDEN.prompt_type(p) == "minority")
    base = MultiSolutionTask().teacher_digit_probs(p)
    inside, fav = list(p.allowed), p.allowed[0]
    outside = [d for d in range(10) if d not in p.allowed]
    for s in (0.0, 0.3, 1.0):
        probs = NarrowingTask(conflict_strength=s).teacher_digit_probs(p)  # complement
        assert probs.sum() == pytest.approx(1.0)
        assert np.allclose(probs[inside], base[inside] * (1 - s))
        assert probs[outside].sum() == pytest.approx(base[outside].sum() + s * base[inside].sum())
        assert np.allclose(probs[outside], probs[outside][0])
        probs = NarrowingTask(conflict_strength=s, conflict_rule="no-favourite").teacher_digit_probs(p)
        assert probs.sum() == pytest.approx(1.0)
        assert probs[fav] == pytest.approx(base[fav] * (1 - s))
        assert np.allclose(probs[outside], base[outside])
    # the teacher's minority correct mass rises with the strength, its rest mass does not move
    masses = [
        np.mean(
            [
                _exact_correct_mass(NarrowingTask(conflict_strength=s), q)
                for q in HIDDEN.prompts("train", 200, 1)
                if HIDDEN.prompt_type(q) == "minority"
            ]
        )
        for s in (0.0, 0.5, 1.0)
    ]
    assert masses[0] < masses[1] < masses[2]


@pytest.mark.parametrize(
    ("kw", "key"),
    [
        ({"conflict_rule": "swap"}, "conflict_rule"),
        ({"conflict_share": 1.0}, "conflict_share"),
        ({"conflict_share": -0.1}, "conflict_share"),
        ({"conflict_share": float("nan")}, "conflict_share"),
        ({"conflict_strength": 1.5}, "conflict_strength"),
        ({"conflict_strength": True}, "conflict_strength"),
        ({"conflict_visible": 1}, "conflict_visible"),
        ({"conflict_seed": -1}, "conflict_seed"),
        ({"conflict_rule": "no-favourite", "min_allowed": 1}, "min_allowed"),
    ],
)
def test_bad_conflict_settings_rejected(kw, key):
    with pytest.raises(ValueError, match=key):
        NarrowingTask(**kw)


# -- its own code scope -------------------------------------------------------------------------------------------


def test_task_module_is_a_scope_of_its_own():
    module = "llm/tasks/narrowing.py"
    assert store.own_scope_of(HIDDEN) == (module,)
    assert store.own_scope_of(MultiSolutionTask()) == ()
    for scope in store.SCOPES:
        assert not any(str(p).endswith(module) for p in store._scope_files(scope))
    assert len(store.module_fingerprint(module)) == 16
    prov = store.provenance("llm")
    assert prov["code"]["modules"] == {module: store.module_fingerprint(module)}


def test_stale_reason_judges_the_task_module_only_for_its_runs():
    module = "llm/tasks/narrowing.py"
    meta = {"provenance": store.provenance("llm")}
    assert store.stale_reason(meta, "llm") is None
    assert store.stale_reason(meta, "llm", (module,)) is None
    meta["provenance"]["code"]["modules"][module] = "0" * 16  # the task's code was edited since
    assert store.stale_reason(meta, "llm") is None  # a run of another task keeps
    assert module in store.stale_reason(meta, "llm", (module,))
    del meta["provenance"]["code"]["modules"]  # a unit from before the task: not its run
    assert "not recorded" in store.stale_reason(meta, "llm", (module,))
