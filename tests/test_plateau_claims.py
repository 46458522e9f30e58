"""The plateau runs read pair by pair (:mod:`tailmiss.studies.narrowing.plateau_claims`): the reading of the frontier
and the end point together, the comparisons and their families, on constructed histories, and the part's text."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tailmiss.studies.narrowing.plateau_claims import (
    COMPARISONS,
    PLATEAU_GRPO,
    SLOWER,
    SPEED,
    answer_verdict,
    focal,
    more_than_slower,
    plateau_claims,
)
from tailmiss.studies.narrowing.plateau_text import plateau_lines
from tailmiss.studies.rule import Verdict

FRONTIER = ("above", "on", "below", "crosses", "cannot tell")
END = ("dominates", "is dominated", "same point", "cannot tell", "not judged")


@pytest.mark.parametrize("frontier", FRONTIER)
@pytest.mark.parametrize("end", END)
def test_the_reading_follows_its_written_rule(frontier, end):
    word = more_than_slower(frontier, end)
    if end == "not judged":
        assert word == "cannot tell"  # no plateau, no answer about it
    elif end == "dominates":
        assert word == ("yes" if frontier in ("above", "on") else "partly")
    elif end in ("same point", "is dominated"):
        assert word == ("partly" if frontier in ("above", "crosses") else "no")
    else:
        assert word == ("partly" if frontier == "above" else "cannot tell")
    # a yes needs both readings to agree: never from one of them alone
    assert word != "yes" or (end == "dominates" and frontier != "below")


def test_the_ledger_reads_the_words_one_to_one():
    assert [answer_verdict(w) for w in ("yes", "no", "partly", "cannot tell")] == [
        Verdict.REPRODUCED,
        Verdict.REFUTED,
        Verdict.PARTLY,
        Verdict.CANNOT_TELL,
    ]


def _run(label: str, seed: int, rate: float, lift: float, gamma: float, rng) -> list[dict]:
    """pass@1 saturating at 0.72 (``rate`` per step), pass@256 on GRPO's path 0.95 - 0.8 (p1 - 0.3) plus ``lift``
    times how far pass@1 has come; a minority / rest split of pass@256 for the typed table."""
    rows = []
    for step in range(0, 1601, 40):
        p1 = 0.72 - 0.42 * math.exp(-rate * step) + 0.001 * rng.standard_normal() * (step > 0)
        p256 = 0.95 - 0.8 * (p1 - 0.3) + lift * (p1 - 0.3) + 0.001 * rng.standard_normal() * (step > 0)
        rows.append(
            {
                "label": label,
                "seed": seed,
                "step": step,
                "mu_pos": p1,
                "exact_pass_at_256": p256,
                "gamma": gamma,
                "group_size": 8,
            }
        )
    return rows


def _history(slow_rate: float = 0.006, seeds=range(10, 15)) -> tuple[pd.DataFrame, pd.DataFrame]:
    """GRPO; F-GRPO γ = 0.5 on GRPO's path, γ = 1 and 2 above it; the slower GRPO runs on GRPO's path at
    ``slow_rate`` (plateaued by step 1200 at the default, rising at 0.0005)."""
    rng = np.random.default_rng(3)
    arms = {
        PLATEAU_GRPO: (0.008, 0.0, 0.0),
        focal(0.5): (0.006, 0.0, 0.5),
        focal(1.0): (0.006, 0.3, 1.0),
        focal(2.0): (0.005, 0.3, 2.0),
        **{SLOWER[g]: (slow_rate, 0.0, 0.0) for g in SLOWER},
        SPEED: (slow_rate, 0.0, 0.0),
    }
    rows = [r for a, (rate, lift, g) in arms.items() for s in seeds for r in _run(a, s, rate, lift, g, rng)]
    history = pd.DataFrame(rows)
    parts = []
    for kind, shift in (("all", 0.0), ("minority", -0.5), ("rest", 0.03)):
        t = history[["label", "seed", "step", "mu_pos", "exact_pass_at_256"]].rename(
            columns={"exact_pass_at_256": "pass256"}
        )
        parts.append(t.assign(type=kind, pass256=(t["pass256"] + shift).clip(0, 1)))
    return history, pd.concat(parts, ignore_index=True)


def test_every_comparison_reads_its_pairs_and_lifted_arms_dominate():
    p = plateau_claims(*_history())
    assert set(p.frontiers) == {pair for pairs in COMPARISONS.values() for pair in pairs}
    assert p.seeds == (10, 11, 12, 13, 14) and p.steps == 1600
    assert all(c.plateaued for c in p.checks.values())
    for g in (1.0, 2.0):
        for b in (PLATEAU_GRPO, SLOWER[g]):
            assert p.frontiers[(focal(g), b)].word == "above"
            assert p.end_word((focal(g), b)) == "dominates"
            assert p.answers[(focal(g), b)] == "yes"
    # γ = 0.5 walks GRPO's path to the same end: no more than a slower GRPO
    assert p.frontiers[p.main].word == "on"
    assert p.end_word(p.main) == "same point"
    assert p.answers[p.main] == "no"
    # the end points of one comparison are one family of three
    assert p.ends[(focal(1.0), PLATEAU_GRPO)].pass256.family == 3
    assert p.ends[(focal(1.0), SPEED)].pass256.family == 1
    assert p.narrows == Verdict.REPRODUCED  # GRPO N = 8 ends below the SFT model's pass@256
    assert p.change is not None and p.change.mean < 0


def test_an_arm_that_has_not_plateaued_is_not_judged_and_its_family_shrinks():
    p = plateau_claims(*_history(slow_rate=0.0005))
    assert not p.checks[SPEED].plateaued
    assert p.ends[(focal(1.0), SPEED)] is None
    assert p.end_word((focal(1.0), SPEED)) == "not judged"
    assert p.answers[(focal(1.0), SPEED)] == "cannot tell"
    assert p.ends[(focal(1.0), PLATEAU_GRPO)] is not None  # GRPO's comparison is untouched
    text = "\n".join(plateau_lines(p))
    assert f"not judged: {SPEED} has not plateaued" in text
    assert "- γ = 1: **yes** against GRPO (frontier above over pass@1" in text


def test_the_text_names_the_seeds_and_the_rules():
    text = "\n".join(plateau_lines(plateau_claims(*_history())))
    assert "on seeds 10-14, which no earlier run used" in text
    assert "±0.02" in text and "shown not higher than +0.005 by the noise rule's one-sided test" in text
    assert "- γ = 0.5: **no** against GRPO" in text
    assert plateau_lines(None) == []


def _archive_plateau(tmp_path, history, config=None):
    """``history`` saved as the plateau sweep's result and added to an evidence archive under ``tmp_path``."""
    from tailmiss import archive
    from tailmiss.experiments.presets import llm_sweep
    from tailmiss.experiments.sweep_result import SweepResult

    config = config or llm_sweep("narrowing-plateau")
    final = history.sort_values("step").groupby(["label", "seed"]).tail(1).assign(method="grpo")
    cache = SweepResult(config, history.assign(method="grpo"), final, {}).save(tmp_path / "runs/llm/narrowing-plateau")
    root = tmp_path / "evidence"
    root.mkdir(parents=True)
    archive.add(cache, root)
    return root


