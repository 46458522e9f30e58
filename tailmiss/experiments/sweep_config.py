"""A sweep's settings: its variants (method, focal gamma, group size) and the RL config of every run.

:class:`LLMSweep` is what a sweep TOML (``[sweep]``, ``[sft]``, ``[rl]``) holds;
:func:`tailmiss.experiments.sweep.run_sweep` trains its runs and collects the result.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from tailmiss._checks import check_bool, check_choice, check_int, check_number
from tailmiss.experiments.cached import cached_rl, run_state, sft_job
from tailmiss.experiments.pool import Job
from tailmiss.io import ConfigError, check_run_name, read_toml, write_toml
from tailmiss.llm.config import RLConfig, SFTConfig
from tailmiss.llm.optim import OptimConfig
from tailmiss.objectives import POLICY_LOSSES
from tailmiss.options import RunOptions

__all__ = ["Variant", "LLMSweep", "load_sweep"]

_METHOD_NAMES = {"grpo": "GRPO", "dapo": "DAPO", "cispo": "CISPO", "drgrpo": "Dr. GRPO"}
_VARIANT_OWN = {"name", "method", "gamma", "group_size", "seed", "dynamic_sampling", "steps"}
_RL_FIELDS = {f.name for f in dataclasses.fields(RLConfig)} - {"optim"} | {
    f"optim.{f.name}" for f in dataclasses.fields(OptimConfig)
}
_VARIANT_KEYS = ("method", "gamma", "group_size", "dynamic_sampling", "steps", "tag", "overrides")
_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,23}")


@dataclass(frozen=True)
class Variant:
    """One arm of a sweep: the method, its focal exponent and the group size.

    ``dynamic_sampling`` turns on DAPO's filter (keep only mixed-reward groups
    and refill the batch); ``steps`` overrides the base config's step count (an
    equal-rollout-budget sweep gives each group size its own), keeping the same
    number of evaluations. ``overrides`` sets other RL settings of this arm (a
    control: ``{"entropy_coef": 1e-3}``, ``{"optim.lr": 6.8e-6}`` for a setting
    of ``[rl.optim]``, ...); such an arm needs a ``tag``, which names it in
    labels and run names.
    """

    method: str = "grpo"
    gamma: float = 0.0
    group_size: int = 8
    dynamic_sampling: bool = False
    steps: int | None = None
    tag: str | None = None
    overrides: tuple = ()

    def __post_init__(self) -> None:
        check_choice("variant method", self.method, tuple(POLICY_LOSSES))
        g = check_number("variant gamma", self.gamma, 0.0)
        check_int("variant group_size", self.group_size, 2)
        check_bool("variant dynamic_sampling", self.dynamic_sampling)
        if self.steps is not None:
            check_int("variant steps", self.steps)
        object.__setattr__(self, "gamma", float(g))
        items = self.overrides.items() if isinstance(self.overrides, dict) else self.overrides
        # a list (a TOML array, such as train_types) becomes a tuple: a variant is hashable and equal to its preset
        overrides = tuple(sorted((str(k), tuple(v) if isinstance(v, list) else v) for k, v in items))
        keys = {k for k, _ in overrides}
        moved = sorted(k for k in keys if f"optim.{k}" in _RL_FIELDS)
        if moved:
            raise ValueError(
                f"variant overrides: {', '.join(map(repr, moved))} is an [rl.optim] setting: write "
                + ", ".join(f"'optim.{k}'" for k in moved)
            )
        bad = sorted(keys & _VARIANT_OWN | (keys - _RL_FIELDS))
        if bad:
            raise ValueError(
                f"variant overrides: {', '.join(map(repr, bad))} cannot be overridden (an RL setting other than "
                f"{', '.join(sorted(_VARIANT_OWN))}, which the variant and sweep set themselves)"
            )
        if self.tag is not None and (not isinstance(self.tag, str) or not _TAG.fullmatch(self.tag)):
            raise ValueError(f"variant tag must be a short name of letters, digits and '-', got {self.tag!r}")
        if overrides and self.tag is None:
            raise ValueError(f"a variant with overrides {dict(overrides)!r} needs a tag that names it")
        object.__setattr__(self, "overrides", overrides)

    @property
    def label(self) -> str:
        """``"GRPO N=8"``, ``"F-GRPO γ=0.5 N=8"``, ``"F-CISPO γ=1 N=8"``, ``"DAPO+DS N=8"``, ``"GRPO N=8 KL"`` ..."""
        base = _METHOD_NAMES[self.method] + ("+DS" if self.dynamic_sampling else "")
        name = f"F-{base} γ={self.gamma:g} N={self.group_size}" if self.gamma > 0 else f"{base} N={self.group_size}"
        return name + (f" T={self.steps}" if self.steps is not None else "") + (f" {self.tag}" if self.tag else "")

    @property
    def slug(self) -> str:
        extra = ("-ds" if self.dynamic_sampling else "") + (f"-t{self.steps}" if self.steps is not None else "")
        extra += f"-{self.tag.lower()}" if self.tag else ""
        return f"{self.method}-n{self.group_size}-g{self.gamma:g}{extra}"

    def to_dict(self) -> dict:
        out = {k: v for k, v in dataclasses.asdict(self).items() if v is not None and k != "overrides"}
        if self.overrides:
            out["overrides"] = dict(self.overrides)
        return out


@dataclass(frozen=True)
class LLMSweep:
    """A sweep: ``variants × seeds`` RL runs from one SFT model.

    Attributes
    ----------
    name : str
        Result folder name under the cache root.
    sft : SFTConfig
        The model every run starts from (trained once).
    rl : RLConfig
        The base RL config; each run replaces ``method``, ``gamma``,
        ``group_size``, ``seed`` and ``name``. Its ``seed`` also picks the
        fixed evaluation prompts of ``final.csv``, the same for every run.
    variants : tuple of Variant
    seeds : tuple of int
    """

    name: str
    sft: SFTConfig
    rl: RLConfig
    variants: tuple[Variant, ...]
    seeds: tuple[int, ...] = (0,)
    _runs: list = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_run_name(self.name, "sweep name")
        if not isinstance(self.sft, SFTConfig) or not isinstance(self.rl, RLConfig):
            raise ValueError("a sweep needs an SFTConfig (sft) and an RLConfig (rl)")
        variants = tuple(v if isinstance(v, Variant) else Variant(**v) for v in self.variants)
        if not variants:
            raise ValueError("variants must not be empty")
        if len(set(variants)) != len(variants):
            raise ValueError("variants must be distinct")
        seeds = tuple(self.seeds)
        if not seeds or any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in seeds):
            raise ValueError(f"seeds must be a non-empty list of integers >= 0, got {list(seeds)!r}")
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be distinct, got {list(seeds)!r}")
        object.__setattr__(self, "variants", variants)
        object.__setattr__(self, "seeds", seeds)
        object.__setattr__(self, "_runs", [(v, s, self._config(v, s)) for v in variants for s in seeds])

    def _config(self, variant: Variant, seed: int) -> RLConfig:
        name = f"{self.rl.name}-{variant.slug}-s{seed}"
        changes = dict(method=variant.method, gamma=variant.gamma, group_size=variant.group_size, seed=seed)
        if variant.dynamic_sampling:
            changes["dynamic_sampling"] = True
        changes.update((k, v) for k, v in variant.overrides if not k.startswith("optim."))
        optim = {k.removeprefix("optim."): v for k, v in variant.overrides if k.startswith("optim.")}
        if variant.steps is not None:  # same number of evaluations over the new length
            evals = max(1, self.rl.steps // self.rl.eval_every)
            changes.update(steps=variant.steps, eval_every=max(1, variant.steps // evals))
            changes["checkpoint_every"] = max(1, min(self.rl.checkpoint_every, variant.steps))
        try:
            if optim:  # the [rl.optim] settings it overrides, the base's others
                changes["optim"] = self.rl.optim.replace(**optim)
            return self.rl.replace(name=name, **changes)
        except ValueError as exc:
            raise ValueError(f"variant {variant.label!r}: {exc}") from None

    def runs(self) -> list[tuple[Variant, int, RLConfig]]:
        """``(variant, seed, RL config)`` of every run, variants outer, seeds inner."""
        return list(self._runs)

    def jobs(self, root: str | Path, options: RunOptions = RunOptions(), start: Job | None = None) -> list[Job]:
        """The SFT run (or ``start``, the job that makes the starting point) and every RL run, as pool jobs
        (:func:`tailmiss.experiments.pool.run_jobs`)."""
        root = Path(root)
        sft_dir = root / self.sft.name
        reuse_stale = options.reuse_stale
        start = sft_job(self.sft, root, reuse_stale) if start is None else start
        jobs = [start]
        for i, (variant, seed, cfg) in enumerate(self._runs, 1):
            jobs.append(
                Job(
                    cfg.name,
                    cached_rl,
                    (cfg, sft_dir, root),
                    needs=(start.key,),
                    label=f"[{i}/{len(self._runs)}] {variant.label} seed {seed}",
                    state=functools.partial(run_state, root / cfg.name, cfg, sft_dir, reuse_stale),
                )
            )
        return jobs

    def replace(self, **changes) -> LLMSweep:
        return dataclasses.replace(self, **changes)

    # -- TOML --------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "sweep": {
                "name": self.name,
                "seeds": list(self.seeds),
                "variants": [v.to_dict() for v in self.variants],
            },
            "sft": self.sft.to_dict(),
            "rl": self.rl.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict, where: str = "sweep") -> LLMSweep:
        if not isinstance(data, dict) or set(data) != {"sweep", "sft", "rl"}:
            got = sorted(data) if isinstance(data, dict) else data
            raise ConfigError(f"{where}: expected the tables [sweep], [sft] and [rl], got {got!r}")
        body = dict(data["sweep"])
        unknown = sorted(set(body) - {"name", "seeds", "variants"})
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) in [sweep]: {', '.join(map(repr, unknown))}")
        if "name" not in body or "variants" not in body:
            raise ConfigError(f"{where}: [sweep] needs name and variants")
        variants = []
        for i, v in enumerate(body["variants"]):
            if not isinstance(v, dict) or set(v) - {*_VARIANT_KEYS}:
                raise ConfigError(
                    f"{where}: variant {i} must be a table of method, gamma, group_size (and optionally "
                    f"dynamic_sampling, steps, tag, overrides), got {v!r}"
                )
            try:
                variants.append(Variant(**v))
            except ValueError as exc:
                raise ConfigError(f"{where}: variant {i}: {exc}") from None
        try:
            return cls(
                name=body["name"],
                sft=SFTConfig.from_dict(data["sft"], where=f"{where}: [sft]"),
                rl=RLConfig.from_dict(data["rl"], where=f"{where}: [rl]"),
                variants=tuple(variants),
                seeds=tuple(body.get("seeds", (0,))),
            )
        except ValueError as exc:  # a config refused stays one (a stored unit holding it is redone, not a bug)
            msg = str(exc)
            kind = ConfigError if isinstance(exc, ConfigError) else ValueError
            raise kind(msg if msg.startswith(where) else f"{where}: {msg}") from None

    @classmethod
    def from_toml(cls, path: str | Path) -> LLMSweep:
        return cls.from_dict(read_toml(path), where=str(path))

    def to_toml(self, path: str | Path) -> None:
        write_toml(path, self.to_dict())


def load_sweep(path: str | Path) -> LLMSweep:
    """Read a sweep TOML (tables ``[sweep]``, ``[sft]`` and ``[rl]``)."""
    return LLMSweep.from_toml(path)
