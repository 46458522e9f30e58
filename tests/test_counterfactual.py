"""The counterfactual pool's rule (:mod:`tailmiss.studies.narrowing.counterfactual`) on made-up histories."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tailmiss.studies.narrowing.counterfactual import (
    ARMS,
    TAG,
    counterfactual_lines,
    counterfactual_rows,
    counterfactual_table,
)


def _typed(label: str, finals: dict, seeds=range(5), sft=(0.9, 0.3)) -> pd.DataFrame:
    """``by_type``'s rows of one arm: step 0 at the SFT model's values, step 400 at ``finals[type](seed)``."""
    rows = []
    for seed in seeds:
        for kind, start in zip(("minority", "rest"), sft):
            rows.append({"label": label, "seed": seed, "step": 0, "type": kind, "pass256": start, "mu_pos": 0.1})
            rows.append(
                {"label": label, "seed": seed, "step": 200, "type": kind, "pass256": 0.5, "mu_pos": 0.2}
            )  # a middle evaluation the rule does not read
            rows.append(
                {"label": label, "seed": seed, "step": 400, "type": kind, "pass256": finals[kind](seed), "mu_pos": 0.3}
            )
    return pd.DataFrame(rows)


def _frames(with_minority, without_minority):
    rest = {"rest": lambda s: 0.95}
    study = pd.concat([_typed(a, {"minority": with_minority, **rest}) for a in ARMS], ignore_index=True)
    cf = pd.concat([_typed(f"{a} {TAG}", {"minority": without_minority, **rest}) for a in ARMS], ignore_index=True)
    return study, cf


def test_rows_read_the_sft_model_and_the_last_evaluation():
    study, cf = _frames(lambda s: 0.7 + 0.01 * s, lambda s: 0.6 + 0.01 * s)
    rows = counterfactual_rows(study, cf)
    assert len(rows) == 10 and set(rows["arm"]) == set(ARMS)
    first = rows.iloc[0]
    assert (first["sft"], first["pass256_with"], first["pass256_without"]) == (0.9, 0.7, 0.6)
    assert first["rest_with"] == first["rest_without"] == 0.95


@pytest.mark.parametrize(
    ("without", "word", "remaining"),
    [
        (lambda s: 0.6 + 0.01 * s + 0.002 * (-1) ** s, "lower", 1.553),  # loses 0.28 instead of 0.18
        (lambda s: 0.8 + 0.01 * s + 0.002 * (-1) ** s, "higher", 0.442),
        (lambda s: 0.7 + 0.01 * s + 0.001 * (-1) ** s, "same", 0.998),
        (lambda s: 0.7 + 0.01 * s + 0.05 * (-1) ** s, "cannot tell", 0.944),
    ],
)
def test_the_word_follows_the_rule(without, word, remaining):
    study, cf = _frames(lambda s: 0.7 + 0.01 * s, without)
    table = counterfactual_table(counterfactual_rows(study, cf))
    assert list(table["word"]) == [word, word]
    assert np.allclose(table["remaining"], remaining, atol=0.002)
    assert all(d.family == 2 for d in table["diff"] if d.test != "none")  # the two arms: one Holm family
    text = "\n".join(counterfactual_lines(table))
    assert all(arm in text for arm in ARMS) and "share remaining" in text


def test_a_seed_missing_from_one_side_is_left_out():
    study, cf = _frames(lambda s: 0.7, lambda s: 0.6)
    cf = cf[cf["seed"] != 4]
    rows = counterfactual_rows(study, cf)
    assert sorted(set(rows["seed"])) == [0, 1, 2, 3]
