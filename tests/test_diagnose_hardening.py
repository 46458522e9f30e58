"""`tailmiss diagnose` at the edges: no torch on its path, unequal group sizes, steps out of range, a cut last line,
repeated rollouts, result folders that never collide, plain numbers in messages, groups of one, ids as text in every
format, what a read dropped, steps logged twice without a rollout column, each stack's words for non-binary rewards."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import one_error_line
from typer.testing import CliRunner

from tailmiss import analytic
from tailmiss.cli import app
from tailmiss.diagnose import CutLineWarning, diagnose, group_counts, read_rollouts, side_text, success_flags
from tailmiss.diagnose.rollout_log import RepeatedRowsWarning


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"COLUMNS": "200"})


def _jsonl(path, rows, tail: str = ""):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)
    return path


def _rows(spec, rollout: bool = False):
    """Rows from {(step, prompt): [rewards]} (with each rollout's index in its group when ``rollout``)."""
    return [
        {"step": s, "prompt_id": p, "reward": r, **({"rollout": k} if rollout else {})}
        for (s, p), rewards in spec.items()
        for k, r in enumerate(rewards)
    ]


# --- start-up: numpy and pandas only -----------------------------------------------------------------


def test_the_diagnose_command_never_imports_torch(tmp_path):
    """`tailmiss diagnose` refuses an empty log and diagnoses a small one without importing torch."""
    (tmp_path / "empty.jsonl").write_text("")
    small = _jsonl(tmp_path / "small.jsonl", _rows({(1, "a"): [1, 0, 0, 1], (2, "a"): [1, 1, 1, 0]}))
    code = (
        "import sys, time; started = time.perf_counter()\n"
        "from tailmiss.cli import main\n"
        "for argv in (['{empty}'], ['{small}', '--out', '{out}']):\n"
        "    sys.argv = ['tailmiss', 'diagnose', *argv]\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit as exc:\n"
        "        print('exit', exc.code, round(time.perf_counter() - started, 2), file=sys.stderr)\n"
        "print(sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules))\n"
    ).format(empty=tmp_path / "empty.jsonl", small=small, out=tmp_path / "out")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=False)
    print(proc.stderr)
    assert "exit 2" in proc.stderr and "exit 0" in proc.stderr, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "out" / "diagnose.png").is_file()


# --- exact labels for unequal group sizes ------------------------------------------------------------


def test_unequal_group_sizes_are_named_and_the_risk_is_each_groups_own(runner, tmp_path):
    spec = {(1, "a"): [1, 0, 0], (1, "b"): [1, 1, 0], (1, "c"): [1, 0, 0, 0, 0, 0, 0, 0], (1, "d"): [1, 1] + [0] * 6}
    log = _jsonl(tmp_path / "log.jsonl", _rows(spec))
    d = diagnose(read_rollouts(log), rhos=(0.05,), gammas=(0.5,))
    (row,) = d.summary.tail_miss
    assert row.group_sizes == (3, 8) and row.n_observed is None
    expected = np.mean(
        [analytic.tail_miss_probability(m, 0.05 * m, n) for m, n in ((1 / 3, 3), (2 / 3, 3), (1 / 8, 8), (2 / 8, 8))]
    )
    assert row.risk_at_observed_n == pytest.approx(expected, rel=1e-13)
    result = runner.invoke(app, ["diagnose", str(log), "--out", str(tmp_path / "o"), "--rho", "0.05"])
    assert result.exit_code == 0, result.output
    assert "N = 3, 8" in result.stdout and "Groups differ in size" in result.stdout
    table_row = next(line for line in result.stdout.splitlines() if "0.05 " in line)
    assert "3, 8" in table_row and "│ 5 " not in table_row  # no group has size 5 (the old median label)
    # sizes on both sides of N* are named one by one
    wide = _jsonl(tmp_path / "wide.jsonl", _rows({(1, "a"): [1, 0], (1, "b"): [1] * 8 + [0] * 56}))
    (row,) = diagnose(read_rollouts(wide), rhos=(0.05,), gammas=(0.5,)).summary.tail_miss
    assert 2 < row.n_star < 64 and side_text(row) == "N = 2 below, N = 64 above"


