"""Does the committed report follow from the committed evidence? Re-derive it from the archive alone and compare.

:func:`verify` re-derives ``paper_repro.md`` and its figures in a temporary folder from the evidence archive
(:mod:`tailmiss.archive`) and nothing else: an empty cache, no unit computed
(:data:`tailmiss._units.COMPUTE_NOTHING_ENV`: asking for one is an error that names it), then compares with the
committed files:

* the report's text, byte for byte, once each stamp line's date is set aside;
* the stamps file (``paper_repro.stamps.json``), every field but the stamps' dates and the figures' file digests;
* every figure's picture, pixel for pixel (its PNG decoded: a PNG's and a PDF's bytes also record the matplotlib that
  wrote them, and ``tailmiss repro --check`` already checks the committed files against their stamps).

While the archive lacks units of some sections, ``partial`` re-derives only the sections it holds whole (one at a time,
as ``tailmiss repro --only`` would, in a copy of the committed report) and lists what the others lack; otherwise a
missing unit fails the check before anything runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tailmiss.options import RunOptions
from tailmiss.studies.context import Context

__all__ = ["Difference", "Verification", "verify", "compare"]

_MADE = re.compile(r"tailmiss \S+ on \d{4}-\d{2}-\d{2}")


@dataclasses.dataclass(frozen=True)
class Difference:
    """One place where the re-derived report differs from the committed one."""

    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


@dataclasses.dataclass
class Verification:
    """What :func:`verify` re-derived and found."""

    sections: list[str]
    """The studies re-derived (every one when the archive is full)."""
    lacking: dict[str, list[str]]
    """Section -> the units it reads that the archive lacks or holds stale (not re-derived)."""
    differences: list[Difference]
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.differences and not self.lacking


@contextlib.contextmanager
def _setting(env: dict[str, str], cwd: Path) -> Iterator[None]:
    """``env`` set and ``cwd`` the working folder inside the block (spawned workers inherit both)."""
    before = {k: os.environ.get(k) for k in env}
    here = Path.cwd()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(here)
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def verify(
    report: str | Path = "paper_repro.md",
    root: Path | None = None,
    partial: bool = False,
    options: RunOptions | None = None,
    keep: Path | None = None,
    ctx: Context | None = None,
    figures: bool = True,
) -> Verification:
    """Re-derive ``report`` and its figures from the evidence archive ``root`` alone and compare (module docstring).

    Parameters
    ----------
    report : path
        The committed report (its stamps file and ``figures/`` beside it).
    root : Path
        The archive (default :func:`tailmiss.archive.archive_root`).
    partial : bool
        Re-derive the sections whose units are all archived and list what the others lack, instead of refusing.
    options : RunOptions
        Processes and progress bars of the re-derivation (nothing is computed: the pool only restores).
    keep : Path, optional
        Re-derive into this folder (left in place) instead of a temporary one.
    ctx : Context, optional
        The report's context (default: the full report's); its caches are replaced by empty ones in the work folder.
    figures : bool
        Re-derive and compare the figures too.
    """
    from tailmiss import archive
    from tailmiss.evidence.plan import plan
    from tailmiss.store import COMPUTE_NOTHING_ENV

    report = Path(report).resolve()
    if not report.is_file():
        raise ValueError(f"{str(report)!r} does not exist: there is no committed report to compare")
    root = archive.archive_root() if root is None else root
    if root is None:
        raise ValueError("no evidence archive: set $TAILMISS_EVIDENCE or create evidence/ in the checkout")
    root = Path(root).resolve()
    started = time.perf_counter()
    base = ctx or Context()
    found = plan(base, root)
    lacking = {s: [e.spec.name for e in found.missing if s in e.needed.sections] for s in found.sections()}
    lacking = {s: names for s, names in lacking.items() if names}
    if lacking and not partial:
        return Verification([], lacking, [], time.perf_counter() - started)
    work = Path(keep).resolve() if keep is not None else Path(tempfile.mkdtemp(prefix="tailmiss-verify-"))
    work.mkdir(parents=True, exist_ok=True)
    options = options or RunOptions(progress=False)
    env = {archive.ARCHIVE_ENV: str(root), COMPUTE_NOTHING_ENV: "1"}
    try:
        with _setting(env, work):
            ctx = dataclasses.replace(base, cache_dir=Path("runs/sim"), llm_cache_dir=None, options=options)
            done = _rederive(report, work, lacking, ctx, figures)
        differences = compare(report, work / report.name, figures)
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return Verification(done, lacking, differences, time.perf_counter() - started)


def _rederive(report: Path, work: Path, lacking: dict, ctx: Context, figures: bool) -> list[str]:
    """Write the report (and figures) in ``work`` from the archive: whole when nothing is lacking, else each
    deferrable section the archive holds whole, into a copy of the committed report; the studies re-derived."""
    from tailmiss.evidence.make import make
    from tailmiss.report import SECTIONS
    from tailmiss.report.registry import STUDIES, study
    from tailmiss.report.stamps import stamps_path

    out = Path(report.name)
    if not lacking:
        make(out, ctx, figures=figures)
        return [s.name for s in STUDIES]
    shutil.copyfile(report, work / report.name)
    shutil.copyfile(stamps_path(report), work / stamps_path(report).name)
    shutil.copytree(report.parent / "figures", work / "figures")
    done = []
    for name in SECTIONS:
        s = study(name)
        top = s.parent or s.name
        if top in lacking or s.parent is not None:
            continue
        make(out, ctx, only=name, figures=figures)
        done.append(name)
    return done


def _without_dates(text: str) -> str:
    return _MADE.sub("tailmiss (version) on (date)", text)


def _stamps(path: Path) -> dict:
    """A stamps file without its dates and its figures' file digests."""
    record = json.loads(path.read_text())
    for group in ("sections", "figures"):
        for stamp in record.get(group, {}).values():
            stamp.pop("made", None)
            stamp.pop("sha256", None)
    return record


