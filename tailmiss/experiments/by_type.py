"""A sweep's final models scored again by prompt type, as a unit of the store.

On a task whose prompts come in types (the narrowing task's conflict minority and the rest), each chosen run's final
model is scored on each type of its evaluation prompts against its SFT model: correct mass :math:`\\mu_{pos}`,
retained mass :math:`M_{ret}` (BroRL's and F-GRPO's), :math:`\\Delta NLL_{rare}` (F-GRPO Table 2) and exact pass@256.
It reads the runs' weights, which the evidence archive does not keep (:mod:`tailmiss.archive`), so it is computed once,
where the runs were trained, and saved (``root/<sweep>-by-type/``) like any unit: reused when its sweep, its labels and
its code are the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tailmiss.experiments.sweep_config import LLMSweep
from tailmiss.experiments.sweep_result import SCOPE as SWEEP_SCOPE
from tailmiss.options import RunOptions
from tailmiss.store import Scope, UnitKind, lookup, open_unit, own_scope_of, read_meta, save_tables, unit_clock

__all__ = ["TypeScores", "BY_TYPE_UNIT", "SCOPE", "by_type_name", "score_by_type", "run_by_type"]

_FILES = ("config.toml", "scores.csv", "meta.json")
SCOPE = Scope("by-type", ("llm", "experiments/sweep.py", "experiments/by_type.py"), SWEEP_SCOPE.no_numbers)
"""Its numbers: the runs' (the trainer's), the sweep's and the scoring here."""


@dataclass
class TypeScores:
    """:func:`score_by_type` of a sweep's runs of ``labels``.

    Attributes
    ----------
    sweep : LLMSweep
    labels : tuple of str
        The variants scored (every seed of each).
    scores : DataFrame
        One row per run and prompt type: ``label, seed, type, mu_pos, mret, dnll, pass256``.
    """

    sweep: LLMSweep
    labels: tuple[str, ...]
    scores: pd.DataFrame

    def save(self, path: str | Path) -> Path:
        """Write ``path/`` atomically, sealed with checksums and provenance (:func:`tailmiss.store.save_tables`)."""
        meta = {"labels": list(self.labels)}
        return save_tables(path, self.sweep, {"scores.csv": self.scores}, meta, SCOPE, BY_TYPE_UNIT.what)

    @classmethod
    def load(cls, path: str | Path) -> TypeScores:
        """Read a saved result after verifying its checksums (``CorruptUnit`` otherwise)."""
        path = Path(path)
        open_unit(path, BY_TYPE_UNIT.files, BY_TYPE_UNIT.what)
        return cls(
            sweep=LLMSweep.from_toml(path / "config.toml"),
            labels=tuple(read_meta(path)["labels"]),
            scores=pd.read_csv(path / "scores.csv", dtype={"seed": "int64"}),
        )


BY_TYPE_UNIT = UnitKind(_FILES, "by-type scores", SCOPE, TypeScores.load)


def by_type_name(sweep: LLMSweep) -> str:
    """The unit's folder name under the cache: ``<sweep>-by-type``."""
    return f"{sweep.name}-by-type"


def score_by_type(sweep: LLMSweep, root: str | Path, labels: tuple[str, ...]) -> pd.DataFrame:
    """Each run of ``labels`` at its last step, scored again on each prompt type of its evaluation prompts (the
    task's ``minority_mask``) against its SFT model (the reference its checkpoint holds): ``mu_pos``, ``mret``
    (retained mass), ``dnll`` (:math:`\\Delta NLL_{rare}`) and exact ``pass256``, one row per run and type."""
    from tailmiss.llm.checkpoint import LoadedRun
    from tailmiss.llm.evaluate import answer_distribution, exact_metrics

    task, rows = sweep.sft.task, []
    references = {}  # every run starts from the sweep's SFT model: its distribution once per prompt set
    for variant, seed, cfg in sweep.runs():
        if variant.label not in labels:
            continue
        run = LoadedRun(Path(root) / cfg.name)
        prompts = task.prompts(cfg.eval_split, cfg.eval_prompts, seed=cfg.eval_prompt_seed, distinct=True)
        mask = task.minority_mask(prompts)
        for kind, sel in (("minority", mask), ("rest", ~mask)):
            sub = [p for p, keep in zip(prompts, sel) if keep]
            if not sub:
                continue
            key = (kind, cfg.eval_split, cfg.eval_prompts, cfg.eval_prompt_seed)
            if key not in references:
                references[key] = answer_distribution(run.reference, task, sub, correct_only=True)
            ref = references[key]
            cur = answer_distribution(run.model, task, sub, correct_only=True)
            m = exact_metrics(cur, ref, rare_share=cfg.rare_share)
            rows.append(
                {
                    "label": variant.label,
                    "seed": int(seed),
                    "type": kind,
                    "mu_pos": m["mu_pos_mean"],
                    "mret": m["retained_mass_mean"],
                    "dnll": m["dnll_rare"],
                    "pass256": m["exact_pass_at_k"][256],
                }
            )
    return pd.DataFrame(rows, columns=["label", "seed", "type", "mu_pos", "mret", "dnll", "pass256"])


def run_by_type(
    sweep: LLMSweep, root: str | Path, labels: tuple[str, ...], options: RunOptions = RunOptions()
) -> TypeScores:
    """:func:`score_by_type` of the finished runs of ``sweep`` under ``root``, saved as ``root/<sweep>-by-type/``, or
    that unit when it holds the same sweep and labels made by the running code (or by the evidence archive's)."""
    if not isinstance(sweep, LLMSweep):
        raise ValueError(f"sweep must be an LLMSweep, got {type(sweep).__name__}")
    labels = tuple(labels)
    known = {v.label for v in sweep.variants}
    unknown = [label for label in labels if label not in known]
    if unknown:
        raise ValueError(f"labels {unknown!r} are not variants of the sweep {sweep.name!r}")
    out = Path(root) / by_type_name(sweep)
    found = lookup(
        out,
        BY_TYPE_UNIT,
        lambda r: r.sweep == sweep and r.labels == labels,
        options.reuse_stale,
        options.log,
        own_scope_of(sweep.sft.task),
    )
    if found.usable:
        return found.value
    with unit_clock():  # the CPU seconds of the scoring, recorded in the result
        TypeScores(sweep, labels, score_by_type(sweep, root, labels)).save(out)
    return TypeScores.load(out)  # as saved: the numbers a later reuse reads, to the last digit
