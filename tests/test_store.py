"""The result store: sealed units, code fingerprints, atomic replacement, leftovers, and the simulator's reuse."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tailmiss import io, store
from tailmiss.llm.tasks import Task
from tailmiss.options import RunOptions
from tailmiss.sim import SimConfig, SimResult, simulate
from tailmiss.sim.runner import resume_dir, run_sim

TINY = SimConfig(
    name="tiny",
    num_actions=512,
    num_correct=32,
    group_sizes=(2, 16),
    gammas=(0.0, 1.0),
    seeds=(0, 1),
    steps=12,
    log_every=4,
)


def _lines():
    out: list[str] = []
    return out, out.append


# --- units --------------------------------------------------------------------------------------


def _unit(path, text="a,b\n1,2\n"):
    return store.save_unit(path, {"data.csv": lambda p: p.write_text(text)}, {"x": 1}, "sim", "test unit")


def test_a_saved_unit_records_provenance_and_checksums(tmp_path):
    path = _unit(tmp_path / "u")
    meta = store.open_unit(path, ("data.csv", "meta.json"), "test unit")
    assert meta["x"] == 1
    assert meta["checksums"]["data.csv"] == store.file_sha256(path / "data.csv")
    prov = meta["provenance"]
    modules = {m: store.module_fingerprint(m) for m in store.OWN_SCOPE}
    assert prov["code"] == {"scope": "sim", "fingerprint": store.code_fingerprint("sim"), "modules": modules}
    for key in ("tailmiss", "torch", "numpy", "python", "created"):
        assert prov[key]
    assert store.stale_reason(meta, "sim") is None


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: (p / "data.csv").write_text("a,b\n"),  # truncated at a line boundary
        lambda p: (p / "data.csv").write_text("a,b\n1,3\n"),  # edited
        lambda p: (p / "data.csv").unlink(),  # missing
        lambda p: (p / "meta.json").write_text("{"),  # half-written metadata
        lambda p: (p / "meta.json").write_text(json.dumps({"x": 1})),  # no checksums: not a sealed unit
    ],
    ids=["truncated", "edited", "missing", "bad-meta", "unsealed"],
)
def test_a_damaged_unit_is_detected(tmp_path, damage):
    path = _unit(tmp_path / "u")
    damage(path)
    with pytest.raises(store.CorruptUnit):
        store.open_unit(path, ("data.csv", "meta.json"), "test unit")


def _fake_package(pkg: Path) -> None:
    """A package with every path :data:`store.SCOPES`, :data:`store.NO_NUMBERS` and :data:`store.OWN_SCOPE` name, a
    simulator and a trainer sharing one objectives module, and a report module nobody in a scope imports."""
    named = {p for scope in store.SCOPES.values() for p in scope.entries} | set(store.NO_NUMBERS) | set(store.OWN_SCOPE)
    for part in named:
        (pkg / part).parent.mkdir(parents=True, exist_ok=True)
        if part.endswith(".py"):
            (pkg / part).write_text("")
        else:
            (pkg / part).mkdir(exist_ok=True)
    for folder in ("objectives", "report"):
        (pkg / folder).mkdir(exist_ok=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "objectives" / "advantages.py").write_text('def z(x):\n    """Doc."""\n    return x * 2\n')
    (pkg / "sim" / "engine.py").write_text("from tailmiss.objectives.advantages import z\n\nX = z(1)\n")
    (pkg / "llm" / "train.py").write_text(
        "import math\n\nfrom tailmiss.objectives import advantages\n\n\n"
        "def step(x):\n    # one step\n    return advantages.z(x) + helper(x)\n\n\n"
        "def helper(x):\n    return math.exp(x)\n"
    )
    (pkg / "report" / "text.py").write_text('VERDICT = "yes"\n')


def test_the_fingerprint_follows_what_the_sources_of_its_scope_do(tmp_path, monkeypatch):
    """A scope is the import closure of its entry modules; its digest changes with what the code does, not with
    docstrings, comments, formatting, file names or where a definition lives inside the scope."""
    pkg = tmp_path / "pkg"
    _fake_package(pkg)
    monkeypatch.setattr(store, "_PACKAGE", pkg)

    def fingerprint(scope):
        store.code_fingerprint.cache_clear()
        return store.code_fingerprint(scope)

    def edit(rel, old, new):
        path = pkg / rel
        assert old in path.read_text(), (rel, old)
        path.write_text(path.read_text().replace(old, new))

    try:
        sim0, llm0 = fingerprint("sim"), fingerprint("llm")
        assert (pkg / "report" / "text.py") not in store._scope_files("llm") + store._scope_files("sim")
        edit("report/text.py", '"yes"', '"**no**"')  # a verdict reworded: nobody's numbers
        edit("llm/train.py", "# one step", "# one step of the trainer")
        edit("objectives/advantages.py", '"""Doc."""', '"""The doubled advantage (F-GRPO Eq. 3)."""')
        edit("llm/train.py", "return math.exp(x)", "return   math.exp( x )")
        assert (fingerprint("sim"), fingerprint("llm")) == (sim0, llm0)
        # move a function to a new module of the trainer and import it from there: the same code
        edit(
            "llm/train.py",
            "\n\ndef helper(x):\n    return   math.exp( x )\n",
            "\nfrom tailmiss.llm.util import helper\n",
        )
        (pkg / "llm" / "util.py").write_text("import math\n\n\ndef helper(x):\n    return math.exp(x)\n")
        (pkg / "sim" / "engine.py").rename(pkg / "sim" / "core.py")  # a file moved
        assert (fingerprint("sim"), fingerprint("llm")) == (sim0, llm0)
        edit("llm/util.py", "math.exp(x)", "math.exp(-x)")  # the trainer's arithmetic
        llm1 = fingerprint("llm")
        assert llm1 != llm0 and fingerprint("sim") == sim0  # another scope's edit keeps simulations valid
        edit("objectives/advantages.py", "x * 2", "x * 3")  # shared code changes both
        assert fingerprint("sim") != sim0 and fingerprint("llm") != llm1
        sim2, llm2 = fingerprint("sim"), fingerprint("llm")
        edit(
            "llm/util.py",
            "    return math.exp(-x)",
            "    from tailmiss.report.text import VERDICT\n\n    return math.exp(-x)",
        )
        llm3 = fingerprint("llm")  # a lazy import brings the report module into the trainer's scope
        assert (pkg / "report" / "text.py") in store._scope_files("llm") and llm3 != llm2
        edit("report/text.py", '"**no**"', '"yes"')
        assert fingerprint("llm") != llm3 and fingerprint("sim") == sim2
        (pkg / "io.py").unlink()  # a module the store names is gone (renamed): refused, not silently left out
        with pytest.raises(RuntimeError, match="'io.py'"):
            fingerprint("sim")
    finally:
        store.code_fingerprint.cache_clear()
    with pytest.raises(ValueError, match="scope"):
        store.code_fingerprint("nope")


def test_the_real_packages_cache_keys_follow_its_numbers(tmp_path, monkeypatch):
    """On a copy of this package: rewording a verdict, moving a report function, re-documenting and reformatting
    the trainer, or renaming a module of the objectives keeps every cached unit; editing a loss kernel stales every
    unit that trains with it; editing the simulator's sampler stales the simulations and the bridge only."""
    import shutil

    pkg = tmp_path / "tailmiss"
    shutil.copytree(store._PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(store, "_PACKAGE", pkg)

    from tailmiss.experiments.bridge import SCOPE as BRIDGE
    from tailmiss.experiments.sweep_result import SCOPE as SWEEP

    def keys():
        store.code_fingerprint.cache_clear()
        return {s.name: store.code_fingerprint(s) for s in [*store.SCOPES.values(), SWEEP, BRIDGE]}

    def edit(rel, old, new):
        path = pkg / rel
        text = path.read_text()
        assert old in text, (rel, old)
        path.write_text(text.replace(old, new))

    try:
        before = keys()
        edit("studies/protocol/section.py", '"the test (a one-run', '"this test (a one-run')
        moved = (pkg / "studies" / "transformer" / "tables.py").read_text()
        start = moved.index("def verdict_word(")
        end = moved.index("\n\n\ndef ", start)
        text = pkg / "studies" / "text.py"
        text.write_text(text.read_text() + "\n\n" + moved[start:end])
        (pkg / "studies" / "transformer" / "tables.py").write_text(moved[:start] + moved[end + 3 :])
        rl = (pkg / "llm" / "rl_update.py").read_text()
        doc_end = rl.index('"""', 3)
        rl = rl[:doc_end] + " Reworded." + rl[doc_end:]  # the module docstring
        (pkg / "llm" / "rl_update.py").write_text(rl.replace("\n    ", "\n        "))  # every indent doubled
        (pkg / "objectives" / "aggregations.py").rename(pkg / "objectives" / "aggregation_rules.py")
        for rel in ("objectives/__init__.py", "objectives/token_losses.py"):
            edit(rel, "tailmiss.objectives.aggregations import", "tailmiss.objectives.aggregation_rules import")
        assert keys() == before
        edit("objectives/token_losses.py", "ratio.clamp(max=cfg.clip_high)", "ratio.clamp(max=2 * cfg.clip_high)")
        after = keys()
        assert all(after[s] != before[s] for s in ("llm", "sweep", "bridge"))
        edit("sim/sampler.py", "torch.float64", "torch.float32")
        changed = {s for s, v in keys().items() if v != after[s]}
        assert changed == {"sim", "bridge"}
    finally:
        store.code_fingerprint.cache_clear()


def test_stale_reason_names_both_codes(monkeypatch):
    meta = {"provenance": {"code": {"scope": "sim", "fingerprint": "0123"}, "git": {"commit": "a" * 40, "dirty": True}}}
    reason = store.stale_reason(meta, "sim")
    assert "0123" in reason and store.code_fingerprint("sim") in reason and "aaaaaaaaaa" in reason
    assert "uncommitted" in reason


def test_a_unit_of_code_declared_equivalent_is_judged_as_made_by_the_running_code(monkeypatch):
    """EQUIVALENT: newer code replacing older code, down a chain; a loop in the declarations ends; other code and
    other scopes stay stale."""
    monkeypatch.setattr(store, "code_fingerprint", lambda scope: {"sim": "c3", "llm": "l1"}[scope])
    declared = {"sim": {"c3": "c2", "c2": "c1", "x": "y"}, "llm": {"l1": "l0", "l0": "l1"}}
    monkeypatch.setattr(store, "EQUIVALENT", declared)
    for stored in ("c3", "c2", "c1"):
        assert store.same_code("sim", stored)
        assert store.stale_reason({"provenance": {"code": {"fingerprint": stored}}}, "sim") is None
    assert not store.same_code("sim", "y") and not store.same_code("sim", "l0")
    assert "made by code c0" in store.stale_reason({"provenance": {"code": {"fingerprint": "c0"}}}, "sim")
    assert store.same_code("llm", "l0") and not store.same_code("llm", "zz")  # l1 -> l0 -> l1: ends
    (task,) = store.OWN_SCOPE[:1]
    now = store.module_fingerprint(task)
    monkeypatch.setattr(store, "EQUIVALENT", {**declared, task: {now: "t0"}})  # a task module of its own
    assert store.same_code(task, now) and store.same_code(task, "t0") and not store.same_code(task, "t1")
    meta = {"provenance": {"code": {"fingerprint": "c3", "modules": {task: "t0"}}}}
    assert store.stale_reason(meta, "sim", [task]) is None
    meta["provenance"]["code"]["modules"][task] = "t1"
    assert "t1" in store.stale_reason(meta, "sim", [task])


def _derived_scopes() -> dict:
    """The scopes of the units derived from LLM runs, by name (each unit type declares its own beside it)."""
    from tailmiss.experiments import attribution, bridge, by_type, shared_bridge, sweep_result

    scopes = (sweep_result.SCOPE, bridge.SCOPE, by_type.SCOPE, shared_bridge.SCOPE, attribution.SCOPE)
    return {s.name: s for s in scopes}


def _current(name: str) -> str:
    if name in store.OWN_SCOPE:
        return store.module_fingerprint(name)
    return store.code_fingerprint(_derived_scopes().get(name, name))


def test_every_declaration_names_the_running_code_or_what_it_replaces():
    """A declared fingerprint is the running code's, or one it replaces down the chain: a later edit of the scope
    without a new record must drop the declaration (its units are then stale, as any other edit makes them)."""
    for name, pairs in store.EQUIVALENT.items():
        current = _current(name)
        reachable = {current}
        while pairs.get(current) is not None and pairs[current] not in reachable:
            current = pairs[current]
            reachable.add(current)
        assert set(pairs) <= reachable, (name, sorted(set(pairs) - reachable))


def test_every_declared_equivalence_rests_on_identical_retrained_runs():
    """Each EQUIVALENT declaration has its record (benchmarks/trainer_equivalence.py): runs of the replaced code
    retrained by the newer code, SFT and RL, covering every code path of the replaced runs, all the same."""
    root = Path(__file__).resolve().parents[1] / "benchmarks" / "trainer_equivalence"
    declared = [(scope, new, old) for scope, pairs in store.EQUIVALENT.items() for new, old in pairs.items()]
    assert declared and {scope for scope, _, _ in declared} <= {"llm", *store.OWN_SCOPE, *_derived_scopes()}
    declared = [(scope, new, old) for scope, new, old in declared if scope not in _derived_scopes()]
    records = [json.loads(path.read_text()) for path in sorted(root.glob("*.json")) if "-" not in path.stem]
    for scope, new, old in declared:
        if scope in store.OWN_SCOPE:  # a task module: a record that retrained its runs names it
            entry = {"fingerprint": new, "replaces": [old]}  # the record that retrained runs of the replaced module
            (record,) = [r for r in records if r["modules"].get(scope) == entry]
            module = importlib.import_module("tailmiss." + scope.removesuffix(".py").replace("/", "."))
            (task,) = [
                c.__name__
                for c in vars(module).values()
                if getattr(c, "__module__", "") == module.__name__ and isinstance(c, type) and issubclass(c, Task)
            ]
            assert any(f"task={task}" in r["paths"] for r in record["results"] if r["kind"] == "rl")
            assert any(f"sft-task={task}" in r["paths"] for r in record["results"] if r["kind"] == "sft")
        else:
            record = json.loads((root / f"{new}.json").read_text())
            assert (scope, record["fingerprint"], record["replaces"]) == ("llm", new, old)
        assert record["all_same"] and set().union(*(r["paths"] for r in record["results"])) == set(record["paths"])
        assert {r["kind"] for r in record["results"]} == {"sft", "rl"}
        for result in record["results"]:
            checks = {k: v for k, v in result.items() if isinstance(v, bool)}
            assert {"history.csv", "config"} <= set(checks) and all(checks.values()), result["run"]
            if result["checkpoint.pt"] is None:  # a run restored from the evidence archive: it keeps no weights
                assert result["checkpoint config"] is None, result["run"]
            else:
                assert {"checkpoint config", "checkpoint.pt"} <= set(checks), result["run"]
        for kind in ("sft", "rl"):  # the weights were compared too, on runs that keep them
            assert any(r["checkpoint.pt"] for r in record["results"] if r["kind"] == kind), kind


def test_every_derived_scope_declaration_rests_on_units_computed_again_by_both_codes():
    """A declaration for a scope of units derived from LLM runs (a sweep result, the bridge, the scores by type, the
    shared rung's simulation) has its record (benchmarks/derived_equivalence.py): such units computed from the same
    runs by the replaced and by the newer code, file by file the same."""
    root = Path(__file__).resolve().parents[1] / "benchmarks" / "trainer_equivalence"
    records = [json.loads(path.read_text()) for path in sorted(root.glob("derived-*.json"))]
    for name in _derived_scopes():
        for new, old in store.EQUIVALENT.get(name, {}).items():
            (entry,) = [r["scopes"][name] for r in records if r["scopes"].get(name, {}).get("fingerprint") == new]
            assert entry["replaces"] == old and entry["all_same"] and entry["units"], name
            rows = [row for r in records for row in r["results"] if row["unit"] in entry["units"]]
            assert rows and all(v for row in rows for v in row.values() if isinstance(v, bool)), name


def test_the_one_path_trainer_rests_on_every_method_a_resumed_run_and_a_stack():
    """The trainer whose run stack calls its public stages (the declaration for the current code) was retrained on
    every method and option family the report uses, stopped and resumed, and as one stack, all bit for bit."""
    root = Path(__file__).resolve().parents[1] / "benchmarks" / "trainer_equivalence"
    record = json.loads((root / f"{store.code_fingerprint('llm')}.json").read_text())
    assert record["fingerprint"] in store.EQUIVALENT["llm"] and record["all_same"]
    rl = [r for r in record["results"] if r["kind"] == "rl"]
    paths = set().union(*(r["paths"] for r in rl))
    for method in ("grpo", "dapo", "cispo", "drgrpo"):
        assert f"method={method}" in paths, method
    for path in ("focal=True", "kl=True", "entropy=True", "dynamic_sampling=True", "eval_per_prompt=True",
                 "reward_transform=differential-smoothing", "schedule=cosine", "rollout_sampling=counter"):  # fmt: skip
        assert path in paths, path
    assert any("sft-schedule=cosine" in r["paths"] for r in record["results"] if r["kind"] == "sft")
    resumed = [r for r in rl if r["how"].startswith("resumed")]
    assert {p for r in resumed for p in r["paths"] if p.startswith("policy=")} >= {"policy=transformer"}
    stacked = [r for r in rl if r["how"].startswith("in a stack")]
    assert len(stacked) >= 2 and len({r["run"] for r in stacked}) == len(stacked)
    assert all(r["checkpoint.pt"] for r in stacked)  # these keep their weights: compared tensor for tensor
    assert any(r["checkpoint.pt"] for r in resumed if "policy=transformer" in r["paths"])


# --- atomic replacement and leftovers --------------------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_replacing_a_result_swaps_it_whole(tmp_path):
    dest = tmp_path / "r"
    with io.atomic_dir(dest) as tmp:
        (tmp / "f").write_text("old")
    with pytest.raises(RuntimeError):
        with io.atomic_dir(dest) as tmp:
            (tmp / "f").write_text("half")
            raise RuntimeError("crash while writing")
    assert (dest / "f").read_text() == "old"
    with io.atomic_dir(dest) as tmp:
        (tmp / "f").write_text("new")
    assert (dest / "f").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]  # no temporary folder left


