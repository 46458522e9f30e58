"""The report's evidence: every stored unit the full report reads, what the archive holds of them, and what is left.

:func:`report_units` lists the units each ``##`` section of the full report reads (its families' runs and sweeps, the
simulations, the comparisons read off runs: :class:`~tailmiss.experiments.units.UnitSpec`), named before any of them
runs. :func:`plan` holds them against the evidence archive (:mod:`tailmiss.archive`): each is *archived* (its config,
its start and its code are the ones the report asks for) or has to be computed, and why, with what its recorded runs
took. :func:`archive_units` adds to the archive the units a command left current in the cache (``tailmiss repro``
does, after a full report).

Nothing here trains, simulates or loads a model: a plan reads configs and ``meta.json`` files, and verifies the
archived files' checksums.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections.abc import Iterable
from pathlib import Path

from tailmiss import archive as evidence
from tailmiss.experiments.units import KINDS, UnitSpec
from tailmiss.studies.context import Context

__all__ = [
    "PENDING",
    "Needed",
    "Entry",
    "Plan",
    "report_units",
    "judge_folder",
    "plan",
    "archive_units",
    "archive_one",
    "section_of",
]

PENDING = " (pending)"
"""What a section's name carries in a plan for the units of its pending families (:attr:`Needed.pending`)."""
CHECKPOINT = "checkpoint.pt"
_SEED = re.compile(r"-s\d+$")


@dataclasses.dataclass(frozen=True)
class Needed:
    """A unit the report reads, and the ``##`` sections (study names) that read it."""

    spec: UnitSpec
    sections: tuple[str, ...]
    pending: bool = False
    """Read by no section yet: a unit of a study's pending family (:attr:`tailmiss.studies.record.Study.pending`),
    whose section is named ``"<study>" + PENDING``."""

    @property
    def key(self) -> tuple[str, str]:
        return self.spec.tier, self.spec.name


def _study_units(s, ctx: Context) -> list[UnitSpec]:
    from tailmiss.experiments.units import simulation_unit, workload_units
    from tailmiss.sim.presets import preset, quick_name
    from tailmiss.studies.runs import resolve_family
    from tailmiss.studies.simulation.data import SIMULATED

    families = [*s.families, *(f for spec in s.figures for f in spec.llm)]
    simulated = s.simulated or any(spec.simulated for spec in s.figures)
    out: list[UnitSpec] = []
    for family in dict.fromkeys(families):
        workload = resolve_family(family, ctx)
        if workload is not None:
            out += workload_units(workload)
    if simulated:
        out += [simulation_unit(preset(quick_name(n) if ctx.quick else n)) for n in SIMULATED]
    if s.units is not None:
        out += s.units(ctx)
    return out


def report_units(ctx: Context | None = None) -> list[Needed]:
    """Every unit the report of ``ctx`` (default: the full report) reads, each once, with the ``##`` sections that
    read it (a ``###`` part's units count for its section), in the report's order."""
    from tailmiss.report.registry import STUDIES

    ctx = ctx or Context()
    specs: dict[tuple[str, str], UnitSpec] = {}
    readers: dict[tuple[str, str], list[str]] = {}
    for top in STUDIES:
        for s in (top, *top.parts):
            for spec in _study_units(s, ctx):
                key = (spec.tier, spec.name)
                specs.setdefault(key, spec)
                readers.setdefault(key, [])
                if top.name not in readers[key]:
                    readers[key].append(top.name)
    out = [Needed(specs[k], tuple(readers[k])) for k in specs]
    return out + _pending_units(ctx, set(specs))


def _pending_units(ctx: Context, read: set) -> list[Needed]:
    """The units of the studies' pending families that no section reads yet, each once, as ``"<study> (pending)"``."""
    from tailmiss.experiments.units import workload_units
    from tailmiss.report.registry import STUDIES
    from tailmiss.studies.runs import resolve_family

    out: dict[tuple[str, str], Needed] = {}
    for top in STUDIES:
        for s in (top, *top.parts):
            for family in s.pending:
                workload = resolve_family(family, ctx)
                for spec in workload_units(workload) if workload is not None else []:
                    key = (spec.tier, spec.name)
                    if key not in read and key not in out:
                        out[key] = Needed(spec, (top.name + PENDING,), pending=True)
    return list(out.values())


