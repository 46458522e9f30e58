"""A compact group-relative RL trainer for a small transformer on verifiable tasks.

* :mod:`tailmiss.llm.model`: a nanoGPT-style decoder with KV-cache sampling and
  exact (float64) log-probabilities;
* :mod:`tailmiss.llm.tasks`: the task protocol, task (a) ``multisolution``
  (enumerable answer space, exact answer masses) and task (b) ``maze``;
* :mod:`tailmiss.llm.sft` / :mod:`tailmiss.llm.train`: the SFT and RL loops
  (GRPO, DAPO, CISPO, Dr. GRPO, each with the F-GRPO focal weight; losses from
  :mod:`tailmiss.objectives`), sharing their optimiser settings
  (:mod:`tailmiss.llm.optim`); an RL step takes the run
  (:mod:`~tailmiss.llm.rl_run`) through :mod:`~tailmiss.llm.rollouts`
  (prompts, rollouts, dynamic sampling), :mod:`~tailmiss.llm.rl_update`
  (advantages, updates, statistics) and :mod:`~tailmiss.llm.rl_eval` (evaluation);
* :mod:`tailmiss.llm.evaluate`: sampled unbiased pass@k and exact metrics
  (:math:`\\mu_{pos}`, retained mass, rare-correct mass, ΔNLL_rare, exact pass@k);
* :mod:`tailmiss.llm.tabular`: the table, factorized and shared policies (free per-answer
  logits, per-position softmaxes, a log-linear term shared across prompts) that run in the same RL loop;
* :mod:`tailmiss.llm.checkpoint`: run folders, loading a run, scoring a saved run.

This package is the trainer only. Presets, sweeps, ladders, the process pool
and the bridge to the simulator, which decide *which* runs to train, live in
:mod:`tailmiss.experiments`; a run's numbers depend on its config and this
package's code (its cache fingerprint, :mod:`tailmiss.store`).
"""

from tailmiss.llm import evaluate
from tailmiss.llm.checkpoint import LoadedRun, RunFolder
from tailmiss.llm.config import RLConfig, SFTConfig, load_config
from tailmiss.llm.evaluate import (  # noqa: F401 (exported by evaluate.__all__)
    PASS_KS,
    AnswerDistribution,
    answer_distribution,
    exact_metrics,
    sample_correct_counts,
    sampled_pass_at_k,
)
from tailmiss.llm.model import GPT, ModelConfig, answer_logprobs, generate, with_dtype
from tailmiss.llm.optim import OptimConfig
from tailmiss.llm.sft import train_sft
from tailmiss.llm.tasks import TASKS, MazeTask, MultiSolutionTask, Task, make_task
from tailmiss.llm.train import train_rl

__all__ = [
    "GPT",
    "ModelConfig",
    "generate",
    "answer_logprobs",
    "with_dtype",
    "Task",
    "TASKS",
    "make_task",
    "MultiSolutionTask",
    "MazeTask",
    "SFTConfig",
    "RLConfig",
    "OptimConfig",
    "load_config",
    "train_sft",
    "train_rl",
    "RunFolder",
    "LoadedRun",
    *evaluate.__all__,
]
