"""A spot check of the evidence archive: archived runs trained again here and compared.

:func:`spot_check` trains again a few archived runs picked at random and says, run by run, whether they came out the
same bit for bit (as they should on a host like the one that trained them) or how far each number moved, and on which
hosts.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import tempfile
import time
from pathlib import Path

__all__ = ["SpotCheck", "spot_check"]


@dataclasses.dataclass
class SpotCheck:
    """One archived run trained again (:func:`spot_check`)."""

    name: str
    kind: str
    same: bool
    """Every file it was archived with came out the same, bit for bit."""
    moved: dict
    """File -> how far its numbers moved (``{"max_abs": ..., "column": ...}``; empty when ``same``)."""
    archived_host: dict | None
    host: dict
    archived_cpu_s: float | None
    cpu_s: float


def spot_check(count: int, seed: int | None = None, root: Path | None = None, say=None) -> tuple[int, list[SpotCheck]]:
    """Train ``count`` archived runs (SFT or RL) again, picked at random (``seed``; default a fresh one, returned
    first), each alone on one thread in a temporary cache from its archived start, and compare every file it was
    archived with."""
    from tailmiss import archive

    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"the spot check's count must be a positive integer, got {count!r}")
    root = archive.archive_root() if root is None else root
    runs = [u for u in archive.units(root) if u.meta.get("kind") in ("sft", "rl") and u.record["files"]]
    runs = [u for u in runs if "derived_from" not in u.meta]  # a derived policy is no training run
    if not runs:
        raise ValueError("the archive holds no run to check")
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    picked = random.Random(seed).sample(runs, min(count, len(runs)))
    say = say or (lambda line: None)
    out = []
    for unit in picked:
        say(f"training {unit.name} again ({unit.meta['kind']}, recorded {unit.cpu_s or 0:.0f} CPU-s)")
        out.append(_check_one(unit, root))
    return seed, out


def _check_one(unit, root: Path) -> SpotCheck:
    import torch

    from tailmiss import archive
    from tailmiss.llm.checkpoint import read_run_config
    from tailmiss.llm.sft import train_sft
    from tailmiss.llm.train import train_rl
    from tailmiss.store import file_sha256, host

    work = Path(tempfile.mkdtemp(prefix="tailmiss-spot-")) / "llm"
    work.mkdir()
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = read_run_config(unit.path / "config.toml")
        out = work / unit.name
        clock = time.process_time()
        if unit.meta["kind"] == "rl":
            init = work / Path(unit.meta["init"]).name
            start = archive.find(init, root)
            if start is None:
                raise ValueError(f"{unit.name} started from {init.name}, which the archive lacks")
            archive.restore_into(start, init)
            train_rl(cfg, init, out, progress=False)
        else:
            train_sft(cfg, out, progress=False)
        cpu = time.process_time() - clock
        files = unit.files()
        moved = {}
        for name, data in files.items():
            if file_sha256(out / name) != archive.sha256(data):
                moved[name] = _distance(name, data, (out / name).read_bytes())
        return SpotCheck(unit.name, unit.meta["kind"], not moved, moved, unit.host, host(), unit.cpu_s, cpu)
    finally:
        torch.set_num_threads(before)
        shutil.rmtree(work.parent, ignore_errors=True)


def _distance(name: str, archived: bytes, now: bytes) -> dict:
    """How far a file's numbers moved: the largest absolute difference and where."""
    import io

    import numpy as np
    import pandas as pd

    if name.endswith(".csv"):
        a, b = pd.read_csv(io.BytesIO(archived)), pd.read_csv(io.BytesIO(now))
        if list(a.columns) != list(b.columns) or len(a) != len(b):
            return {"what": "other columns or rows"}
        numeric = [c for c in a if pd.api.types.is_numeric_dtype(a[c])]
        gaps = {c: float(np.nanmax(np.abs(a[c].to_numpy(float) - b[c].to_numpy(float)), initial=0.0)) for c in numeric}
        column = max(gaps, key=gaps.get)
        return {"max_abs": gaps[column], "column": column}
    if name.endswith(".npz"):
        with np.load(io.BytesIO(archived)) as a, np.load(io.BytesIO(now)) as b:
            gaps = {k: float(np.max(np.abs(a[k].astype(float) - b[k].astype(float)), initial=0.0)) for k in a.files}
        column = max(gaps, key=gaps.get)
        return {"max_abs": gaps[column], "column": column}
    return {"what": "its bytes differ"}