def test_a_replacement_that_dies_between_its_renames_is_undone(tmp_path, monkeypatch):
    dest = tmp_path / "r"
    with io.atomic_dir(dest) as tmp:
        (tmp / "f").write_text("old")
    monkeypatch.setattr(io, "_exchange", lambda a, b: False)  # a system without an atomic exchange
    real_replace, calls = os.replace, []

    def dying_replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed after moving the old result aside
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", dying_replace)
    with pytest.raises(KeyboardInterrupt):
        with io.atomic_dir(dest) as tmp:
            (tmp / "f").write_text("new")
    monkeypatch.setattr(os, "replace", real_replace)
    assert not dest.exists()
    io.recover(dest)
    assert (dest / "f").read_text() == "old"


def test_leftovers_of_dead_writers_are_removed_and_live_ones_kept(tmp_path):
    dest = tmp_path / "r"
    dead = tmp_path / f".r.{io._HOST}-{_dead_pid()}.abc.tmp"
    live = tmp_path / f".r.{io._HOST}-{os.getpid()}.abc.tmp"
    dead.mkdir()
    (dead / "history.csv").write_text("half")
    live.mkdir()
    with io.atomic_dir(dest) as tmp:
        (tmp / "f").write_text("x")
    assert not dead.exists()
    assert live.exists()
    stale_file = tmp_path / f".x.csv.{io._HOST}-{_dead_pid()}.q.tmp"
    stale_file.write_text("half")
    with io.atomic_write(tmp_path / "x.csv") as fh:
        fh.write("ok")
    assert not stale_file.exists()


