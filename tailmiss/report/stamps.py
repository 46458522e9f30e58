"""Stamps: what made each section of ``paper_repro.md`` and each figure beside it, and ``tailmiss repro --check``.

A stamp records the code fingerprint of the producing code (the import closure of the section's report module or
the figure's modules, digested as :mod:`tailmiss._fingerprint` does for the result store), a digest of every file in
it, the presets the section or figure reads with their seeds and a digest of each preset's config, the package
version and the date. Each ``##`` section of the report ends with one visible line naming its code, presets, seeds,
version and date; the whole record sits beside the report in ``<report>.stamps.json`` (the figures' with the SHA-256
of each written file). :func:`check_stamps` recomputes every stamp from the current code and presets, trains and
simulates nothing, and lists the stale sections and figures with the files and presets that changed.

A stamp also records the fingerprint of each unit scope its code reaches (the trainer's and the simulator's,
:data:`tailmiss._fingerprint.SCOPES`, and each :data:`~tailmiss._fingerprint.OWN_SCOPE` task module). A changed file
inside those scopes does not stale the stamp when every scope holding it is declared to compute what the stamp's
code did (:data:`tailmiss._fingerprint.EQUIVALENT`, each declaration resting on runs retrained bit for bit): the
runs the section read are then current too, so its numbers are the ones the new code would write. Any other change,
or an undeclared one, stales it as before.
"""

from __future__ import annotations

import datetime
import hashlib
import inspect
import json
from dataclasses import dataclass
from pathlib import Path

from tailmiss.io import atomic_write
from tailmiss.report.stamp_scopes import excused, forget, scopes_of
from tailmiss.studies.context import Context
from tailmiss.studies.ledger import LEDGER_HEADING

__all__ = [
    "STAMP_LINE",
    "stamps_path",
    "read_stamps",
    "write_stamps",
    "section_stamp",
    "figure_stamp",
    "stamp_report",
    "enclosing_heading",
    "known_section",
    "check_stamps",
    "record_scopes",
    "Stale",
]

STAMP_LINE = "*Made by*"
"""How the visible stamp line at the end of each ``##`` section starts."""

_NOT_CLAIMS = ("__init__.py", "section.py", "figures.py", "data.py")


def _studies():
    from tailmiss.report.registry import STUDIES

    return STUDIES


def _ledger_roots() -> list[Path]:
    """The ledger's code: the catalogue, the noise rule and every study's claims modules (a change to any verdict
    rule stales the ledger, whose verdicts come from every section's rules)."""
    studies = _package() / "studies"
    claims = [p for p in sorted(studies.glob("*/*.py")) if p.name not in _NOT_CLAIMS]
    return [studies / "ledger.py", studies / "claims.toml", studies / "rule.py", *claims]


def _in_package(function) -> Path:
    """The file defining ``function``, relative to the package folder it was imported from."""
    import tailmiss

    return Path(inspect.getsourcefile(function)).resolve().relative_to(Path(tailmiss.__file__).parent.resolve())


def _rule(heading: str):
    """``(code roots, its study)`` of the ``##`` section ``heading`` (the ledger's study: None), or None."""
    if heading.startswith(LEDGER_HEADING):
        return _ledger_roots(), None
    for s in _studies():
        if heading.startswith(s.heading):
            return [_package() / _in_package(s.write)], s
    return None


def stamps_path(report: str | Path) -> Path:
    """Where the stamps of ``report`` live: ``paper_repro.md`` -> ``paper_repro.stamps.json`` beside it."""
    report = Path(report)
    return report.with_name(report.stem + ".stamps.json")


def _package() -> Path:
    from tailmiss import store

    return store._PACKAGE


