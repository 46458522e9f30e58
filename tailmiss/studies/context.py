"""Where and how results are computed: the :class:`~tailmiss.studies.context.Context` every result function takes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tailmiss.options import RunOptions

__all__ = ["Context"]


@dataclass(frozen=True)
class Context:
    """Which results (quick or full), where they are cached, and how they are computed (:attr:`options`)."""

    quick: bool = False
    cache_dir: Path = Path("runs/sim")
    llm_cache_dir: Path | None = None
    llm_sweeps: Mapping[str, object] | None = None
    """Sweeps to use instead of the presets, by family (``"nsweep"``, ``"objectives"``, ``"maze"``; see
    :data:`tailmiss.studies.runs.SWEEPS`, and the ladders of :data:`tailmiss.studies.runs.LADDERS`), e.g. small
    ones in a notebook."""
    options: RunOptions = field(default_factory=RunOptions)
    """Device, processes, threads, progress bars, the log of cache decisions and stale-cache reuse."""

    @property
    def llm_cache(self) -> Path:
        """Where LLM runs are cached: ``llm_cache_dir``, else ``llm/`` beside the simulation cache."""
        return Path(self.llm_cache_dir) if self.llm_cache_dir is not None else Path(self.cache_dir).parent / "llm"
