"""Where and how results are computed: the :class:`Context` every result function takes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Context"]


@dataclass(frozen=True)
class Context:
    """Where and how figure and report data is computed."""

    quick: bool = False
    cache_dir: Path = Path("runs/sim")
    device: str | None = None
    progress: bool = True
    llm_cache_dir: Path | None = None
    llm_sweeps: Mapping[str, object] | None = None
    """Sweeps to use instead of the presets, by family (``"nsweep"``, ``"objectives"``, ``"maze"``; see
    :data:`tailmiss.results.llm.SWEEPS`, and the ladders of :data:`tailmiss.results.ladder.LADDERS`), e.g. small
    ones in a notebook."""
    reuse_stale: bool = False
    """Reuse cached results made by other code (with a warning) instead of recomputing them."""
    log: Callable[[str], None] | None = None
    """Receives one line per cache decision (reused, stale, damaged, resumed)."""
    jobs: int | None = 1
    """Processes that train the LLM runs side by side (``None``: one per usable CPU core; 1: in this process)."""

    def llm_options(self) -> dict:
        """The keyword arguments of :func:`~tailmiss.llm.sweep.run_sweep` and :func:`~tailmiss.llm.ladder.run_ladder`
        that this context sets."""
        options = ("device", "progress", "log", "reuse_stale", "jobs")
        return {name: getattr(self, name) for name in options}

    @property
    def llm_cache(self) -> Path:
        """Where LLM runs are cached: ``llm_cache_dir``, else ``llm/`` beside the simulation cache."""
        return Path(self.llm_cache_dir) if self.llm_cache_dir is not None else Path(self.cache_dir).parent / "llm"
