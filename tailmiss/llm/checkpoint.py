"""Run folders of the SFT and RL loops: config, tidy history, metadata and a resumable checkpoint.

A run folder ``DIR`` holds ``config.toml``, ``history.csv`` (one row per
logged step), ``meta.json`` and ``checkpoint.pt``. Each file is replaced
atomically, so a run killed at any moment leaves the last complete checkpoint;
``checkpoint.pt`` carries the model, the optimizer, the history so far and the
step, and every random draw of a step is seeded from ``(seed, step)``, so a
resumed run repeats an uninterrupted one exactly on the CPU. :func:`evaluate_run`
scores a saved run (``tailmiss llm eval``).
"""

from __future__ import annotations

import io
import json
import math
import numbers
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from tailmiss._device import resolve_device
from tailmiss.io import ConfigError, atomic_write, read_toml
from tailmiss.llm.config import RLConfig, SFTConfig, load_config
from tailmiss.llm.evaluate import PASS_KS, answer_distribution, exact_metrics, sample_correct_counts, sampled_pass_at_k
from tailmiss.llm.loop import progress_bar
from tailmiss.llm.model import GPT, ModelConfig
from tailmiss.llm.optim import FLAT_KEYS
from tailmiss.llm.tabular import tabular_from_state
from tailmiss.llm.tasks import Task, make_task
from tailmiss.store import code_fingerprint, file_sha256, provenance

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RunFolder", "LoadedRun", "evaluate_run", "read_run_config", "run_config"]

CHECKPOINT = "checkpoint.pt"
PROMPT_EVALS = "prompt_evals.npz"
_RUN_FILES = {"config.toml", "history.csv", "meta.json", CHECKPOINT}
OPTIONAL_RUN_FILES = {PROMPT_EVALS}
"""Files a run folder holds only when its config asks (``RLConfig.eval_per_prompt``)."""


def read_run_config(path: str | Path) -> SFTConfig | RLConfig:
    """A run folder's ``config.toml`` (``path``), also in the layout before ``[optim]`` that run folders written then
    keep (:func:`run_config`); :func:`load_config` refuses that layout."""
    data = read_toml(path)
    if len(data) != 1 or next(iter(data)) not in ("sft", "rl"):
        return load_config(path)  # its error
    ((table, body),) = data.items()
    return run_config(table, body, str(path))


def run_config(kind: str, body: dict, where: str | None = None) -> SFTConfig | RLConfig:
    """The ``"sft"`` or ``"rl"`` config a run stored (``config.toml``'s table, a checkpoint's ``config``), also
    with the optimiser settings as keys of the table (:data:`~tailmiss.llm.optim.FLAT_KEYS`), as before ``[optim]``."""
    body = dict(body)
    flat = {FLAT_KEYS[k]: body.pop(k) for k in list(body) if k in FLAT_KEYS}
    if flat and "optim" in body:
        raise ConfigError(f"{where}: optimiser settings both in [{kind}] and in [{kind}.optim]")
    if flat:
        body["optim"] = flat
    return {"sft": SFTConfig, "rl": RLConfig}[kind].from_dict(body, where)


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
            if names - _RUN_FILES - OPTIONAL_RUN_FILES:
                raise ValueError(f"refusing to write into {str(self.path)!r}: it holds files that are not a run's")
            if names and not resume:
                raise ValueError(f"{str(self.path)!r} already holds a run: pass --resume to continue it")
        if not resume or not self.checkpoint_path.is_file():
            self.path.mkdir(parents=True, exist_ok=True)
            config.to_toml(self.path / "config.toml")
            return None
        stored = read_run_config(self.path / "config.toml")
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
        text = history_csv(rows)
        if text is None:  # not plain numbers: let pandas write it
            import pandas as pd

            text = pd.DataFrame(rows).to_csv(index=False, float_format="%.10g")
        with atomic_write(self.path / "history.csv") as fh:
            fh.write(text)

    def write_meta(self, meta: dict) -> None:
        """Write ``meta.json`` last, sealed with the provenance and the checksums of the run's other files.

        A run folder whose ``meta.json`` says ``complete`` is a finished unit of
        the result store: :func:`tailmiss.store.open_unit` verifies it before use.
        """
        sealed = dict(meta)
        sealed["provenance"] = provenance("llm", meta.get("device"))
        sealed["checksums"] = {
            name: file_sha256(self.path / name)
            for name in sorted((_RUN_FILES | OPTIONAL_RUN_FILES) - {"meta.json"})
            if (self.path / name).is_file()
        }
        with atomic_write(self.path / "meta.json") as fh:
            fh.write(json.dumps(sealed, indent=2, default=str) + "\n")

    def write_prompt_evals(self, per_prompt: dict) -> None:
        """Write ``prompt_evals.npz`` atomically: ``step`` (E,) and ``mu_pos`` (E, P), one row per evaluation."""
        steps = sorted(per_prompt)
        buffer = io.BytesIO()
        mu_pos = np.stack([per_prompt[s].numpy() for s in steps])
        np.savez(buffer, step=np.asarray(steps, dtype=np.int64), mu_pos=mu_pos)
        with atomic_write(self.path / PROMPT_EVALS, "wb") as fh:
            fh.write(buffer.getvalue())

    def prompt_evals(self) -> dict[str, np.ndarray]:
        """``prompt_evals.npz`` read back (``ValueError`` if the run did not keep per-prompt evaluations)."""
        path = self.path / PROMPT_EVALS
        if not path.is_file():
            raise ValueError(f"{str(self.path)!r} has no {PROMPT_EVALS}: its config did not set eval_per_prompt")
        with np.load(path) as data:
            return {k: data[k] for k in ("step", "mu_pos")}

    def history(self) -> pd.DataFrame:
        import pandas as pd

        return pd.read_csv(self.path / "history.csv")

    def meta(self) -> dict:
        return json.loads((self.path / "meta.json").read_text())


