"""Cached SFT and RL runs for sweeps, figures and the report: reuse a finished run, resume a partial one.

A finished run folder is a unit of the result store (:mod:`tailmiss.store`):
it is reused only when its files pass their checksums, its config (and, for
RL, its starting SFT run) is the requested one and it was made by the running
code; a partial run is resumed only from a checkpoint written by the running
code. Anything else is redone from scratch.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import torch

from tailmiss.experiments.pool import Job
from tailmiss.llm.checkpoint import _RUN_FILES, CHECKPOINT, OPTIONAL_RUN_FILES
from tailmiss.llm.config import RLConfig, SFTConfig
from tailmiss.llm.sft import train_sft
from tailmiss.llm.train import train_rl
from tailmiss.options import RunOptions
from tailmiss.store import code_fingerprint, file_sha256, open_unit, read_meta, stale_reason

__all__ = ["cached_sft", "cached_rl", "run_state", "STATES"]

STATES = ("missing", "done", "stale-done", "partial", "stale", "corrupt", "other")
"""What :func:`run_state` can find: nothing; a finished run by this code; a finished run by other code
that ``reuse_stale`` allows; a resumable run; a run by other code; a damaged run; another config or start."""


def _describe(path: Path, cfg, init, reuse_stale: bool) -> tuple[str, str | None]:
    if not path.exists():
        return "missing", None
    if not (path / "config.toml").is_file():
        return "other", "no config.toml"
    try:
        same = type(cfg).from_toml(path / "config.toml") == cfg
    except ValueError as exc:
        return "other", str(exc)
    if not same:
        return "other", "another config"
    if (path / "meta.json").is_file():
        try:
            meta = read_meta(path)
            if meta.get("complete"):
                kept = OPTIONAL_RUN_FILES & set(meta.get("checksums") or {})
                open_unit(path, sorted(_RUN_FILES | kept), "run")
        except ValueError as exc:
            return "corrupt", str(exc)
        if not meta.get("complete"):
            return "corrupt", "meta.json does not say the run is complete"
        if init is not None and not _same_start(meta, Path(init)):
            return "other", f"started from {meta.get('init')!r}, not from the SFT run in {str(Path(init))!r}"
        reason = stale_reason(meta, "llm")
        if reason is None:
            return "done", None
        return ("stale-done" if reuse_stale else "stale"), reason
    if not (path / CHECKPOINT).is_file():
        return "corrupt", "neither meta.json nor a checkpoint"
    try:
        code = torch.load(path / CHECKPOINT, map_location="cpu", weights_only=True).get("code")
    except Exception as exc:  # a truncated or foreign file is never resumed
        return "corrupt", f"unreadable checkpoint: {exc}"
    if code != code_fingerprint("llm"):
        return "stale", f"its checkpoint was written by code {code}, not by the running code {code_fingerprint('llm')}"
    return "partial", None


def _same_start(meta: dict, init: Path) -> bool:
    """Whether a finished RL run started from the SFT run ``init``: by its checkpoint's SHA-256, else by path."""
    recorded = meta.get("init_checkpoint")
    if recorded is None:
        return meta.get("init") == str(init)
    try:
        current = read_meta(init).get("checksums", {}).get(CHECKPOINT)
    except ValueError:
        current = None
    if current is None and (init / CHECKPOINT).is_file():
        current = file_sha256(init / CHECKPOINT)
    return recorded == current


def run_state(path: str | Path, cfg, init: str | Path | None, reuse_stale: bool = False) -> str:
    """What the folder ``path`` holds for ``cfg`` started from ``init`` (one of :data:`STATES`)."""
    return _describe(Path(path), cfg, init, reuse_stale)[0]


def _run(cfg, path: Path, init: Path | None, train, options: RunOptions) -> Path:
    state, reason = _describe(path, cfg, init, options.reuse_stale)
    say = options.say
    if state == "done":
        return path
    if state == "stale-done":
        say(f"warning: reusing the stale run {path} (--reuse-stale): {reason}")
        return path
    if state in ("stale", "corrupt", "other"):
        names = {p.name for p in path.iterdir() if not p.name.startswith(".")} if path.is_dir() else None
        if names is None or names - _RUN_FILES - OPTIONAL_RUN_FILES:
            raise ValueError(f"refusing to replace {str(path)!r}: it is not a run folder")
        say(f"{path}: {state} ({reason}); training it again")
        shutil.rmtree(path)
    return train(path, resume=state == "partial", device=options.device, progress=options.progress)


def cached_sft(cfg: SFTConfig, root: str | Path, options: RunOptions = RunOptions()) -> Path:
    """``root/<name>`` holding a finished SFT run of ``cfg`` (run, resumed or reused)."""
    path = Path(root) / cfg.name
    return _run(cfg, path, None, lambda p, **kw: train_sft(cfg, p, **kw), options)


def cached_rl(cfg: RLConfig, init: str | Path, root: str | Path, options: RunOptions = RunOptions()) -> Path:
    """``root/<name>`` holding a finished RL run of ``cfg`` from ``init`` (run, resumed or reused)."""
    path, init = Path(root) / cfg.name, Path(init)
    return _run(cfg, path, init, lambda p, **kw: train_rl(cfg, init, p, **kw), options)


# -- the same runs as pool jobs (tailmiss.experiments.pool.run_jobs) ----------------------------------------


def sft_job(cfg: SFTConfig, root: Path, reuse_stale: bool) -> Job:
    """The pool job of the SFT run ``root/<cfg.name>`` (:func:`cached_sft`)."""
    state = functools.partial(run_state, root / cfg.name, cfg, None, reuse_stale)
    return Job(cfg.name, cached_sft, (cfg, root), label=f"SFT {cfg.name}", state=state)
