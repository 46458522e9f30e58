"""A long regeneration in parts.

:func:`regenerate` computes what the full report still needs (:func:`tailmiss.evidence.plan.plan`), the most-needed
first, until a time budget is spent, and archives each unit as it completes: a regeneration that takes hours is done
in several calls, each leaving the archive fuller (commit it between calls). *Most-needed*: the sections whose
missing units cost least come first, so that each call completes whole sections; within a section, starting points
before the runs that start from them, runs before what is read off them.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import time
from pathlib import Path

from tailmiss.evidence.plan import PENDING, Entry, Plan, kind_order, plan
from tailmiss.options import RunOptions
from tailmiss.studies.context import Context

__all__ = ["parse_duration", "priority", "regenerate", "retrain_for_weights", "Part"]

_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m(?:in)?)?\s*(?:(\d+(?:\.\d+)?)s)?\s*$")


def parse_duration(text: str) -> float:
    """Seconds of a duration written ``2h``, ``90m``, ``1h30m``, ``45s`` or a bare number of seconds (``ValueError``
    naming the text otherwise)."""
    text = str(text).strip()
    try:
        seconds = float(text)
    except ValueError:
        match = _DURATION.match(text)
        if not text or match is None or not any(match.groups()):
            raise ValueError(f"a duration is written like 2h, 90m, 1h30m or 45s, got {text!r}") from None
        hours, minutes, secs = (float(g) if g else 0.0 for g in match.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    if not seconds > 0:
        raise ValueError(f"a duration must be positive, got {text!r}")
    return seconds


def priority(found: Plan) -> list[Entry]:
    """The units to compute, most-needed first: section by section, the cheapest section to complete first (its
    known CPU seconds, then its units of unknown cost), the pending families' units after every section's, each unit
    once; within a section by kind (starting points, runs, then what is read off them), and within the pending
    families family by family, each one's units by kind, so that each finished family is whole in the archive."""
    sections = found.sections()
    order = sorted(
        (s for s, row in sections.items() if row["todo"]),
        key=lambda s: (s.endswith(PENDING), sections[s]["cpu_s"], sections[s]["unknown"]),
    )
    out: list[Entry] = []
    seen: set = set()
    for name in order:
        mine = [e for e in found.todo if name in e.needed.sections and e.needed.key not in seen]
        if name.endswith(PENDING):
            # family by family, so that a finished family's sweep result is computed before the next family's runs
            families = {id(e.spec.workload): 0 for e in mine}
            families = {k: i for i, k in enumerate(families)}
            mine.sort(key=lambda e: (families[id(e.spec.workload)], kind_order(e.spec.kind)))
        else:
            mine.sort(key=lambda e: kind_order(e.spec.kind))
        for entry in mine:
            seen.add(entry.needed.key)
            out.append(entry)
    return out


@dataclasses.dataclass
class Part:
    """What one :func:`regenerate` call did."""

    selected: int
    """Units it set out to compute."""
    archived: list[str]
    """Units it computed (or found computed) and archived."""
    left: Plan
    """The plan after it."""
    seconds: float


def _workload_jobs(entries: list[Entry], root: Path, options: RunOptions) -> dict:
    """The pool jobs (SFT runs, derived policies, RL runs) of the workloads that make ``entries``, by key (= unit
    name)."""
    jobs: dict = {}
    seen: set = set()
    for entry in entries:
        workload = entry.spec.workload
        if workload is None or id(workload) in seen:
            continue
        seen.add(id(workload))
        for job in workload.jobs(root, options):
            jobs.setdefault(job.key, job)
    return jobs


def _collect_job(sweep, root, options) -> None:
    """A pool job: a sweep's result from its finished runs."""
    from tailmiss.experiments.sweep import run_sweep

    run_sweep(sweep, root, options.replace(jobs=1))


