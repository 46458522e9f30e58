"""The evidence archive: the report's units kept in the repository, which the result store reads as a read-only tier.

The runs, simulations and comparisons behind ``paper_repro.md`` take hours to compute and live in the ``runs/``
cache, which git does not hold. The archive keeps each of them in compact form beside the code
(``evidence/<tier>/<name>/`` for the cache's ``runs/<tier>/<name>/``, ``tier`` being ``sim`` or ``llm``), so that a
fresh clone re-derives the report from them in minutes, as research compendia ship their intermediate results.

An archived unit is the folder of a finished unit of the store (:mod:`tailmiss.store`) with

* ``meta.json``: the unit's own (its provenance, with the host and the CPU seconds it took, and the SHA-256 of every
  file it was written with), plus an ``archive`` record: each kept file's stored name and the SHA-256 of its stored
  bytes, and the files not kept, with why;
* ``config.toml`` as it is (the unit's key: readable and comparable in git);
* every other file xz-compressed (``history.csv.xz``, ...);
* no RL run's ``checkpoint.pt`` (the sections read its history and per-prompt evaluations; a unit read off its
  weights trains it again, and :func:`differs_from` says whether it came out the same). An SFT run's or a derived
  policy's checkpoint is kept byte for byte: RL runs and derived policies start from it and name it by its SHA-256.

The store consults the archive whenever it judges a unit (:func:`consult`): an archived unit is restored into the
cache (its bytes verified against the SHA-256 the unit was written with) and judged there as any cached unit. It
stands in when the cache has no usable unit, and also when the cache's differs from it, so that a report follows the
committed evidence rather than a local retrain. A damaged archived file is refused naming it; a stale archived unit
is never used unless ``reuse_stale`` says so. Only :func:`add` writes the archive (``tailmiss repro`` adds the units
the full report read). Where it is: ``$TAILMISS_EVIDENCE`` when set (empty: no archive), else ``evidence/`` beside
the package in a checkout that has one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import lzma
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from tailmiss._units import Lookup, UnitState
from tailmiss.io import atomic_dir

__all__ = [
    "ARCHIVE_ENV",
    "FORMAT",
    "ArchiveError",
    "ArchivedUnit",
    "archive_root",
    "find",
    "units",
    "add",
    "remove",
    "consult",
    "archived_without",
    "restore",
    "restore_into",
    "ensure",
    "differs_from",
    "sha256",
    "size_on_disk",
]

ARCHIVE_ENV = "TAILMISS_EVIDENCE"
"""The environment variable naming the archive's folder (set but empty: read no archive)."""
FORMAT = 1
"""The version of the archived units' layout."""
TIERS = ("sim", "llm")
"""The cache folders an archive mirrors (``runs/sim``, ``runs/llm``)."""
PLAIN = ("config.toml",)
"""Files kept as they are: the unit's key, small and worth reading in a diff."""
DROPPED = {("rl", "checkpoint.pt"): "an RL run's weights and optimiser state: a unit read off them trains it again"}
"""``(meta's kind, file) -> why``: the files an archived unit leaves out."""

_PACKAGE = Path(__file__).resolve().parent


class ArchiveError(ValueError):
    """An archived unit is damaged (a file edited, truncated or missing) or cannot be archived."""


def archive_root() -> Path | None:
    """The archive's folder: ``$TAILMISS_EVIDENCE`` (set but empty: none), else ``evidence/`` beside the package when
    the checkout has one, else None."""
    value = os.environ.get(ARCHIVE_ENV)
    if value is not None:
        return Path(value) if value.strip() else None
    default = _PACKAGE.parent / "evidence"
    return default if default.is_dir() else None


def sha256(data: bytes) -> str:
    """SHA-256 (hex) of ``data``."""
    import hashlib

    return hashlib.sha256(data).hexdigest()


