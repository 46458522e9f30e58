"""`tailmiss diagnose` at the edges: no torch on its path, unequal group sizes, steps out of range, a cut last line,
repeated rollouts, result folders that never collide, plain numbers in messages, groups of one."""

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