# --- the simulator through the store --------------------------------------------------------------


def test_a_truncated_history_is_never_loaded_and_is_redone(tmp_path):
    out = tmp_path / "tiny"
    first = run_sim(TINY, out, RunOptions(device="cpu", progress=False))
    history = (out / "history.csv").read_text().splitlines(keepends=True)
    (out / "history.csv").write_text("".join(history[:-5]))  # cut at a line boundary
    with pytest.raises(store.CorruptUnit, match="damaged"):
        SimResult.load(out)
    lines, log = _lines()
    again = run_sim(TINY, out, RunOptions(device="cpu", progress=False, log=log))
    assert any("not reused" in line and "damaged" in line for line in lines)
    pd.testing.assert_frame_equal(again.history, first.history)
    pd.testing.assert_frame_equal(SimResult.load(out).history, SimResult.load(out).history)


def test_an_incomplete_history_is_refused_even_with_valid_checksums(tmp_path):
    result = simulate(TINY, device="cpu", progress=False)
    short = SimResult(TINY, result.history[result.history["step"] < TINY.steps].reset_index(drop=True), result.meta)
    short.save(tmp_path / "r")
    with pytest.raises(store.CorruptUnit, match="incomplete"):
        SimResult.load(tmp_path / "r")


def test_a_result_of_other_code_is_redone_unless_reuse_stale(tmp_path, monkeypatch):
    out = tmp_path / "tiny"
    run_sim(TINY, out, RunOptions(device="cpu", progress=False))
    made = json.loads((out / "meta.json").read_text())["provenance"]["created"]
    monkeypatch.setattr(store, "code_fingerprint", lambda scope="bridge": "f" * 16)

    lines, log = _lines()
    reused = run_sim(TINY, out, RunOptions(device="cpu", progress=False, reuse_stale=True, log=log))
    assert reused.meta["provenance"]["created"] == made
    assert any(line.startswith("warning: reusing the stale") and "ffff" in line for line in lines)

    lines, log = _lines()
    redone = run_sim(TINY, out, RunOptions(device="cpu", progress=False, log=log))
    assert any("stale" in line and "redoing" in line for line in lines)
    assert redone.meta["provenance"]["code"]["fingerprint"] == "f" * 16