def _code(roots: list[Path]) -> dict:
    """The fingerprint of the import closure of ``roots`` and a digest of each of its files; a root that is no Python
    module (the ledger's claims catalogue) counts by its bytes."""
    from tailmiss import store
    from tailmiss._fingerprint import file_digest, import_closure, source_digest
    from tailmiss.experiments.sweep_result import SCOPE

    package = _package()  # numbers as the units see them: less what holds none (the presets only name runs)
    data = [p for p in roots if p.suffix != ".py"]
    files = import_closure(
        package, [p for p in roots if p not in data], [package / p for p in store.NO_NUMBERS + SCOPE.no_numbers]
    )
    per_file = {path.relative_to(package).as_posix(): file_digest(path) for path in files}
    per_file.update({path.relative_to(package).as_posix(): _bytes_digest(path) for path in data})
    code = source_digest(files)
    if data:
        code = hashlib.sha256((code + "".join(_bytes_digest(p) for p in data)).encode()).hexdigest()[:16]
    return {"code": code, "files": per_file, "scopes": scopes_of(per_file)}


def _bytes_digest(path: Path) -> str:
    """SHA-256 (hex, 16 digits) of a data file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _presets(families, simulated: bool, ctx: Context) -> dict:
    """``name -> {"seeds": [...], "config": digest}`` of every preset read (quick variants in quick mode)."""
    from tailmiss.sim.presets import preset, quick_name
    from tailmiss.studies.runs import resolve_family
    from tailmiss.studies.simulation.data import SIMULATED

    configs = [c for c in (resolve_family(f, ctx) for f in families) if c is not None]
    if simulated:
        configs += [preset(quick_name(n) if ctx.quick else n) for n in SIMULATED]
    return {
        c.name: {
            "seeds": [int(s) for s in getattr(c, "seeds", ())],
            "config": hashlib.sha256(repr(c).encode()).hexdigest()[:16],
        }
        for c in configs
    }


def _today() -> str:
    from tailmiss import __version__

    return f"tailmiss {__version__} on {datetime.datetime.now(datetime.timezone.utc).date().isoformat()}"


def known_section(heading: str) -> bool:
    """Whether :func:`section_stamp` knows what makes the ``##`` section ``heading``."""
    return _rule(heading) is not None


def section_stamp(heading: str, ctx: Context, deferred: tuple[str, ...] = ()) -> dict:
    """The stamp of the report section whose ``##`` heading starts with a study's heading (or the ledger's).

    A study the first look defers (``deferred``) reads none of its presets (only its note is written); nor do its
    deferred parts.
    """
    rule = _rule(heading)
    if rule is None:
        raise ValueError(f"no stamp rule for the section {heading!r}")
    roots, study = rule
    families: list[str] = []
    if study and study.name not in deferred:
        for s in (study, *study.parts):
            families += [f for f in s.families if s.name not in deferred]
    return {
        **_code(roots),
        "presets": _presets(list(dict.fromkeys(families)), study is not None and study.simulated, ctx),
        "made": _today(),
    }


def figure_stamp(spec, ctx: Context, paths: list[Path]) -> dict:
    """The stamp of one rendered figure (a :class:`~tailmiss.studies.figure.FigureSpec`) and its ``paths``."""
    roots = sorted({Path(inspect.getsourcefile(f)).resolve() for f in (spec.data, spec.plot)})
    return {
        **_code(roots),
        "presets": _presets(spec.llm, spec.simulated, ctx),
        "made": _today(),
        "sha256": {p.suffix[1:]: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths},
    }


def _seeds(seeds: list[int]) -> str:
    if not seeds:
        return "no seeds"
    if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"seeds {seeds[0]}–{seeds[-1]}"
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def _line(stamp: dict) -> str:
    presets = "; ".join(f"`{n}` ({_seeds(p['seeds'])})" for n, p in sorted(stamp["presets"].items()))
    return (
        f"{STAMP_LINE} {stamp['made']}, code `{stamp['code']}`"
        + (f", presets {presets}" if presets else "")
        + "; `tailmiss repro --check` compares it with the current code."
    )


