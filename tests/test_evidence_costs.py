"""``benchmarks/evidence_costs.py``: what a sweep's runs cost, read from the evidence archive's records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import benchmark_script

ROOT = Path(__file__).parents[1]


def _costs():
    return benchmark_script("evidence_costs")


def test_the_plateau_runs_costs_add_up_over_their_arms(capsys):
    costs = _costs()
    row = costs.sweep_costs("narrowing-plateau", ROOT / "evidence")
    assert row["runs"] == row["archived"] == 40 and row["unknown"] == 0 and row["seeds"] == [10, 11, 12, 13, 14]
    assert len(row["arms"]) == 8 and all(a["runs"] == 5 for a in row["arms"].values())
    assert row["cpu_s"] == pytest.approx(sum(a["cpu_s"] for a in row["arms"].values()))
    assert 40 * 60 < row["cpu_s"] < 40 * 1800  # minutes a run, not seconds nor hours
    assert costs.main(["narrowing-plateau", "--json", "--evidence", str(ROOT / "evidence")]) == 0
    assert json.loads(capsys.readouterr().out) == [row]


def test_an_empty_archive_holds_no_run_and_an_unknown_sweep_exits_2(tmp_path, capsys):
    costs = _costs()
    row = costs.sweep_costs("narrowing-plateau", tmp_path)
    assert row["archived"] == 0 and row["cpu_s"] == 0 and row["runs"] == 40
    with pytest.raises(SystemExit) as exc:
        costs.main(["no-such-sweep"])
    assert exc.value.code == 2 and "no-such-sweep" in capsys.readouterr().err
