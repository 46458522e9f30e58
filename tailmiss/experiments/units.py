"""The stored units a piece of work makes, named before any of it runs.

A sweep makes its SFT run, one RL run per variant and seed and its tidy result; a ladder its SFT run, one derived
policy per rung that is not the transformer, and one sweep per rung; a simulation preset one result; a comparison
(a bridge, the by-type scores, an attribution) one result read off a sweep's runs. :func:`workload_units` lists them as
:class:`UnitSpec` s: where each lives in the cache (``runs/<tier>/<name>``), what config it must hold, which code's
fingerprint it carries, what it starts from and what it is read off. The report's evidence
(:mod:`tailmiss.evidence.plan`) plans, trains and archives from these lists.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "KINDS",
    "UnitSpec",
    "workload_units",
    "sweep_units",
    "ladder_units",
    "simulation_unit",
    "comparison_unit",
    "attribution_unit",
    "rung_simulation_unit",
]

KINDS = (
    "SFT run",
    "derived policy",
    "RL run",
    "sweep result",
    "bridge result",
    "by-type scores",
    "attribution",
    "simulation",
    "shared simulation",
)
"""The kinds of unit, in the order a regeneration makes them."""


@dataclass(frozen=True)
class UnitSpec:
    """One stored unit a piece of work makes.

    Attributes
    ----------
    tier, name : str
        Its cache folder is ``runs/<tier>/<name>`` (``tier``: ``"llm"`` or ``"sim"``), its archived copy
        ``evidence/<tier>/<name>``.
    kind : str
        One of :data:`KINDS`.
    preset : str
        The sweep, ladder or simulation preset it belongs to.
    config : object
        The config its ``config.toml`` must hold.
    read_config : callable
        ``read_config(path)``: the config a ``config.toml`` holds, for comparing with :attr:`config`.
    scope : Scope or str
        The code whose fingerprint it carries (:func:`tailmiss.store.code_fingerprint`).
    modules : tuple of str
        The :data:`tailmiss.store.OWN_SCOPE` modules whose code makes its numbers too.
    start : str or None
        The unit it starts from (an RL run's SFT run or derived policy, a derived policy's SFT run): its
        ``checkpoint.pt`` is part of this unit's key.
    reads : tuple of str
        The units it is computed from (a sweep result's runs, a bridge's SFT run and runs).
    weights : bool
        Whether computing it reads the weights of :attr:`reads` (which the archive keeps for SFT runs and derived
        policies only).
    key : dict
        ``meta.json`` fields that are part of its key besides the config (a bridge's ``sim_lr``).
    workload : object
        The sweep or ladder whose pool jobs make it (an SFT run, a derived policy, an RL run), else None.
    """

    tier: str
    name: str
    kind: str
    preset: str
    config: object
    read_config: Callable[[Path], object]
    scope: object
    modules: tuple[str, ...] = ()
    start: str | None = None
    reads: tuple[str, ...] = ()
    weights: bool = False
    key: dict = field(default_factory=dict)
    workload: object = field(default=None, compare=False, repr=False)


def _run_config(path: Path):
    from tailmiss.llm.checkpoint import read_run_config

    return read_run_config(path)


def _sweep_config(path: Path):
    from tailmiss.experiments.sweep_config import LLMSweep

    return LLMSweep.from_toml(path)


def _sim_config(path: Path):
    from tailmiss.sim.config import SimConfig

    return SimConfig.from_toml(path)


def _own(task) -> tuple[str, ...]:
    from tailmiss.store import own_scope_of

    return own_scope_of(task)


def sweep_units(
    sweep, start_kind: str = "SFT run", start: str | None = None, preset: str | None = None, workload=None
) -> list:
    """The units of the sweep ``sweep``: its starting point (an SFT run, or a derived policy of ``start_kind`` made
    from the unit ``start``), its RL runs and its result; ``workload``: the ladder it is a rung of, if any."""
    from tailmiss.experiments.sweep_result import SCOPE

    preset = preset or sweep.name
    modules = _own(sweep.sft.task)
    sft = sweep.sft.name
    made_by = workload or sweep
    out = [UnitSpec("llm", sft, start_kind, preset, sweep.sft, _run_config, "llm", modules, start, workload=made_by)]
    runs = []
    for _, _, cfg in sweep.runs():
        out.append(UnitSpec("llm", cfg.name, "RL run", preset, cfg, _run_config, "llm", modules, sft, workload=made_by))
        runs.append(cfg.name)
    out.append(
        UnitSpec("llm", sweep.name, "sweep result", preset, sweep, _sweep_config, SCOPE, modules, reads=(sft, *runs))
    )
    return out


def ladder_units(ladder) -> list:
    """The units of the ladder ``ladder``: its SFT run, then each rung's sweep (a rung that is not the transformer
    starts from a policy derived from the SFT run)."""
    sft = ladder.sft
    out = [UnitSpec("llm", sft.name, "SFT run", ladder.name, sft, _run_config, "llm", _own(sft.task), workload=ladder)]
    for rung, sweep in ladder.sweeps():
        if rung.model == "transformer":
            out += sweep_units(sweep, preset=ladder.name, workload=ladder)[1:]
        else:
            out += sweep_units(sweep, "derived policy", sft.name, preset=ladder.name, workload=ladder)
    return list({u.name: u for u in out}.values())  # rungs of one model share its derived policy


def workload_units(workload) -> list:
    """The units of a sweep (:class:`~tailmiss.experiments.sweep_config.LLMSweep`) or a ladder
    (:class:`~tailmiss.experiments.ladder.Ladder`)."""
    from tailmiss.experiments.ladder import Ladder

    return ladder_units(workload) if isinstance(workload, Ladder) else sweep_units(workload)


def simulation_unit(config) -> UnitSpec:
    """The unit of the simulation preset ``config`` (a :class:`~tailmiss.sim.config.SimConfig`)."""
    return UnitSpec("sim", config.name, "simulation", config.name, config, _sim_config, "sim")


def comparison_unit(kind: str, name: str, sweep, scope, key: dict, weights: bool = True) -> UnitSpec:
    """A unit read off the runs of ``sweep`` (a bridge result, the by-type scores): named ``name``, its config the
    sweep's, ``key`` the ``meta.json`` fields that key it besides."""
    reads = (sweep.sft.name, *(cfg.name for _, _, cfg in sweep.runs()))
    return UnitSpec(
        "llm",
        name,
        kind,
        sweep.name,
        sweep,
        _sweep_config,
        scope,
        _own(sweep.sft.task),
        reads=reads,
        weights=weights,
        key=dict(key),
    )


