"""A small progress bar on stderr (rich), silent when stderr is not a terminal unless forced."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class ProgressBar:
    """``update(n)`` / ``close()`` progress bar over a known number of items."""

    def __init__(self, total: int, description: str):
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._task = self._progress.add_task(description, total=total)
        self._progress.start()

    def update(self, advance: int = 1) -> None:
        self._progress.update(self._task, advance=advance)

    def close(self) -> None:
        self._progress.stop()
