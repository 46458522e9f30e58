"""F-GRPO with TRL on a CPU in seconds: a tiny Llama learns a digit task; the run is logged for `tailmiss diagnose`.

    pip install torch==2.13.0 && pip install -e ".[trl]"
    python examples/trl_fgrpo.py --out runs/trl-fgrpo --gamma 0.5
    tailmiss diagnose runs/trl-fgrpo/rollouts.jsonl

Checkpoints and resuming: ``--save-steps 10`` saves ``--out/checkpoint-<step>`` every 10 steps; a run
killed after step 17 goes on with ``--resume`` (the latest checkpoint, here 10) or ``--resume
runs/trl-fgrpo/checkpoint-10``, and its log is cut back to step 10 first, so that it holds every step
once. A fresh run into an ``--out`` whose ``rollouts.jsonl`` holds rows stops with an error saying so;
``--overwrite`` starts the log afresh.

    python examples/trl_fgrpo.py --out runs/trl-fgrpo --steps 30 --save-steps 10   # killed at step 17
    python examples/trl_fgrpo.py --out runs/trl-fgrpo --steps 30 --save-steps 10 --resume

Threads: the example trains on one intra-op thread (``--threads 1``, the default). Its model is
tiny, so torch's threads spend their time waiting for each other, and on a busy machine for a core:
on a 2-core machine shared with other work (load average 5-6), the 60 steps trained in 3.3-3.7 s on
one thread and in 27-41 s on torch's default two, to the same weights. On a CPU, small models
should run so: ``torch.set_num_threads(1)`` (or ``OMP_NUM_THREADS=1``) before training.

The task: a prompt ``a+b=`` (digits) is answered with a digit; 0, 3, 6 and 9 are correct, so
every prompt has four correct answers, which the untrained model finds about a quarter of the
time; as GRPO sharpens the policy some of them become rare (the tail that F-GRPO protects). The
model (2 layers, width 32) and the tokenizer are built in memory: nothing is downloaded.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from transformers.trainer_utils import get_last_checkpoint

from tailmiss.integrations.trl import EarlierLogError, FGRPOConfig, FGRPOTrainer, TailMissCallback

TOKENS = ["<pad>", "<eos>", *map(str, range(10)), "+", "="]


def build_tokenizer() -> PreTrainedTokenizerFast:
    """One token per character of ``0-9+=``, plus padding and end of sequence."""
    core = Tokenizer(models.WordLevel({t: i for i, t in enumerate(TOKENS)}, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>")


def build_model(seed: int = 0, width: int = 32) -> LlamaForCausalLM:
    """A 2-layer Llama from a config, seeded."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(TOKENS),
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    return LlamaForCausalLM(config)


def build_dataset() -> Dataset:
    """The 100 prompts ``a+b=`` with a ``prompt_id`` column (TailMissCallback groups by it)."""
    prompts = [f"{a}+{b}=" for a in range(10) for b in range(10)]
    return Dataset.from_dict({"prompt": prompts, "prompt_id": [p[:3] for p in prompts]})


def digit_reward(prompts, completions, **kwargs) -> list[float]:
    """1 if the completion starts with a multiple of 3 (0, 3, 6 or 9), else 0."""
    return [float(c[:1].isdigit() and int(c[:1]) % 3 == 0) for c in completions]


def config(out: Path, gamma: float, steps: int, **overrides) -> FGRPOConfig:
    """A CPU configuration: 4 prompts x 8 rollouts per step, completions of at most 2 tokens."""
    settings = dict(
        output_dir=str(out),
        focal_gamma=gamma,
        use_cpu=True,
        per_device_train_batch_size=32,
        num_generations=8,
        max_completion_length=2,
        max_steps=steps,
        learning_rate=3e-3,
        lr_scheduler_type="constant",
        gradient_checkpointing=False,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=0,
        disable_tqdm=True,
    )
    settings.update(overrides)
    return FGRPOConfig(**settings)


def main(argv=None) -> FGRPOTrainer:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/trl-fgrpo"))
    parser.add_argument("--gamma", type=float, default=0.5, help="focal gamma (0: plain GRPO)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rho", type=float, default=0.05, help="rare share for the logged tail-miss risk")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (default 1: fastest for this tiny model)"
    )
    parser.add_argument("--save-steps", type=int, default=None, metavar="K", help="save a checkpoint every K steps")
    parser.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        default=None,
        metavar="CHECKPOINT",
        help="go on from a checkpoint folder, or from the latest one in --out (no value or 'latest')",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="a fresh run may empty --out/rollouts.jsonl (an earlier run's log)"
    )
    ns = parser.parse_args(argv)
    if ns.save_steps is not None and ns.save_steps < 1:
        parser.error(f"--save-steps must be a whole number >= 1, got {ns.save_steps}")
    resume = ns.resume
    if resume == "latest":
        resume = get_last_checkpoint(str(ns.out)) if ns.out.is_dir() else None
        if resume is None:
            parser.error(f"--resume: {ns.out} holds no checkpoint-<step> folder (save some with --save-steps K)")
    elif resume is not None and not Path(resume).is_dir():
        parser.error(f"--resume: no checkpoint folder {resume}")
    torch.set_num_threads(ns.threads)
    saving = {} if ns.save_steps is None else {"save_strategy": "steps", "save_steps": ns.save_steps}
    trainer = FGRPOTrainer(
        build_model(),
        reward_funcs=digit_reward,
        args=config(ns.out, ns.gamma, ns.steps, **saving),
        train_dataset=build_dataset(),
        processing_class=build_tokenizer(),
        callbacks=[TailMissCallback(rho=ns.rho, overwrite=ns.overwrite)],  # logs --out/rollouts.jsonl
    )
    started = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=resume)
    except EarlierLogError as exc:  # a fresh run into an --out that holds a run
        parser.error(f"{exc}; here: --resume [CHECKPOINT] goes on from a checkpoint, --overwrite starts afresh")
    seconds = time.perf_counter() - started
    last = [h for h in trainer.state.log_history if "reward" in h][-1]
    print(
        f"step {last['step']}: reward {last['reward']:.3f}, inactive groups {last['tailmiss/share_inactive']:.2f}; "
        f"trained in {seconds:.1f} s on {torch.get_num_threads()} thread(s)"
    )
    print(f"per-rollout log: {ns.out / 'rollouts.jsonl'} (tailmiss diagnose reads it)")
    return trainer


if __name__ == "__main__":
    main()
