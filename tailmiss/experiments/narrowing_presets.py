"""The narrowing regime's sweeps (:class:`~tailmiss.llm.tasks.narrowing.NarrowingTask`): the search that picked the
conflict's strength, the study at the picked setting, its controls, and a quick sweep.

Every sweep starts from one SFT model of the task (the ``multisolution-sft`` recipe, 3000 steps) and runs GRPO-family
RL with the ``multisolution-grpo`` recipe (32 prompts x N rollouts per step, 4 mini-batch updates, lr 1e-4) for 400
steps, scoring exactly, every 20 steps, 256 held-out prompts stratified by prompt type (64 minority, 192 rest; the
SFT model is step 0), with per-prompt masses kept.

**The rule that picks the setting, written before any N sweep.** Grid: ``conflict_rule = "complement"``, a share of
0.25, hidden, strength in {0.25, 0.5, 1}; GRPO N = 8, seeds 0-2 from one SFT model per strength
(``narrowing-search-str*``). A setting qualifies when

1. the SFT model's held-out pass@256 is unsaturated: at most 0.99;
2. GRPO's final held-out pass@256 lies below the SFT model's by more than twice the seeds' sd of the final value;
3. held-out pass@1 rises (by more than 0.05 over the run) and levels: the last third of the steps adds at most a
   quarter of the rise (seed means).

Of the qualifying settings the rule takes the one whose pass@256 falls furthest (seed mean), the weaker strength on a
tie; with none, the study is not run and the report says so
(:func:`tailmiss.studies.narrowing.claims.search_verdict` applies it). It picked strength 0.5 (the report's search
table gives every setting's numbers).
"""

from __future__ import annotations

from tailmiss.analytic import lr_matched_scale
from tailmiss.experiments.presets import LLM_PRESETS
from tailmiss.experiments.sweep_config import LLMSweep, Variant
from tailmiss.llm.tasks.narrowing import NarrowingTask

__all__ = [
    "NARROWING_SWEEPS",
    "SEARCH_STRENGTHS",
    "PICKED_STRENGTH",
    "ENTROPY_COEFS",
    "KL_COEFS",
    "DS_COEFS",
    "NARROWING_FAMILIES",
]

SEARCH_STRENGTHS = (0.25, 0.5, 1.0)
"""The search grid of ``conflict_strength`` (share 0.25, hidden, rule ``"complement"``)."""
PICKED_STRENGTH = 0.5
"""What the search's rule picked (module docstring)."""
ENTROPY_COEFS = (1e-3, 1e-2)
"""Entropy bonus coefficients of the controls, fixed before any run (the paper's 1e-3 and ten times it)."""
KL_COEFS = (1e-3, 1e-2)
"""KL penalty coefficients of the controls, fixed before any run (the paper's 1e-3 and ten times it)."""
DS_COEFS = (0.05, 0.2)
"""DS-GRPO's beta per nat of sequence log-probability, fixed before any run (the paper gives none)."""

_SFT = LLM_PRESETS["multisolution-sft"]
_RL = LLM_PRESETS["multisolution-grpo"].replace(
    eval_every=20,
    eval_prompts=256,
    eval_seed=0,
    eval_answers="correct",
    eval_per_prompt=True,
    checkpoint_every=100,
)
_LR = _RL.lr


def _task(strength: float = PICKED_STRENGTH, share: float = 0.25, visible: bool = False) -> NarrowingTask:
    return NarrowingTask(conflict_share=share, conflict_strength=strength, conflict_visible=visible)


def _sft(tag: str, task: NarrowingTask):
    return _SFT.replace(name=f"narrowing-sft-{tag}", task=task)


def _rl(tag: str, **changes):
    return _RL.replace(name=f"narrowing-{tag}", **changes)


def _tag(prefix: str, coef: float) -> str:
    """``entropy-1e-3``: a variant tag (letters, digits and '-')."""
    mantissa, exponent = f"{coef:.0e}".split("e")
    return f"{prefix}-{mantissa}e{int(exponent)}"


_PICKED = f"str{PICKED_STRENGTH:g}"
_GRPO8 = (Variant("grpo", 0.0, 8),)
_N_SWEEP = tuple(Variant("grpo", 0.0, n) for n in (2, 4, 8, 16, 32)) + tuple(Variant("grpo", g, 8) for g in (0.5, 1.0))
_CONTROLS = (
    Variant("grpo", 2.0, 8),
    Variant("cispo", 0.0, 8),
    Variant("grpo", 0.0, 8, tag="low-LR", overrides={"lr": _LR * lr_matched_scale(0.5)}),
    *(Variant("grpo", 0.0, 8, tag=_tag("entropy", c), overrides={"entropy_coef": c}) for c in ENTROPY_COEFS),
    *(Variant("grpo", 0.0, 8, tag=_tag("KL", c), overrides={"kl_coef": c}) for c in KL_COEFS),
    *(
        Variant(
            "grpo",
            0.0,
            8,
            tag=_tag("DS", c),
            overrides={"reward_transform": "differential-smoothing", "transform_coef": c},
        )
        for c in DS_COEFS
    ),
)
_SEARCH = {
    s: LLMSweep(f"narrowing-search-str{s:g}", _sft(f"str{s:g}", _task(s)), _rl(f"str{s:g}"), _GRPO8, seeds=(0, 1, 2))
    for s in SEARCH_STRENGTHS
}
_STUDY_SFT = _SFT.replace(name=f"narrowing-sft-{_PICKED}", task=_task())
_STUDY_RL = _rl(_PICKED)
# quick: the study's SFT model (a minute), then GRPO and F-GRPO (gamma = 1) at N = 8 for 200 steps, seed 0
_QUICK_RL = _rl(f"{_PICKED}-quick", steps=200)

NARROWING_SWEEPS: dict[str, LLMSweep] = {
    s.name: s
    for s in (
        *_SEARCH.values(),
        LLMSweep("narrowing", _STUDY_SFT, _STUDY_RL, _N_SWEEP, seeds=tuple(range(10))),
        LLMSweep("narrowing-controls", _STUDY_SFT, _STUDY_RL, _CONTROLS, seeds=tuple(range(5))),
        LLMSweep(
            "narrowing-visible", _sft("visible", _task(visible=True)), _rl("visible"), _GRPO8, seeds=tuple(range(5))
        ),
        LLMSweep("narrowing-none", _sft("none", _task(share=0.0)), _rl("none"), _GRPO8, seeds=tuple(range(5))),
        LLMSweep("narrowing-quick", _STUDY_SFT, _QUICK_RL, (Variant("grpo", 0.0, 8), Variant("grpo", 1.0, 8))),
    )
}
"""The narrowing sweeps: the search (``narrowing-search-str*``), the study (``narrowing``: GRPO N = 2-32 and F-GRPO
gamma = 0.5, 1 at N = 8, 10 seeds), its controls (``narrowing-controls``: gamma = 2, CISPO, low-LR, entropy, KL and
DS-GRPO at N = 8, 5 seeds), the task's controls (``narrowing-visible``, ``narrowing-none``: GRPO N = 8, 5 seeds) and
``narrowing-quick``."""
NARROWING_FAMILIES = tuple(n for n in NARROWING_SWEEPS if n != "narrowing-quick")
"""The full sweeps of the narrowing study, the search first."""