def section_of(entries: Iterable[Needed]) -> dict[str, list[Needed]]:
    """The needed units by section (a unit read by two sections counts in both)."""
    out: dict[str, list[Needed]] = {}
    for entry in entries:
        for name in entry.sections:
            out.setdefault(name, []).append(entry)
    return out


def _scope(scope):
    from tailmiss.store import _scope as named

    return scope if not isinstance(scope, str) else named(scope)


def judge_folder(spec: UnitSpec, folder: Path, meta: dict) -> str | None:
    """Why the unit folder ``folder`` (in the cache or the archive; ``meta``: its ``meta.json``) does not hold the unit
    ``spec`` asks for, or None when it does: the same config (and key fields), a finished run, and the code of the
    running process (its scope and its own modules, :func:`tailmiss.store.same_code`). The start is checked by
    :func:`plan`, which knows where the starting unit is."""
    from tailmiss.io import ConfigError
    from tailmiss.store import code_fingerprint, same_code

    try:
        config = spec.read_config(folder / "config.toml")
    except (ConfigError, OSError) as exc:
        return f"its config.toml is unreadable ({exc})"
    if config != spec.config:
        return "it holds another config"
    for field, value in spec.key.items():
        if meta.get(field) != value:
            return f"it holds another {field} ({meta.get(field)!r}, not {value!r})"
    if meta.get("kind") in ("sft", "rl") and not meta.get("complete"):
        return "it is not a finished run"
    code = (meta.get("provenance") or {}).get("code") or {}
    scope = _scope(spec.scope)
    if not same_code(scope, code.get("fingerprint")):
        return f"made by code {code.get('fingerprint')}, not by the running {code_fingerprint(scope)}"
    recorded = code.get("modules") or {}
    for module in spec.modules:
        if not same_code(module, recorded.get(module)):
            return f"made by other code of {module}"
    return None


@dataclasses.dataclass
class Entry:
    """One needed unit in a :class:`Plan`."""

    needed: Needed
    archived: evidence.ArchivedUnit | None
    why: str | None
    """None: the archive holds it current; else why it must be computed."""
    cpu_s: float | None = None
    """What it took when it was computed (its archived copy's record), or an estimate (:attr:`estimated`)."""
    estimated: bool = False

    @property
    def spec(self) -> UnitSpec:
        return self.needed.spec

    @property
    def todo(self) -> bool:
        return self.why is not None


@dataclasses.dataclass
class Plan:
    """The full report's units held against the archive."""

    entries: list[Entry]
    unused: list[evidence.ArchivedUnit]
    """Archived units no section reads (``tailmiss repro --prune`` removes them)."""
    root: Path | None

    @property
    def todo(self) -> list[Entry]:
        return [e for e in self.entries if e.todo]

    @property
    def missing(self) -> list[Entry]:
        """The units to compute that some section reads (:attr:`todo` less the pending families' units)."""
        return [e for e in self.todo if not e.needed.pending]

    def sections(self) -> dict[str, dict]:
        """Per section: ``units`` read, ``todo`` units to compute and their ``cpu_s`` (known part) and ``unknown``
        (units of no recorded cost)."""
        out: dict[str, dict] = {}
        for entry in self.entries:
            for name in entry.needed.sections:
                row = out.setdefault(name, {"units": 0, "todo": 0, "cpu_s": 0.0, "unknown": 0})
                row["units"] += 1
                if entry.todo:
                    row["todo"] += 1
                    if entry.cpu_s is None:
                        row["unknown"] += 1
                    else:
                        row["cpu_s"] += entry.cpu_s
        return out

    def complete(self, section: str) -> bool:
        """Whether the archive holds every unit ``section`` reads, current."""
        return all(not e.todo for e in self.entries if section in e.needed.sections)


