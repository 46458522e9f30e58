"""``benchmarks/command_cost.py``: the README's command as a newcomer runs it, and the phases of a command."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).parents[1]


def _command_cost():
    spec = importlib.util.spec_from_file_location("command_cost", ROOT / "benchmarks" / "command_cost.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_command_is_read_from_the_readme():
    cost = _command_cost()
    install, timed = cost.readme_command((ROOT / "README.md").read_text())
    assert install[0].startswith("pip install torch") and install[-1] == "pip install -e ."
    assert timed == ["tailmiss repro --quick"]
    readme = "# x\n\n## Set-up\n\nRun it:\n\n```bash\npip install a && pip install -e . && tailmiss repro\n```\n"
    assert cost.readme_command(readme) == (["pip install a", "pip install -e ."], ["tailmiss repro"])


def _record(phase, start, end, cpu, pid=1, **fields):
    return {"phase": phase, "pid": pid, "start": start, "end": end, "wall_s": end - start, "cpu_s": cpu,
            "peak_rss_mb": 100.0, "children_peak_rss_mb": 50.0, **fields}  # fmt: skip


def test_phases_take_nested_work_out_and_sum_jobs_by_kind():
    cost = _command_cost()
    records = [
        _record("llm pool", 12.0, 60.0, 90.0),
        _record("job", 12.5, 30.0, 17.0, pid=2, label="SFT maze-sft-quick", worker=True),
        _record("job", 30.0, 40.0, 9.0, pid=2, label="[1/4] GRPO N=4 seed 0", worker=True),
        _record("job", 13.0, 50.0, 36.0, pid=3, label="simulation fgrpo-fig2-quick", worker=True),
        _record("job", 50.0, 59.0, 8.5, pid=3, label="bridge lr 0.01", worker=True),
        _record("figures", 60.0, 80.0, 19.0),
        _record("simulation", 61.0, 65.0, 4.0, preset="fig5 sampler"),
        _record("report", 80.0, 82.0, 2.0),
    ]
    out = cost.phases(records, launched=10.0)
    assert out["startup"] == {"wall_s": 2.0}
    assert out["figures"]["wall_s"] == 16.0 and out["figures"]["cpu_s"] == 15.0  # the sampler taken out
    assert out["simulations (main process)"]["cpu_s"] == 4.0
    assert out["jobs: sft"]["count"] == 1 and out["jobs: rl"]["cpu_s"] == 9.0
    assert out["jobs: simulation"]["cpu_s"] == 36.0 and out["jobs: bridge"]["count"] == 1
    assert out["report"]["cpu_s"] == 2.0 and out["llm pool"]["cpu_s"] == 90.0


def test_jobs_are_read_from_the_log_of_a_commit_without_timings():
    cost = _command_cost()
    log = "SFT a: training\nSFT a: finished in 53.2 s\n[1/7] GRPO N=2 seed 0: finished in 9.9 s\n"
    log += "[2/7] x: finished in 1.1 s\n[3/7] y: finished in 2.0 s on host-3 (4f7f2a3f)\n"  # Ray names the node
    assert cost.logged_jobs(log) == {
        "jobs (log): sft": {"count": 1, "wall_s": 53.2},
        "jobs (log): rl": {"count": 3, "wall_s": 13.0},
    }
