"""Shared pytest configuration.

Hypothesis profiles (select with the ``HYPOTHESIS_PROFILE`` environment variable):

- ``ci`` (default): 60 examples, derandomized so that every run checks the same cases.
- ``dev``: 300 random examples, for hunting counterexamples locally.
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import settings

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True, print_blob=True)
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _no_evidence_archive(monkeypatch):
    """Tests read no evidence archive unless they make one: the checkout's ``evidence/`` holds the full report's
    units, which a test's tiny units must neither find nor stand in for."""
    from tailmiss.archive import ARCHIVE_ENV

    monkeypatch.setenv(ARCHIVE_ENV, "")


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny tensors: one intra-op thread is several times faster than two on a busy 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_sft_config(name: str = "sft-fixture", steps: int = 60):
    """A tiny SFT config on 2-digit multisolution (at 60 steps, mu_pos about 0.2 on the test prompts)."""
    from tailmiss.llm import ModelConfig, MultiSolutionTask, SFTConfig
    from tailmiss.llm.optim import SFT_OPTIM

    return SFTConfig(
        name=name,
        task=MultiSolutionTask(num_digits=2),
        model=ModelConfig(1, 2, 32),
        steps=steps,
        batch_size=16,
        optim=SFT_OPTIM.replace(lr=1e-2, warmup_steps=5),
        eval_every=30,
        eval_prompts=8,
        checkpoint_every=30,
        log_every=10,
    )


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory):
    """A 60-step SFT run of :func:`tiny_sft_config`, once per test module."""
    from tailmiss.llm import train_sft

    return train_sft(tiny_sft_config(), tmp_path_factory.mktemp("sft") / "run", device="cpu", progress=False)


def tiny_llm_sweeps() -> dict:
    """Seconds-sized stand-ins for the quick LLM sweeps, by figure family (``Context.llm_sweeps``).

    Same structure as the presets (the N sweep keeps GRPO at several N plus F-GRPO at N = 8; the
    objective sweep keeps all three methods with and without the focal weight; the maze sweep keeps
    GRPO and F-GRPO γ = 0.5 at two N), two seeds, a few RL steps of a few prompts.
    """
    from tailmiss.experiments.presets import llm_sweep
    from tailmiss.experiments.sweep import Variant

    def shrink(name, variants, samples=0):
        s = llm_sweep(name)
        return s.replace(
            name=f"{name}-tiny",
            sft=s.sft.replace(name=f"{s.sft.name}-tiny", steps=40, eval_every=20, eval_prompts=8, checkpoint_every=20),
            rl=s.rl.replace(
                name=f"{s.rl.name}-tiny",
                steps=2,
                eval_every=2,
                prompts_per_step=2,
                eval_prompts=6,
                eval_samples=samples,
                checkpoint_every=2,
                minibatches=1,
            ),
            variants=variants,
            seeds=(0, 1),
        )

    nsweep = tuple(Variant("grpo", 0.0, n) for n in (2, 4, 8)) + (Variant("grpo", 0.5, 8),)
    objectives = tuple(Variant(m, g, 4) for m in ("grpo", "dapo", "cispo") for g in (0.0, 0.5)) + tuple(
        Variant("dapo", g, 4, dynamic_sampling=True) for g in (0.0, 0.5)
    )
    maze = tuple(Variant("grpo", g, n) for g in (0.0, 0.5) for n in (2, 4))
    return {
        "nsweep": shrink("multisolution-nsweep-quick", nsweep),
        "objectives": shrink("multisolution-objectives-quick", objectives),
        "maze": shrink("maze-nsweep-quick", maze, samples=256),
        **tiny_ladders(),
        **tiny_protocol_sweeps(),
        **tiny_control_sweeps(),
        **tiny_narrowing_sweeps(),
    }


