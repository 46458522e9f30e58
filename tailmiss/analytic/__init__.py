r"""Closed forms of the F-GRPO and BroRL theory (numpy/scipy only).

Every function broadcasts over its scalar arguments, validates its inputs
(``ValueError`` naming the argument and the bad value; arguments that do not
broadcast are named with their shapes) and works in log space where powers such
as :math:`(1-\tau)^N` would otherwise lose all their digits. Booleans (outside
the masks), strings, ``None``, NaN and infinities are rejected; group sizes and counts must be whole
numbers below ``2**53``, the range in which float64 is exact for integers (see
:mod:`tailmiss._checks`).

Distribution arguments ``probs`` are arrays whose *last* axis runs over the
action set; ``correct`` and ``sampled`` broadcast against them.

References
----------
F-GRPO: arXiv 2602.06717 v2 (Lemma 3.1, Prop. 3.2, Lemma H.1, App. N).
BroRL: arXiv 2510.01180 (Theorem 1 / Eq. 17, Lemma 2, Corollary 3).

Statistics on finite samples rather than closed forms live in
:mod:`tailmiss.analytic.significance` (imported from there, outside this
broadcasting contract): F-GRPO App. Q's paired m-out-of-n subsampling test,
the benchmark pass@k estimator and outcomes drawn from exact correct masses;
:mod:`tailmiss.analytic.significance_size` measures that test's size under its
own null (two independent answer draws from one policy).
"""

from tailmiss.analytic.advantages import AdvantageMagnitudes, advantage_magnitudes, focal_weight, lr_matched_scale
from tailmiss.analytic.expectations import (
    SampledMass,
    expected_batch_mood,
    expected_sampled_mass,
    expected_unsampled_coupling,
    expected_unsampled_mass,
    expected_unsampled_second_moment,
)
from tailmiss.analytic.initial import InitialDistribution, initial_distribution
from tailmiss.analytic.pass_at_k import pass_at_k, pass_at_k_from_mass
from tailmiss.analytic.tail_miss import TailMissPeak, active_probability, tail_miss_peak, tail_miss_probability
from tailmiss.analytic.update import MassBalance, UnsampledCorrectChange, mass_balance, unsampled_correct_change

__all__ = [
    "active_probability",
    "tail_miss_probability",
    "tail_miss_peak",
    "TailMissPeak",
    "mass_balance",
    "MassBalance",
    "unsampled_correct_change",
    "UnsampledCorrectChange",
    "expected_unsampled_second_moment",
    "expected_unsampled_mass",
    "expected_unsampled_coupling",
    "expected_sampled_mass",
    "SampledMass",
    "expected_batch_mood",
    "focal_weight",
    "advantage_magnitudes",
    "AdvantageMagnitudes",
    "lr_matched_scale",
    "pass_at_k",
    "pass_at_k_from_mass",
    "initial_distribution",
    "InitialDistribution",
]