def test_one_group_size_is_the_runs_n(tmp_path):
    log = _jsonl(tmp_path / "log.jsonl", _rows({(1, "a"): [1, 0, 0, 0], (1, "b"): [1, 1, 0, 0]}))
    (row,) = diagnose(read_rollouts(log), rhos=(0.1,), gammas=(1.0,)).summary.tail_miss
    assert row.n_observed == 4 and row.group_sizes == (4,) and side_text(row) in ("below", "at", "above")


def test_groups_of_one_print_words_not_none(runner, tmp_path):
    log = _jsonl(tmp_path / "log.jsonl", _rows({(1, "a"): [1], (1, "b"): [0], (2, "a"): [1]}))
    result = runner.invoke(app, ["diagnose", str(log), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "None" not in result.stdout and "no peak: risk 0 at every N" in result.stdout
    nothing_solved = _jsonl(tmp_path / "zero.jsonl", _rows({(1, "a"): [0, 0], (1, "b"): [0, 0]}))
    result = runner.invoke(app, ["diagnose", str(nothing_solved), "--out", str(tmp_path / "z")])
    assert result.exit_code == 0, result.output
    assert "None" not in result.stdout and "no solved group" in result.stdout


# --- steps, cut lines, repeated rollouts -------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "shown"), [(1e20, "1e+20"), (2**53, "9007199254740992"), (-1, "-1"), (2.5, "2.5"), ("x", "'x'")]
)
def test_steps_must_be_whole_numbers_in_range(tmp_path, step, shown):
    log = _jsonl(
        tmp_path / "log.jsonl",
        [{"step": 1, "prompt_id": "a", "reward": 1}, {"step": step, "prompt_id": "a", "reward": 0}],
    )
    with pytest.raises(ValueError) as info:
        read_rollouts(log)
    message = str(info.value)
    assert "line 2" in message and shown in message and "np." not in message, message


def test_the_largest_exact_step_is_kept(tmp_path):
    log = _jsonl(tmp_path / "log.jsonl", [{"step": 2**53 - 1, "prompt_id": "a", "reward": 1}])
    assert read_rollouts(log).frame["step"].tolist() == [2**53 - 1]


def test_a_cut_last_line_is_skipped_with_a_warning_naming_it(runner, tmp_path):
    rows = _rows({(1, "a"): [1, 0, 0, 1], (2, "a"): [1, 1, 1]})
    log = _jsonl(tmp_path / "log.jsonl", rows, tail='{"step": 2, "prompt_id": "a", "rew')
    with pytest.warns(CutLineWarning, match=r"line 8, the last, is cut off"):
        read = read_rollouts(log)
    assert read.rows_read == 7 and read.warnings and "line 8" in read.warnings[0]
    result = runner.invoke(app, ["diagnose", str(log), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "Warning:" in result.stderr and "line 8" in result.stderr and "Traceback" not in result.stderr
    assert json.loads((tmp_path / "o" / "diagnose.json").read_text())["warnings"] == list(read.warnings)


def test_a_bad_line_before_the_last_is_refused_naming_it(runner, tmp_path):
    text = "".join(json.dumps(r) + "\n" for r in _rows({(1, "a"): [1, 0, 0, 1]}))
    lines = text.splitlines(keepends=True)
    (tmp_path / "log.jsonl").write_text("".join(lines[:2]) + "{oops\n" + "\n" + "".join(lines[2:]))
    one_error_line(runner.invoke(app, ["diagnose", str(tmp_path / "log.jsonl")]), "line 3 is not JSON")
    (tmp_path / "list.jsonl").write_text(lines[0] + "[1, 2]\n" + lines[1])
    one_error_line(runner.invoke(app, ["diagnose", str(tmp_path / "list.jsonl")]), "line 2 is not a JSON object")


def test_blank_lines_keep_the_line_numbers(tmp_path):
    good = json.dumps({"step": 1, "prompt_id": "a", "reward": 1})
    (tmp_path / "log.jsonl").write_text(
        f"{good}\n\n\n{good}\n" + json.dumps({"step": 0.5, "prompt_id": "a", "reward": 1})
    )
    with pytest.raises(ValueError, match=r"line 5: column 'step' must hold whole numbers in \[0, 2\*\*53\), got 0\.5"):
        read_rollouts(tmp_path / "log.jsonl")


def test_repeated_step_prompt_rollout_rows_are_refused(runner, tmp_path):
    rows = _rows({(1, "a"): [1, 0], (2, "a"): [0, 1]}, rollout=True)
    log = _jsonl(tmp_path / "log.jsonl", rows + rows[2:])  # step 2 logged twice, as a resumed run did
    line = one_error_line(runner.invoke(app, ["diagnose", str(log)]), "2 rows repeat", "step 2", "prompt 'a'")
    assert "rollout '0'" in line
    ok = _jsonl(tmp_path / "ok.jsonl", rows)
    assert group_counts(read_rollouts(ok))["n"].tolist() == [2, 2]


def test_verl_uids_name_the_rollouts(tmp_path):
    rows = [{"input": "q", "output": "o", "score": 1.0, "step": 1, "uid": f"p1_{s}_0"} for s in range(3)] + [
        {"input": "q", "output": "o", "score": 0.0, "step": 1, "uid": "p1_0_0"}
    ]
    log = _jsonl(tmp_path / "1.jsonl", rows)
    with pytest.raises(ValueError, match=r"1 rows repeat .* step 1, prompt 'p1', rollout '0_0'"):
        read_rollouts(log)


@pytest.mark.parametrize("arrow", [True, False])
def test_verl_uids_of_one_group_and_trl_lines_still_read(tmp_path, monkeypatch, arrow):
    """A uid shared by a group's rollouts (no session and output parts) names the group, not a repeated rollout;
    a TRL table written as JSON lines finds its one reward column (with either JSONL reader)."""
    if not arrow:
        from tailmiss.diagnose import _read

        monkeypatch.setattr(_read, "_jsonl_by_arrow", lambda path, pick: None)
    rows = [{"input": "q", "output": "o", "score": float(k < 2), "step": 1, "uid": "3f2a-91"} for k in range(4)]
    log = read_rollouts(_jsonl(tmp_path / "1.jsonl", rows))
    assert "rollout" not in log.frame.columns and group_counts(log)[["n", "x"]].values.tolist() == [[4, 2]]
    trl = [{"step": 1, "prompt": "p", "completion": "c", "accuracy": float(k < 1), "advantage": 0.0} for k in range(4)]
    log = read_rollouts(_jsonl(tmp_path / "trl.jsonl", trl))
    assert log.format == "trl" and group_counts(log)[["n", "x"]].values.tolist() == [[4, 1]]


# --- result folders ------------------------------------------------------------------------------------


def test_logs_of_one_name_get_their_own_folders(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        _jsonl(tmp_path / name / "rollouts.jsonl", _rows({(1, name): [1, 0, 0, 0]}))
        assert runner.invoke(app, ["diagnose", f"{name}/rollouts.jsonl"]).exit_code == 0
    folders = sorted((tmp_path / "runs" / "diagnose").iterdir())
    assert len(folders) == 2 and all(f.name.startswith("rollouts-") for f in folders)
    sources = {json.loads((f / "diagnose.json").read_text())["source"] for f in folders}
    assert sources == {"a/rollouts.jsonl", "b/rollouts.jsonl"}
    # an explicit folder that holds another log's diagnosis is refused; the same log's is replaced
    mine = folders[0]
    other = "b" if json.loads((mine / "diagnose.json").read_text())["source"].startswith("a") else "a"
    line = one_error_line(runner.invoke(app, ["diagnose", f"{other}/rollouts.jsonl", "--out", str(mine)]))
    assert "holds the diagnosis of another log" in line
    again = json.loads((mine / "diagnose.json").read_text())["source"]
    assert runner.invoke(app, ["diagnose", again, "--out", str(mine)]).exit_code == 0


# --- plain numbers in messages -------------------------------------------------------------------------


def test_messages_show_plain_numbers(runner, tmp_path):
    (tmp_path / "step.csv").write_text("step,prompt_id,reward\n1,a,1\n1.5,a,0\n")
    line = one_error_line(runner.invoke(app, ["diagnose", str(tmp_path / "step.csv")]), "got 1.5", "row 2")
    assert "np." not in line
    (tmp_path / "flag.csv").write_text("step,prompt_id,reward,correct\n1,a,1,1\n1,a,0,0.9999999\n")
    line = one_error_line(runner.invoke(app, ["diagnose", str(tmp_path / "flag.csv")]), "got 0.9999999", "row 2")
    assert "np." not in line
    with pytest.raises(ValueError, match=r"found 0, 0\.9999999, 1:"):
        success_flags([0.0, 1.0, 0.9999999])
    with pytest.raises(ValueError, match=r"got nan") as info:
        success_flags([0.0, 1.0], threshold=np.float64("nan"))
    assert "np." not in str(info.value)


def test_read_keeps_only_the_columns_it_uses(tmp_path):
    rows = [{"step": 1, "prompt_id": "a", "reward": 1.0, "completion": "x" * 1000, "correct": True, "rollout": 0}]
    log = read_rollouts(_jsonl(tmp_path / "log.jsonl", rows))
    assert list(log.frame.columns) == ["step", "prompt_id", "reward", "correct", "rollout"]
    assert isinstance(log.frame["prompt_id"].dtype, pd.CategoricalDtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean file warns about nothing
        read_rollouts(tmp_path / "log.jsonl")


# --- the two JSONL readers agree --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rows",
    [
        _rows({(1, "a"): [1, 0, 0, 1], (2, "b"): [1, 1, 0, 0]}, rollout=True),
        [  # unscored rows, a missing flag, ids written as numbers, and a key that only later rows carry
            {"step": 1, "prompt_id": 7, "reward": 1.0, "correct": True},
            {"step": 1, "prompt_id": 7, "reward": None},
            {"step": 1, "prompt_id": 8, "reward": 0.0, "correct": False},
            {"step": 2, "prompt_id": 8, "reward": 0.5, "correct": False, "extra": "x"},
        ],
        [  # ids written as whole and fractional numbers: a float column for pyarrow, ints and floats line by line
            {"step": 1, "prompt_id": 7, "reward": 1, "rollout": 0},
            {"step": 1, "prompt_id": 8.5, "reward": 0, "rollout": 1.0},
        ],
    ],
)
def test_the_arrow_and_line_readers_give_the_same_log(tmp_path, monkeypatch, rows):
    pytest.importorskip("pyarrow")
    from tailmiss.diagnose import _read

    log = _jsonl(tmp_path / "log.jsonl", rows)
    assert _read._jsonl_by_arrow(log, lambda columns: columns) is not None  # this file takes the fast path
    fast = read_rollouts(log)
    monkeypatch.setattr(_read, "_jsonl_by_arrow", lambda path, pick: None)
    slow = read_rollouts(log)
    pd.testing.assert_frame_equal(fast.frame, slow.frame)
    assert (fast.rows_read, fast.rows_without_reward) == (slow.rows_read, slow.rows_without_reward)


def test_files_that_are_not_plain_take_the_line_reader(tmp_path):
    pytest.importorskip("pyarrow")
    from tailmiss.diagnose import _read

    good = json.dumps({"step": 1, "prompt_id": "a", "reward": 1})
    cases = {
        "blank.jsonl": f"{good}\n\n{good}\n",  # blank line: arrow's rows would not be the file's lines
        "cut.jsonl": f"{good}\n" + good[:10],
        "nested.jsonl": json.dumps({"step": 1, "prompt_id": ["a"], "reward": 1}) + "\n",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        assert _read._jsonl_by_arrow(tmp_path / name, lambda columns: columns) is None, name
    (tmp_path / "no-newline.jsonl").write_text(f"{good}\n{good}")
    chunk = _read._jsonl_by_arrow(tmp_path / "no-newline.jsonl", lambda columns: columns)
    assert chunk is not None and chunk.place.tolist() == [1, 2]


# --- ids are text, in every format ------------------------------------------------------------------------

LOOK_ALIKE = ["007", "7", "1e5", "100000", "1.0", "1"]  # ids a number parser would merge


def _ids(log) -> dict[str, int]:
    """Group size by prompt id (one step)."""
    counts = group_counts(log)
    return dict(zip(counts["prompt_id"].astype(str), counts["n"].tolist()))


@pytest.mark.parametrize("rollout", [True, False])
def test_csv_ids_are_read_as_written(tmp_path, rollout):
    """CSV ids that look like numbers stay distinct: with a rollout column the log used to be refused as a resumed
    run, without one the groups silently became 2N."""
    head = "step,prompt_id,reward" + (",rollout" if rollout else "")
    lines = [f"1,{pid},{r}" + (f",{k}" if rollout else "") for pid in LOOK_ALIKE for k, r in enumerate((1, 0, 0, 1))]
    (tmp_path / "log.csv").write_text("\n".join([head, *lines]) + "\n")
    log = read_rollouts(tmp_path / "log.csv")
    assert _ids(log) == dict.fromkeys(LOOK_ALIKE, 4)
    assert list(log.frame["prompt_id"].iloc[::4]) == LOOK_ALIKE
    if rollout:
        assert sorted(log.frame["rollout"].cat.categories) == ["0", "1", "2", "3"]


def test_csv_rollout_ids_are_text_and_empty_ids_are_refused(tmp_path):
    """Rollout ids are text too; only an empty field is a missing id ("NA", "nan" are ids)."""
    rows = ["step,prompt_id,reward,rollout", "1,a,1,0", "1,a,0,00", "1,a,1,0.0", "1,NA,1,0", "1,nan,1,0"]
    (tmp_path / "log.csv").write_text("\n".join(rows) + "\n")
    assert _ids(read_rollouts(tmp_path / "log.csv")) == {"a": 3, "NA": 1, "nan": 1}  # none repeated, none empty
    (tmp_path / "no-prompt.csv").write_text("step,prompt_id,reward\n1,007,1\n1,,0\n")
    with pytest.raises(ValueError, match=r"no-prompt\.csv, row 2: column 'prompt_id' is empty"):
        read_rollouts(tmp_path / "no-prompt.csv")
    (tmp_path / "no-rollout.csv").write_text("step,prompt_id,reward,rollout\n1,a,1,0\n1,a,0,\n1,a,,\n")
    with pytest.raises(ValueError, match=r"no-rollout\.csv, row 2: column 'rollout' is empty"):
        read_rollouts(tmp_path / "no-rollout.csv")  # row 3 has no reward: dropped, its empty rollout is no error


@pytest.mark.parametrize("arrow", [True, False])
def test_jsonl_ids_keep_their_text_with_either_reader(tmp_path, monkeypatch, arrow):
    """A JSON string is its text (pyarrow reads "2024-01-01 10:00:00" as a timestamp: such a file takes the line
    reader); a JSON number is its plain text, "007" and 7 are two ids, "7" and 7 one, True and 1 two."""
    pytest.importorskip("pyarrow")
    from tailmiss.diagnose import _read

    if not arrow:
        monkeypatch.setattr(_read, "_jsonl_by_arrow", lambda path, pick: None)

    def ids(name, values):
        return _ids(read_rollouts(_jsonl(tmp_path / name, [{"step": 1, "prompt_id": v, "reward": 1} for v in values])))

    times = ["2024-01-01 10:00:00", "2024-01-01T10:00:00", "2024-01-01T10:00:00Z"]
    assert ids("times.jsonl", times) == dict.fromkeys(times, 1)
    assert ids("strings.jsonl", [*LOOK_ALIKE, "NA", "10:00"]) == dict.fromkeys([*LOOK_ALIKE, "NA", "10:00"], 1)
    assert ids("numbers.jsonl", [7, 7.0, 8.5, 100000, 1e5, 0]) == {"7": 2, "8.5": 1, "100000": 2, "0": 1}
    assert ids("mixed.jsonl", ["007", 7, "7", True, 1]) == {"007": 1, "7": 2, "True": 1, "1": 1}
    if arrow:  # which files the fast path took (pyarrow cannot read mixed types, the line reader did)
        taken = {
            f: _read._jsonl_by_arrow(tmp_path / f, lambda c: c) is not None for f in ("strings.jsonl", "numbers.jsonl")
        }
        assert taken == {"strings.jsonl": True, "numbers.jsonl": True}
        assert _read._jsonl_by_arrow(tmp_path / "times.jsonl", lambda c: c) is None


def test_parquet_ids_are_strings_as_stored_and_integers_as_digits(tmp_path):
    pytest.importorskip("pyarrow")
    pd.DataFrame({"step": [1] * 4, "prompt_id": ["007", "7", "1e5", "1.0"], "reward": [1.0, 0, 1, 0]}).to_parquet(
        tmp_path / "text.parquet"
    )
    assert _ids(read_rollouts(tmp_path / "text.parquet")) == {"007": 1, "7": 1, "1e5": 1, "1.0": 1}
    pd.DataFrame(
        {"step": [1] * 3, "prompt_id": [7, 7, 100000], "reward": [1.0, 0, 1], "rollout": [0, 1, 0]}
    ).to_parquet(tmp_path / "int.parquet")
    log = read_rollouts(tmp_path / "int.parquet")
    assert _ids(log) == {"7": 2, "100000": 1} and sorted(log.frame["rollout"].cat.categories) == ["0", "1"]


# --- what a read dropped ------------------------------------------------------------------------------------


def test_the_log_counts_the_rows_it_dropped_and_why(tmp_path):
    rows = _rows({(1, "a"): [1, 0, 0, 1]}) + [{"step": 1, "prompt_id": "a", "reward": None}]
    (tmp_path / "run").mkdir()
    for name in ("1.jsonl", "2.jsonl"):  # two files, each with an unscored row and a cut last line
        _jsonl(tmp_path / "run" / name, rows, tail='{"step": 2, "prompt_id": "a"')
    with pytest.warns(CutLineWarning):
        log = read_rollouts(tmp_path / "run")
    assert (log.rows_read, log.rows_without_reward, log.cut_lines) == (10, 2, 2)
    assert len(log.warnings) == 2 and all("the last, is cut off" in w for w in log.warnings)
    clean = read_rollouts(_jsonl(tmp_path / "clean.jsonl", rows))
    assert (clean.rows_read, clean.rows_without_reward, clean.cut_lines, clean.warnings) == (5, 1, 0, ())


# --- steps logged twice, without a rollout column ------------------------------------------------------------


def _quiet(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return read_rollouts(path)


def test_a_step_logged_twice_without_rollout_ids_warns(tmp_path):
    spec = {(s, p): [1, 0, 0, 1] if p == "a" else [0, 0, 0, 1] for s in (1, 2, 3, 4) for p in ("a", "b")}
    rows = _rows(spec)
    again = [dict(r, reward=1 - r["reward"]) for r in rows if r["step"] == 3]  # step 3 sampled and logged again
    with pytest.warns(RepeatedRowsWarning, match=r"1 of 4 steps \(first: step 3\) hold every group at 2 times"):
        log = read_rollouts(_jsonl(tmp_path / "twice.jsonl", rows + again))
    (note,) = log.warnings
    assert "log a 'rollout' column" in note and str(tmp_path / "twice.jsonl") in note
    assert group_counts(log)["n"].tolist() == [4, 4, 4, 4, 8, 8, 4, 4]  # what the warning is about
    # the whole log written twice, rewards that tell rollouts apart: every row repeats twice
    shaped = _rows({(s, p): [0.1 * s, 0.35, 0.7, 0.0, 0.0] for s in (1, 2) for p in ("a", "b")})
    with pytest.warns(RepeatedRowsWarning, match=r"repeats 2 times .* written 2 times"):
        read_rollouts(_jsonl(tmp_path / "all-twice.jsonl", shaped + shaped))
    assert _quiet(_jsonl(tmp_path / "shaped.jsonl", shaped)).warnings == ()
    # a rollout column makes it unambiguous: refused, as before
    with pytest.raises(ValueError, match="rows repeat"):
        read_rollouts(_jsonl(tmp_path / "ids.jsonl", _rows(spec, rollout=True) + _rows(spec, rollout=True)[16:24]))


@pytest.mark.parametrize(
    "spec",
    [
        {(s, p): [1, 0, 0, 1] for s in (1, 2, 3) for p in "ab"},  # every group N = 4, every row twice
        {(s, p): [1, 1, 1, 1] for s in (1, 2) for p in "ab"},  # uniform groups: every row N times
        {(1, "a"): [1, 0, 0], (1, "b"): [1, 1, 0], (1, "c"): [1] + [0] * 7, (2, "d"): [1, 1] + [0] * 6},  # 3 and 8
        {(1, "a"): [1, 0], (1, "b"): [1] * 8 + [0] * 56},  # 2 and 64 in one step
        {(1, "a"): [1, 0, 0, 1], (2, "a"): [1, 0, 0, 0, 1, 0]},  # 4 and 6
        {(s, "a"): [0.2, 0.9, 0.5, 0.0] for s in (1, 2)},  # shaped rewards, each row once
    ],
)
def test_normal_logs_do_not_warn_of_repeats(tmp_path, spec):
    log = _quiet(_jsonl(tmp_path / "log.jsonl", _rows(spec)))
    assert log.warnings == ()


# --- non-binary rewards: what to set, in the words of the user's stack -------------------------------------


def test_non_binary_errors_say_what_to_set_in_each_stack(monkeypatch):
    """diagnose: --threshold or a 'correct' column; verl (its plugin, through a stand-in verl module): the
    +algorithm key, never a 'correct' column, which means nothing inside verl."""
    import importlib.util
    import types
    from pathlib import Path

    torch = pytest.importorskip("torch")

    with pytest.raises(ValueError, match=r"found 0\.2, 0\.8: set --threshold .* or log a 'correct' column"):
        success_flags([0.2, 0.8], threshold_name="--threshold")
    core_algos = types.SimpleNamespace(register_adv_est=lambda name: lambda fn: fn)
    for name, module in {
        "verl": types.ModuleType("verl"),
        "verl.trainer": types.ModuleType("verl.trainer"),
        "verl.trainer.ppo": types.SimpleNamespace(core_algos=core_algos),
        "verl.trainer.ppo.core_algos": core_algos,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    import tailmiss.integrations

    path = Path(tailmiss.integrations.__file__).with_name("verl.py")
    spec = importlib.util.spec_from_file_location("tailmiss_verl_without_verl", path)
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)  # not registered as tailmiss.integrations.verl
    scores = torch.tensor([[0.0, 0.8], [0.0, 1.0], [0.0, 0.0]], dtype=torch.float64)
    with pytest.raises(ValueError) as info:
        plugin.focal_weights(scores, np.array(["u", "u", "v"]), {"fgrpo_gamma": 1.0})
    message = str(info.value)
    assert "found 0, 0.8, 1: add +algorithm.fgrpo_success_threshold=T to verl's command line" in message, message
    assert "correct' column" not in message and "binary scores" in message
    weights = plugin.focal_weights(scores, np.array(["u", "u", "v"]), {"fgrpo_success_threshold": 0.5})
    assert weights.tolist() == [0.0, 0.0, 1.0]  # u: both correct (g = 0), v: none (g = 1)