def attribution_unit(sweep, labels, seeds, batches: int, sft_batches: int = 0) -> UnitSpec:
    """The unit of :func:`tailmiss.experiments.attribution.run_attribution` of ``sweep``'s runs of ``labels`` and
    ``seeds``: read off those runs' weights (and the SFT model's), keyed by the runs and the batches drawn."""
    from tailmiss.experiments.attribution import SCOPE, Attribution, attribution_name

    key = Attribution(sweep, tuple(labels), tuple(seeds), int(batches), int(sft_batches), None).key()
    runs = tuple(cfg.name for v, s, cfg in sweep.runs() if v.label in key["labels"] and s in key["seeds"])
    return UnitSpec(
        "llm",
        attribution_name(sweep),
        "attribution",
        sweep.name,
        sweep,
        _sweep_config,
        SCOPE,
        _own(sweep.sft.task),
        reads=(sweep.sft.name, *runs),
        weights=True,
        key=key,
    )


def rung_simulation_unit(ladder) -> UnitSpec:
    """The unit of the shared simulator run from the shared rung of ``ladder``
    (:func:`tailmiss.experiments.shared_bridge.run_rung_simulation`): keyed by the rung's sweep and the simulator's
    seeds, started from the rung's derived shared policy (whose weights the archive keeps, so it can be computed
    from the archive alone)."""
    from tailmiss.experiments.shared_bridge import SCOPE, SIM_SEEDS, rung_simulation_name, shared_rung

    _, sweep = shared_rung(ladder)
    return UnitSpec(
        "llm",
        rung_simulation_name(ladder),
        "shared simulation",
        ladder.name,
        sweep,
        _sweep_config,
        SCOPE,
        _own(sweep.sft.task),
        start=sweep.sft.name,
        key={"seeds": list(SIM_SEEDS)},
        workload=ladder,
    )
