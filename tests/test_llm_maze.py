"""Tests of the maze task (F-GRPO §5.2 / App. K; Tajwar et al. 2026): generator, solver, verifier, splits."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tailmiss.llm.tasks.base import BOS, EOS, SEP, cut_at_eos
from tailmiss.llm.tasks.maze import MOVES, Maze, MazeTask, is_perfect

SIZES = (5, 7, 9, 17)

# A size-5 maze whose open squares form one snake: the path from (1, 1) to
# (3, 1) visits all 7 of them, so it is the longest answer the size allows.
SNAKE = Maze(("#####", "#...#", "###.#", "#...#", "#####"), (1, 1), (3, 1))
SNAKE_PATH = ["R", "R", "D", "D", "L", "L"]


def _mazes(task: MazeTask, n: int, seed: int = 0) -> list[Maze]:
    rng = np.random.default_rng(seed)
    return [task._random_prompt(rng) for _ in range(n)]


def _ids(task: MazeTask, moves) -> list[int]:
    return task.vocab.encode(list(moves))


def _all_simple_paths(maze: Maze) -> list[list[str]]:
    """Brute force: every simple path from start to goal, by exhaustive depth-first search."""
    found: list[list[str]] = []

    def extend(here, seen, moves):
        if here == maze.goal:
            found.append(list(moves))
            return
        for move, (dr, dc) in MOVES.items():
            nxt = (here[0] + dr, here[1] + dc)
            if maze.grid[nxt[0]][nxt[1]] == "." and nxt not in seen:
                extend(nxt, seen | {nxt}, [*moves, move])

    extend(maze.start, {maze.start}, [])
    return found


# -- generator ---------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_generated_mazes_are_perfect(size):
    task = MazeTask(size=size)
    n = (size - 1) // 2
    for maze in _mazes(task, 150 if size < 17 else 60, seed=size):
        assert maze.size == size and is_perfect(maze.grid)
        assert maze.grid[0] == maze.grid[-1] == "#" * size
        assert all(row[0] == row[-1] == "#" for row in maze.grid)
        # every cell is open, and exactly cells - 1 passages are carved
        assert all(maze.grid[2 * i + 1][2 * j + 1] == "." for i in range(n) for j in range(n))
        assert "".join(maze.grid).count(".") == 2 * task.cells - 1
        assert maze.start != maze.goal
        for r, c in (maze.start, maze.goal):
            assert r % 2 == 1 and c % 2 == 1 and maze.grid[r][c] == "."


def test_generator_is_deterministic_and_varied():
    task = MazeTask(size=17)
    assert _mazes(task, 20, seed=3) == _mazes(task, 20, seed=3)
    assert _mazes(task, 20, seed=3) != _mazes(task, 20, seed=4)
    assert len(set(_mazes(task, 200, seed=5))) == 200


def test_is_perfect_rejects_cycles_and_islands():
    assert is_perfect(SNAKE.grid)
    assert not is_perfect(("#####", "#...#", "#.#.#", "#...#", "#####"))  # a ring
    assert not is_perfect(("#####", "#.#.#", "#####", "#...#", "#####"))  # two components
    assert not is_perfect(("###", "###", "###"))


def test_maze_validates_and_draws():
    with pytest.raises(ValueError, match="start"):
        Maze(SNAKE.grid, (2, 1), (3, 1))  # a wall
    with pytest.raises(ValueError, match="goal"):
        Maze(SNAKE.grid, (1, 1), (1, 2))  # open, but not a cell
    with pytest.raises(ValueError, match="differ"):
        Maze(SNAKE.grid, (1, 1), (1, 1))
    with pytest.raises(ValueError, match="square"):
        Maze(("#####", "#...#"), (1, 1), (1, 3))
    assert str(SNAKE).splitlines() == ["#####", "#S..#", "###.#", "#G..#", "#####"]
    assert hash(SNAKE) == hash(Maze(list(SNAKE.grid), (1, 1), (3, 1)))


# -- solver ----------------------------------------------------------------------


def test_solve_golden():
    assert MazeTask(size=5).solve(SNAKE) == SNAKE_PATH
    assert MazeTask(size=5).solve(Maze(SNAKE.grid, (3, 1), (1, 1))) == ["R", "R", "U", "U", "L", "L"]


@pytest.mark.parametrize("size", SIZES)
def test_solve_walks_open_squares_to_goal(size):
    task = MazeTask(size=size)
    for maze in _mazes(task, 50, seed=10 + size):
        here = maze.start
        for move in task.solve(maze):
            here = (here[0] + MOVES[move][0], here[1] + MOVES[move][1])
            assert maze.grid[here[0]][here[1]] == "."
        assert here == maze.goal


@pytest.mark.parametrize("size", [5, 7])
def test_solve_is_the_unique_simple_path(size):
    task = MazeTask(size=size)
    for maze in _mazes(task, 100, seed=20 + size):
        assert _all_simple_paths(maze) == [task.solve(maze)]


def test_max_answer_len_bounds_every_path():
    assert MazeTask(size=5).max_answer_len == len(SNAKE_PATH) + 1 == 7
    assert MazeTask(size=17).max_answer_len == 2 * 64 - 1
    for size in SIZES:
        task = MazeTask(size=size)
        assert max(len(task.solve(m)) + 1 for m in _mazes(task, 100, seed=size)) <= task.max_answer_len


# -- verifier --------------------------------------------------------------------


def test_verifier_accepts_only_the_path():
    task = MazeTask(size=5)
    good = _ids(task, SNAKE_PATH) + [EOS]
    rng = np.random.default_rng(0)
    assert task.sft_answer(SNAKE, rng) == good
    assert task.reward(SNAKE, good) == 1.0
    assert task.reward(SNAKE, good + [EOS, 5, 99, -1]) == 1.0  # after <eos> is ignored
    wall, u = task.vocab.encode(["#", "U"])
    wrong = [
        _ids(task, ["R", "R", "D", "D", "L", "U"]) + [EOS],  # one move changed
        _ids(task, SNAKE_PATH[:-1]) + [EOS],  # one move dropped
        _ids(task, [*SNAKE_PATH, "R"]) + [EOS],  # one move too many
        _ids(task, SNAKE_PATH),  # no <eos>
        [wall, *good],
        _ids(task, SNAKE_PATH[:3]) + [99] + _ids(task, SNAKE_PATH[3:]) + [EOS],
        [-1, *good],
        [u, u, u, EOS],
        [EOS],
        [],
    ]
    for answer in wrong:
        assert task.reward(SNAKE, answer) == 0.0, answer


@pytest.mark.parametrize("size", SIZES)
def test_sft_answer_scores_one(size):
    task = MazeTask(size=size)
    rng = np.random.default_rng(1)
    for maze in _mazes(task, 30, seed=size):
        answer = task.sft_answer(maze, rng)
        assert answer[-1] == EOS and task.vocab.decode(answer[:-1]) == task.solve(maze)
        assert task.reward(maze, answer) == 1.0
        assert task.reward(maze, answer[:-2] + [EOS]) == 0.0


@settings(deadline=None)
@given(st.lists(st.integers(-3, 15), max_size=40))
def test_reward_never_raises_and_matches_exact_path(answer):
    task = MazeTask(size=5)
    expected = float(cut_at_eos(answer) == task.sft_answer(SNAKE, np.random.default_rng(0)))
    assert task.reward(SNAKE, answer) == expected


@settings(deadline=None)
@given(st.integers(0, 6), st.integers(-3, 15), st.lists(st.integers(-3, 15), max_size=8))
def test_reward_on_one_token_edits(position, token, junk):
    # the edits that keep the answer right are exactly the no-ops; anything after <eos> is ignored
    task = MazeTask(size=5)
    good = _ids(task, SNAKE_PATH) + [EOS]
    edited = [*good[:position], token, *good[position + 1 :]]
    assert task.reward(SNAKE, edited + junk) == float(token == good[position])
    assert task.reward(SNAKE, good + junk) == 1.0


# -- prompts and splits ----------------------------------------------------------


def test_prompt_tokens():
    task = MazeTask(size=5)
    assert task.prompt_len == 27
    ids = task.prompt_tokens(SNAKE)
    assert len(ids) == task.prompt_len and ids[0] == BOS and ids[-1] == SEP
    assert "".join(task.vocab.decode(ids[1:-1])) == str(SNAKE).replace("\n", "")
    with pytest.raises(ValueError, match="size 5"):
        MazeTask(size=7).prompt_tokens(SNAKE)
    big = MazeTask(size=17)
    assert big.prompt_len == 291
    for maze in _mazes(big, 20):
        ids = big.prompt_tokens(maze)
        assert len(ids) == big.prompt_len and ids[0] == BOS and ids[-1] == SEP
        assert big.vocab.decode(ids).count("S") == big.vocab.decode(ids).count("G") == 1


@pytest.mark.parametrize("split", ["train", "test"])
def test_prompts_deterministic_and_split(split):
    task = MazeTask(size=9, heldout_fraction=0.3)
    a = task.prompts(split, 40, seed=1)
    assert a == task.prompts(split, 40, seed=1)
    assert a != task.prompts(split, 40, seed=2)
    assert all(task.split_of(m) == split for m in a)
    distinct = MazeTask(size=7).prompts(split, 200, seed=0, distinct=True)
    assert len({tuple(MazeTask(size=7).prompt_tokens(m)) for m in distinct}) == 200


def test_heldout_share():
    task = MazeTask(size=9, heldout_fraction=0.3)
    mazes = _mazes(task, 3000, seed=7)
    share = np.mean([task.split_of(m) == "test" for m in mazes])
    assert share == pytest.approx(0.3, abs=0.04)
    assert all(MazeTask(size=9, heldout_fraction=0.0).split_of(m) == "train" for m in mazes[:200])


def test_train_and_test_prompts_are_disjoint():
    task = MazeTask(size=7, heldout_fraction=0.5)
    train = set(task.prompts("train", 300, seed=0))
    test = set(task.prompts("test", 300, seed=0))
    assert not train & test


def test_sft_batch():
    task = MazeTask(size=9)
    mazes = task.prompts("train", 8, seed=0)
    ids, mask = task.sft_batch(mazes, np.random.default_rng(0))
    assert ids.shape == mask.shape == (8, task.prompt_len + task.max_answer_len)
    assert ids.dtype == torch.long and mask.dtype == torch.bool
    for i, maze in enumerate(mazes):
        n = len(task.solve(maze)) + 1
        assert torch.equal(ids[i, : task.prompt_len], torch.tensor(task.prompt_tokens(maze)))
        assert mask[i].nonzero().flatten().tolist() == list(range(task.prompt_len, task.prompt_len + n))
        answer = ids[i, task.prompt_len : task.prompt_len + n].tolist()
        assert answer[-1] == EOS and task.reward(maze, answer) == 1.0
        assert not ids[i, task.prompt_len + n :].any()  # <pad> is id 0


# -- construction ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"size": 6}, "size"),
        ({"size": 3}, "size"),
        ({"size": 35}, "size"),
        ({"size": True}, "size"),
        ({"size": 7.0}, "size"),
        ({"heldout_fraction": 1.0}, "heldout_fraction"),
        ({"heldout_fraction": -0.1}, "heldout_fraction"),
        ({"heldout_fraction": float("nan")}, "heldout_fraction"),
        ({"heldout_fraction": True}, "heldout_fraction"),
    ],
)
def test_bad_arguments(kwargs, field):
    with pytest.raises(ValueError, match=field):
        MazeTask(**kwargs)


def test_task_table_and_vocab():
    task = MazeTask(size=17, heldout_fraction=0.2)
    assert task.to_dict() == {"name": "maze", "size": 17, "heldout_fraction": 0.2}
    assert MazeTask(**{k: v for k, v in task.to_dict().items() if k != "name"}) == task
    assert task.vocab.tokens[4:] == ("#", ".", "S", "G", "U", "D", "L", "R")
    assert MazeTask().size == 7 and not MazeTask.enumerable
    with pytest.raises(NotImplementedError):
        task.enumerate_answers(task.prompts("train", 1, seed=0)[0])
