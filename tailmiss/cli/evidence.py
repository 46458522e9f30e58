"""The evidence archive's modes of ``tailmiss repro``: ``--plan``, ``--budget``, ``--spot-check``, ``--prune`` and
``--verify`` (:mod:`tailmiss.evidence.plan`, :mod:`tailmiss.evidence.regenerate`, :mod:`tailmiss.evidence.verify`)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

__all__ = ["show_plan", "run_budget", "run_spot_check", "run_prune", "run_verify", "archive_written"]


def _cost(seconds: float | None, estimated: bool = False) -> str:
    if seconds is None:
        return "?"
    return f"{seconds:,.0f}" + (" (est.)" if estimated else "")


def _wall(cpu_s: float, jobs: int) -> str:
    minutes = cpu_s / max(jobs, 1) / 60
    return f"{minutes / 60:.1f} h" if minutes >= 90 else f"{minutes:.0f} min"


def show_plan(found, as_json: bool, jobs: int) -> None:
    """Print a :class:`~tailmiss.evidence.plan.Plan`: each unit to compute, the totals per section, the archived
    units no section reads."""
    from tailmiss import archive

    todo = found.todo
    sections = found.sections()
    if as_json:
        payload = {
            "archive": str(found.root) if found.root else None,
            "units": len(found.entries),
            "todo": [
                {
                    "unit": e.spec.name,
                    "tier": e.spec.tier,
                    "kind": e.spec.kind,
                    "preset": e.spec.preset,
                    "sections": list(e.needed.sections),
                    "why": e.why,
                    "cpu_s": e.cpu_s,
                    "estimated": e.estimated,
                }
                for e in todo
            ],
            "sections": sections,
            "unused": [f"{u.tier}/{u.name}" for u in found.unused],
        }
        typer.echo(json.dumps(payload, indent=2))
        return
    size = archive.size_on_disk(found.root) / 1e6 if found.root is not None else 0.0
    where = f"{found.root} ({size:.1f} MB)" if found.root is not None else "no archive"
    typer.echo(
        f"The full report reads {len(found.entries):,} units; the archive, {where}, holds "
        f"{len(found.entries) - len(todo):,} of them current."
    )
    if todo:
        typer.echo(f"To compute: {len(todo):,} units (unit [kind; preset; sections]: why; CPU seconds)")
        for e in todo:
            where = f"{e.spec.kind}; {e.spec.preset}; {', '.join(e.needed.sections)}"
            typer.echo(f"  {e.spec.name} [{where}]: {e.why}; {_cost(e.cpu_s, e.estimated)}")
    typer.echo("")
    typer.echo("By section (units read; to compute; their CPU seconds as recorded or estimated):")
    for name, row in sections.items():
        unknown = f", {row['unknown']} of unknown cost" if row["unknown"] else ""
        rest = f"{row['todo']:,} to compute, {row['cpu_s']:,.0f} CPU-s{unknown}" if row["todo"] else "complete"
        typer.echo(f"  {name:<12} {row['units']:>5,} units: {rest}")
    total = sum(e.cpu_s or 0.0 for e in todo)
    if todo:
        typer.echo(
            f"In all: {len(todo):,} units, {total:,.0f} CPU-s known (about {_wall(total, jobs)} on {jobs} "
            "processes); tailmiss repro --budget 2h computes the most-needed that fit and archives them."
        )
    else:
        typer.echo("Nothing to compute: tailmiss repro re-derives the report from the archive.")
    if found.unused:
        names = ", ".join(f"{u.tier}/{u.name}" for u in found.unused[:5])
        more = f" and {len(found.unused) - 5} more" if len(found.unused) > 5 else ""
        typer.echo(
            f"Archived but read by no section: {len(found.unused)} units ({names}{more}); "
            "tailmiss repro --prune removes them."
        )


def run_budget(seconds: float, ctx, jobs: int) -> None:
    """``--budget``: one part of a regeneration (:func:`tailmiss.evidence.regenerate.regenerate`)."""
    from tailmiss.evidence.plan import plan
    from tailmiss.evidence.regenerate import priority, regenerate

    before = priority(plan(ctx, cache=ctx.llm_cache))
    known = sum(e.cpu_s or 0.0 for e in before)
    typer.echo(
        f"The full report still needs {len(before):,} units ({known:,.0f} CPU-s known, about "
        f"{_wall(known, jobs)} on {jobs} processes); this part has {seconds / 3600:.2f} h.",
        err=True,
    )
    part = regenerate(seconds, ctx, say=lambda line: typer.echo(line, err=True), workers=jobs)
    left = part.left.todo
    rest = sum(e.cpu_s or 0.0 for e in left)
    typer.echo(
        f"This part archived {len(part.archived):,} units in {part.seconds / 60:.1f} min; "
        f"{len(left):,} remain ({rest:,.0f} CPU-s known, about {_wall(rest, jobs)} on {jobs} processes)."
    )
    if left:
        typer.echo("Commit evidence/ and run tailmiss repro --budget again for the next part.")
    else:
        typer.echo(
            "The archive is full: tailmiss repro re-derives the report from it; commit evidence/ and the report."
        )


def run_spot_check(count: int, seed: int | None, as_json: bool) -> None:
    """``--spot-check K``: archived runs trained again (:func:`tailmiss.evidence.spot_check.spot_check`)."""
    from tailmiss.evidence.spot_check import spot_check

    used, checks = spot_check(count, seed, say=lambda line: typer.echo(line, err=True))
    if as_json:
        typer.echo(json.dumps({"seed": used, "checks": [c.__dict__ for c in checks]}, indent=2, default=str))
        return
    typer.echo(f"Spot check of {len(checks)} archived runs (--seed {used} picks them again):")
    for c in checks:
        where = _hosts(c.archived_host, c.host)
        if c.same:
            typer.echo(f"  {c.name}: the same bit for bit ({where}; {_cost(c.archived_cpu_s)} -> {c.cpu_s:,.0f} CPU-s)")
            continue
        moved = "; ".join(
            f"{f}: {m['column']} moved by up to {m['max_abs']:.3g}" if "max_abs" in m else f"{f}: {m['what']}"
            for f, m in c.moved.items()
        )
        typer.echo(f"  {c.name}: differs ({where}): {moved}")
    same = sum(c.same for c in checks)
    typer.echo(f"{same} of {len(checks)} the same bit for bit.")


def _hosts(archived: dict | None, now: dict) -> str:
    def one(h):
        if not h:
            return "an unrecorded host"
        return f"{h.get('cpu')}, {h.get('cpu_capability')}, torch {h.get('torch')}, {h.get('threads')} thread(s)"

    then, here = one(archived), one({**now, "threads": 1})
    return f"archived on {then}" + ("" if then == here else f"; here {here}")


def run_prune(found) -> None:
    """``--prune``: remove the archived units no section reads."""
    from tailmiss import archive

    for unit in found.unused:
        archive.remove(unit)
        typer.echo(f"removed {unit.path}")
    typer.echo(f"pruned {len(found.unused)} archived units that no section reads")


def run_verify(report: Path, partial: bool, options, keep: Path | None) -> None:
    """``--verify``: re-derive the report from the archive and compare (:func:`tailmiss.evidence.verify.verify`)."""
    from tailmiss.evidence.verify import verify

    result = verify(report, partial=partial, options=options, keep=keep)
    for section, names in result.lacking.items():
        typer.echo(f"not re-derived: {section} (the archive lacks {len(names)} of its units, e.g. {names[0]})")
    for difference in result.differences:
        typer.echo(f"differs: {difference}")
    done = ", ".join(result.sections) or "no section"
    typer.echo(f"re-derived {done} from the evidence archive in {result.seconds:.0f} s")
    if result.differences:
        typer.echo(f"{report}: {len(result.differences)} difference(s) from the evidence's re-derivation")
        raise typer.Exit(1)
    if result.lacking and not partial:
        typer.echo(f"{report}: the archive lacks units of {len(result.lacking)} section(s) (tailmiss repro --plan)")
        raise typer.Exit(1)
    typer.echo(
        f"{report}: follows from the evidence archive" + (" (the sections re-derived)" if result.lacking else "")
    )


def archive_written(ctx, only: str | None, say) -> None:
    """After a report written from the full presets: add the units it read that the archive lacks (or holds stale)."""
    from tailmiss import archive
    from tailmiss.evidence.plan import archive_units, report_units

    if archive.archive_root() is None:
        return
    names = None
    if only is not None:
        names = [n.spec.name for n in report_units(ctx) if _top(only) in n.sections]
    added = archive_units(ctx, names=names)
    say(f"archived {len(added)} new or changed units in {archive.archive_root()}")


def _top(name: str) -> str:
    from tailmiss.report.registry import study

    s = study(name)
    return s.parent or s.name