def history_csv(rows: list[dict]) -> str | None:
    """``pd.DataFrame(rows).to_csv(index=False, float_format="%.10g")`` for rows of numbers, without pandas
    (about 70 MB and a second of start-up in every training process); ``None`` for any other value.

    As pandas does: columns in order of first appearance; a column with a float or a missing value is a float
    column (every number in it written with ``%.10g``, a missing one or NaN as nothing), any other an integer one.
    """
    columns = list(dict.fromkeys(key for row in rows for key in row))
    cells = [[row.get(c) for row in rows] for c in columns]
    lines = [",".join(columns)]
    kinds = []
    for values in cells:
        if any(isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, type(None))) for v in values):
            return None
        kinds.append(any(v is None or isinstance(v, (float, np.floating)) for v in values))
    for i in range(len(rows)):
        out = []
        for is_float, values in zip(kinds, cells):
            v = values[i]
            if not is_float:
                out.append(str(int(v)))
            else:
                out.append("" if v is None or math.isnan(v) else f"{float(v):.10g}")
        lines.append(",".join(out))
    return "\n".join(lines) + "\n"


class LoadedRun:
    """A run folder read back: its config, task, trained model and (RL) its SFT reference model."""

    def __init__(self, path: str | Path, device: torch.device | str = "cpu"):
        folder = RunFolder(path)
        if not (folder.path / "config.toml").is_file():
            raise ValueError(f"{str(folder.path)!r} is not a run folder: config.toml is missing")
        state = folder.load_checkpoint()
        self.folder, self.state = folder, state
        self.kind = state["kind"]
        self.config = run_config(self.kind, state["config"], f"{folder.path / CHECKPOINT}: config")
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


def evaluate_run(run_dir: str | Path, samples: int, device=None, seed: int = 0, progress: bool = False) -> dict:
    """Sampled pass@k (and exact metrics for enumerable tasks) of a run folder on its eval prompts.

    The prompts are the run's own evaluation set (``eval_prompts`` distinct
    prompts of ``eval_split``); exact metrics of an RL run are measured against
    its SFT starting point.
    """
    if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
        raise ValueError(f"samples must be a positive integer, got {samples!r}")
    dev = resolve_device(device)
    run = LoadedRun(run_dir, dev)
    cfg, task = run.config, run.task
    prompts = task.prompts(cfg.eval_split, cfg.eval_prompts, seed=cfg.seed, distinct=True)
    gen = torch.Generator(device=dev).manual_seed(seed)
    bar = progress_bar(progress, len(prompts), f"sampling {samples} per prompt")
    try:
        counts = sample_correct_counts(
            run.model, task, prompts, samples, gen, getattr(cfg, "temperature", 1.0), progress=bar and bar.update
        )
    finally:
        if bar is not None:
            bar.close()
    out: dict = {
        "run": str(run_dir),
        "kind": run.kind,
        "step": run.step,
        "task": task.name,
        "prompts": len(prompts),
        "split": cfg.eval_split,
        "samples": samples,
        "pass_at_k": {str(k): v for k, v in sampled_pass_at_k(counts, samples, PASS_KS).items()},
    }
    if task.enumerable:
        reference = answer_distribution(run.reference, task, prompts) if run.reference is not None else None
        rare_share = getattr(cfg, "rare_share", 0.1)
        m = exact_metrics(answer_distribution(run.model, task, prompts), reference, PASS_KS, rare_share)
        out.update(
            exact_pass_at_k={str(k): v for k, v in m["exact_pass_at_k"].items()},
            mu_pos=m["mu_pos_mean"],
            retained_mass=m["retained_mass_mean"],
            dnll_rare=m["dnll_rare"],
            off_format=m["off_format_mean"],
            tau_rare=float(np.mean(m["tau_rare"])),
        )
    return out
