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


def _archive_plateau(tmp_path, history, config=None, name="narrowing-plateau"):
    """``history`` saved as sweep ``name``'s result and added to an evidence archive under ``tmp_path``."""
    from tailmiss import archive
    from tailmiss.experiments.presets import llm_sweep
    from tailmiss.experiments.sweep_result import SweepResult

    config = config or llm_sweep(name)
    final = history.sort_values("step").groupby(["label", "seed"]).tail(1).assign(method="grpo")
    cache = SweepResult(config, history.assign(method="grpo"), final, {}).save(tmp_path / "runs/llm" / name)
    root = tmp_path / "evidence"
    root.mkdir(parents=True, exist_ok=True)
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
    """The checkout's evidence archive holds the runs to the plateau at the presets' configs: the first look quotes
    them."""
    from pathlib import Path

    from tailmiss.studies.narrowing.archived import archived_answers
    from tailmiss.studies.narrowing.plateau_claims import ANSWERS

    answers = archived_answers(Path(__file__).resolve().parents[1] / "evidence")
    assert [a.gamma for a in answers] == [0.5, 1.0, 2.0]
    assert all(a.steps == 1600 and a.word in ANSWERS for a in answers)
    fresh = tuple(range(15, 45))  # the end point on enough fresh seeds, where its runs train the γ
    assert [a.seeds for a in answers] == [fresh, fresh, (10, 11, 12, 13, 14)]


# --- the end point on enough fresh seeds (tailmiss.studies.narrowing.end_point) -----------------------------------


