"""Simulator throughput: batched sweep vs one-run-at-a-time baseline vs the step's floor, with a per-op profile.

Action-updates per second = runs × actions × steps / wall time.

* **batched**: ``tailmiss.sim.simulate`` on the fgrpo-fig2 setup (all runs as one
  ``[runs, actions]`` tensor);
* **baseline**: what one writes first: for each run in turn, a ``[actions]``
  logit vector, ``torch.multinomial`` + ``bincount``, the log-prob surrogate
  through autograd and ``torch.optim.Adam``, step after step;
* **floor**: what any exact implementation of the step must do, timed in the
  same process on the same ``[runs, actions]`` shape: a softmax, one fused
  Adam step and one float64 prefix sum along each row (the CDF the exact
  sampler needs), per step;
* **ceiling**: a device-copy bandwidth measured in the same process, divided by
  the bytes an Adam step must move per action (read logits, grad, two moments;
  write logits, two moments: 7 values of the logit dtype). Sampling, softmax
  and metrics move more, so no implementation of this simulation reaches it.

Usage::

    python benchmarks/sim_throughput.py                    # reduced sweep: 17 N x 2 gamma x 1 seed x 10 steps
    python benchmarks/sim_throughput.py --steps 20 --profile   # + the per-op profile of the batched step
    python benchmarks/sim_throughput.py --device cuda --full   # the whole fgrpo-fig2 sweep
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from tailmiss.sim import preset, simulate
from tailmiss.sim.sampler import row_cdf


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def baseline(config, device: torch.device) -> float:
    """Seconds for the one-run-at-a-time implementation over every run of ``config``."""
    c = config.num_correct
    started = time.perf_counter()
    for n, gamma, seed in config.runs():
        gen = torch.Generator(device=device).manual_seed(seed)
        z0 = torch.zeros(config.num_actions, device=device)
        z0[:c] = config.correct_logit
        z0[0] = config.anchor_logit
        z = z0.clone().requires_grad_(True)
        opt = torch.optim.Adam([z], lr=config.lr)
        for _ in range(config.steps):
            logp = torch.log_softmax(z, 0)
            idx = torch.multinomial(logp.exp().detach(), n, replacement=True, generator=gen)
            counts = torch.bincount(idx, minlength=config.num_actions)
            x = counts[:c].sum()
            reward = torch.where(idx < c, config.reward_correct, config.reward_incorrect)
            adv = reward - reward.mean()
            g = (1 - x / n) ** gamma
            loss = -g * (adv * logp[idx]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    _sync(device)
    return time.perf_counter() - started


def floor_step(config, device: torch.device, repeats: int = 10) -> float:
    """Seconds per step of softmax + fused Adam + one row-wise float64 prefix sum on ``[runs, actions]``.

    Each at its fastest here: the softmax into the probabilities, the prefix
    sum by :func:`tailmiss.sim.sampler.row_cdf` (a thread pool of per-row
    scans, 4-8x faster on the CPU than one ``torch.cumsum`` of the matrix with
    a float64 result) into a reused buffer, one fused Adam step.
    """
    dtype = getattr(torch, config.dtype)
    z = torch.zeros(config.num_runs, config.num_actions, device=device, dtype=dtype, requires_grad=True)
    z.grad = torch.randn_like(z)
    opt = torch.optim.Adam([z], lr=config.lr, fused=True)
    cdf = torch.empty(z.shape, dtype=torch.float64, device=device)

    def one() -> None:
        with torch.no_grad():
            p = torch.softmax(z, dim=1)
            row_cdf(p, out=cdf)
        opt.step()

    one()
    _sync(device)
    started = time.perf_counter()
    for _ in range(repeats):
        one()
    _sync(device)
    return (time.perf_counter() - started) / repeats


def profile_table(config, device: torch.device, rows: int = 18) -> str:
    """torch.profiler's self-time table of ``config`` (the batched step), top ``rows`` ops."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        simulate(config, device=device, progress=False)
        _sync(device)
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=rows)


