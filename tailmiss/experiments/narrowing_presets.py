"""The narrowing regime's sweeps (:class:`~tailmiss.llm.tasks.narrowing.NarrowingTask`): the search that picked the
conflict's strength, the study at the picked setting, its controls, and a quick sweep.

Every sweep but the quick one starts from one SFT model of the task (the ``multisolution-sft`` recipe, 3000 steps) and
runs GRPO-family RL with the ``multisolution-grpo`` recipe (32 prompts x N rollouts per step, 4 mini-batch updates, lr
1e-4) for 400 steps, scoring exactly, every 20 steps, 256 held-out prompts stratified by prompt type (64 minority, 192
rest; the SFT model is step 0), with per-prompt masses kept.

**The rule that picks the setting, written before any N sweep.** Grid: ``conflict_rule = "complement"``, a share of
0.25, hidden, strength in {0.25, 0.5, 1}; GRPO N = 8, seeds 0-2 from one SFT model per strength
(``narrowing-search-str*``). A setting qualifies when

1. the SFT model's held-out pass@256 is unsaturated: at most 0.99;
2. GRPO's final held-out pass@256 lies below the SFT model's by more than twice the seeds' sd of the final value;
3. held-out pass@1 rises (by more than 0.05 over the run) and levels: the last third of the steps adds at most a
   quarter of the rise (seed means).

Of the qualifying settings the rule takes the one whose pass@256 falls furthest (seed mean), the weaker strength on a
tie; with none, the study is not run and the report says so
(:func:`tailmiss.studies.narrowing.search.search_result` applies it). It picked strength 0.5 (the report's search
table gives every setting's numbers).

**The quick preset's rule, written before its runs.** The first look (``tailmiss repro --quick``) shows this regime
with ``narrowing-quick``, the cheapest setting that still shows the fall. Grid: the study's task (strength 0.5, share
0.25, hidden); an SFT model of 1000 or 3000 steps (the study's recipe, its cosine schedule over the run's length);
GRPO N = 8 with the study's RL recipe (32 prompts x 8 rollouts per step, 4 mini-batches, constant rate, the 256
stratified held-out prompts scored every 20 steps) at lr 1e-4 (the study's) or 3e-4, stopped after 40, 60, 80, 100,
140 or 200 steps (read off 200-step runs, whose first steps are those of the shorter runs). It is judged on RL seeds
1 and 2; the first look shows seed 0, which the pick never saw. A setting qualifies when, on each of the two seeds,

1. the SFT model's held-out pass@256 is at most 0.99;
2. GRPO's held-out pass@256 at the last step lies at least 0.05 below the SFT model's;
3. the minority's pass@256 falls further than the rest's (the conflict narrows the minority, not the whole set).

Of the qualifying settings the rule takes the cheapest: the SFT model's training seconds plus three times the RL
seconds up to the last step (the first look trains GRPO, F-GRPO and the low-LR control; seconds from the runs'
``meta.json``, per step). With none, the quick preset stays the study's SFT model and 200 steps at lr 1e-4.
Nothing in the rule reads F-GRPO.

*Amended on 2026-12-02, before the runs it judges.* Every setting of that grid qualified, so the rule took its
cheapest corner (1000 SFT steps, 40 RL steps) and the grid never reached the cheapest setting that shows the fall.
The same rule is applied again to a grid that extends below that corner: an SFT model of 250, 500 or 1000 steps; lr
3e-4 or 1e-3; stopped after 10, 20, 30 or 40 steps (read off 40-step runs scored every 10 steps); RL seeds 1 and 2
again. A setting qualifies under conditions 1-3 above and

4. GRPO's held-out pass@1 at the last step lies at least 0.05 above the SFT model's (the frontier figure reads pass@1
   levels between the two).

Its cost counts what the first look trains that depends on the setting: the SFT model's training seconds plus four
times the RL seconds up to the stop (its four arms; the quick ladder's runs keep their own length). With none, the
first pick stands. ``benchmarks/narrowing_quick_pick.py --amended`` applies it.

**The frontier to the plateau: runs and rules written before the runs** (``narrowing-plateau``). The study's runs
stop at 400 steps, and its frontier levels end at the lowest best pass@1 of any run of a pair (0.68-0.70), below
the plateau (0.71-0.74) where the arms separate. These runs carry the study's frontier arms to their plateau, on
seeds no earlier run used, and the rules below judge them.

* *Runs.* The study's SFT model and RL recipe (above), at N = 8: GRPO; F-GRPO γ = 0.5, 1, 2; GRPO at the rate
  lr × m_γ for γ = 0.5, 1, 2 (F-GRPO App. N's scale m_γ: 0.679, 0.5, 0.3125; tags ``low-LR``, ``low-LR-m1``,
  ``low-LR-m2``); and GRPO at the rate that matches F-GRPO γ = 1's pass@1 speed (tag ``speed-LR``, rule below).
  1,600 steps (GRPO gains 0.005 over steps 300-400 and the slowest rate is 0.3125 × lr, so about 1,300 steps
  reach its plateau), held-out pass@1 and pass@256 scored exactly every 20 steps (80 evaluations; at least 20 on
  any plateau that lasts 400 steps). Seeds 10-14: the search used 0-2, the study 0-9, its controls 0-4; the
  verdicts read these seeds only.
* *The speed-matched rate* is lr × s, s the median over the study's seeds 0-4 (not these runs) of GRPO N = 8's
  steps to reach a pass@1 level L over F-GRPO γ = 1's (linear interpolation between evaluations), L halfway from the
  SFT model's pass@1 to the lowest final pass@1 of those ten runs. Computed before these runs: L = 0.529, ratios
  0.890, 0.885, 0.823, 0.788, 0.791, s = 0.823 (:data:`SPEED_MATCHED_SCALE`). Under Adam a step's size follows the
  rate, so GRPO at lr × s rises about as fast as F-GRPO γ = 1.
* *Plateau.* An arm has plateaued when its seed-mean held-out pass@1 gains less than 0.005 over the last quarter
  of its steps (1,200-1,600). An arm that has not is reported as *not plateaued*, and its end point is not judged.
* *Levels.* 8 pass@1 levels, evenly spaced from the SFT model's pass@1 (excluded) to the highest pass@1 that at
  least three seeds of each arm of a pair reach (included); each run is read where its pass@1 first reaches a level
  (as the study reads its levels), each level compared on the seeds of the pair that both reach it (at least
  three, else *cannot tell* at that level), by the report's noise rule, the 8 levels one Holm family; the words
  *above*, *on*, *below*, *crosses* as the study's.
* *End point.* Each run's end point is its final evaluation (every judged arm has plateaued there; the study's
  best-pass@1 selection, which stops a focal run at its baseline's step, would cut a slower arm before its
  plateau). For a pair (a, b), paired by seed: pass@1 is *equivalent* when two one-sided paired t-tests reject a
  difference beyond ±0.02 (each at 0.05, Holm over the pair's γ family); pass@256's difference is judged by the
  noise rule (threshold 0.01). Then a *dominates* b when its pass@256 is higher and its pass@1 equivalent or
  higher; *is dominated* when lower and its pass@1 equivalent or lower; *same point* when pass@1 is equivalent and
  pass@256 equivalent within ±0.01 (the same two one-sided tests); *cannot tell* otherwise. The bound 0.02 is the
  pass@1 gap that moves GRPO's path by the pass@256 threshold: on the study's seeds 0-4 pass@256 falls 0.35-0.78
  (median 0.56) per unit of pass@1 between pass@1 0.60 and 0.72, so 0.01 / 0.56 = 0.018, rounded up.
* *Pairs.* Each F-GRPO γ against GRPO, against GRPO at lr × m_γ, and (γ = 1) against the speed-matched arm; the
  three γ of one comparison form one family. The answer to "is F-GRPO more than a slower GRPO?" is given by γ, from
  the frontier word (with the pass@1 range its levels cover) and the end-point word together.
  (:mod:`tailmiss.studies.narrowing.plateau` applies these rules; :mod:`tailmiss.studies.equivalence` is the
  equivalence test.)

**The end point on enough fresh seeds** (``narrowing-endpoint``). On seeds 10-14 the end points' paired spread of
pass@1 is too wide to show two arms the same point within ±0.02. The rule that sets the seed count
(:mod:`tailmiss.studies.narrowing.end_point_seeds`, committed before these runs) read the plateau runs of seeds 10-14
(``python benchmarks/end_point_seeds.py``, 2026-12-07): paired sds of pass@1 0.016, 0.024, 0.008 and 0.033 (γ = 0.5
and 1 against GRPO, against GRPO at lr × m_γ), needing 9, 18, 5 and more than 30 seeds for pass@1's equivalence at
power 0.8, and 8, 5, nothing and 9 for pass@256's measured differences (+0.018, +0.051, +0.007, +0.051). The count is
the most the rule allows, **30 seeds (15-44)**, at which γ = 1's equivalence against GRPO at lr × m_1 has power 0.77
and every other wanted test at least 0.98. The runs: the plateau recipe (1,600 steps, scored every 20), GRPO,
F-GRPO γ = 0.5 and 1, GRPO at lr × m_0.5 and lr × m_1, at N = 8: 150 runs, about 8 CPU-hours. The end points are
judged on these seeds alone, by the rules of the plateau runs (above).

**Across settings: runs and rules written before the runs** (``narrowing-settings-str0.25``,
``narrowing-settings-share0.1``, ``narrowing-settings-share0.5``). Where is the focal weight more than a slower GRPO,
beyond the study's one setting?

* *Settings.* Conflict strength 0.25 at share 0.25 (the search's other qualifying strength; its SFT model
  ``narrowing-sft-str0.25``), and shares 0.1 and 0.5 at the study's strength 0.5, each with an SFT model of its own
  (the study's SFT recipe); the conflict hidden throughout.
* *Runs.* The plateau recipe (1,600 steps, held-out pass@1 and pass@256 scored exactly every 20 steps) at N = 8:
  GRPO; F-GRPO γ = 0.5, 1, 2; GRPO at lr × m_γ for the three γ. The study's learning rate at every setting, not
  tuned per setting; no speed-matched arm (its rate was matched at the study's setting only). Seeds 10-14 (five,
  the fewest the question allows: the study's setting needed 30 to decide its end point, so several cells may read
  *cannot tell*). 7 arms x 5 seeds x 3 settings = 105 runs, about 5.5 CPU-hours, and two SFT models.
* *Reading.* First, whether GRPO loses coverage at the setting: its final held-out pass@256 below the SFT model's
  by the noise rule. Where it does not, the setting reads *GRPO does not lose coverage here* and no γ is judged (a
  claim is judged in the regime it is about). Where it does, each γ is set against GRPO at lr × m_γ by the plateau
  runs' rules (above: plateau, frontier levels, end point), the three γ of a setting one family, and its cell gives
  the word (*dominates*, *same point*, *is dominated*, *cannot tell*) with the end point's pass@256 difference. The
  table has one row per setting beside the study's own (its end point on seeds 15-44), one column per γ.

**The counterfactual pool** (``narrowing-counterfactual``): GRPO and F-GRPO γ = 1 at N = 8, the study's recipe and
SFT model, seeds 0-4, trained on the rest's prompts alone (``train_types``; tag ``rest-only``), the held-out set
unchanged. Its rule, written before its runs: :mod:`tailmiss.studies.narrowing.counterfactual`.
"""

