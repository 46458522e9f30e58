"""Cached SFT and RL runs for sweeps, figures and the report: reuse a finished run, resume a partial one.

A finished run folder is a unit of the result store (:mod:`tailmiss.store`):
it is reused only when its files pass their checksums, its config (and, for
RL, its starting SFT run) is the requested one and it was made by the running
code; a partial run is resumed only from a checkpoint written by the running
code. Anything else is redone from scratch.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
from pathlib import Path

import torch

from tailmiss.experiments.pool import Job
from tailmiss.io import ConfigError
from tailmiss.llm.checkpoint import _RUN_FILES, CHECKPOINT, OPTIONAL_RUN_FILES, read_run_config
from tailmiss.llm.config import RLConfig, SFTConfig
from tailmiss.llm.sft import train_sft
from tailmiss.llm.train import train_rl
from tailmiss.options import RunOptions
from tailmiss.store import (
    Lookup,
    UnitKind,
    UnitState,
    check_may_compute,
    code_fingerprint,
    consult_archive,
    file_sha256,
    judge,
    own_scope_of,
    read_meta,
    same_code,
)

__all__ = ["cached_sft", "cached_rl", "run_state", "STATES", "RUN_UNIT"]

STATES = tuple(UnitState)
"""What :func:`run_state` can find (:class:`tailmiss.store.UnitState`): nothing; a finished run by this code; a
finished run by other code that ``reuse_stale`` allows; a finished run by other code; a resumable run; a damaged run;
another config or start."""


def _run_config(path: Path):
    """The config of the run folder ``path``."""
    return read_run_config(path / "config.toml")


RUN_UNIT = UnitKind(tuple(sorted(_RUN_FILES)), "run", "llm", _run_config)
"""A finished SFT or RL run folder as a unit of the store, with the files every run holds (a run whose config asks
for more holds those too: ``_describe`` adds them)."""


def _describe(path: Path, cfg, init, reuse_stale: bool) -> Lookup:
    """What the folder ``path`` holds for ``cfg`` started from ``init``, or the evidence archive's run of that name
    when it is better (:func:`tailmiss.store.consult_archive`, which restores it into ``path``)."""

    def here(folder: Path) -> Lookup:
        return _describe_folder(folder, cfg, init, reuse_stale)

    return consult_archive(path, here(path), here)


def _describe_folder(path: Path, cfg, init, reuse_stale: bool) -> Lookup:
    """What the folder ``path`` holds for ``cfg`` started from ``init``: a finished run is judged as every unit of the
    store is (:func:`tailmiss.store.judge`); a run stopped part-way resumes only from a checkpoint of this code."""
    if not path.exists():
        return Lookup(UnitState.MISSING)
    modules = _own_modules(cfg, init)
    if (path / "meta.json").is_file():
        try:
            meta = read_meta(path)
        except ValueError as exc:
            return Lookup(UnitState.CORRUPT, reason=str(exc))
        if not meta.get("complete"):
            return Lookup(UnitState.CORRUPT, reason="meta.json does not say the run is complete")
        kept = OPTIONAL_RUN_FILES & set(meta.get("checksums") or {})
        kind = dataclasses.replace(RUN_UNIT, files=tuple(sorted(_RUN_FILES | kept)))
        return judge(path, kind, lambda found: _same_run(found, cfg, meta, init), reuse_stale, modules, archive=False)
    if not (path / "config.toml").is_file():
        return Lookup(UnitState.OTHER, reason="no config.toml")
    try:
        same = read_run_config(path / "config.toml") == cfg
    except ConfigError as exc:
        return Lookup(UnitState.OTHER, reason=str(exc))
    if not same:
        return Lookup(UnitState.OTHER, reason="another config")
    if not (path / CHECKPOINT).is_file():
        return Lookup(UnitState.CORRUPT, reason="neither meta.json nor a checkpoint")
    if modules:
        return Lookup(UnitState.STALE, reason=f"a checkpoint does not record the code of {', '.join(modules)}")
    try:
        code = torch.load(path / CHECKPOINT, map_location="cpu", weights_only=True).get("code")
    except Exception as exc:  # a truncated or foreign file is never resumed
        return Lookup(UnitState.CORRUPT, reason=f"unreadable checkpoint: {exc}")
    if not same_code("llm", code):
        running = code_fingerprint("llm")
        return Lookup(
            UnitState.STALE, reason=f"its checkpoint was written by code {code}, not by the running code {running}"
        )
    return Lookup(UnitState.PARTIAL)


def _own_modules(cfg, init) -> tuple[str, ...]:
    """The modules outside the trainer's scope whose code makes the run's numbers (:func:`tailmiss.store.own_scope_of`
    its task; an RL run's task is its SFT run's)."""
    if isinstance(cfg, SFTConfig):
        return own_scope_of(cfg.task)
    try:
        return own_scope_of(read_run_config(Path(init) / "config.toml").task)
    except (OSError, ValueError):  # no SFT run to read: the RL run is redone with it anyway
        return ()


def _same_run(found, cfg, meta: dict, init) -> bool | str:
    """Whether a finished run's config is ``cfg`` and it started from the SFT run ``init`` (or why not)."""
    if found != cfg:
        return "another config"
    if init is not None and not _same_start(meta, Path(init)):
        return f"started from {meta.get('init')!r}, not from the SFT run in {str(Path(init))!r}"
    return True


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


def run_state(path: str | Path, cfg, init: str | Path | None, reuse_stale: bool = False) -> UnitState:
    """What the folder ``path`` holds for ``cfg`` started from ``init`` (one of :data:`STATES`)."""
    return _describe(Path(path), cfg, init, reuse_stale).state


def _run(cfg, path: Path, init: Path | None, train, options: RunOptions) -> Path:
    found = _describe(path, cfg, init, options.reuse_stale)
    say = options.say
    if found.state is UnitState.FRESH:
        if found.reason:  # restored from the evidence archive
            say(f"{path}: {found.reason}")
        return path
    if found.state is UnitState.REUSED_STALE:
        say(f"warning: reusing the stale run {path} (--reuse-stale): {found.reason}")
        return path
    check_may_compute(path, "run", found.reason)
    if found.state in (UnitState.STALE, UnitState.CORRUPT, UnitState.OTHER):
        names = {p.name for p in path.iterdir() if not p.name.startswith(".")} if path.is_dir() else None
        if names is None or names - _RUN_FILES - OPTIONAL_RUN_FILES:
            raise ValueError(f"refusing to replace {str(path)!r}: it is not a run folder")
        say(f"{path}: {found.state.value} ({found.reason}); training it again")
        shutil.rmtree(path)
    return train(path, resume=found.state is UnitState.PARTIAL, device=options.device, progress=options.progress)


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
