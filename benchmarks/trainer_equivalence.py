"""Retrain cached LLM runs with the running trainer and compare them with the cached ones, bit for bit.

A change to ``tailmiss/llm`` changes the trainer's code fingerprint, so every cached run reads as stale
(:mod:`tailmiss.store`). When the change is meant to keep every number (a restructuring), this script is the
evidence for declaring the new fingerprint equivalent to the one it replaces (``tailmiss.store.EQUIVALENT``):

1. every finished run under ``ROOT/llm`` made by the replaced code (``--replaces``) is described by the code paths
   its config takes (method, focal weight, mini-batches, dynamic sampling, KL, entropy, reward transform, optimiser
   and schedule, training pool and its order, sampled or exact evaluation, per-prompt evaluations, sampling
   settings, loss overrides, task, policy kind, ...);
2. a greedy cover picks runs, cheapest first per newly covered path, until every path of every run is covered
   (plus ``--sft`` transformer SFT runs, the cheapest of each task);
3. each picked run is retrained from its config (an RL run from the cached SFT run it started from) into a
   temporary folder, and compared: ``history.csv`` and ``prompt_evals.npz`` byte for byte, every tensor and number
   of ``checkpoint.pt`` exactly (its ``config`` entry as a config, the layout may differ), and the config itself.
   A run restored from the evidence archive has no weights (the archive keeps none): its ``checkpoint.pt``
   comparison is recorded as ``null``, not as a pass;
4. with ``--resumed K``, the K cheapest picked RL runs of each policy kind that checkpoint before their last step
   are trained again, stopped after their first checkpoint and resumed from it (``train_rl(..., resume=True)``),
   and compared the same way;
5. with ``--stacks``, up to four runs of distinct settings that can train as one stack
   (:func:`tailmiss.experiments.run_stack.stack_key`) are trained again as one stack
   (:func:`~tailmiss.experiments.run_stack.train_rl_stack`) and each run compared the same way.

The record (``--out``, JSON) lists every picked run, its paths, its time and each comparison.

    python benchmarks/trainer_equivalence.py --root runs --replaces 1b2f56e5f964b4d3 --jobs 2 --resumed 1 \\
        --stacks --out benchmarks/trainer_equivalence/<new fingerprint>.json

Runs do not come out bit for bit on another CPU (the archive's runs were trained on an Intel Xeon; on an AMD EPYC
none of 20 retrained runs was the same, final metrics moved by up to 0.003), so compare on one host: first the
replaced code (a checkout of it put first on ``PYTHONPATH``) trains the cover again and keeps it (``--keep``), then
the newer code compares itself with those runs:

    PYTHONPATH=../old python benchmarks/equivalence_runs.py ../old-runs   # the paths the archive's runs lack
    PYTHONPATH=../old python benchmarks/trainer_equivalence.py --root runs --replaces <archived runs' fingerprint> \\
        --keep ../old-runs --out /tmp/old.json   # its comparisons with the archive do not matter
    python benchmarks/trainer_equivalence.py --root ../old-runs --replaces <replaced fingerprint> --resumed 1 \\
        --stacks --out benchmarks/trainer_equivalence/<new fingerprint>.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path


def _features(run: Path, meta: dict) -> set[str]:
    from tailmiss.llm.checkpoint import read_run_config

    cfg = read_run_config(run / "config.toml")
    if meta["kind"] == "sft":
        o = cfg.optim
        return {
            f"sft-task={type(cfg.task).__name__}",
            f"sft-schedule={o.lr_schedule}",
            f"sft-warmup={o.warmup_steps > 0}",
        }
    init = read_run_config(Path(meta["init"]) / "config.toml")
    o = cfg.optim
    return {
        f"task={type(init.task).__name__}",
        f"policy={init.model.kind}",
        f"method={cfg.method}",
        f"focal={cfg.gamma > 0}",
        f"minibatches>1={cfg.minibatches > 1}",
        f"dynamic_sampling={cfg.dynamic_sampling}",
        f"kl={cfg.kl_coef > 0}",
        f"entropy={cfg.entropy_coef > 0}",
        f"reward_transform={cfg.reward_transform}",
        f"optimizer={o.kind}",
        f"schedule={o.lr_schedule}",
        f"warmup={o.warmup_steps > 0}",
        f"weight_decay={o.weight_decay > 0}",
        f"pool={cfg.train_prompts > 0}",
        f"pool_order={cfg.pool_order if cfg.train_prompts else '-'}",
        f"eval_samples={cfg.eval_samples > 0}",
        f"eval_answers={cfg.eval_answers}",
        f"eval_per_prompt={cfg.eval_per_prompt}",
        f"eval_split={cfg.eval_split}",
        f"eval_seed={cfg.eval_seed is not None}",
        f"rollout_sampling={cfg.rollout_sampling}",
        f"sampling={(cfg.temperature, cfg.top_k, cfg.top_p)}",
        f"advantage={cfg.advantage}",
        f"loss={sorted(cfg.loss.to_dict().items())}",
        f"group_size={cfg.group_size}",
    }


def _candidates(root: Path, replaces: str) -> list[dict]:
    out = []
    for run in sorted((root / "llm").iterdir()):
        try:
            meta = json.loads((run / "meta.json").read_text())
        except (OSError, ValueError):
            continue
        code = (meta.get("provenance") or {}).get("code") or {}
        if not meta.get("complete") or code.get("fingerprint") != replaces or code.get("scope") != "llm":
            continue
        if meta["kind"] == "sft" and "derived_from" in meta:
            continue  # a table or factorized policy derived from a transformer: built, not trained
        try:
            features = _features(run, meta)
        except (OSError, ValueError, KeyError):
            continue
        cost, modules = float(meta.get("elapsed_s", 1e9)), code.get("modules") or {}
        out.append({"run": str(run), "kind": meta["kind"], "cost": cost, "paths": features, "modules": modules})
    return out


def _family(name: str) -> str:
    """A run's sweep: its name without the variant and seed (``paper-protocol-grpo-n8-g0-s3`` -> ``paper-protocol``)."""
    match = re.match(r"^(.*?)-(grpo|dapo|cispo|drgrpo)-n\d+", name)
    return match.group(1) if match else name