def _start_key(meta: dict) -> str | None:
    """The SHA-256 of the starting checkpoint a unit records (an RL run's ``init_checkpoint``, a derived policy's
    ``source_checkpoint``)."""
    return meta.get("init_checkpoint") or meta.get("source_checkpoint")


def plan(ctx: Context | None = None, root: Path | None = None, cache: Path | None = None) -> Plan:
    """What the report of ``ctx`` (default: the full report) needs that the archive ``root`` (default:
    :func:`tailmiss.archive.archive_root`) lacks or holds stale, with why and at what cost.

    A unit is to be computed when the archive lacks it, holds it damaged, with another config, made by other code, or
    started from another checkpoint than its start; when its start is to be computed; when a unit it is read off is to
    be computed. A comparison read off runs' weights (a bridge, the by-type scores, an attribution) that is to be
    computed needs those runs retrained unless ``cache`` (the LLM cache, e.g. ``runs/llm``) holds them with their
    weights; a run trained again for its weights alone leaves what else is read off it as it is. Costs are the
    archived copy's recorded CPU seconds, else the median of its arm's other seeds (or its preset's units of its kind)
    in the archive, marked estimated.
    """
    ctx = ctx or Context()
    root = evidence.archive_root() if root is None else root
    needed = report_units(ctx)
    archived = {(u.tier, u.name): u for u in evidence.units(root)} if root is not None else {}
    entries = {n.key: Entry(n, archived.get(n.key), None) for n in needed}
    for entry in entries.values():
        entry.why = _archived_why(entry, archived)
    _propagate(entries, cache)
    for entry in entries.values():
        _cost(entry, entries)
    unused = [u for k, u in archived.items() if k not in entries]
    return Plan(list(entries.values()), unused, root)


def _archived_why(entry: Entry, archived: dict) -> str | None:
    unit, spec = entry.archived, entry.spec
    if unit is None:
        return "not archived"
    try:
        unit.verify()
    except evidence.ArchiveError as exc:
        return f"damaged: {exc}"
    why = judge_folder(spec, unit.path, unit.meta)
    if why is not None:
        return f"archived, but {why}"
    if spec.start is not None:
        start = archived.get(("llm", spec.start))
        if start is not None and _start_key(unit.meta) != start.checksums.get(CHECKPOINT):
            return f"archived, but started from another {spec.start} than the archived one"
    return None


def _propagate(entries: dict, cache: Path | None) -> None:
    """Mark the units whose start or whose inputs are recomputed, and the runs a recomputed comparison needs the
    weights of, until nothing changes."""
    by_name = {k[1]: e for k, e in entries.items() if k[0] == "llm"}
    changed = True
    while changed:
        changed = False
        for entry in entries.values():
            if entry.todo:
                continue
            start = by_name.get(entry.spec.start) if entry.spec.start else None
            if start is not None and start.todo:
                entry.why, changed = f"its start {start.spec.name} is recomputed", True
                continue
            redone = [r for r in entry.spec.reads if r in by_name and by_name[r].todo and not _for_weights(by_name[r])]
            if redone:
                entry.why, changed = f"{len(redone)} unit(s) it is read off are recomputed ({redone[0]}, ...)", True
        for entry in entries.values():
            if not (entry.todo and entry.spec.weights):
                continue
            for name in entry.spec.reads:
                run = by_name.get(name)
                if run is None or run.todo or run.spec.kind != "RL run" or _has_weights(cache, name, run):
                    continue
                run.why, changed = f"{entry.spec.name} {_WEIGHTS}", True


_WEIGHTS = "is recomputed from its weights, which the archive lacks"


def _for_weights(entry: Entry) -> bool:
    """Whether ``entry`` is a run trained again for its weights alone: its archived copy stays what the units read
    off it read (:func:`tailmiss.evidence.regenerate.retrain_for_weights`), so they are not recomputed."""
    return entry.spec.kind == "RL run" and _WEIGHTS in (entry.why or "")


