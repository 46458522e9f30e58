"""Verifiable tasks for the compact RL trainer, by name.

* ``multisolution``: task (a), many correct answers in an enumerable answer
  space (:class:`MultiSolutionTask`);
* ``maze``: task (b), one correct path per maze (:class:`MazeTask`);
* ``narrowing``: task (a) with a conflict between prompt types that the policy
  cannot resolve from the prompt (:class:`~tailmiss.llm.tasks.narrowing.NarrowingTask`).
"""

from __future__ import annotations

from collections.abc import Mapping

from tailmiss._checks import check_choice
from tailmiss.io import dataclass_from_mapping
from tailmiss.llm.tasks.base import BOS, EOS, PAD, SEP, AnswerSet, Task, Vocab
from tailmiss.llm.tasks.maze import Maze, MazeTask
from tailmiss.llm.tasks.multisolution import DigitSetPrompt, MultiSolutionTask
from tailmiss.llm.tasks.narrowing import NarrowingTask

__all__ = [
    "TASKS",
    "make_task",
    "Task",
    "Vocab",
    "AnswerSet",
    "MultiSolutionTask",
    "DigitSetPrompt",
    "NarrowingTask",
    "MazeTask",
    "Maze",
    "PAD",
    "BOS",
    "SEP",
    "EOS",
]

TASKS: dict[str, type[Task]] = {cls.name: cls for cls in (MultiSolutionTask, MazeTask, NarrowingTask)}
"""The task classes by name (``multisolution``, ``maze``, ``narrowing``): the ``name`` of a task's table, which
:func:`make_task` builds."""


def make_task(spec: Mapping | Task, where: str = "task") -> Task:
    """Build a task from its table ``{"name": ..., **parameters}`` (unknown keys rejected)."""
    if isinstance(spec, Task):
        return spec
    if not isinstance(spec, Mapping):
        raise ValueError(f"{where} must be a table with a 'name', got {spec!r}")
    params = dict(spec)
    name = params.pop("name", None)
    check_choice(f"{where}: name", name, TASKS)
    return dataclass_from_mapping(TASKS[name], params, where)