from __future__ import annotations

from tailmiss.analytic import lr_matched_scale
from tailmiss.experiments.ladder import Ladder, Rung
from tailmiss.experiments.sweep_config import LLMSweep, Variant
from tailmiss.llm.config import RLConfig, SFTConfig
from tailmiss.llm.tasks.narrowing import NarrowingTask

__all__ = [
    "narrowing_workloads",
    "SEARCH_STRENGTHS",
    "PICKED_STRENGTH",
    "ENTROPY_COEFS",
    "KL_COEFS",
    "DS_COEFS",
    "QUICK_SFT_STEPS",
    "QUICK_LR",
    "QUICK_STEPS",
    "QUICK_EVAL_EVERY",
    "N_SHAPE_SIZES",
    "PLATEAU_STEPS",
    "PLATEAU_SEEDS",
    "SPEED_MATCHED_SCALE",
    "END_POINT_SEEDS",
    "SETTINGS",
    "SETTINGS_SEEDS",
    "REST_ONLY",
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


def _task(strength: float = PICKED_STRENGTH, share: float = 0.25, visible: bool = False) -> NarrowingTask:
    return NarrowingTask(conflict_share=share, conflict_strength=strength, conflict_visible=visible)


def _tag(prefix: str, coef: float, first: float) -> str:
    """The control's tag: ``prefix`` at the grid's first (the paper's) value, ``prefix-1e-2`` at the others."""
    if coef == first:
        return prefix
    mantissa, exponent = f"{coef:.0e}".split("e")
    return f"{prefix}-{mantissa}e{int(exponent)}"


_GRPO8 = (Variant("grpo", 0.0, 8),)
_N_SWEEP = tuple(Variant("grpo", 0.0, n) for n in (2, 4, 8, 16, 32)) + tuple(Variant("grpo", g, 8) for g in (0.5, 1.0))
_PICKED = f"str{PICKED_STRENGTH:g}"


def _controls(lr: float) -> tuple[Variant, ...]:
    """γ = 2, CISPO and the controls at N = 8 (GRPO's rate ``lr``)."""
    ds = {"reward_transform": "differential-smoothing"}
    return (
        Variant("grpo", 2.0, 8),
        Variant("cispo", 0.0, 8),
        Variant("grpo", 0.0, 8, tag="low-LR", overrides={"optim.lr": lr * lr_matched_scale(0.5)}),
        *(
            Variant("grpo", 0.0, 8, tag=_tag("entropy", c, ENTROPY_COEFS[0]), overrides={"entropy_coef": c})
            for c in ENTROPY_COEFS
        ),
        *(Variant("grpo", 0.0, 8, tag=_tag("KL", c, KL_COEFS[0]), overrides={"kl_coef": c}) for c in KL_COEFS),
        *(
            Variant("grpo", 0.0, 8, tag=_tag("DS", c, DS_COEFS[0]), overrides={**ds, "transform_coef": c})
            for c in DS_COEFS
        ),
    )


QUICK_SFT_STEPS, QUICK_LR, QUICK_STEPS, QUICK_EVAL_EVERY = 250, 1e-3, 10, 5
"""What the amended quick rule (module docstring) picked: a 250-step SFT model, lr 1e-3, 10 RL steps
(``python benchmarks/narrowing_quick_pick.py --amended``, 2026-12-02). Every setting of the amended grid qualified
too: on both selection seeds GRPO N = 8's held-out pass@256 fell by 0.11-0.25, the minority's by 0.43-0.88, the
rest's by at most 0.08, and pass@1 rose by 0.20-0.42. The cheapest was again the grid's corner, 23.1 s (the SFT
model's 10.5 s plus four times a quarter of the 40-step runs' 12.4-12.8 s, as the rule prices a stop; the first
pick, 1000 SFT steps and 40 steps at lr 3e-4, priced 75.9 s on the same runs). The quick preset scores every 5
steps (three points per run; scoring is exact and draws nothing, so it changes no trained number)."""


N_SHAPE_SIZES = (2, 4, 8, 16, 32)
"""The group sizes of ``narrowing-ladder-shared-n`` (the narrowing study's own N sweep)."""
PLATEAU_STEPS = 1600
"""Steps of the plateau runs (module docstring)."""
PLATEAU_SEEDS = tuple(range(10, 15))
"""The plateau runs' seeds: none of them used by the search, the study or its controls."""
_END_POINT_ARMS = ("GRPO N=8", "F-GRPO γ=0.5 N=8", "F-GRPO γ=1 N=8", "GRPO N=8 low-LR", "GRPO N=8 low-LR-m1")
END_POINT_SEEDS = tuple(range(15, 45))
"""The end-point runs' seeds: the count the seed rule set from seeds 10-14 (module docstring), none used before."""
SETTINGS = {"str0.25": (0.25, 0.25), "share0.1": (0.5, 0.1), "share0.5": (0.5, 0.5)}
"""The settings of ``narrowing-settings-<tag>``: tag -> (conflict strength, conflict share) (module docstring)."""
SETTINGS_SEEDS = PLATEAU_SEEDS
"""The across-settings runs' seeds (module docstring)."""
REST_ONLY = {"train_types": ("rest",)}
"""The counterfactual pool's override: RL draws the rest's training prompts alone (module docstring)."""
SPEED_MATCHED_SCALE = 0.823
"""GRPO's rate scale that matches F-GRPO γ = 1's pass@1 speed, from the study's seeds 0-4 (module docstring)."""


def _plateau_arms(lr: float) -> tuple[Variant, ...]:
    """The plateau runs' arms at N = 8 (module docstring)."""

    def slower(tag: str, scale: float) -> Variant:
        return Variant("grpo", 0.0, 8, tag=tag, overrides={"optim.lr": lr * scale})

    return (
        Variant("grpo", 0.0, 8),
        *(Variant("grpo", g, 8) for g in (0.5, 1.0, 2.0)),
        slower("low-LR", lr_matched_scale(0.5)),
        slower("low-LR-m1", lr_matched_scale(1.0)),
        slower("low-LR-m2", lr_matched_scale(2.0)),
        slower("speed-LR", SPEED_MATCHED_SCALE),
    )


def _quick_sft(study_sft: SFTConfig) -> SFTConfig:
    """The first look's SFT model of the narrowing task: the study's recipe for :data:`QUICK_SFT_STEPS` steps."""
    return study_sft.replace(name=f"narrowing-sft-{_PICKED}-quick", steps=QUICK_SFT_STEPS)


def _quick(study_sft: SFTConfig, base: RLConfig) -> tuple[SFTConfig, RLConfig]:
    """The quick preset's SFT model and RL recipe (:data:`QUICK_SFT_STEPS`, :data:`QUICK_LR`, :data:`QUICK_STEPS`)."""
    sft = _quick_sft(study_sft)
    rl = base.replace(
        name=f"narrowing-{_PICKED}-quick",
        steps=QUICK_STEPS,
        eval_every=QUICK_EVAL_EVERY,
        checkpoint_every=QUICK_STEPS,
        optim=base.optim.replace(lr=QUICK_LR),
    )
    return sft, rl


def _quick_arms(lr: float) -> tuple[Variant, ...]:
    """The first look's arms at N = 8: GRPO, F-GRPO γ = 0.5 and 1, and GRPO at the matched lower rate."""
    low = Variant("grpo", 0.0, 8, tag="low-LR", overrides={"optim.lr": lr * lr_matched_scale(0.5)})
    return (Variant("grpo", 0.0, 8), Variant("grpo", 0.5, 8), Variant("grpo", 1.0, 8), low)


def _settings_arms(lr: float) -> tuple[Variant, ...]:
    """The across-settings runs' arms: the plateau's but the speed-matched one (module docstring)."""
    return tuple(v for v in _plateau_arms(lr) if v.tag != "speed-LR")


def _sweeps(sft: SFTConfig, rl: RLConfig) -> dict[str, LLMSweep]:
    base = rl.replace(
        eval_every=20, eval_prompts=256, eval_seed=0, eval_answers="correct", eval_per_prompt=True, checkpoint_every=100
    )

    def pair(tag: str, task: NarrowingTask, **changes) -> tuple[SFTConfig, RLConfig]:
        return sft.replace(name=f"narrowing-sft-{tag}", task=task), base.replace(name=f"narrowing-{tag}", **changes)

    study_sft, study_rl = pair(_PICKED, _task())
    quick_sft, quick_rl = _quick(study_sft, base)
    out = [
        LLMSweep(f"narrowing-search-str{s:g}", *pair(f"str{s:g}", _task(s)), _GRPO8, seeds=(0, 1, 2))
        for s in SEARCH_STRENGTHS
    ]
    out += [
        LLMSweep("narrowing", study_sft, study_rl, _N_SWEEP, seeds=tuple(range(10))),
        LLMSweep("narrowing-controls", study_sft, study_rl, _controls(base.optim.lr), seeds=tuple(range(5))),
        LLMSweep("narrowing-visible", *pair("visible", _task(visible=True)), _GRPO8, seeds=tuple(range(5))),
        LLMSweep("narrowing-none", *pair("none", _task(share=0.0)), _GRPO8, seeds=tuple(range(5))),
        LLMSweep("narrowing-quick", quick_sft, quick_rl, _quick_arms(quick_rl.optim.lr)),
        LLMSweep(
            "narrowing-plateau",
            study_sft,
            study_rl.replace(name="narrowing-plateau", steps=PLATEAU_STEPS, checkpoint_every=200),
            _plateau_arms(base.optim.lr),
            seeds=PLATEAU_SEEDS,
        ),
        LLMSweep(
            "narrowing-endpoint",
            study_sft,
            study_rl.replace(name="narrowing-plateau", steps=PLATEAU_STEPS, checkpoint_every=200),
            tuple(v for v in _plateau_arms(base.optim.lr) if v.label in _END_POINT_ARMS),
            seeds=END_POINT_SEEDS,
        ),
    ]
    cf = tuple(Variant("grpo", g, 8, tag="rest-only", overrides=REST_ONLY) for g in (0.0, 1.0))
    out.append(LLMSweep("narrowing-counterfactual", study_sft, study_rl, cf, seeds=tuple(range(5))))
    for tag, (strength, share) in SETTINGS.items():
        setting_sft, setting_rl = pair(tag, _task(strength, share))
        name = f"narrowing-settings-{tag}"
        setting_rl = setting_rl.replace(name=name, steps=PLATEAU_STEPS, checkpoint_every=200)
        out.append(LLMSweep(name, setting_sft, setting_rl, _settings_arms(base.optim.lr), seeds=SETTINGS_SEEDS))
    return {s.name: s for s in out}


def _ladders(sft: SFTConfig, rl: RLConfig, rungs: tuple[Rung, ...]) -> dict[str, Ladder]:
    """Why it narrows: the table (the categorical simulator's policy: one softmax per prompt over its 1,000 answers),
    the factorized policy and the transformer, each with Adam at the ladder's calibrated rate, from the study's SFT
    model, on a fixed pool of 64 training prompts (16 per step, one on-policy update, 200 steps) that is also the
    evaluation set (scored exactly per prompt: a table policy never moves a prompt it does not train on). GRPO and
    F-GRPO (γ = 1) at N = 8, five seeds; the quick ladder from the first look's SFT model, 20 steps, seed 0. The
    shared ladders (``narrowing-ladder-shared`` and its quick version) train the shared rung on the same pool, arms
    and seeds."""
    study_sft = sft.replace(name=f"narrowing-sft-{_PICKED}", task=_task())
    base = rl.replace(
        name="narrowing-ladder",
        prompts_per_step=16,
        train_prompts=64,
        pool_seed=0,
        minibatches=1,
        steps=200,
        optim=rl.optim.replace(weight_decay=0.0),
        eval_every=20,
        eval_split="train",
        eval_prompts=64,
        eval_seed=0,
        eval_answers="correct",
        eval_per_prompt=True,
        checkpoint_every=100,
    )
    adam = tuple(r for r in rungs if r.optimizer == "adamw" and r.lr in (0.1, 0.05, 2e-4))
    # The quick ladder's length, by a rule written (2026-12-02) before its runs: the shortest of 20, 40 and 60 steps
    # (read off 60-step runs scored every 20 steps; constant rate, scoring draws nothing) at which RL seed 1 (the
    # first look shows seed 0, which the pick never sees) shows what the first look reads from the ladder: under
    # GRPO N = 8 the transformer's minority pass@256 falls by at least 0.05 while the table's and the factorized
    # policy's change by no less than -0.01. With none, 60. `python benchmarks/first_look_pick.py ladder` applies it;
    # it picked 20 (2026-12-02: at 20 steps seed 1's transformer minority pass@256 has fallen by 0.369, the table's
    # has moved +0.0004 and the factorized policy's +0.0016; the shortest length qualifies, as for narrowing-quick).
    quick = base.replace(name="narrowing-ladder-quick", steps=20)
    # The shared rung (the log-linear policy shared across prompts, `tailmiss.llm.tabular.SharedPolicy`) in a ladder
    # of its own, so that the ladder above keeps its runs. Its rate by the calibration rule every rung's follows
    # (above `_LADDER_RL` in presets.py: one run per candidate on the learning ladder, N = 8, γ = 0, seed 0; final
    # pool Q_pos in [0.85, 0.95], closest to 0.9), written before its runs (2026-12-03);
    # `python benchmarks/shared_rung_lr.py` applies it: lr 0.003, 0.01, 0.03, 0.1 end at 0.658, 0.814, 0.947, 0.974
    # from 0.592; the pick is 0.03. Nothing from the narrowing task chose it.
    shared = (Rung("shared", "adamw", 0.03),)
    # The N shape of the shared rung and the transformer (GRPO at N = 2 ... 32 on the same pool, seeds 0-4), its rule
    # written before its runs (2026-12-03) in `tailmiss.studies.sharing.nshape`. Not in the first look.
    transformer = tuple(r for r in adam if r.model == "transformer")
    # The frontier on the ladder's pool: the shared rung and the transformer carried to their plateau (1,600 steps,
    # seeds 10-14 as the plateau runs), GRPO and F-GRPO γ = 1 at their rates and GRPO at lr × m_1 (F-GRPO App. N's
    # scale for γ = 1, 0.5) in a ladder of its own (a ladder's rungs fix their rates). Its rule written before its
    # runs (2026-12-03) in `tailmiss.studies.sharing.frontier`. Not in the first look.
    far = base.replace(name="narrowing-ladder-frontier", steps=PLATEAU_STEPS, checkpoint_every=200)
    pair = shared + transformer
    low = tuple(Rung(r.model, r.optimizer, r.lr * lr_matched_scale(1.0)) for r in pair)
    out = (
        Ladder("narrowing-ladder", study_sft, base, adam, (8,), gammas=(0.0, 1.0), seeds=tuple(range(5))),
        Ladder("narrowing-ladder-quick", _quick_sft(study_sft), quick, adam, (8,), gammas=(0.0, 1.0), seeds=(0,)),
        Ladder("narrowing-ladder-shared", study_sft, base, shared, (8,), gammas=(0.0, 1.0), seeds=tuple(range(5))),
        Ladder(
            "narrowing-ladder-shared-quick", _quick_sft(study_sft), quick, shared, (8,), gammas=(0.0, 1.0), seeds=(0,)
        ),
        Ladder(
            "narrowing-ladder-shared-n",
            study_sft,
            base,
            shared + transformer,
            N_SHAPE_SIZES,
            gammas=(0.0,),
            seeds=tuple(range(5)),
        ),
        Ladder("narrowing-ladder-frontier", study_sft, far, pair, (8,), gammas=(0.0, 1.0), seeds=PLATEAU_SEEDS),
        Ladder(
            "narrowing-ladder-frontier-low",
            study_sft,
            far.replace(name="narrowing-ladder-frontier-low"),
            low,
            (8,),
            gammas=(0.0,),
            seeds=PLATEAU_SEEDS,
        ),
    )
    return {lad.name: lad for lad in out}


def narrowing_workloads(
    sft: SFTConfig, rl: RLConfig, rungs: tuple[Rung, ...]
) -> tuple[dict[str, LLMSweep], dict[str, Ladder]]:
    """The narrowing sweeps and ladders, from the task (a) recipes ``sft`` (``multisolution-sft``) and ``rl``
    (``multisolution-grpo``) and the ladder's ``rungs`` (:data:`tailmiss.experiments.presets.LADDER_RUNGS`).

    Sweeps: the search (``narrowing-search-str*``), the study (``narrowing``: GRPO N = 2-32 and F-GRPO γ = 0.5, 1 at
    N = 8, 10 seeds), its controls (``narrowing-controls``: γ = 2, CISPO, low-LR, entropy, KL and DS-GRPO at N = 8,
    5 seeds), the task's controls (``narrowing-visible``, ``narrowing-none``: GRPO N = 8, 5 seeds) and
    ``narrowing-quick`` (GRPO, F-GRPO γ = 0.5 and 1 and low-LR at N = 8 from a 250-step SFT model, lr 1e-3, 10
    steps, seed 0: :data:`QUICK_SFT_STEPS`), and ``narrowing-plateau`` (the frontier's arms to their plateau, seeds
    10-14: :data:`PLATEAU_STEPS`). Ladders: ``narrowing-ladder`` and ``narrowing-ladder-quick`` (from the
    quick SFT model, 20 steps, seed 0), and the same with the shared rung alone (``narrowing-ladder-shared``,
    ``narrowing-ladder-shared-quick``).
    """
    return _sweeps(sft, rl), _ladders(sft, rl, rungs)