def pick(candidates: list[dict], sft: int, per_family: int) -> list[dict]:
    """Greedy cover of the RL runs' paths (cheapest per newly covered path first), ``per_family`` runs drawn at
    random (seed 0) from each sweep's RL runs, and the ``sft`` cheapest trained SFT runs of each task."""
    rl = [c for c in candidates if c["kind"] == "rl"]
    need = set().union(*(c["paths"] for c in rl)) if rl else set()
    chosen = []
    while need:
        best = max(rl, key=lambda c: (len(c["paths"] & need) / max(c["cost"], 0.1), -c["cost"]))
        if not best["paths"] & need:
            break
        chosen.append(best)
        need -= best["paths"]
    families: dict[str, list[dict]] = {}
    for c in rl:
        families.setdefault(_family(Path(c["run"]).name), []).append(c)
    rng = random.Random(0)
    for name in sorted(families):
        rest = [c for c in families[name] if c not in chosen]
        chosen += rng.sample(rest, min(per_family, len(rest)))
    by_task: dict[str, list[dict]] = {}
    for c in candidates:
        if c["kind"] == "sft":
            by_task.setdefault(next(p for p in c["paths"] if p.startswith("sft-task")), []).append(c)
    for runs in by_task.values():
        chosen += sorted(runs, key=lambda c: c["cost"])[:sft]
    return chosen


def _same(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return a == b


class _Stop(Exception):
    """Raised by the step hook to stop a run after its first checkpoint (the resume check)."""


def _compare(src_path: Path, out: Path, kind: str) -> dict:
    """``out`` (trained now) against ``src_path`` (the replaced code's run): files byte for byte, configs as
    configs, checkpoints tensor for tensor (``None`` where ``src_path`` keeps no weights: an archived run)."""
    import torch

    from tailmiss.llm.checkpoint import read_run_config, run_config
    from tailmiss.store import file_sha256

    result = {"history.csv": file_sha256(src_path / "history.csv") == file_sha256(out / "history.csv")}
    if (src_path / "prompt_evals.npz").is_file():
        result["prompt_evals.npz"] = file_sha256(src_path / "prompt_evals.npz") == file_sha256(out / "prompt_evals.npz")
    result["config"] = read_run_config(src_path / "config.toml") == read_run_config(out / "config.toml")
    if not (src_path / "checkpoint.pt").is_file():
        result["checkpoint config"] = result["checkpoint.pt"] = None  # the archive keeps no weights
        return result
    old = torch.load(src_path / "checkpoint.pt", map_location="cpu", weights_only=True)
    new = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=True)
    result["checkpoint config"] = run_config(kind, old.pop("config")) == run_config(kind, new.pop("config"))
    old.pop("code"), new.pop("code")
    result["checkpoint.pt"] = _same(old, new)
    return result


