"""RunOptions: the one value that carries device, processes, threads, progress, log and cache reuse."""

from __future__ import annotations

import pytest

from tailmiss.options import RunOptions
from tailmiss.studies.context import Context
from tailmiss.studies.runs import train_llm


@pytest.mark.parametrize(
    ("field", "value"),
    [("jobs", 0), ("jobs", 1.5), ("threads", 0), ("threads", True), ("progress", 1), ("reuse_stale", "yes")],
)
def test_bad_options_are_refused_with_their_name(field, value):
    with pytest.raises(ValueError, match=field):
        RunOptions(**{field: value})


def test_log_must_be_callable():
    with pytest.raises(ValueError, match="log must be callable"):
        RunOptions(log="stderr")


def test_say_reaches_the_log_and_nothing_without_one():
    lines: list[str] = []
    RunOptions(log=lines.append).say("reused")
    RunOptions().say("nowhere")
    assert lines == ["reused"]


def test_replace_keeps_the_rest_and_validates():
    base = RunOptions(device="cpu", jobs=None, progress=False)
    changed = base.replace(threads=2)
    assert (changed.device, changed.jobs, changed.progress, changed.threads) == ("cpu", None, False, 2)
    with pytest.raises(ValueError, match="threads"):
        base.replace(threads=-1)


def test_a_context_carries_its_options_and_refuses_unknown_families_in_any_mode():
    ctx = Context(quick=True)
    assert ctx.options == RunOptions()
    for jobs in (1, 2):
        with pytest.raises(ValueError, match="unknown LLM family 'nope'"):
            train_llm(["nope"], Context(quick=True, options=RunOptions(jobs=jobs)))