def _has_weights(cache: Path | None, name: str, entry: Entry) -> bool:
    """Whether the cache holds the run ``name`` with the checkpoint its archived copy was written with."""
    from tailmiss.store import file_sha256

    if cache is None or entry.archived is None:
        return False
    path = Path(cache) / name / CHECKPOINT
    return path.is_file() and file_sha256(path) == entry.archived.checksums.get(CHECKPOINT)


def _arm(name: str) -> str:
    return _SEED.sub("", name)


def _cost(entry: Entry, entries: dict) -> None:
    """``entry.cpu_s``: its archived copy's record, else an estimate from its arm's other seeds or its preset's units
    of its kind."""
    if entry.archived is not None and entry.archived.cpu_s is not None:
        entry.cpu_s = entry.archived.cpu_s
        return
    for same in (
        lambda e: _arm(e.spec.name) == _arm(entry.spec.name),
        lambda e: e.spec.preset == entry.spec.preset and e.spec.kind == entry.spec.kind,
    ):
        known = [
            e.archived.cpu_s
            for e in entries.values()
            if e is not entry and e.archived is not None and e.archived.cpu_s is not None and same(e)
        ]
        if known:
            entry.cpu_s, entry.estimated = float(statistics.median(known)), True
            return


def archive_units(
    ctx: Context | None = None,
    root: Path | None = None,
    names: Iterable[str] | None = None,
    say=None,
    needed: Iterable[Needed] | None = None,
) -> list[str]:
    """Add to the archive every unit of the report (or those of ``names``) that the cache holds current and the
    archive lacks, holds stale, or holds with other files; return their names.

    Parameters
    ----------
    ctx : Context
        Whose report (default: the full report) and which caches (``ctx.llm_cache``, ``ctx.cache_dir``).
    root : Path
        The archive (default :func:`tailmiss.archive.archive_root`).
    names : iterable of str
        Only these units.
    say : callable
        Receives one line per unit archived.
    needed : iterable of Needed
        :func:`report_units` of ``ctx``, when the caller holds it already.
    """
    ctx = ctx or Context()
    root = evidence.archive_root() if root is None else root
    if root is None:
        raise ValueError("no evidence archive: set $TAILMISS_EVIDENCE or create evidence/ in the checkout")
    wanted = None if names is None else set(names)
    done = []
    for need in report_units(ctx) if needed is None else needed:
        if wanted is None or need.spec.name in wanted:
            if archive_one(need.spec, ctx, root, say):
                done.append(need.spec.name)
    return done


def archive_one(spec: UnitSpec, ctx: Context, root: Path, say=None) -> bool:
    """Archive the unit ``spec`` if the cache of ``ctx`` holds it current and the archive does not hold it with the
    same files; whether it did."""
    caches = {"llm": Path(ctx.llm_cache), "sim": Path(ctx.cache_dir)}
    folder = caches[spec.tier] / spec.name
    if not _current_in_cache(spec, folder, caches["llm"]):
        return False
    before = evidence.find(folder, root)
    unit = evidence.add(folder, root)
    if before is not None and before.checksums == unit.checksums:
        return False
    if say is not None:
        say(f"archived {unit.path} ({unit.stored_bytes / 1e3:.0f} kB)")
    return True


def _current_in_cache(spec: UnitSpec, folder: Path, llm_cache: Path) -> bool:
    """Whether the cache folder ``folder`` holds the unit ``spec`` asks for, made by the running code, started from
    the checkpoint the cache holds for its start."""
    from tailmiss.store import CorruptUnit, file_sha256, read_meta

    if not (folder / "meta.json").is_file():
        return False
    try:
        meta = read_meta(folder)
    except CorruptUnit:
        return False
    if judge_folder(spec, folder, meta) is not None:
        return False
    if spec.start is not None:
        start = llm_cache / spec.start / CHECKPOINT
        if not start.is_file() or _start_key(meta) != file_sha256(start):
            return False
    return True


def kind_order(kind: str) -> int:
    """Where ``kind`` comes in a regeneration (:data:`tailmiss.experiments.units.KINDS`)."""
    return KINDS.index(kind)
