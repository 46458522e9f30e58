"""Cached SFT and RL runs for figures and the report: reuse a finished run of the same config, resume a partial one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tailmiss.llm.checkpoint import _RUN_FILES
from tailmiss.llm.config import RLConfig, SFTConfig
from tailmiss.llm.sft import train_sft
from tailmiss.llm.train import train_rl

__all__ = ["cached_sft", "cached_rl", "run_state"]


def run_state(path: str | Path, cfg, init: str | Path | None) -> str:
    """``"missing"``, ``"done"``, ``"partial"`` (same config, resumable) or ``"stale"`` (anything else there)."""
    path = Path(path)
    if not path.exists():
        return "missing"
    if not (path / "config.toml").is_file():
        return "stale"
    try:
        same = type(cfg).from_toml(path / "config.toml") == cfg
    except ValueError:
        return "stale"
    meta_file = path / "meta.json"
    if not same:
        return "stale"
    if meta_file.is_file():
        meta = json.loads(meta_file.read_text())
        if meta.get("complete") and (init is None or meta.get("init") == str(Path(init))):
            return "done"
        return "stale"
    return "partial" if (path / "checkpoint.pt").is_file() else "stale"


def _run(cfg, path: Path, init: Path | None, train, device, progress) -> Path:
    state = run_state(path, cfg, init)
    if state == "done":
        return path
    if state == "stale":
        if not path.is_dir() or {p.name for p in path.iterdir() if not p.name.startswith(".")} - _RUN_FILES:
            raise ValueError(f"refusing to replace {str(path)!r}: it is not a run folder")
        shutil.rmtree(path)
    return train(path, resume=state == "partial", device=device, progress=progress)


def cached_sft(cfg: SFTConfig, root: str | Path, device=None, progress: bool = True) -> Path:
    """``root/<name>`` holding a finished SFT run of ``cfg`` (run, resumed or reused)."""
    path = Path(root) / cfg.name
    return _run(cfg, path, None, lambda p, **kw: train_sft(cfg, p, **kw), device, progress)


def cached_rl(cfg: RLConfig, init: str | Path, root: str | Path, device=None, progress: bool = True) -> Path:
    """``root/<name>`` holding a finished RL run of ``cfg`` from ``init`` (run, resumed or reused)."""
    path, init = Path(root) / cfg.name, Path(init)
    return _run(cfg, path, init, lambda p, **kw: train_rl(cfg, init, p, **kw), device, progress)