def _bridge_job(sweep, sim_lr: float, root, options) -> None:
    """A pool job: the bridge of a sweep at ``sim_lr`` (from its result, collected if needed)."""
    from tailmiss.experiments.bridge import run_bridge
    from tailmiss.experiments.sweep import run_sweep

    run_bridge(run_sweep(sweep, root, options.replace(jobs=1)), root, sim_lr=sim_lr, options=options)


def _by_type_job(sweep, labels, root, options) -> None:
    """A pool job: a sweep's final models scored by prompt type."""
    from tailmiss.experiments.by_type import run_by_type

    run_by_type(sweep, root, tuple(labels), options)


def _attribution_job(sweep, key, root, options) -> None:
    """A pool job: one step's groups attributed at a sweep's chosen final models."""
    from tailmiss.experiments.attribution import run_attribution

    run_attribution(sweep, root, key["labels"], key["seeds"], key["batches"], key["sft_batches"], options)


def _shared_simulation_job(ladder, root, options) -> None:
    """A pool job: the shared simulator from a ladder's shared rung, its shared policy restored from the archive
    first when the cache lacks it."""
    from tailmiss import archive
    from tailmiss.experiments.shared_bridge import SIM_SEEDS, run_rung_simulation, shared_rung

    archive.ensure(Path(root) / shared_rung(ladder)[1].sft.name)
    run_rung_simulation(ladder, root, SIM_SEEDS, options.replace(progress=False))


def _simulation_job(config, cache, options) -> None:
    """A pool job: a simulation preset."""
    from tailmiss.sim.runner import run_cached

    run_cached(config, cache, options.replace(progress=False))


def retrain_for_weights(cfg, init, root, options=None) -> list[str]:
    """A pool job: an RL run trained again for its weights (its archived copy has none), a copy without them in the
    cache replaced; the files where it does not come out as its archived copy recorded (a CPU other than the one that
    trained it can round differently, and a sampled run then takes another path). It is never archived: the archived
    copy stays what the report and the units read off it read."""
    from tailmiss import archive
    from tailmiss.llm.train import train_rl

    path = Path(root) / cfg.name
    if not _trained_here(path, cfg):  # a run this host trained again earlier is kept: it would come out the same
        if path.is_dir():
            shutil.rmtree(path)
        archive.ensure(Path(init))
        train_rl(cfg, init, path, progress=False)
    return archive.differs_from(path) or []


def _trained_here(path: Path, cfg) -> bool:
    """Whether the cache folder ``path`` holds the finished run ``cfg`` with its weights, made by the running code."""
    from tailmiss.llm.checkpoint import CHECKPOINT, read_run_config
    from tailmiss.store import CorruptUnit, read_meta, same_code

    if not (path / CHECKPOINT).is_file():
        return False
    try:
        meta = read_meta(path)
        same_config = read_run_config(path / "config.toml") == cfg
    except (CorruptUnit, OSError, ValueError):
        return False
    code = (meta.get("provenance") or {}).get("code") or {}
    return bool(meta.get("complete")) and same_config and same_code("llm", code.get("fingerprint"))


