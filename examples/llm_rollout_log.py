"""The package's own trainer, logged per rollout: a short SFT run, a short GRPO run, and a log for `tailmiss diagnose`.

    python examples/llm_rollout_log.py --out runs/own-grpo
    tailmiss diagnose runs/own-grpo/rollouts.jsonl

The runs are the `multisolution-sft-quick` and `multisolution-grpo-quick` presets (the same as
experiments/multisolution-sft-quick.toml and experiments/multisolution-grpo-quick.toml; `tailmiss
llm sft` / `tailmiss llm train` with `--preset`), written to ``--out/sft`` and ``--out/rl``, with
``--steps``, ``--group-size``, ``--gamma`` and ``--seed`` set on them (``--seed`` on both runs,
``--sft-steps`` on the SFT run). The RL loop (:mod:`tailmiss.llm.train`) writes a history of
per-step means but no per-rollout log; this example logs its rollouts without changing it: for the
length of the run, :class:`RolloutRecorder` replaces ``tailmiss.llm.train.gather_groups`` (steps 1-2
of the loop: the step's prompts, rollouts and rewards) by a wrapper that hands the trainer the very
batch it returns and keeps that batch's rewards, then restores the original.

``--out/rollouts.jsonl`` holds one line per rollout in the tailmiss schema
(:mod:`tailmiss.diagnose.rollout_log`): ``step`` (the RL step, 0 to steps - 1), ``prompt_id``,
``rollout`` (0 to N - 1 in its group), ``reward`` (the task's strict verifier, 1.0 or 0.0) and
``correct`` (1 when the reward is 1: the trainer's own success flag), ``focal_weight`` (the group's
(1 - X/N)^gamma, from which ``tailmiss diagnose`` reads the run's gamma). A prompt id is the prompt's
tokens, e.g. ``17__`` for allowed digits 1 and 7 (``_`` an empty slot); a prompt drawn twice in one
step gives the trainer two groups, logged as ``17__`` and ``17__#2``. Each step's lines are
appended once the step is done (the trainer's ``on_step`` hook) and flushed to disk, so a run
killed while writing leaves at most a cut-off last line, which ``tailmiss diagnose`` skips with a
warning.

Default settings take about 40 s on 2 CPU cores (the SFT run most of it), on one torch thread
(``--threads 1``: this model is tiny, more threads only wait for each other). A rerun
into the same ``--out`` is refused; ``--overwrite`` deletes ``--out/sft``, ``--out/rl`` and
``--out/rollouts.jsonl`` first. One process only (not under ``torchrun``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from typing import NamedTuple

import torch

from tailmiss.analytic import focal_weight
from tailmiss.experiments.presets import llm_preset
from tailmiss.llm import RLConfig, SFTConfig, train_rl, train_sft
from tailmiss.llm import train as rl_loop  # the RL loop's module: gather_groups is looked up there every step
from tailmiss.llm.tasks import BOS, EOS, PAD, SEP

SFT_PRESET, RL_PRESET = "multisolution-sft-quick", "multisolution-grpo-quick"
LOG_NAME = "rollouts.jsonl"


def prompt_text(task, tokens) -> str:
    """A prompt's text id: its tokens without the special ones (one-character tokens joined as they are)."""
    words = [w for t, w in zip(tokens, task.vocab.decode(tokens)) if t not in (PAD, BOS, SEP, EOS)]
    joiner = "" if all(len(w) == 1 for w in task.vocab.tokens[4:]) else " "
    return joiner.join(words)