def tiny_narrowing_sweeps(full: bool = False) -> dict:
    """Seconds-sized stand-ins for the narrowing study's sweeps: the quick one (``narrowing``: GRPO at N = 2, 8, 32,
    F-GRPO γ = 0.5 and the low-LR control at N = 8, two seeds), and with ``full`` every family of the full study at
    the same size (the search's three strengths, the controls, the visible and no-conflict tasks, the plateau and
    end-point runs), three seeds."""
    from tailmiss.experiments.presets import llm_sweep
    from tailmiss.experiments.sweep import Variant

    seeds = (0, 1, 2) if full else (0, 1)

    def shrink(name, variants=None):
        s = llm_sweep(name)
        return s.replace(
            name=f"{name}-tiny",
            sft=s.sft.replace(name=f"{s.sft.name}-tiny", steps=40, eval_every=20, eval_prompts=8, checkpoint_every=20),
            rl=s.rl.replace(
                name=f"{s.rl.name}-tiny", steps=4, eval_every=2, prompts_per_step=2, eval_prompts=12, checkpoint_every=2
            ),
            variants=variants or s.variants,
            seeds=seeds,
        )

    low = next(v for v in llm_sweep("narrowing-controls").variants if v.tag == "low-LR")
    main = (*(Variant("grpo", 0.0, n) for n in (2, 8, 32)), Variant("grpo", 0.5, 8), Variant("grpo", 1.0, 8))
    from tailmiss.experiments.presets import ladder_preset

    lad = ladder_preset("narrowing-ladder-quick")
    tiny = lad.sft.replace(name=f"{lad.sft.name}-tiny", steps=40, eval_every=20, eval_prompts=8, checkpoint_every=20)
    ladder = lad.replace(
        name="narrowing-ladder-tiny",
        sft=tiny,
        rl=lad.rl.replace(
            name="narrowing-ladder-tiny", steps=4, eval_every=2, train_prompts=8, eval_prompts=8, prompts_per_step=4
        ),
        seeds=seeds,
    )
    shared = ladder.replace(name="narrowing-ladder-shared-tiny", rungs=ladder_preset("narrowing-ladder-shared").rungs)
    n_ladder = ladder.replace(
        name="narrowing-ladder-shared-n-tiny",
        rungs=ladder_preset("narrowing-ladder-shared-n").rungs,
        group_sizes=(2, 8),
        gammas=(0.0,),
    )
    shared_ladders = {"narrowing-ladder-shared": shared, "narrowing-ladder-shared-n": n_ladder}
    for name in ("narrowing-ladder-frontier", "narrowing-ladder-frontier-low"):
        full_size = ladder_preset(name)
        shared_ladders[name] = ladder.replace(name=f"{name}-tiny", rungs=full_size.rungs, gammas=full_size.gammas)
    if not full:  # as the presets do, every family stands for the quick sweep in quick mode
        quick = shrink("narrowing-quick", (*main, low))
        families = ("narrowing-search-str0.25", "narrowing-search-str0.5", "narrowing-search-str1", "narrowing")
        families += ("narrowing-controls", "narrowing-visible", "narrowing-none")
        return {**dict.fromkeys(families, quick), "narrowing-ladder": ladder, **shared_ladders}
    out = {"narrowing": shrink("narrowing", main), "narrowing-ladder": ladder, **shared_ladders}
    for name in ("narrowing-search-str0.25", "narrowing-search-str0.5", "narrowing-search-str1"):
        out[name] = shrink(name)
    out["narrowing-controls"] = shrink("narrowing-controls").replace(sft=out["narrowing"].sft, rl=out["narrowing"].rl)
    out["narrowing-visible"] = shrink("narrowing-visible")
    out["narrowing-none"] = shrink("narrowing-none")
    out["narrowing-plateau"] = shrink("narrowing-plateau").replace(sft=out["narrowing"].sft)
    out["narrowing-endpoint"] = shrink("narrowing-endpoint").replace(sft=out["narrowing"].sft)
    return out


def tiny_protocol_sweeps() -> dict:
    """Seconds-sized stand-ins for the protocol ladder's quick sweeps: GRPO at N = 2, 8, 32 and F-GRPO γ = 0.5 at
    N = 8, two seeds, 4 steps of 2 prompts (pools of 4: two epochs), 34 evaluation prompts (a 30-prompt benchmark
    and a 4-prompt one)."""
    from tailmiss.experiments.presets import llm_sweep
    from tailmiss.experiments.sweep import Variant

    variants = tuple(Variant("grpo", 0.0, n) for n in (2, 8, 32)) + (Variant("grpo", 0.5, 8),)
    out = {}
    for name in ("protocol-today", "protocol-difficulty", "protocol-on-policy", "paper-protocol"):
        s = llm_sweep(f"{name}-quick")
        rl = s.rl.replace(
            name=f"{s.rl.name}-tiny",
            steps=4,
            eval_every=2,
            checkpoint_every=2,
            prompts_per_step=2,
            eval_prompts=34,
            minibatches=min(s.rl.minibatches, 2),
            **({"train_prompts": 4} if s.rl.train_prompts else {}),
        )
        sft = s.sft.replace(name=f"{s.sft.name}-tiny", steps=40, eval_every=20, eval_prompts=8, checkpoint_every=20)
        out[name] = s.replace(name=f"{name}-tiny", sft=sft, rl=rl, variants=variants, seeds=(0, 1))
    return out