def _end_point_history() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The end-point runs: the arms the seed rule names, on seeds 15-44, the paths of :func:`_history`."""
    from tailmiss.studies.narrowing.end_point_seeds import END_POINT_ARMS

    history, typed = _history(seeds=range(15, 45))
    return history[history["label"].isin(END_POINT_ARMS)], typed[typed["label"].isin(END_POINT_ARMS)]


def test_the_end_point_runs_read_the_pairs_the_count_was_powered_for():
    from tailmiss.studies.narrowing.end_point import end_point_claims
    from tailmiss.studies.narrowing.end_point_seeds import END_POINT_FAMILY, END_POINT_PAIRS

    e = end_point_claims(*_end_point_history())
    assert set(e.frontiers) == {pair for pairs in END_POINT_PAIRS.values() for pair in pairs}
    assert e.seeds == tuple(range(15, 45)) and e.steps == 1600
    assert all(v.pass256.family == END_POINT_FAMILY for v in e.ends.values())  # each comparison's two γ
    assert e.answers[(focal(1.0), SLOWER[1.0])] == "yes" and e.answers[(focal(0.5), SLOWER[0.5])] == "no"
    assert e.narrows == Verdict.REPRODUCED


def test_the_study_answer_takes_each_pair_from_the_runs_that_train_it():
    from tailmiss.studies.narrowing.end_point import end_point_claims, study_answers

    p, e = plateau_claims(*_history()), end_point_claims(*_end_point_history())
    answers = study_answers(p, e)
    assert [a.gamma for a in answers] == sorted(a.gamma for a in answers)  # in γ order
    where = {(a.gamma, a.against): a for a in answers}
    for g in (0.5, 1.0):
        for name in ("GRPO", "GRPO at lr × m_γ"):
            a = where[(g, name)]
            assert a.family == "narrowing-endpoint" and a.seeds == tuple(range(15, 45))
            assert a.word == e.answers[a.pair]
    for key in ((2.0, "GRPO"), (2.0, "GRPO at lr × m_γ"), (1.0, "GRPO at the speed-matched rate")):
        assert where[key].family == "narrowing-plateau" and where[key].seeds == (10, 11, 12, 13, 14)
    assert study_answers(p, None) == study_answers(p, None, families=("narrowing-plateau", "x"))
    assert {a.family for a in study_answers(p, None)} == {"narrowing-plateau"}
    assert study_answers(None, None) == []
    with pytest.raises(ValueError, match="'GRPO at lr'"):
        study_answers(p, e, comparisons=("GRPO at lr",))


def test_the_end_point_text_gives_the_count_and_one_sentence_per_gamma():
    from tailmiss.studies.narrowing.end_point import end_point_claims, study_answers
    from tailmiss.studies.narrowing.end_point_seeds import end_point_seeds
    from tailmiss.studies.narrowing.end_point_text import HEADING, answer_lines, end_point_lines

    history, typed = _history()
    p, e = plateau_claims(history, typed), end_point_claims(*_end_point_history())
    count = end_point_seeds(history)
    text = "\n".join(end_point_lines(e, count))
    assert text.startswith(HEADING) and f"**{count.count} fresh seeds**" in text
    assert "on seeds 15-44 with the plateau runs' recipe" in text and "it narrows on seeds the search never saw" in text
    assert end_point_lines(None, count) == []
    lines = answer_lines(study_answers(p, e))
    gammas = [x for x in lines if x.startswith("- γ = ")]
    assert [x.split(":")[0] for x in gammas] == ["- γ = 0.5", "- γ = 1", "- γ = 2"]
    assert "against GRPO at lr × m_γ: end point **dominates** (pass@256 higher" in gammas[1]
    assert "(seeds 15-44, `narrowing-endpoint`) → **yes**" in gammas[1]
    assert "(seeds 10-14, `narrowing-plateau`)" in gammas[2] and "narrowing-endpoint" not in gammas[2]
    assert answer_lines([]) == []


def test_the_first_look_quotes_the_end_point_where_the_archive_holds_it(tmp_path):
    from tailmiss.studies.narrowing.archived import archived_answers

    history, _ = _history()
    root = _archive_plateau(tmp_path, history)
    _archive_plateau(tmp_path, _end_point_history()[0], name="narrowing-endpoint")
    answers = {a.gamma: a for a in archived_answers(root)}
    assert set(answers) == {0.5, 1.0, 2.0}
    assert answers[0.5].seeds == answers[1.0].seeds == tuple(range(15, 45))
    assert answers[2.0].seeds == (10, 11, 12, 13, 14)  # the end-point runs do not train γ = 2
    assert answers[1.0].word == "yes" and answers[1.0].against == SLOWER[1.0]


# --- across settings (tailmiss.studies.narrowing.settings) ---------------------------------------------------------


def _keeps_coverage(typed: pd.DataFrame) -> pd.DataFrame:
    """``typed`` where GRPO N = 8's held-out pass@256 stays at the SFT model's (plus a little noise) on every type."""
    rng = np.random.default_rng(5)
    out = typed.copy()
    grpo = out["label"] == PLATEAU_GRPO
    start = out[grpo & (out["step"] == 0)].set_index(["seed", "type"])["pass256"]
    keys = list(zip(out.loc[grpo, "seed"], out.loc[grpo, "type"]))
    out.loc[grpo, "pass256"] = [start[k] + 0.001 * abs(rng.standard_normal()) for k in keys]
    return out


def test_a_setting_judges_each_gamma_only_where_grpo_loses_coverage():
    from tailmiss.studies.narrowing.settings import AGAINST, setting_row

    history, typed = _history()
    row = setting_row("narrowing-settings-x", history, typed, 0.25, 0.1)
    assert row.name == "strength 0.25, share 0.1" and row.narrows == Verdict.REPRODUCED
    assert sorted(row.cells) == [0.5, 1.0, 2.0]
    assert all(a.against == AGAINST and a.family == "narrowing-settings-x" for a in row.cells.values())
    assert {a.end.pass256.family for a in row.cells.values()} == {3}  # a setting's three γ: one Holm family
    assert row.cells[1.0].word == "yes" and row.cells[0.5].word == "no"
    sft, end = row.coverage()
    assert end < sft
    kept = setting_row("narrowing-settings-x", history, _keeps_coverage(typed), 0.25, 0.1)
    assert kept.narrows == Verdict.REFUTED and kept.cells == {}  # no γ judged where GRPO keeps coverage


def test_the_settings_table_has_the_studys_row_first_and_says_why_a_row_judges_nothing():
    from tailmiss.studies.narrowing.end_point import end_point_claims, study_answers
    from tailmiss.studies.narrowing.settings import setting_row, study_row
    from tailmiss.studies.narrowing.settings_text import HEADING, settings_lines

    history, typed = _history()
    e = end_point_claims(*_end_point_history())
    study = study_row(study_answers(plateau_claims(history, typed), e), e, "narrowing-endpoint", 0.5, 0.25)
    assert sorted(study.cells) == [0.5, 1.0, 2.0] and study.cells[2.0].family == "narrowing-plateau"
    assert settings_lines([study]) == []  # the study's own answer is given above: no table of one row
    kept = setting_row("narrowing-settings-x", history, _keeps_coverage(typed), 0.5, 0.1)
    lines = settings_lines([study, kept])
    assert lines[0] == HEADING
    rows = [x for x in "\n".join(lines).splitlines() if x.startswith("| strength")]
    assert rows[0].startswith("| strength 0.5, share 0.25 (the study's) (`narrowing-endpoint`) | loses coverage")
    assert "**yes** (dominates; pass@256 +" in rows[0] and "seeds 15-44" in rows[0] and "seeds 10-14" in rows[0]
    assert "**does not lose coverage here**" in rows[1] and rows[1].count("— (no γ judged)") == 3
