"""One definition of each regime idea (tailmiss.analytic.regimes): Spearman with its guards, zone agreement, NShape."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tailmiss.analytic.regimes import NShape, concentration_zone, n_shape, spearman, zone_agreement, zones


def test_spearman_matches_scipy_and_is_nan_where_undefined():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=12), rng.normal(size=12)
    assert spearman(a, b) == pytest.approx(stats.spearmanr(a, b).statistic, rel=1e-12)
    assert spearman([1, 2, 3], [3, 1, 2]) == pytest.approx(-0.5)
    assert np.isnan(spearman([1, 2], [2, 1]))  # fewer than 3 points
    assert np.isnan(spearman([1, 2, 3], [5, 5, 5]))  # a constant side
    with pytest.raises(ValueError, match="same shape"):
        spearman([1, 2, 3], [1, 2])


def test_zone_agreement_is_the_share_of_equal_labels():
    assert zone_agreement(["I", "II", "III"], ["I", "II", "II"]) == pytest.approx(2 / 3)
    assert zone_agreement(zones([2, 8, 32], [0.9, 0.2, 0.9]), ["I", "II", "III"]) == 1.0
    with pytest.raises(ValueError, match="one length"):
        zone_agreement(["I"], ["I", "II"])


def test_concentration_zone_spans_the_zone_ii_labels():
    ns, m = [2, 8, 32, 128, 512], [0.9, 0.4, 0.2, 0.3, 0.9]
    labels = zones(ns, m)
    lo, hi = concentration_zone(ns, m)
    inside = [lo < n < hi for n in ns]
    assert inside == [lab == "II" for lab in labels]


def test_n_shape_is_a_frozen_value():
    shape = n_shape([2, 8, 32], [0.9, 0.2, 0.8])
    assert isinstance(shape, NShape) and shape.worst_n == 8 and shape.recovers
    with pytest.raises(AttributeError):
        shape.worst_n = 2