def tiny_control_sweeps() -> dict:
    """Seconds-sized stand-ins for the quick controls and γ sweeps, on the tiny paper-protocol's SFT model and RL
    settings (so that they pair with its runs): the four controls, GRPO γ = 2 and DAPO (dynamic sampling) at γ = 0
    and 0.5 (the quick γ sweep), two seeds."""
    from tailmiss.experiments.presets import llm_sweep

    paper = tiny_protocol_sweeps()["paper-protocol"]
    out = {}
    for name in ("paper-protocol-controls", "paper-protocol-gamma"):
        s = llm_sweep(f"{name}-quick")
        out[name] = s.replace(name=f"{name}-tiny", sft=paper.sft, rl=paper.rl, seeds=(0, 1))
    return out


def tiny_ladders() -> dict:
    """Seconds-sized stand-ins for the quick ladders (``Context.llm_sweeps`` families ``ladder*``).

    The main one keeps a table, a factorized and a transformer rung with Adam plus the table with SGD (so every
    ingredient verdict has both sides), two group sizes, γ = 0 and 1 and two seeds; the others three group sizes,
    γ = 0, one seed; a few steps on a pool of four prompts.
    """
    from tailmiss.experiments.ladder import Rung
    from tailmiss.experiments.presets import ladder_preset

    def shrink(name, rungs, gammas=(0.0,), seeds=(0,), ns=(2, 4, 8)):
        lad = ladder_preset(name)
        sft = lad.sft.replace(name=f"{lad.sft.name}-tiny", steps=40, eval_every=20, eval_prompts=8, checkpoint_every=20)
        rl = lad.rl.replace(
            name=f"{lad.rl.name}-tiny", steps=4, eval_every=2, train_prompts=4, prompts_per_step=2, eval_prompts=4
        )
        return lad.replace(name=f"{name}-tiny", sft=sft, rl=rl, rungs=rungs, group_sizes=ns, gammas=gammas, seeds=seeds)

    table, sgd = Rung("table", "adamw", 0.1), Rung("table", "sgd", 20.0)
    fact, trans = Rung("factorized", "adamw", 0.05), Rung("transformer", "adamw", 2e-4)
    return {
        "ladder": shrink("ladder-quick", (table, sgd, fact, trans), gammas=(0.0, 1.0), seeds=(0, 1), ns=(2, 8)),
        "ladder-budget": shrink("ladder-budget-quick", (table, trans)),
        "ladder-hard": shrink("ladder-hard-quick", (table, trans)),
    }


@pytest.fixture
def evidence_root(tmp_path, monkeypatch):
    """An empty evidence archive in the test's folder, the one this process and its workers read."""
    from tailmiss.archive import ARCHIVE_ENV

    root = tmp_path / "evidence"
    root.mkdir()
    monkeypatch.setenv(ARCHIVE_ENV, str(root))
    return root


@pytest.fixture(scope="module")
def trained_narrowing(tmp_path_factory, one_torch_thread):
    """The tiny narrowing sweep (:func:`tiny_narrowing_sweeps`) trained once per module, on one thread, in a cache
    of its own with no evidence archive: ``(its cache root, its result)``."""
    from tailmiss.archive import ARCHIVE_ENV
    from tailmiss.experiments.sweep import run_sweep
    from tailmiss.options import RunOptions

    root = tmp_path_factory.mktemp("trained") / "llm"
    mp = pytest.MonkeyPatch()
    mp.setenv(ARCHIVE_ENV, "")
    try:
        result = run_sweep(tiny_narrowing_sweeps()["narrowing"], root, RunOptions(progress=False))
    finally:
        mp.undo()
    return root, result


def benchmark_script(name: str):
    """The module of ``benchmarks/<name>.py`` (a script, not a package module), loaded from the checkout."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def one_error_line(result, *needles: str, code: int = 2) -> str:
    """A CLI result that failed with ``code`` and said exactly one ``Error:`` line (containing ``needles``), no
    traceback; returns the line."""
    assert result.exit_code == code, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output + result.stderr
    for needle in needles:
        assert needle.lower() in lines[0].lower(), (needle, lines[0])
    return lines[0]


@pytest.fixture(scope="session")
def quick_ctx(tmp_path_factory):
    """Quick-mode context whose simulation cache lives for the whole session (the tiny LLM sweeps stand in for
    the quick ones), shared by the figure tests."""
    from tailmiss.options import RunOptions
    from tailmiss.studies.context import Context

    cache = tmp_path_factory.getbasetemp() / "tailmiss-quick-cache"
    cache.mkdir(exist_ok=True)
    return Context(quick=True, cache_dir=cache, llm_sweeps=tiny_llm_sweeps(), options=RunOptions(progress=False))