def test_a_fresh_result_is_reused_and_another_config_redone(tmp_path):
    out = tmp_path / "tiny"
    first = run_sim(TINY, out, RunOptions(device="cpu", progress=False))
    lines, log = _lines()
    again = run_sim(TINY, out, RunOptions(device="cpu", progress=False, log=log))
    assert any("reusing" in line for line in lines)
    assert again.meta["provenance"]["created"] == first.meta["provenance"]["created"]
    other = TINY.replace(steps=8)
    lines, log = _lines()
    assert run_sim(other, out, RunOptions(device="cpu", progress=False, log=log)).config == other
    assert any("another config" in line for line in lines)


def test_the_destination_is_checked_before_any_work(tmp_path):
    heavy = TINY.replace(num_actions=2**20, steps=10**6)  # would run for hours
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        run_sim(heavy, tmp_path / "file", RunOptions(device="cpu", progress=False))
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an earlier SimResult folder"):
        run_sim(heavy, tmp_path / "foreign", RunOptions(device="cpu", progress=False))
    assert (tmp_path / "foreign" / "notes.txt").read_text() == "mine"


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a non-root POSIX user")
def test_a_read_only_destination_is_refused_before_any_work(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(ValueError, match="cannot write"):
            run_sim(TINY.replace(steps=10**6), locked / "r", RunOptions(device="cpu", progress=False))
    finally:
        locked.chmod(0o700)


# --- snapshots: resume bit for bit -------------------------------------------------------------------


def test_a_run_interrupted_after_a_snapshot_resumes_bit_for_bit(tmp_path, monkeypatch, one_torch_thread):
    from tailmiss.sim import snapshot

    config = TINY.replace(steps=30, log_every=3, optimizer="adam")
    whole = simulate(config, device="cpu", progress=False)
    snap = tmp_path / "snap.pt"
    real_save, saves = snapshot._Checkpoint.save, []

    def save_then_die(self, state):
        real_save(self, state)
        saves.append(state["step"])
        if len(saves) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(snapshot._Checkpoint, "save", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        simulate(config, device="cpu", progress=False, checkpoint=snap, checkpoint_every=7)
    monkeypatch.setattr(snapshot._Checkpoint, "save", real_save)
    assert saves == [7, 14]
    lines, log = _lines()
    resumed = simulate(config, device="cpu", progress=False, checkpoint=snap, checkpoint_every=7, log=log)
    assert resumed.meta["resumed_from_step"] == 14
    assert any("from step 14" in line for line in lines)
    pd.testing.assert_frame_equal(resumed.history, whole.history, check_exact=True)


def test_a_snapshot_of_another_sweep_or_a_damaged_one_is_ignored(tmp_path):
    config = TINY.replace(steps=10)
    whole = simulate(config, device="cpu", progress=False)
    snap = tmp_path / "snap.pt"
    simulate(config.replace(lr=0.5), device="cpu", progress=False, checkpoint=snap, checkpoint_every=5)
    assert snap.is_file()  # the other sweep's snapshot at step 5
    again = simulate(config, device="cpu", progress=False, checkpoint=snap, checkpoint_every=100)
    assert "resumed_from_step" not in again.meta
    pd.testing.assert_frame_equal(again.history, whole.history, check_exact=True)
    snap.write_bytes(b"not a snapshot")
    again = simulate(config, device="cpu", progress=False, checkpoint=snap, checkpoint_every=100)
    pd.testing.assert_frame_equal(again.history, whole.history, check_exact=True)


def test_run_sim_removes_its_snapshots_once_saved(tmp_path):
    out = tmp_path / "tiny"
    run_sim(TINY, out, RunOptions(device="cpu", progress=False), checkpoint_every=2)
    assert not resume_dir(out).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny"]


# --- shards -------------------------------------------------------------------------------------------


def test_shard_bounds_split_like_array_split():
    import numpy as np

    from tailmiss._dist import shard_bounds

    for n in (0, 1, 5, 136):
        for parts in (1, 2, 3, 8):
            bounds = [shard_bounds(n, parts, k) for k in range(parts)]
            expected = [(int(a[0]), int(a[-1]) + 1) if len(a) else None for a in np.array_split(np.arange(n), parts)]
            for (start, stop), want in zip(bounds, expected):
                assert (start, stop) == want if want else start == stop


def test_shards_of_a_sweep_concatenate_to_the_whole_sweep(one_torch_thread):
    config = TINY.replace(group_sizes=(2, 16, 128, 1024), gammas=(0.0, 0.5, 1.0), seeds=(0, 1, 2), steps=10)
    whole = simulate(config, device="cpu", progress=False).history
    from tailmiss._dist import shard_bounds

    for parts in (2, 5):
        shares = [
            simulate(config, device="cpu", progress=False, runs=range(*shard_bounds(config.num_runs, parts, k))).history
            for k in range(parts)
        ]
        joined = pd.concat(shares, ignore_index=True).sort_values(["run", "step"], kind="stable")
        pd.testing.assert_frame_equal(joined.reset_index(drop=True), whole, check_exact=True)


@pytest.mark.parametrize("runs", [[], [0, 0], [-1], [99], "ab"])
def test_bad_run_selections_are_refused(runs):
    with pytest.raises(ValueError, match="runs must be"):
        simulate(TINY, device="cpu", progress=False, runs=runs)


def test_no_scope_covers_analysis_figures_report_or_cli():
    """Where an analysis, figure or report file lives never decides what the cache keeps: no scope's import closure
    reaches those packages, and an LLM run's scope (the trainer) excludes the experiments that only choose which runs
    to train."""
    outside = {"results", "figures", "report", "cli", "diagnose", "integrations", "options.py", "store.py", "io.py"}
    from tailmiss.experiments.bridge import SCOPE as BRIDGE
    from tailmiss.experiments.sweep_result import SCOPE as SWEEP

    for scope in [*store.SCOPES.values(), SWEEP, BRIDGE]:
        files = {p.relative_to(store._PACKAGE).parts[0] for p in store._scope_files(scope)}
        assert files.isdisjoint(outside), scope
    llm = {p.relative_to(store._PACKAGE).as_posix() for p in store._scope_files(store.SCOPES["llm"])}
    assert not any(f.startswith(("experiments/", "sim/")) for f in llm)
    assert "analytic/significance.py" not in llm and "objectives/token_losses.py" in llm
    sim = {p.relative_to(store._PACKAGE).as_posix() for p in store._scope_files(store.SCOPES["sim"])}
    assert not any(f.startswith(("experiments/", "llm/")) for f in sim) and "sim/presets.py" not in sim
    sweep = {p.relative_to(store._PACKAGE).as_posix() for p in store._scope_files(SWEEP)}
    assert {"experiments/sweep.py", "experiments/sweep_config.py"} <= sweep and "experiments/presets.py" not in sweep


def test_the_derived_units_record_compares_files_and_not_when_or_by_which_code(tmp_path):
    """benchmarks/derived_equivalence.py: two computations of a derived unit are the same when every file but the
    provenance of ``meta.json`` is; one changed byte, or a unit missing on the newer side, is a difference."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "derived_equivalence", Path(__file__).resolve().parents[1] / "benchmarks" / "derived_equivalence.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def unit(root: Path, name: str, fingerprint: str, table: str) -> None:
        (root / name).mkdir(parents=True)
        meta = {"checksums": {"t.csv": "x"}, "provenance": {"created": fingerprint, "code": {"scope": "sweep",
                "fingerprint": fingerprint}}}  # fmt: skip
        (root / name / "meta.json").write_text(json.dumps(meta))
        (root / name / "t.csv").write_text(table)

    old, new = tmp_path / "old", tmp_path / "new"
    unit(old, "a", "f0", "1,2\n")
    unit(new, "a", "f1", "1,2\n")
    unit(old, "b", "f0", "1,2\n")
    unit(new, "b", "f1", "1,3\n")
    unit(old, "c", "f0", "1\n")
    (old / "run").mkdir()  # an LLM run: not a derived unit
    (old / "run" / "meta.json").write_text(json.dumps({"provenance": {"code": {"scope": "llm"}}}))
    rows = {r["unit"]: r for r in module.compare(old, new)}
    assert set(rows) == {"a", "b", "c"} and rows["a"]["fingerprint"] == "f1" and rows["a"]["replaces"] == "f0"
    assert rows["a"]["t.csv"] and rows["a"]["meta.json"]
    assert not rows["b"]["t.csv"] and rows["b"]["meta.json"]
    assert not rows["c"]["t.csv"] and not rows["c"]["meta.json"]