def copy_bandwidth(device: torch.device, numel: int, dtype: torch.dtype, repeats: int = 10) -> float:
    """Bytes per second of ``dst.copy_(src)`` (read + write)."""
    src = torch.randn(numel, device=device).to(dtype)
    dst = torch.empty_like(src)
    dst.copy_(src)
    _sync(device)
    started = time.perf_counter()
    for _ in range(repeats):
        dst.copy_(src)
    _sync(device)
    elapsed = time.perf_counter() - started
    return 2 * src.element_size() * numel * repeats / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--full", action="store_true", help="the whole fgrpo-fig2 sweep (17 N x 2 gamma x 4 seeds)")
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default: 1000 full, 10 reduced)")
    parser.add_argument("--group-sizes", type=int, nargs="+", default=None, help="default: the preset's 2..2^17")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="reduced sweep seeds")
    parser.add_argument("--actions", type=int, default=128_000)
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON line instead of text")
    parser.add_argument("--profile", action="store_true", help="also print the per-op profile of the batched step")
    args = parser.parse_args()

    device = torch.device(args.device)
    config = preset("fgrpo-fig2").replace(num_actions=args.actions)
    if not args.full:  # reduced: every group size and both gammas, fewer seeds and steps
        config = config.replace(group_sizes=args.group_sizes or config.group_sizes, seeds=args.seeds)
    config = config.replace(steps=args.steps or (1000 if args.full else 10))
    updates = config.num_runs * config.num_actions * config.steps

    simulate(config.replace(steps=2), device=device, progress=False)  # warm-up (allocator, kernels)
    _sync(device)
    started = time.perf_counter()
    simulate(config.replace(steps=2), device=device, progress=False)
    _sync(device)
    two_steps_s = time.perf_counter() - started
    started = time.perf_counter()
    simulate(config, device=device, progress=False)
    _sync(device)
    batched_s = time.perf_counter() - started
    # a step once running: the difference takes out the set-up (keys, state) and the final logged step
    step_s = (batched_s - two_steps_s) / (config.steps - 2) if config.steps > 2 else batched_s / config.steps

    base_s = None if args.no_baseline else baseline(config, device)
    floor_s = floor_step(config, device)
    # at least 256 MiB so that caches do not flatter the bandwidth
    numel = max(config.num_runs * config.num_actions, 2**26)
    bandwidth = copy_bandwidth(device, numel, getattr(torch, config.dtype))
    bytes_per_update = 7 * torch.finfo(getattr(torch, config.dtype)).bits // 8
    ceiling = bandwidth / bytes_per_update

    report = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu x{torch.get_num_threads()}",
        "runs": config.num_runs,
        "actions": config.num_actions,
        "steps": config.steps,
        "group_sizes": list(config.group_sizes),
        "batched_s": round(batched_s, 3),
        "batched_updates_per_s": updates / batched_s,
        "baseline_s": None if base_s is None else round(base_s, 3),
        "baseline_updates_per_s": None if base_s is None else updates / base_s,
        "speedup_vs_baseline": None if base_s is None else base_s / batched_s,
        "step_ms": 1e3 * step_s,
        "floor_step_ms": 1e3 * floor_s,
        "step_over_floor": step_s / floor_s,
        "copy_bandwidth_GBps": bandwidth / 1e9,
        "ceiling_updates_per_s": ceiling,
        "fraction_of_ceiling": updates / batched_s / ceiling,
    }
    if args.json:
        print(json.dumps(report))
        return
    print(f"device                 {report['device']}")
    print(f"sweep                  {config.num_runs} runs x {config.num_actions} actions x {config.steps} steps")
    print(f"batched                {batched_s:8.2f} s  {report['batched_updates_per_s']:.3e} action-updates/s")
    if base_s is not None:
        print(f"one run at a time      {base_s:8.2f} s  {report['baseline_updates_per_s']:.3e} action-updates/s")
        print(f"speed-up               {report['speedup_vs_baseline']:.2f}x")
    print(f"step                   {report['step_ms']:8.1f} ms (running, log every {config.log_every} steps)")
    print(f"floor step             {report['floor_step_ms']:8.1f} ms (softmax + fused Adam + row-wise float64 cumsum)")
    print(f"step / floor           {report['step_over_floor']:.2f}x")
    print(f"copy bandwidth         {report['copy_bandwidth_GBps']:.1f} GB/s")
    print(f"Adam-traffic ceiling   {ceiling:.3e} action-updates/s ({bytes_per_update} B per action-update)")
    print(f"fraction of ceiling    {report['fraction_of_ceiling']:.3f}")
    if args.profile:
        print()
        print(profile_table(config.replace(steps=min(config.steps, 10)), device))


if __name__ == "__main__":
    main()