def check(src: str, resumed: bool = False, keep: str | None = None) -> dict:
    """Retrain ``src`` with the running code into a temporary folder (``resumed``: stopped after its first
    checkpoint and resumed from it; ``keep``: into ``keep/llm/<name>``, kept); compare."""
    import shutil

    if keep is None:
        with tempfile.TemporaryDirectory() as tmp:
            return _check_into(Path(src), Path(tmp) / Path(src).name, resumed)
    out = Path(keep) / "llm" / Path(src).name
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    return _check_into(Path(src), out, resumed)


def _check_into(src_path: Path, out: Path, resumed: bool) -> dict:
    import torch

    torch.set_num_threads(1)
    from tailmiss.llm.checkpoint import read_run_config
    from tailmiss.llm.sft import train_sft
    from tailmiss.llm.train import train_rl

    meta = json.loads((src_path / "meta.json").read_text())
    started = time.perf_counter()
    kind = meta["kind"]
    cfg = read_run_config(src_path / "config.toml")
    if kind == "rl" and resumed:
        stop_after = cfg.checkpoint_every - 1

        def stop(step: int) -> None:
            if step == stop_after:
                raise _Stop

        try:
            train_rl(cfg, meta["init"], out, device="cpu", progress=False, on_step=stop)
        except _Stop:
            pass
        train_rl(cfg, meta["init"], out, device="cpu", resume=True, progress=False)
        how = f"resumed at step {cfg.checkpoint_every}"
    elif kind == "rl":
        train_rl(cfg, meta["init"], out, device="cpu", progress=False)
        how = "alone"
    else:
        train_sft(cfg, out, device="cpu", progress=False)
        how = "alone"
    result = _compare(src_path, out, kind)
    return {"run": src_path.name, "kind": kind, "how": how, "s": round(time.perf_counter() - started, 1), **result}


def check_stack(srcs: list[str]) -> list[dict]:
    """Retrain the RL runs ``srcs`` as one stack (:func:`tailmiss.experiments.run_stack.train_rl_stack`); compare
    each."""
    import torch

    torch.set_num_threads(1)
    from tailmiss.experiments.run_stack import train_rl_stack
    from tailmiss.llm.checkpoint import read_run_config

    paths = [Path(s) for s in srcs]
    metas = [json.loads((p / "meta.json").read_text()) for p in paths]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        outs = [Path(tmp) / p.name for p in paths]
        cfgs = [read_run_config(p / "config.toml") for p in paths]
        train_rl_stack(cfgs, [m["init"] for m in metas], outs, device="cpu", progress=False)
        seconds = round(time.perf_counter() - started, 1)
        how = f"in a stack of {len(paths)}"
        return [
            {"run": p.name, "kind": "rl", "how": how, "s": seconds, **_compare(p, o, "rl")} for p, o in zip(paths, outs)
        ]


def _resumable(chosen: list[dict], count: int) -> list[dict]:
    """For each policy kind, the ``count`` cheapest picked RL runs that write a checkpoint before their last step."""
    from tailmiss.llm.checkpoint import read_run_config

    def early(c: dict) -> bool:
        cfg = read_run_config(Path(c["run"]) / "config.toml")
        return c["kind"] == "rl" and cfg.checkpoint_every < cfg.steps

    by_policy: dict[str, list[dict]] = {}
    for c in sorted((c for c in chosen if early(c)), key=lambda c: c["cost"]):
        by_policy.setdefault(next(p for p in c["paths"] if p.startswith("policy=")), []).append(c)
    return [c for runs in by_policy.values() for c in runs[:count]]