@dataclasses.dataclass(frozen=True)
class ArchivedUnit:
    """One unit in the archive: its folder and its ``meta.json`` (the unit's own, with the ``archive`` record)."""

    path: Path
    meta: dict

    @property
    def tier(self) -> str:
        return self.path.parent.name

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def record(self) -> dict:
        return self.meta["archive"]

    @property
    def checksums(self) -> dict:
        """The SHA-256 of every file the unit was written with (dropped ones included)."""
        return dict(self.meta.get("checksums") or {})

    @property
    def provenance(self) -> dict:
        return dict(self.meta.get("provenance") or {})

    @property
    def host(self) -> dict | None:
        """Where it was computed (:func:`tailmiss.store.host`), when recorded."""
        return self.provenance.get("host")

    @property
    def cpu_s(self) -> float | None:
        """The CPU seconds it took, when recorded (a unit made inside a pool job); else its run's wall seconds times
        its threads when the unit records them; else None."""
        if self.provenance.get("cpu_s") is not None:
            return float(self.provenance["cpu_s"])
        if self.meta.get("elapsed_s") is not None:
            return float(self.meta["elapsed_s"]) * int(self.meta.get("threads") or 1)
        return None

    @property
    def code(self) -> dict:
        """``{"scope", "fingerprint", "modules"}`` of the code that made it."""
        return dict(self.provenance.get("code") or {})

    @property
    def stored_bytes(self) -> int:
        """Bytes on disk (its files and ``meta.json``)."""
        return sum(p.stat().st_size for p in self.path.iterdir() if p.is_file())

    def verify(self) -> None:
        """Raise :class:`ArchiveError` naming the file unless every stored file is there with its recorded SHA-256
        and ``meta.json`` (its provenance, checksums and key fields) is as archived."""
        if _meta_digest(self.meta) != self.record.get("meta_sha256"):
            raise ArchiveError(
                f"{self.path / 'meta.json'} was edited: its fields differ from those the archive recorded "
                f"({_RESTORE_HINT})"
            )
        for name, entry in self.record["files"].items():
            stored = self.path / entry["stored"]
            if not stored.is_file():
                raise ArchiveError(f"{stored} is missing: the archive records it for {name} ({_RESTORE_HINT})")
            if sha256(stored.read_bytes()) != entry["sha256"]:
                raise ArchiveError(
                    f"{stored} is damaged: its SHA-256 differs from the one the archive recorded ({_RESTORE_HINT})"
                )

    def files(self) -> dict[str, bytes]:
        """Every kept file's original bytes, verified twice: the stored bytes against the archive's record, the
        decompressed ones against the SHA-256 the unit was written with."""
        self.verify()
        out = {}
        for name, entry in self.record["files"].items():
            stored = self.path / entry["stored"]
            data = stored.read_bytes()
            if entry["stored"] != name:
                try:
                    data = lzma.decompress(data)
                except lzma.LZMAError as exc:
                    raise ArchiveError(f"{stored} is not a readable xz file: {exc} ({_RESTORE_HINT})") from None
            if sha256(data) != self.checksums.get(name):
                raise ArchiveError(f"{stored} does not hold the {name} the unit was written with ({_RESTORE_HINT})")
            out[name] = data
        return out


_RESTORE_HINT = "git checkout -- evidence restores the committed archive"


def _meta_digest(meta: dict) -> str:
    """SHA-256 of a unit's ``meta.json`` fields, its archive record aside (keys sorted: the digest of what it says)."""
    fields = {k: v for k, v in meta.items() if k != "archive"}
    return sha256(json.dumps(fields, sort_keys=True, default=str).encode())


def _meta_of(path: Path, hint: str = "") -> dict:
    """``path/meta.json`` parsed (:class:`ArchiveError` naming it when missing or unreadable)."""
    meta_file = path / "meta.json"
    try:
        return json.loads(meta_file.read_text())
    except (OSError, ValueError) as exc:
        raise ArchiveError(f"{meta_file} is missing or unreadable: {exc}{hint}") from None


def _read(path: Path) -> ArchivedUnit:
    meta_file = path / "meta.json"
    meta = _meta_of(path, f" ({_RESTORE_HINT})")
    record = meta.get("archive") if isinstance(meta, dict) else None
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        raise ArchiveError(f"{meta_file} has no archive record: {path} is not an archived unit")
    if record.get("format") != FORMAT:
        raise ArchiveError(f"{meta_file}: archive format {record.get('format')!r}, this code reads {FORMAT}")
    return ArchivedUnit(path, meta)