class RolloutRecorder:
    """``with RolloutRecorder(path):`` every RL step's rollouts go to ``path`` (JSONL, tailmiss schema).

    Inside the block ``tailmiss.llm.train.gather_groups`` is a wrapper around the original: it returns the
    original's ``(batch, info)`` unchanged and keeps the step's rows; :meth:`step_done` (pass it as
    ``train_rl(..., on_step=recorder.step_done)``) appends them to ``path``. On leaving the block the
    original function is back, whatever happened.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.pending: dict[int, list[dict]] = {}
        self.steps_written = 0
        self.rows_written = 0
        self._original = None
        self._fh = None

    def __enter__(self) -> RolloutRecorder:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "w", encoding="utf-8")  # a fresh log: the run starts at step 0
        self._original = rl_loop.gather_groups
        rl_loop.gather_groups = self._gather_groups
        return self

    def __exit__(self, *exc) -> None:
        rl_loop.gather_groups = self._original
        self._fh.close()

    def _gather_groups(self, run, step: int):
        """The loop's stage 1-2 (:func:`tailmiss.llm.rollouts.gather_groups` of the run and the step), recorded."""
        batch, info = self._original(run, step)
        task, cfg = run.task, run.cfg
        if cfg.dynamic_sampling:  # the batch would hold only the kept groups, not what was sampled
            raise ValueError("RolloutRecorder logs runs without dynamic sampling (dynamic_sampling = false)")
        self.pending[step] = self.rows(task, cfg.group_size, step, batch, cfg.gamma)
        return batch, info

    @staticmethod
    def rows(task, group_size: int, step: int, batch, gamma: float = 0.0) -> list[dict]:
        """One row per rollout of ``batch`` (a :class:`tailmiss.llm.rollouts.Rollouts`: prompt ids (G*N, P),
        group-major, and rewards (G, N)), with its group's focal weight (1 - X/N)^gamma (F-GRPO Eq. 12)."""
        rewards = batch.rewards.cpu().tolist()
        firsts = batch.prompt_ids[::group_size].cpu().tolist()  # row g*N + i holds group g's prompt
        assert len(firsts) == len(rewards) and all(len(r) == group_size for r in rewards)
        seen: dict[str, int] = {}
        out = []
        for tokens, group in zip(firsts, rewards):
            text = prompt_text(task, tokens)
            seen[text] = seen.get(text, 0) + 1
            prompt_id = text if seen[text] == 1 else f"{text}#{seen[text]}"  # a prompt drawn twice: two groups
            weight = float(focal_weight(sum(r > 0.5 for r in group) / group_size, gamma))
            for i, reward in enumerate(group):
                row = {"step": step, "prompt_id": prompt_id, "rollout": i, "reward": reward}
                out.append({**row, "correct": int(reward > 0.5), "focal_weight": weight})
        return out

    def step_done(self, step: int) -> None:
        """Append step ``step``'s rows in one write and flush them to disk (a kill can cut the last line only)."""
        rows = self.pending.pop(step)
        self._fh.write("".join(json.dumps(r) + "\n" for r in rows))
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.steps_written += 1
        self.rows_written += len(rows)


class Result(NamedTuple):
    sft: Path
    rl: Path
    log: Path
    seconds: float


def configs(ns: argparse.Namespace) -> tuple[SFTConfig, RLConfig]:
    """The two presets with the command line's settings."""
    sft = llm_preset(SFT_PRESET)
    sft = sft.replace(seed=ns.seed, **({} if ns.sft_steps is None else {"steps": ns.sft_steps}))
    rl = llm_preset(RL_PRESET).replace(seed=ns.seed, gamma=ns.gamma)
    rl = rl.replace(**{k: v for k, v in (("steps", ns.steps), ("group_size", ns.group_size)) if v is not None})
    return sft, rl


def main(argv=None) -> Result:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/own-grpo"), help="folder for sft/, rl/ and the log")
    parser.add_argument("--steps", type=int, default=None, help=f"RL steps (default: {RL_PRESET}'s 60)")
    parser.add_argument(
        "--group-size", type=int, default=None, help=f"rollouts per prompt N (default: {RL_PRESET}'s 8)"
    )
    parser.add_argument("--gamma", type=float, default=0.0, help="focal gamma (0: plain GRPO)")
    parser.add_argument("--seed", type=int, default=0, help="seed of both runs")
    parser.add_argument("--sft-steps", type=int, default=None, help=f"SFT steps (default: {SFT_PRESET}'s 1000)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    parser.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: CUDA when available)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True, help="progress bars")
    parser.add_argument("--overwrite", action="store_true", help="delete an earlier run's sft/, rl/ and log first")
    ns = parser.parse_args(argv)
    if ns.threads < 1:
        parser.error(f"--threads must be a whole number >= 1, got {ns.threads}")
    try:
        sft_cfg, rl_cfg = configs(ns)
    except ValueError as exc:  # the configs check their settings (steps, group size, gamma, seed)
        parser.error(str(exc))
    sft_dir, rl_dir, log = ns.out / "sft", ns.out / "rl", ns.out / LOG_NAME
    earlier = [p for p in (sft_dir, rl_dir, log) if p.exists()]
    if earlier and not ns.overwrite:
        parser.error(
            f"{ns.out} holds an earlier run ({', '.join(p.name for p in earlier)}): pass --overwrite or another --out"
        )
    for p in earlier:
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()

    torch.set_num_threads(ns.threads)
    started = time.perf_counter()
    train_sft(sft_cfg, sft_dir, device=ns.device, progress=ns.progress)
    with RolloutRecorder(log) as recorder:
        train_rl(rl_cfg, sft_dir, rl_dir, device=ns.device, progress=ns.progress, on_step=recorder.step_done)
    seconds = time.perf_counter() - started

    print(
        f"trained {sft_dir} ({sft_cfg.steps} SFT steps) and {rl_dir} ({rl_cfg.method} γ={rl_cfg.gamma:g}, "
        f"N={rl_cfg.group_size}, {rl_cfg.steps} steps) in {seconds:.1f} s on {torch.get_num_threads()} thread(s)"
    )
    print(f"per-rollout log: {log} ({recorder.rows_written} rollouts, {recorder.steps_written} steps)")
    print(f"diagnose it:     tailmiss diagnose {log}")
    return Result(sft_dir, rl_dir, log, seconds)


if __name__ == "__main__":
    main()