def _pixels(path: Path):
    import matplotlib.image

    return matplotlib.image.imread(path)


def compare(committed: Path, derived: Path, figures: bool = True) -> list[Difference]:
    """Where the report ``derived`` (with its stamps file and ``figures/``) differs from ``committed``: the text
    (dates aside), the stamps (dates and file digests aside) and (with ``figures``) each stamped figure's pixels."""
    import numpy as np

    from tailmiss.report.stamps import stamps_path

    out: list[Difference] = []
    old, new = _without_dates(committed.read_text()), _without_dates(derived.read_text())
    if old != new:
        out += [Difference(committed.name, line) for line in _changed_lines(old, new)]
    old_stamps, new_stamps = _stamps(stamps_path(committed)), _stamps(stamps_path(derived))
    if not figures:
        old_stamps.pop("figures", None)
        new_stamps.pop("figures", None)
    for group in sorted(set(old_stamps) | set(new_stamps)):
        if old_stamps.get(group) != new_stamps.get(group):
            out.append(Difference(stamps_path(committed).name, f"{group!r} differs"))
    names = sorted(json.loads(stamps_path(committed).read_text()).get("figures", {})) if figures else []
    for name in names:
        a, b = committed.parent / "figures" / f"{name}.png", derived.parent / "figures" / f"{name}.png"
        if not b.is_file():
            out.append(Difference(f"figures/{name}.png", "not re-derived"))
            continue
        pa, pb = _pixels(a), _pixels(b)
        if pa.shape != pb.shape or not np.array_equal(pa, pb):
            what = f"size {pa.shape[:2]} -> {pb.shape[:2]}" if pa.shape != pb.shape else "its pixels differ"
            out.append(Difference(f"figures/{name}.png", what))
    return out


def _changed_lines(old: str, new: str, most: int = 20) -> list[str]:
    """The first ``most`` changed lines of a unified diff of ``old`` and ``new``."""
    import difflib

    lines = [
        line
        for line in difflib.unified_diff(old.split("\n"), new.split("\n"), "committed", "re-derived", n=0, lineterm="")
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    return [line[:200] for line in lines[:most]] + ([f"... {len(lines) - most} more"] if len(lines) > most else [])