def find(cache_path: str | os.PathLike, root: Path | None = None) -> ArchivedUnit | None:
    """The archived unit that stands for the cache folder ``cache_path`` (``runs/<tier>/<name>``; a cache folder of
    another name is looked up in both tiers), or None.

    ``root``: the archive (default :func:`archive_root`). A damaged ``meta.json`` raises :class:`ArchiveError`.
    """
    root = archive_root() if root is None else root
    cache_path = Path(cache_path)
    if root is None:
        return None
    tier = cache_path.parent.name
    for name in (tier,) if tier in TIERS else TIERS:  # a cache folder of another name: either tier
        path = Path(root) / name / cache_path.name
        if path.is_dir():
            return _read(path)
    return None


def units(root: Path | None = None) -> list[ArchivedUnit]:
    """Every unit of the archive, by tier and name."""
    root = archive_root() if root is None else root
    if root is None:
        return []
    found = [p for tier in TIERS for p in sorted((Path(root) / tier).glob("*"))]
    return [_read(p) for p in found if p.is_dir() and not p.name.startswith(".")]


def size_on_disk(root: Path | None = None) -> int:
    """Bytes of the archive's files."""
    root = archive_root() if root is None else root
    return sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file()) if root is not None else 0


def _unit_meta(path: Path) -> dict:
    """The finished unit's ``meta.json`` at ``path``, after checking every file it records (a dropped one may be
    absent); :class:`ArchiveError` otherwise."""
    meta = _meta_of(path)
    sums = meta.get("checksums") if isinstance(meta, dict) else None
    if not isinstance(sums, dict):
        raise ArchiveError(f"{str(path)!r} is not a sealed unit: meta.json has no checksums")
    dropped = archived_without(meta)
    for name, sha in sums.items():
        if name in dropped:
            continue
        if not (path / name).is_file() or sha256((path / name).read_bytes()) != sha:
            raise ArchiveError(f"{path / name} is missing or differs from the SHA-256 recorded when it was written")
    return meta


def archived_without(meta: dict) -> set[str]:
    """The files of a unit restored from the archive that the archive does not keep (an RL run's checkpoint): absent
    by design, not missing (:func:`tailmiss.store.open_unit` skips them)."""
    record = meta.get("archive")
    return set(record.get("dropped") or ()) if isinstance(record, dict) else set()


