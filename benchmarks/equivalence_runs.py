"""Train small runs of the code paths the evidence archive's runs lack, for ``benchmarks/trainer_equivalence.py``.

The archive's runs cover most of the trainer's paths but not all: cosine schedules with warm-up in RL, Dr. GRPO,
counter-based rollout sampling, top-k and top-p, CISPO with KL and entropy together, a training pool cycled in epochs,
and runs of distinct settings that train as one stack. This script trains one small run of each (40 steps, or 30 for
the three that stack, from the narrowing study's SFT model ``runs/llm/narrowing-sft-str0.5``) into ``ROOT/llm``,
with the code first on ``PYTHONPATH``: run it with the replaced code before ``trainer_equivalence.py --keep ROOT``,
so that the newer code retrains these beside the cover it keeps (``equiv-*`` in the records).

    PYTHONPATH=../old python benchmarks/equivalence_runs.py ../old-runs
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path, help="the runs go to ROOT/llm")
    parser.add_argument("--init", type=Path, default=Path("runs/llm/narrowing-sft-str0.5"), help="the SFT run")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    from tailmiss.experiments.presets import llm_sweep
    from tailmiss.llm.train import train_rl

    study = llm_sweep("narrowing").rl
    base = study.replace(steps=40, eval_every=20, eval_prompts=32, checkpoint_every=20, prompts_per_step=8)
    cosine = base.optim.replace(lr_schedule="cosine", warmup_steps=5)
    stack = base.replace(steps=30, eval_every=10, checkpoint_every=30)
    runs = {
        "equiv-cispo-kl-entropy-cosine-s0": base.replace(
            method="cispo", gamma=0.5, group_size=4, kl_coef=1e-2, entropy_coef=1e-3, optim=cosine, minibatches=2
        ),
        "equiv-drgrpo-cosine-counter-s0": base.replace(
            method="drgrpo", optim=cosine, rollout_sampling="counter", top_k=5, top_p=0.9, temperature=0.9
        ),
        "equiv-grpo-pool-epochs-s0": base.replace(
            train_prompts=32, pool_order="epochs", eval_per_prompt=False, eval_samples=16
        ),
        "equiv-stack-grpo-s0": stack,
        "equiv-stack-focal-s0": stack.replace(gamma=1.0),
        "equiv-stack-lowlr-s0": stack.replace(optim=stack.optim.replace(lr=stack.optim.lr * 0.5)),
    }
    for name, cfg in runs.items():
        train_rl(cfg.replace(name=name), args.init, args.root / "llm" / name, device="cpu", progress=False)
        print("trained", name, flush=True)


if __name__ == "__main__":
    main()
