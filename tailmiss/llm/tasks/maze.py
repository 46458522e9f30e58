"""Maze navigation: a single-solution verifiable task.

A prompt is a perfect maze (exactly one path between any two open squares)
written as symbolic tokens, one token per grid square, with the start and the
goal marked; the answer is the path as move tokens ``U D L R`` closed by
``<eos>``. Because the maze is perfect, exactly one answer is correct, so the
task probes how an objective treats a prompt whose correct mass sits on a
single, long sequence (F-GRPO §5.2 / App. K; Tajwar et al. 2026).

Layout of a size-``s`` grid: the cells of the maze are the squares at odd
(row, column); the squares between two cells are walls or carved passages; the
border is all walls. There are ``((s - 1) / 2)**2`` cells, and any perfect
maze on them opens ``cells + (cells - 1)`` squares (a spanning tree has
``cells - 1`` edges), which bounds the path length.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tailmiss.llm.tasks.base import BOS, EOS, SEP, SPECIAL_TOKENS, Task, Vocab

__all__ = ["Maze", "MazeTask", "is_perfect", "MAZE_TOKENS", "MOVES"]

WALL, OPEN, START, GOAL = "#", ".", "S", "G"
#: (row, column) step of each move token, one grid square per move.
MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
MAZE_TOKENS = (WALL, OPEN, START, GOAL, *MOVES)
"""The maze task's own tokens, after :data:`~tailmiss.llm.tasks.base.SPECIAL_TOKENS` in its vocabulary: wall ``#``,
open square ``.``, start ``S`` and goal ``G`` (one per grid square of a prompt) and the moves ``U D L R`` of an
answer."""


@dataclass(frozen=True)
class Maze:
    """One maze prompt (hashable, so it can key caches and sets).

    Attributes
    ----------
    grid : tuple of str
        ``size`` rows of ``size`` characters, ``"#"`` (wall) or ``"."`` (open).
    start, goal : tuple of int
        (row, column) of two distinct open squares at odd coordinates (cells).
    """

    grid: tuple[str, ...]
    start: tuple[int, int]
    goal: tuple[int, int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", tuple(self.grid))
        object.__setattr__(self, "start", (int(self.start[0]), int(self.start[1])))
        object.__setattr__(self, "goal", (int(self.goal[0]), int(self.goal[1])))
        side = len(self.grid)
        if side == 0 or any(len(row) != side for row in self.grid):
            raise ValueError(f"grid must be a non-empty square of rows, got row lengths {[len(r) for r in self.grid]}")
        if not set("".join(self.grid)) <= {WALL, OPEN}:
            raise ValueError(f"grid characters must be {WALL!r} or {OPEN!r}, got {sorted(set(''.join(self.grid)))}")
        for label, (r, c) in (("start", self.start), ("goal", self.goal)):
            if not (0 <= r < side and 0 <= c < side and r % 2 == 1 and c % 2 == 1 and self.grid[r][c] == OPEN):
                raise ValueError(f"{label} must be an open cell at odd coordinates, got {(r, c)}")
        if self.start == self.goal:
            raise ValueError(f"start and goal must differ, got both {self.start}")

    @property
    def size(self) -> int:
        """Side of the square grid."""
        return len(self.grid)

    def __str__(self) -> str:
        rows = [list(row) for row in self.grid]
        rows[self.start[0]][self.start[1]] = START
        rows[self.goal[0]][self.goal[1]] = GOAL
        return "\n".join("".join(row) for row in rows)


def is_perfect(grid: Sequence[str]) -> bool:
    """Whether the open squares of ``grid`` form a tree.

    A tree is connected with exactly one edge fewer than vertices, which is
    what makes the path between any two open squares unique (F-GRPO §5.2 /
    App. K; Tajwar et al. 2026). Edges join 4-adjacent open squares.

    Parameters
    ----------
    grid : sequence of str
        Rows of ``"#"`` / ``"."`` (other characters count as walls).

    Returns
    -------
    bool
        ``False`` for a grid with no open square.
    """
    cells = {(r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == OPEN}
    if not cells:
        return False
    edges = sum(((r + 1, c) in cells) + ((r, c + 1) in cells) for r, c in cells)
    if edges != len(cells) - 1:
        return False
    first = next(iter(cells))
    seen, todo = {first}, [first]
    while todo:
        r, c = todo.pop()
        for dr, dc in MOVES.values():
            nxt = (r + dr, c + dc)
            if nxt in cells and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return len(seen) == len(cells)


@functools.lru_cache(maxsize=64)
def _cell_layout(n: int) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Flat grid index of each of the ``n * n`` cells, and each cell's neighbouring cells."""
    side = 2 * n + 1
    where = tuple((2 * (i // n) + 1) * side + 2 * (i % n) + 1 for i in range(n * n))
    nbrs = []
    for i in range(n * n):
        r, c = divmod(i, n)
        steps = ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1))
        nbrs.append(tuple(rr * n + cc for rr, cc in steps if 0 <= rr < n and 0 <= cc < n))
    return where, tuple(nbrs)


def _backtracker(n: int, u: Sequence[float]) -> list[str]:
    """Rows of a perfect maze on ``n x n`` cells by iterative randomized depth-first search.

    ``u`` holds ``n * n`` uniforms in [0, 1): the root, then one per carving
    step (there are exactly ``n * n - 1``, one per tree edge), so a whole maze
    costs one call to the generator instead of one per step.
    """
    side = 2 * n + 1
    where, nbrs = _cell_layout(n)
    squares = [WALL] * (side * side)
    visited = [False] * (n * n)
    root = int(u[0] * n * n)
    visited[root] = True
    squares[where[root]] = OPEN
    stack, k = [root], 1
    while stack:
        cell = stack[-1]
        fresh = [j for j in nbrs[cell] if not visited[j]]
        if not fresh:
            stack.pop()
            continue
        nxt = fresh[int(u[k] * len(fresh))]
        k += 1
        visited[nxt] = True
        # the wall square sits halfway between the two cells' flat indices
        squares[(where[cell] + where[nxt]) // 2] = OPEN
        squares[where[nxt]] = OPEN
        stack.append(nxt)
    return ["".join(squares[r * side : (r + 1) * side]) for r in range(side)]


@functools.lru_cache(maxsize=4096)
def _path(maze: Maze) -> tuple[str, ...]:
    """Moves from start to goal by breadth-first search (cached: the verifier asks once per rollout)."""
    side = maze.size
    parent: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {maze.start: None}
    todo = deque([maze.start])
    while todo:
        here = todo.popleft()
        if here == maze.goal:
            break
        for move, (dr, dc) in MOVES.items():
            r, c = here[0] + dr, here[1] + dc
            if 0 <= r < side and 0 <= c < side and maze.grid[r][c] == OPEN and (r, c) not in parent:
                parent[(r, c)] = (here, move)
                todo.append((r, c))
    if maze.goal not in parent:
        raise ValueError(f"no path from {maze.start} to {maze.goal} in\n{maze}")
    moves, step = [], parent[maze.goal]
    while step is not None:
        here, move = step
        moves.append(move)
        step = parent[here]
    return tuple(reversed(moves))


@dataclass(frozen=True)
class MazeTask(Task):
    """Find the unique path through a random perfect maze (F-GRPO §5.2 / App. K; Tajwar et al. 2026).

    Prompt: ``<bos>``, the grid row-major (``#`` wall, ``.`` open, ``S``
    start, ``G`` goal), ``<sep>``. Answer: moves ``U D L R`` (one grid square
    each) then ``<eos>``; reward 1 iff the moves are exactly the unique path.

    Parameters
    ----------
    size : int
        Side of the square token grid, odd, in [5, 33] (the paper's mazes are
        17 x 17, i.e. 8 x 8 cells).
    heldout_fraction : float
        Share of prompts in the ``"test"`` split, in [0, 1).
    """

    name: ClassVar[str] = "maze"
    enumerable: ClassVar[bool] = False

    size: int = 7
    heldout_fraction: float = 0.1

    def __post_init__(self) -> None:
        size = self.size
        if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or not (5 <= size <= 33 and size % 2):
            raise ValueError(f"size must be an odd integer in [5, 33], got {size!r}")
        frac = self.heldout_fraction
        if not isinstance(frac, (int, float, np.floating, np.integer)) or isinstance(frac, bool) or not 0 <= frac < 1:
            raise ValueError(f"heldout_fraction must be a number in [0, 1), got {frac!r}")
        object.__setattr__(self, "size", int(size))
        object.__setattr__(self, "heldout_fraction", float(frac))
        object.__setattr__(self, "vocab", Vocab(SPECIAL_TOKENS + MAZE_TOKENS))
        object.__setattr__(self, "prompt_len", 1 + self.size * self.size + 1)
        # a path makes at most (open squares - 1) moves, open squares = cells + (cells - 1); +1 for <eos>
        object.__setattr__(self, "max_answer_len", 2 * self.cells - 1)

    @property
    def cells(self) -> int:
        """Cells of the maze, ``((size - 1) / 2)**2``."""
        return ((self.size - 1) // 2) ** 2

    def _random_prompt(self, rng: np.random.Generator) -> Maze:
        """A recursive-backtracker maze with two distinct random cells as start and goal."""
        n = (self.size - 1) // 2
        u = rng.random(n * n + 2).tolist()
        grid = _backtracker(n, u[: n * n])
        s = int(u[-2] * n * n)
        g = int(u[-1] * (n * n - 1))
        g += g >= s  # uniform over the cells other than s
        (sr, sc), (gr, gc) = divmod(s, n), divmod(g, n)
        return Maze(tuple(grid), (2 * sr + 1, 2 * sc + 1), (2 * gr + 1, 2 * gc + 1))

    def prompt_tokens(self, prompt: Maze) -> list[int]:
        """``<bos>``, the grid row-major with ``S`` and ``G`` marked, ``<sep>``: ``prompt_len`` ids."""
        if prompt.size != self.size:
            raise ValueError(f"maze of size {prompt.size} given to a task of size {self.size}")
        ids = [BOS, *self.vocab.encode("".join(prompt.grid)), SEP]
        ids[1 + prompt.start[0] * self.size + prompt.start[1]] = self.vocab.encode([START])[0]
        ids[1 + prompt.goal[0] * self.size + prompt.goal[1]] = self.vocab.encode([GOAL])[0]
        return ids

    def solve(self, prompt: Maze) -> list[str]:
        """The unique path from start to goal as move tokens (``ValueError`` if there is none)."""
        return list(_path(prompt))

    def is_correct(self, prompt: Maze, answer: list[int]) -> bool:
        """Whether ``answer`` is the path's move ids then ``<eos>``, exactly."""
        return [int(x) for x in answer] == self.vocab.encode(_path(prompt)) + [EOS]

    def sft_answer(self, prompt: Maze, rng: np.random.Generator) -> list[int]:
        """The unique path's move ids then ``<eos>`` (``rng`` unused: one correct answer)."""
        return self.vocab.encode(_path(prompt)) + [EOS]
