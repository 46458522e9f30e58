"""Run folders of the SFT and RL loops: config, tidy history, metadata and a resumable checkpoint.

A run folder ``DIR`` holds ``config.toml``, ``history.csv`` (one row per
logged step), ``meta.json`` and ``checkpoint.pt``. Each file is replaced
atomically, so a run killed at any moment leaves the last complete checkpoint;
``checkpoint.pt`` carries the model, the optimizer, the history so far and the
step, and every random draw of a step is seeded from ``(seed, step)``, so a
resumed run repeats an uninterrupted one exactly on the CPU.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import torch

from tailmiss.io import atomic_write
from tailmiss.llm.config import RLConfig, SFTConfig
from tailmiss.llm.model import GPT, ModelConfig
from tailmiss.llm.tabular import tabular_from_state
from tailmiss.llm.tasks import Task, make_task
from tailmiss.store import code_fingerprint, file_sha256, provenance

__all__ = ["RunFolder", "LoadedRun"]

CHECKPOINT = "checkpoint.pt"
_RUN_FILES = {"config.toml", "history.csv", "meta.json", CHECKPOINT}


class RunFolder:
    """The files of one SFT or RL run under ``path``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def checkpoint_path(self) -> Path:
        return self.path / CHECKPOINT

    def prepare(self, config: SFTConfig | RLConfig, resume: bool) -> dict | None:
        """Check the folder before any work; return the checkpoint to resume from, if any.

        A folder that holds anything but an earlier run is refused; an earlier
        run is continued only with ``resume`` and the same config.
        """
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"--out {str(self.path)!r} is a file, not a folder")
        if self.path.is_dir():
            names = {p.name for p in self.path.iterdir() if not p.name.startswith(".")}
            if names - _RUN_FILES:
                raise ValueError(f"refusing to write into {str(self.path)!r}: it holds files that are not a run's")
            if names and not resume:
                raise ValueError(f"{str(self.path)!r} already holds a run: pass --resume to continue it")
        if not resume or not self.checkpoint_path.is_file():
            self.path.mkdir(parents=True, exist_ok=True)
            config.to_toml(self.path / "config.toml")
            return None
        stored = type(config).from_toml(self.path / "config.toml")
        if stored != config:
            raise ValueError(f"cannot resume {str(self.path)!r}: its config.toml differs from the requested config")
        return self.load_checkpoint()

    def save_checkpoint(self, state: dict) -> None:
        """Write ``checkpoint.pt`` atomically, stamped with the code fingerprint (:mod:`tailmiss.store`)."""
        buffer = io.BytesIO()
        torch.save({**state, "code": code_fingerprint("llm")}, buffer)
        with atomic_write(self.checkpoint_path, "wb") as fh:
            fh.write(buffer.getvalue())

    def load_checkpoint(self) -> dict:
        if not self.checkpoint_path.is_file():
            raise ValueError(f"{str(self.path)!r} has no {CHECKPOINT}")
        try:
            return torch.load(self.checkpoint_path, map_location="cpu", weights_only=True)
        except Exception as exc:  # a truncated or foreign file
            raise ValueError(f"{self.checkpoint_path} is not a readable checkpoint: {exc}") from None

    def write_history(self, rows: list[dict]) -> None:
        with atomic_write(self.path / "history.csv") as fh:
            pd.DataFrame(rows).to_csv(fh, index=False, float_format="%.10g")

    def write_meta(self, meta: dict) -> None:
        """Write ``meta.json`` last, sealed with the provenance and the checksums of the run's other files.

        A run folder whose ``meta.json`` says ``complete`` is a finished unit of
        the result store: :func:`tailmiss.store.open_unit` verifies it before use.
        """
        sealed = dict(meta)
        sealed["provenance"] = provenance("llm", meta.get("device"))
        sealed["checksums"] = {
            name: file_sha256(self.path / name)
            for name in sorted(_RUN_FILES - {"meta.json"})
            if (self.path / name).is_file()
        }
        with atomic_write(self.path / "meta.json") as fh:
            fh.write(json.dumps(sealed, indent=2, default=str) + "\n")

    def history(self) -> pd.DataFrame:
        return pd.read_csv(self.path / "history.csv")

    def meta(self) -> dict:
        return json.loads((self.path / "meta.json").read_text())


class LoadedRun:
    """A run folder read back: its config, task, trained model and (RL) its SFT reference model."""

    def __init__(self, path: str | Path, device: torch.device | str = "cpu"):
        folder = RunFolder(path)
        if not (folder.path / "config.toml").is_file():
            raise ValueError(f"{str(folder.path)!r} is not a run folder: config.toml is missing")
        state = folder.load_checkpoint()
        self.folder, self.state = folder, state
        self.kind = state["kind"]
        self.config = (SFTConfig if self.kind == "sft" else RLConfig).from_dict(state["config"])
        self.task: Task = make_task(state["task"])
        self.model_config = ModelConfig(**state["model_config"])
        self.model = _build(self.model_config, self.task, state["model"], device)
        self.reference = (
            _build(self.model_config, self.task, state["reference"], device) if "reference" in state else None
        )
        self.step = int(state["step"])


def _build(model_config: ModelConfig, task: Task, weights: dict, device) -> GPT:
    if model_config.kind != "transformer":
        return tabular_from_state(model_config.kind, weights, len(task.vocab)).to(device).eval()
    model = GPT(model_config, len(task.vocab), task.prompt_len + task.max_answer_len)
    model.load_state_dict(weights)
    return model.to(device).eval()
