"""Named shared-parameter setups: the synthetic conflict at F-GRPO App. J's scale, and its quick version.

``shared-conflict`` is F-GRPO's simulation (App. J: 128,000 actions, 10,000 correct, the seeded start, the
log-probability surrogate with Adam at lr 1e-2, mean-centred rewards ±1) on 8 prompts that share one log-linear
policy (:class:`~tailmiss.sim.shared.SharedSimConfig`): one-hot prompt features and a trained answer bias, the
smallest sharing there is; 2 of the 8 prompts (a share of 0.25, as in the transformer's narrowing task) are the
minority, whose correct set is 10,000 of the rest's incorrect answers, while the rest's correct set is part of the
minority's incorrect answers. Group sizes 2 … 131,072 as in F-GRPO Fig. 2, γ ∈ {0, 1}, 4 seeds, 1,000 steps.

How its result is read, stated before any of its runs: each prompt type's correct mass :math:`Q_{pos}` and retained
mass at the last step, mean over its prompts, then over seeds (``SharedSimResult.by_type``). The minority
*narrows* at a group size when its final :math:`Q_{pos}` is below its start by more than 0.01 in every seed; the
focal weight *protects* it there when γ = 1's final minority :math:`Q_{pos}` exceeds γ = 0's in every seed
(paired by seed, the draws of one seed being common to both). These words describe this simulator; they are no
verdict on the paper and enter no report.
"""

from __future__ import annotations

from tailmiss.sim.presets import preset as table_preset
from tailmiss.sim.shared.config import SharedSimConfig

__all__ = ["SHARED_PRESETS", "shared_preset"]

_CONFLICT = SharedSimConfig(
    sim=table_preset("fgrpo-fig2").replace(
        name="shared-conflict", group_sizes=(2, 16, 256, 8192, 131072), seeds=(0, 1, 2, 3), log_every=20
    ),
    num_prompts=8,
    minority_prompts=2,
    prompt_features="one-hot",
    train_bias=True,
)

SHARED_PRESETS: dict[str, SharedSimConfig] = {
    c.name: c
    for c in (
        _CONFLICT,
        _CONFLICT.replace(name="shared-conflict-quick", group_sizes=(2, 256, 8192), seeds=(0,), steps=300),
    )
}
"""Every named shared-parameter setup; the quick one keeps the action space, the start and the prompts and cuts the
group sizes, seeds and steps so that it runs in about a minute on two CPU cores."""


def shared_preset(name: str) -> SharedSimConfig:
    """The named :class:`~tailmiss.sim.shared.SharedSimConfig`; ``ValueError`` lists the known names otherwise."""
    if name not in SHARED_PRESETS:
        raise ValueError(f"unknown shared preset {name!r}; known presets: {', '.join(SHARED_PRESETS)}")
    return SHARED_PRESETS[name]