def test_the_first_look_reads_the_archived_answer_by_gamma(tmp_path):
    from tailmiss.studies.narrowing.archived import archived_answers

    history, _ = _history()
    root = _archive_plateau(tmp_path, history)
    answers = {a.gamma: a for a in archived_answers(root)}
    direct = plateau_claims(history)
    assert set(answers) == {0.5, 1.0, 2.0}
    for gamma, a in answers.items():
        pair = (focal(gamma), SLOWER[gamma])
        assert a.against == SLOWER[gamma] and a.word == direct.answers[pair] and a.end == direct.end_word(pair)
        assert a.seeds == (10, 11, 12, 13, 14) and a.steps == 1600
    assert answers[1.0].word == "yes" and answers[1.0].gain256 > 0.01
    assert answers[0.5].word == "no" and abs(answers[0.5].gain256) < 0.01


def test_the_archived_answer_is_none_for_another_config_and_refused_when_damaged(tmp_path):
    from tailmiss.archive import ArchiveError
    from tailmiss.experiments.presets import llm_sweep
    from tailmiss.studies.narrowing.archived import archived_answers

    history, _ = _history()
    other = llm_sweep("narrowing-plateau")
    root = _archive_plateau(tmp_path, history, other.replace(rl=other.rl.replace(steps=1200)))
    assert archived_answers(root) == []  # the archive holds runs of another recipe: no answer quoted
    assert archived_answers(tmp_path / "nowhere") == []
    root2 = _archive_plateau(tmp_path / "b", history)
    stored = root2 / "llm" / "narrowing-plateau" / "history.csv.xz"
    stored.write_bytes(stored.read_bytes()[:-8])
    with pytest.raises(ArchiveError, match="history.csv.xz"):
        archived_answers(root2)


def test_the_committed_archive_answers_by_gamma():
    """The checkout's evidence archive holds the plateau runs at the preset's config: the first look quotes them."""
    from pathlib import Path

    from tailmiss.studies.narrowing.archived import archived_answers
    from tailmiss.studies.narrowing.plateau_claims import ANSWERS

    answers = archived_answers(Path(__file__).resolve().parents[1] / "evidence")
    assert [a.gamma for a in answers] == [0.5, 1.0, 2.0]
    assert all(a.seeds == (10, 11, 12, 13, 14) and a.steps == 1600 and a.word in ANSWERS for a in answers)