def _jobs(entries: list[Entry], ctx: Context, options: RunOptions) -> list:
    """The pool jobs computing ``entries`` (in their order), each needing only the jobs of the list it waits on."""
    from tailmiss.experiments.pool import Job

    root, out = ctx.llm_cache, []
    workload = _workload_jobs(entries, root, options)
    keys = {e.spec.name for e in entries}
    for entry in entries:
        spec = entry.spec
        label = f"{spec.kind} {spec.name}"
        if spec.kind == "RL run" and "from its weights" in (entry.why or ""):
            args = (spec.config, root / spec.start, root)
            job = Job(spec.name, retrain_for_weights, args, (), workload[spec.name].label, None)
        elif spec.kind in ("SFT run", "derived policy", "RL run"):
            job = workload[spec.name]
        elif spec.kind == "sweep result":
            job = Job(spec.name, _collect_job, (spec.config, root), (), label, None, "collecting")
        elif spec.kind == "bridge result":
            args = (spec.config, spec.key["sim_lr"], root)
            job = Job(spec.name, _bridge_job, args, (), label, None, "simulating")
        elif spec.kind == "by-type scores":
            job = Job(spec.name, _by_type_job, (spec.config, spec.key["labels"], root), (), label, None, "scoring")
        elif spec.kind == "attribution":
            job = Job(spec.name, _attribution_job, (spec.config, spec.key, root), (), label, None, "attributing")
        elif spec.kind == "shared simulation":
            job = Job(spec.name, _shared_simulation_job, (spec.workload, root), (), label, None, "simulating")
        else:
            job = Job(spec.name, _simulation_job, (spec.config, ctx.cache_dir), (), label, None, "simulating")
        wanted = ({spec.start} if spec.start else set()) | set(spec.reads)
        out.append(dataclasses.replace(job, needs=tuple(sorted(k for k in wanted if k in keys))))
    return out


def _starts(todo: list[Entry], found: Plan) -> list[Entry]:
    """The archived starting points (SFT runs, derived policies, and theirs) of the runs in ``todo``: their jobs find
    them in the archive and restore them into the cache before the runs start from them."""
    by_name = {e.spec.name: e for e in found.entries if e.spec.tier == "llm"}
    chosen = {e.spec.name for e in todo}
    out: list[Entry] = []
    pending = [e.spec.start for e in todo if e.spec.start]
    while pending:
        name = pending.pop()
        entry = by_name.get(name)
        if entry is None or name in chosen:
            continue
        chosen.add(name)
        out.append(entry)
        if entry.spec.start:
            pending.append(entry.spec.start)
    return sorted(out, key=lambda e: kind_order(e.spec.kind))


def regenerate(
    seconds: float, ctx: Context | None = None, root: Path | None = None, say=None, workers: int | None = None
) -> Part:
    """Compute the most-needed units the full report lacks (:func:`priority`) while they fit in ``seconds`` of wall
    time, archiving each as it completes; the plan after it in :attr:`Part.left`.

    A job starts only if its expected cost (its recorded or estimated CPU seconds: one thread each) ends inside the
    budget; the jobs running when it is spent finish. ``workers``: processes (default ``ctx.options.jobs``, else
    one per usable core).
    """
    from tailmiss import archive
    from tailmiss.evidence.plan import archive_one
    from tailmiss.experiments.pool import Schedule, default_jobs, run_jobs

    started = time.monotonic()
    ctx = ctx or Context()
    root = archive.archive_root() if root is None else root
    if root is None:
        raise ValueError("no evidence archive: set $TAILMISS_EVIDENCE or create evidence/ in the checkout")
    say = say or (lambda line: None)
    found = plan(ctx, root, cache=ctx.llm_cache)
    todo = priority(found)
    options = ctx.options
    jobs = _jobs(_starts(todo, found) + todo, ctx, options)
    costs = {e.spec.name: e.cpu_s for e in todo}
    archived: list[str] = []

    specs = {e.spec.name: e.spec for e in found.entries}

    again = {j.key for j in jobs if j.fn is retrain_for_weights}

    def on_finish(job, value) -> None:
        if job.key in again:  # trained for its weights: the archived copy stays
            if value:
                say(f"{job.key}, trained again for its weights, differs from its archived copy in {', '.join(value)}")
            return
        spec = specs.get(job.key)
        if spec is not None and archive_one(spec, ctx, root, say):
            archived.append(job.key)

    count = workers or options.jobs or default_jobs(options.device, len(jobs))
    schedule = Schedule(until=started + seconds, cost=lambda job: costs.get(job.key), on_finish=on_finish)
    if jobs:
        run_jobs(jobs, max(1, min(count, len(jobs))), options, "units", schedule)
    return Part(len(todo), archived, plan(ctx, root, cache=ctx.llm_cache), time.monotonic() - started)