def add(cache_path: str | os.PathLike, root: Path | None = None) -> ArchivedUnit:
    """Archive the finished unit at ``cache_path`` (``runs/<tier>/<name>``) as ``<root>/<tier>/<name>``; return it
    (a cache folder of another name: the tier of the unit's kind, ``sim`` for a simulation).

    The unit is checked first (every file against its recorded SHA-256). An archived unit with the same files (the
    same SHA-256 for every file it was written with) is left as it is; any other is replaced as a whole, atomically.

    Raises
    ------
    ArchiveError
        No archive, or a unit that is not finished.
    """
    root = archive_root() if root is None else root
    cache_path = Path(cache_path)
    if root is None:
        raise ArchiveError("no evidence archive: set $TAILMISS_EVIDENCE or create evidence/ in the checkout")
    meta = _unit_meta(cache_path)
    tier = cache_path.parent.name
    if tier not in TIERS:  # a cache folder of another name: the tier of the unit's kind
        tier = "sim" if ((meta.get("provenance") or {}).get("code") or {}).get("scope") == "sim" else "llm"
    if meta.get("kind") in ("sft", "rl") and not meta.get("complete"):
        raise ArchiveError(f"{str(cache_path)!r} is not a finished run")
    existing = find(cache_path, root)
    if existing is not None and existing.checksums == meta["checksums"]:
        return existing
    kind = meta.get("kind")
    dropped = {name: why for (k, name), why in DROPPED.items() if k == kind and name in meta["checksums"]}
    unit_meta = {k: v for k, v in meta.items() if k != "archive"}
    dest = Path(root) / tier / cache_path.name
    files = {}
    with atomic_dir(dest) as tmp:
        for name in sorted(meta["checksums"]):
            if name in dropped:
                continue
            data = (cache_path / name).read_bytes()
            stored = name if name in PLAIN else f"{name}.xz"
            blob = data if stored == name else lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)
            (tmp / stored).write_bytes(blob)
            files[name] = {"stored": stored, "sha256": sha256(blob)}
        record = {
            "format": FORMAT,
            "files": files,
            "dropped": dropped,
            "meta_sha256": _meta_digest(unit_meta),
            "archived": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        (tmp / "meta.json").write_text(json.dumps({**unit_meta, "archive": record}, indent=2, default=str) + "\n")
    return _read(dest)


def remove(unit: ArchivedUnit) -> None:
    """Take ``unit`` out of the archive."""
    shutil.rmtree(unit.path)


def restore(unit: ArchivedUnit, dest: Path) -> None:
    """Write ``unit``'s files (decompressed, verified) and its ``meta.json`` into the empty folder ``dest``."""
    for name, data in unit.files().items():
        (dest / name).write_bytes(data)
    (dest / "meta.json").write_text(json.dumps(unit.meta, indent=2, default=str) + "\n")


def restore_into(unit: ArchivedUnit, path: str | os.PathLike) -> Path:
    """Write ``unit`` as the cache folder ``path`` (atomically; an earlier folder there is replaced)."""
    with atomic_dir(path) as tmp:
        restore(unit, tmp)
    return Path(path)


def ensure(path: str | os.PathLike) -> bool:
    """Restore the cache folder ``path`` from the archive when the cache lacks it and the archive holds it; whether it
    did. Nothing is judged: for a unit whose user judged it already (an RL run's start)."""
    path = Path(path)
    unit = None if path.exists() else find(path)
    if unit is not None:
        restore_into(unit, path)
    return unit is not None


def differs_from(path: str | os.PathLike, root: Path | None = None) -> list[str] | None:
    """The files of the cache folder ``path`` whose bytes are not those its archived copy recorded (``meta.json`` and
    the files the archive drops left out); None when the archive holds no copy. Empty: it came out as archived."""
    unit, path = find(path, root), Path(path)
    if unit is None:
        return None
    skip = {"meta.json", *(unit.record.get("dropped") or ())}
    kept = {f: digest for f, digest in unit.checksums.items() if f not in skip}
    return sorted(f for f, d in kept.items() if not (path / f).is_file() or sha256((path / f).read_bytes()) != d)


class _Declined(Exception):
    """The archived unit is no better than the cache's: leave the cache as it is."""


def _replaceable(path: Path, unit: ArchivedUnit) -> bool:
    """Whether the cache folder ``path`` is absent or holds nothing but files of the unit ``unit`` is (so that the
    archive's may replace it)."""
    if not path.exists():
        return True
    if not path.is_dir():
        return False
    allowed = set(unit.checksums) | set(unit.record.get("dropped") or ()) | {"meta.json"}
    return {p.name for p in path.iterdir() if not p.name.startswith(".")} <= allowed


def _cached_checksums(path: Path) -> dict | None:
    with contextlib.suppress(OSError, ValueError):
        meta = json.loads((path / "meta.json").read_text())
        return meta.get("checksums") if isinstance(meta, dict) else None
    return None


def consult(path: str | os.PathLike, found, judge_at: Callable[[Path], object]):
    """The store's decision once the cache's unit at ``path`` was judged ``found`` (a :class:`tailmiss.store.Lookup`
    made by ``judge_at(path)``): the archive's unit of the same name when it is better.

    The archived unit is restored into a temporary folder beside ``path`` and judged there by ``judge_at``; it
    replaces the cache's (atomically) when it is fresh and the cache's is not, or is fresh and differs from it (the
    report follows the committed evidence), or is a stale unit that ``reuse_stale`` allows where the cache has nothing
    usable. Otherwise the cache is left as it is and ``found`` returned. A damaged archived unit raises
    :class:`tailmiss.archive.ArchiveError`, naming the file.
    """
    path = Path(path)
    unit = find(path)
    if unit is None:
        return found
    if found.state is UnitState.FRESH and _cached_checksums(path) == unit.checksums:
        return found
    if not _replaceable(path, unit):
        return found
    unit.verify()
    there = None
    try:
        with atomic_dir(path) as tmp:
            restore(unit, tmp)
            there = judge_at(tmp)
            take = there.state is UnitState.FRESH or (there.state is UnitState.REUSED_STALE and not found.usable)
            if not take:
                raise _Declined
    except _Declined:
        if found.state is UnitState.MISSING and there is not None and there.reason:
            return Lookup(UnitState.MISSING, reason=f"the archive's {unit.path} is {there.state.value}: {there.reason}")
        return found
    now = judge_at(path)
    why = f"restored from the archive ({unit.path})"
    if found.state is UnitState.FRESH:
        why += ", which differs from the cached unit it replaced"
    return dataclasses.replace(now, reason=why if now.reason is None else f"{now.reason}; {why}")