def _stacks(candidates: list[dict], most: int = 4) -> list[list[dict]]:
    """One stack to train again: of the RL runs that can stack (:func:`tailmiss.experiments.run_stack.stack_key`),
    the key whose runs have the most distinct settings (the name without its seed), up to ``most`` of them, the
    cheapest run of each setting."""
    from tailmiss.experiments.run_stack import stack_key
    from tailmiss.llm.checkpoint import read_run_config

    groups: dict = {}
    for c in sorted(candidates, key=lambda c: c["cost"]):
        if c["kind"] != "rl":
            continue
        meta = json.loads((Path(c["run"]) / "meta.json").read_text())
        key = stack_key(read_run_config(Path(c["run"]) / "config.toml"), meta["init"])
        setting = re.sub(r"-s\d+$", "", Path(c["run"]).name)
        if key is not None and setting not in groups.setdefault(key, {}):
            groups[key][setting] = c
    best = max(groups.values(), key=lambda g: (min(len(g), most), -sum(c["cost"] for c in list(g.values())[:most])))
    return [list(best.values())[:most]] if len(best) > 1 else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path("runs"))
    parser.add_argument("--replaces", required=True, help="the fingerprint of the code that made the cached runs")
    parser.add_argument("--sft", type=int, default=1, help="trained SFT runs per task")
    parser.add_argument("--per-family", type=int, default=1, help="RL runs drawn at random from each sweep")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--resumed", type=int, default=0, help="picked RL runs per policy kind also trained stopped and resumed"
    )
    parser.add_argument("--stacks", action="store_true", help="also train the picked runs that can stack as stacks")
    parser.add_argument("--dry-run", action="store_true", help="list the picked runs and stop")
    parser.add_argument(
        "--keep", type=Path, help="keep the picked runs trained again, in KEEP/llm: a root of runs made by this code"
    )
    args = parser.parse_args()
    from tailmiss.store import OWN_SCOPE, code_fingerprint, module_fingerprint

    candidates = _candidates(args.root, args.replaces)
    chosen = pick(candidates, args.sft, args.per_family)
    paths = sorted(set().union(*(c["paths"] for c in candidates)))
    print(
        f"{len(candidates)} runs by {args.replaces}; {len(chosen)} picked, "
        f"{sum(c['cost'] for c in chosen):.0f} s of training; {len(paths)} paths",
        flush=True,
    )
    for c in chosen:
        print(f"  {c['kind']} {Path(c['run']).name} ({c['cost']:.0f} s)", flush=True)
    resumed = _resumable(chosen, args.resumed)
    stacks = _stacks(candidates) if args.stacks else []
    for c in resumed:
        print(f"  resumed: {Path(c['run']).name}", flush=True)
    for group in stacks:
        print(f"  stack of {len(group)}: {', '.join(Path(c['run']).name for c in group)}", flush=True)
    if args.dry_run:
        return
    results = []
    total = len(chosen) + len(resumed) + sum(len(g) for g in stacks)
    with ProcessPoolExecutor(args.jobs) as pool:
        keep = str(args.keep) if args.keep else None
        futures = {pool.submit(check, c["run"], False, keep): [c] for c in chosen}
        futures |= {pool.submit(check, c["run"], True): [c] for c in resumed}
        futures |= {pool.submit(check_stack, [c["run"] for c in g]): g for g in stacks}
        for future in as_completed(futures):
            done = future.result()
            for row, c in zip(done if isinstance(done, list) else [done], futures[future]):
                row["paths"] = sorted(c["paths"])
                results.append(row)
                flags = [k for k, v in row.items() if v is False]
                verdict = "same" if not flags else "DIFFERS: " + ", ".join(flags)
                print(f"[{len(results)}/{total}] {row['run']} ({row['how']}): {verdict} ({row['s']} s)", flush=True)
    record = {
        "fingerprint": code_fingerprint("llm"),
        "replaces": args.replaces,
        "modules": {  # each task module of its own scope: its code now, and what the runs recorded
            m: {
                "fingerprint": module_fingerprint(m),
                "replaces": sorted({c["modules"][m] for c in candidates if m in c["modules"]}),
            }
            for m in OWN_SCOPE
        },
        "runs_by_replaced_code": len(candidates),
        "paths": paths,
        "covered": sorted(set().union(*(set(r["paths"]) for r in results))),
        "all_same": all(v is not False for r in results for v in r.values()),
        "threads": 1,
        "no_weights": sum(r.get("checkpoint.pt") is None for r in results),
        "results": sorted(results, key=lambda r: (r["run"], r["how"])),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp, args.out)
    print(f"all same: {record['all_same']}; written {args.out}")
    sys.exit(0 if record["all_same"] else 1)


if __name__ == "__main__":
    main()
