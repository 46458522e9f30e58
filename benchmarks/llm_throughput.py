"""LLM trainer throughput: rollout tokens/s with and without the KV cache, and train tokens/s.

* **rollout**: ``tailmiss.llm.generate`` on ``--rollouts`` sequences of a task's
  prompts, full answer length (``max_answer_len`` new tokens; sequences stop at
  ``<eos>``, so tokens/s counts the tokens actually generated), once with the
  KV cache and once re-encoding the whole prefix at every step;
* **train**: one forward + backward + AdamW step of the SFT loss on a batch of
  teacher answers, in answer tokens/s;
* **exact eval**: scoring every well-formed answer of task (a) on 64 prompts
  (``answer_distribution``), in answers/s: in the model's float32 (the default:
  logits in float32, each next-token law normalised in float64) and on a
  float64 copy.

Threads: torch's default; set ``OMP_NUM_THREADS=1`` (or ``--threads``) for the
trainer's default of one intra-op thread.

Usage::

    python benchmarks/llm_throughput.py                        # the default CPU model on task (a)
    python benchmarks/llm_throughput.py --task maze --size 9   # longer answers, where the cache matters more
    python benchmarks/llm_throughput.py --device cuda --n-layer 4 --n-embd 256 --task maze --size 17
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
import torch.nn.functional as F

from tailmiss.llm import GPT, MazeTask, ModelConfig, MultiSolutionTask, answer_distribution, generate
from tailmiss.llm.tasks import EOS, PAD


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device, repeats):
    fn()  # warm-up
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=("multisolution", "maze"), default="multisolution")
    parser.add_argument("--size", type=int, default=7, help="maze size")
    parser.add_argument("--n-layer", type=int, default=2)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--n-embd", type=int, default=64)
    parser.add_argument("--rollouts", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64, help="SFT batch for the train timing")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads (default: torch's)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    device = torch.device(args.device)
    task = MultiSolutionTask() if args.task == "multisolution" else MazeTask(size=args.size)
    torch.manual_seed(0)
    model = GPT(
        ModelConfig(args.n_layer, args.n_head, args.n_embd), len(task.vocab), task.prompt_len + task.max_answer_len
    )
    model = model.to(device).eval()
    prompts = task.prompts("train", args.rollouts, seed=0)
    prompt_ids = task.encode_prompts(prompts).to(device)

    def rollout(use_cache):
        gen = torch.Generator(device=device).manual_seed(0)
        tokens, _ = generate(model, prompt_ids, task.max_answer_len, EOS, PAD, generator=gen, use_cache=use_cache)
        return tokens

    results = {
        "task": args.task,
        "params": model.num_params(),
        "device": str(device),
        "threads": torch.get_num_threads(),
    }
    for label, cache in (("rollout_kv_cache", True), ("rollout_no_cache", False)):
        seconds, tokens = _timed(lambda c=cache: rollout(c), device, args.repeats)
        generated = int(((tokens != PAD) | (tokens == EOS)).sum())
        results[f"{label}_tokens_per_s"] = generated / seconds
    results["kv_cache_speedup"] = results["rollout_kv_cache_tokens_per_s"] / results["rollout_no_cache_tokens_per_s"]

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids, mask = task.sft_batch(task.prompts("train", args.batch, seed=1), np.random.default_rng(0))
    ids, mask = ids.to(device), mask.to(device)

    def train_step():
        logits = model(ids[:, :-1])
        nll = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        loss = (nll * mask[:, 1:]).sum() / mask[:, 1:].sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    seconds, _ = _timed(train_step, device, args.repeats)
    results["train_answer_tokens_per_s"] = int(mask[:, 1:].sum()) / seconds
    results["train_all_tokens_per_s"] = ids[:, :-1].numel() / seconds

    if task.enumerable:
        model.eval()
        eval_prompts = task.prompts("test", 64, seed=0, distinct=True)
        answers = len(eval_prompts) * 10**task.num_digits
        seconds, _ = _timed(lambda: answer_distribution(model, task, eval_prompts), device, args.repeats)
        results["exact_eval_answers_per_s"] = answers / seconds
        seconds, _ = _timed(
            lambda: answer_distribution(model, task, eval_prompts, dtype=torch.float64), device, args.repeats
        )
        results["exact_eval_float64_answers_per_s"] = answers / seconds
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