def _sections(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, heading)`` line ranges of each ``##`` section of ``text``; a section starts at its study's
    opening fence when one stands right above its heading (so no stamp line lands inside the next study's fences)."""
    lines = text.split("\n")
    heads = [i for i, line in enumerate(lines) if line.startswith("## ")]
    starts = [i - 1 if i and lines[i - 1].startswith("<!-- study:") else i for i in heads]
    return [
        (s, starts[k + 1] if k + 1 < len(starts) else len(lines), lines[i])
        for k, (s, i) in enumerate(zip(starts, heads))
    ]


def stamp_report(text: str, stamps: dict) -> str:
    """``text`` with the visible stamp line of each ``##`` section of ``stamps`` (heading -> stamp) at its end, an
    older one replaced; the other sections are left as they are."""
    lines = text.split("\n")
    for start, end, heading in reversed(_sections(text)):
        if heading not in stamps:
            continue
        body = [line for line in lines[start:end] if not line.startswith(STAMP_LINE)]
        while body and not body[-1]:
            body.pop()
        lines[start:end] = [*body, "", _line(stamps[heading]), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def enclosing_heading(text: str, heading: str) -> str:
    """The ``##`` heading of the section holding the line that starts with ``heading`` (itself for a ``##``)."""
    for start, end, head in _sections(text):
        if any(line.startswith(heading) for line in text.split("\n")[start:end]):
            return head
    raise ValueError(f"no section holds {heading!r}")


def read_stamps(report: str | Path) -> dict:
    """The stamps file of ``report`` as written by :func:`write_stamps` (empty when there is none)."""
    path = stamps_path(report)
    return json.loads(path.read_text()) if path.is_file() else {}


def write_stamps(
    report: Path, sections: dict, figures: dict | None = None, quick: bool | None = None, deferred=None, ledger=None
) -> Path:
    """Merge ``sections`` and ``figures`` (name -> stamp) into ``<report>.stamps.json``, atomically; ``quick``,
    ``deferred`` (the sections the report leaves out) and ``ledger`` (the claims ledger's rows, which a later
    ``--only`` rebuilds it from) replace the recorded ones when given."""
    path = stamps_path(report)
    old = read_stamps(report)
    record = {
        "quick": bool(quick) if quick is not None else old.get("quick", False),
        "deferred": list(deferred) if deferred is not None else old.get("deferred", []),
        "sections": {**old.get("sections", {}), **sections},
        "figures": {**old.get("figures", {}), **(figures or {})},
        "ledger": [list(r) for r in ledger] if ledger is not None else old.get("ledger", []),
    }
    with atomic_write(path) as fh:
        fh.write(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return path


@dataclass(frozen=True)
class Stale:
    """One stale section or figure: what it is and why."""

    kind: str
    name: str
    why: str

    def __str__(self) -> str:
        return f"stale {self.kind} {self.name!r}: {self.why}"


def _diff(old: dict, new: dict) -> str | None:
    """Why ``old`` (a stored stamp) no longer matches ``new`` (the current one), or None; a changed file that
    :func:`~tailmiss.report.stamp_scopes.excused` keeps does not count."""
    why = []
    if old.get("code") != new["code"]:
        files = sorted(
            f
            for f in set(old.get("files", {})) | set(new["files"])
            if old.get("files", {}).get(f) != new["files"].get(f)
        )
        if not files or not all(excused(f, old.get("scopes", {})) for f in files):
            why.append("code changed in " + (", ".join(files) if files else "(no file listed)"))
    presets = sorted(
        n
        for n in set(old.get("presets", {})) | set(new["presets"])
        if old.get("presets", {}).get(n) != new["presets"].get(n)
    )
    if presets:
        why.append("presets changed: " + ", ".join(presets))
    return "; ".join(why) or None


def check_stamps(report: str | Path, figures=None, expected=None, ctx: Context | None = None) -> list[Stale]:
    """Every stale section of ``report`` and every stale figure in its ``figures/`` folder, against the current code.

    Nothing is trained or simulated: the current stamps are computed from the sources and the presets.

    Parameters
    ----------
    report : path
        The report (``paper_repro.md``); its stamps are read from :func:`stamps_path`.
    figures : mapping, optional
        Name -> :class:`~tailmiss.studies.figure.FigureSpec` (the registry): the report's figures
        (:func:`tailmiss.report.report_figures`, less its deferred sections') must be stamped and current; every
        stamped figure's files are checked in any case.
    expected : callable, optional
        ``deferred -> names`` of the figures a report that defers ``deferred`` has
        (:func:`tailmiss.report.report_figures`); by default every figure of ``figures``.
    ctx : Context, optional
        Where the presets come from, when the report was written with sweeps of its own (``Context.llm_sweeps``);
        by default the presets, quick or full as the stamps record.
    """
    report = Path(report)
    path = stamps_path(report)
    forget()  # the scopes' fingerprints as the sources are now, computed once for this check
    if not report.is_file():
        raise ValueError(f"{str(report)!r} does not exist: write the report first (tailmiss repro)")
    if not path.is_file():
        return [Stale("report", str(report), f"no stamps ({path.name} is missing): made before stamps")]
    record = json.loads(path.read_text())
    ctx = ctx if ctx is not None else Context(quick=record.get("quick", False))
    deferred = tuple(record.get("deferred", ()))
    stale = _stale_sections(report.read_text(), record.get("sections", {}), ctx, deferred)
    wanted = expected(deferred) if expected is not None else list(figures or {})
    expected = [n for n in wanted if n in (figures or {})]
    for name in dict.fromkeys([*record.get("figures", {}), *expected]):
        why = _figure_staleness(name, record.get("figures", {}).get(name), (figures or {}).get(name), report, ctx)
        if why:
            stale.append(Stale("figure", name, why))
    return stale


def record_scopes(report: str | Path, figures=None) -> list[str]:
    """Give every current stamp of ``report`` that records no scope fingerprints (written before stamps held them)
    the fingerprints of its scopes, and return the names of the stamps given them.

    Only a stamp that is current by its files (its code's digest equals the current code's) is given them, so the
    fingerprints are those of the code that made it; a stale one is left as it is. Run once on a report whose check
    passes, before a change that a declaration in :data:`tailmiss._fingerprint.EQUIVALENT` is to cover.

    Parameters
    ----------
    report : path
        The report (``paper_repro.md``); its stamps file is rewritten atomically.
    figures : mapping, optional
        Name -> :class:`~tailmiss.studies.figure.FigureSpec` (the registry): the figures whose stamps are given theirs.
    """
    report = Path(report)
    record = read_stamps(report)
    if not record:
        raise ValueError(f"{str(report)!r} has no stamps file ({stamps_path(report).name})")
    ctx = Context(quick=record.get("quick", False))
    deferred = tuple(record.get("deferred", ()))
    given = []
    for heading, stamp in record.get("sections", {}).items():
        if "scopes" not in stamp and known_section(heading):
            now = section_stamp(heading, ctx, deferred)
            if stamp.get("code") == now["code"]:
                stamp["scopes"] = now["scopes"]
                given.append(heading)
    for name, stamp in record.get("figures", {}).items():
        spec = (figures or {}).get(name)
        if "scopes" not in stamp and spec is not None:
            now = figure_stamp(spec, ctx, [])
            if stamp.get("code") == now["code"]:
                stamp["scopes"] = now["scopes"]
                given.append(name)
    with atomic_write(stamps_path(report)) as fh:
        fh.write(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return given


def _stale_sections(text: str, stored: dict, ctx: Context, deferred: tuple[str, ...]) -> list[Stale]:
    """The stale ``##`` sections of the report ``text`` against their ``stored`` stamps."""
    stale = []
    for start, end, heading in _sections(text):
        lines = text.split("\n")[start:end]
        if heading not in stored:
            stale.append(Stale("section", heading, "not stamped"))
            continue
        if not any(line == _line(stored[heading]) for line in lines):
            stale.append(Stale("section", heading, "its stamp line differs from the stamps file (edited by hand?)"))
            continue
        why = _diff(stored[heading], section_stamp(heading, ctx, deferred))
        if why:
            stale.append(Stale("section", heading, why))
    return stale


def _figure_staleness(name: str, old: dict | None, spec, report: Path, ctx: Context) -> str | None:
    """Why the figure ``name`` beside ``report`` is stale (``old``: its stored stamp; ``spec``: its current spec, if
    registered), or None."""
    if old is None:
        return "not stamped"
    for ext, sha in old.get("sha256", {}).items():
        file = report.parent / "figures" / f"{name}.{ext}"
        if not file.is_file() or hashlib.sha256(file.read_bytes()).hexdigest() != sha:
            return f"{file.name} is missing or differs from the one stamped"
    return _diff(old, figure_stamp(spec, ctx, [])) if spec is not None else None
