"""Numbers of the report's small-transformer section, computed from cached runs (no plotting here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tailmiss.llm.cached import cached_rl, cached_sft
from tailmiss.llm.checkpoint import LoadedRun
from tailmiss.llm.evaluate import answer_distribution, exact_metrics
from tailmiss.llm.presets import llm_preset, quick_name

__all__ = ["llm_rows", "REPORT_RUNS"]

REPORT_RUNS = ("multisolution-grpo", "multisolution-fgrpo")
"""GRPO and F-GRPO (γ = 0.5) at N = 8 from one SFT model."""


def _name(name: str, quick: bool) -> str:
    return quick_name(name) if quick else name


def llm_rows(quick: bool, root: str | Path, device=None, progress: bool = True) -> dict:
    """SFT summary and one row per RL run of :data:`REPORT_RUNS`, running or reusing the cached runs."""
    sft_cfg = llm_preset(_name("multisolution-sft", quick))
    sft_dir = cached_sft(sft_cfg, root, device=device, progress=progress)
    sft = LoadedRun(sft_dir)
    task = sft.task
    prompts = task.prompts(sft_cfg.eval_split, sft_cfg.eval_prompts, seed=sft_cfg.seed, distinct=True)
    mu = exact_metrics(answer_distribution(sft.model, task, prompts))
    out = {
        "sft": {
            "name": sft_cfg.name,
            "params": sft.model.num_params(),
            "prompts": len(prompts),
            "mu_min": float(np.min(mu["mu_pos"])),
            "mu_max": float(np.max(mu["mu_pos"])),
            "mu_mean": mu["mu_pos_mean"],
            "target_mean": float(np.mean([task.target_mu_pos(p) for p in prompts])),
            "off_format": mu["off_format_mean"],
        },
        "runs": [],
    }
    for name in REPORT_RUNS:
        cfg = llm_preset(_name(name, quick))
        run_dir = cached_rl(cfg, sft_dir, root, device=device, progress=progress)
        history = pd.read_csv(Path(run_dir) / "history.csv")
        evals = history.dropna(subset=["mu_pos"])
        first, last = evals.iloc[0], evals.iloc[-1]
        out["runs"].append(
            {
                "name": cfg.name,
                "gamma": cfg.gamma,
                "steps": cfg.steps,
                "rollouts": int(last["rollouts"]),
                "mu_start": float(first["mu_pos"]),
                "mu_end": float(last["mu_pos"]),
                "retained_mass": float(last["retained_mass"]),
                "dnll_rare": float(last["dnll_rare"]),
                "tau_ratio": float(last["tau_rare"] / first["tau_rare"]),
                "pass1": float(last["exact_pass_at_1"]),
                "pass256": float(last["exact_pass_at_256"]),
            }
        )
    return out
