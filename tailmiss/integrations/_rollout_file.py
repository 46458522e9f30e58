"""The per-rollout log of ``TailMissCallback`` on disk: what a run finds there when training begins.

A fresh run refuses a log that holds an earlier run's rows (:func:`refuse_earlier_log`); a resumed one cuts the
log back to its checkpoint's step, atomically (:func:`keep_steps_up_to`). Plain Python: no TRL import.
"""

from __future__ import annotations

import json
from pathlib import Path

from tailmiss.io import atomic_write

__all__ = ["EarlierLogError", "refuse_earlier_log", "keep_steps_up_to"]


class EarlierLogError(ValueError):
    """A fresh run found its per-rollout log holding an earlier run's rows (see ``TailMissCallback``)."""


def refuse_earlier_log(path: Path) -> None:
    """:class:`EarlierLogError` when the log ``path`` holds rows (non-blank lines): a fresh run would empty it."""
    if not path.is_file():
        return
    with open(path, "rb") as log:
        rows = sum(1 for line in log if line.strip())
    if rows:
        raise EarlierLogError(
            f"{str(path)!r} holds {rows} rows of an earlier run, and this run starts at step 0: resume that run with "
            "trainer.train(resume_from_checkpoint=...) (its log is then cut back to the checkpoint's step), or pass "
            "TailMissCallback(overwrite=True) (or delete the file) to start the log afresh"
        )


def keep_steps_up_to(path: Path, step: int) -> None:
    """Rewrite the JSONL log ``path`` with only its rows of steps ``<= step``, atomically (no file: an empty one).

    A line that does not parse, what a run killed in the middle of a write leaves at the end, is dropped too:
    the next row appended after it would otherwise join it.
    """
    with atomic_write(path) as out:
        if not path.is_file():
            return
        with open(path) as log:
            for line in log:
                try:
                    kept = json.loads(line)["step"] <= step
                except (ValueError, KeyError, TypeError):
                    continue
                if kept:
                    out.write(line)
