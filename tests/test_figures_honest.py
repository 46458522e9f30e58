"""Figures that cannot mislead: checks on every registered figure's Axes, and unit tests of the helpers.

Every figure of :data:`tailmiss.report.registry.FIGURES` is drawn from its quick-mode data (the session ``quick_ctx``
of ``conftest.py``) and each of its Axes is checked:

(a) every bar container's value axis includes 0 (a bar hanging from a truncated axis exaggerates differences);
(b) no two labelled line series (plain lines and error-bar lines) with the same x data have the same y values
    unless one's legend label says so (the identical-note of :func:`tailmiss.studies.style.mark_identical`);
(c) no two visible text labels inside a panel overlap (their rendered bounding boxes).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from matplotlib.container import BarContainer, ErrorbarContainer

from tailmiss.report.registry import FIGURES
from tailmiss.studies import style  # sets the Agg backend before pyplot is imported
from tailmiss.studies.style import FLAT_RTOL, IDENTICAL_NOTE, IDENTICAL_RTOL


@pytest.fixture(scope="module")
def drawn(quick_ctx):
    """``drawn(name)``: figure ``name`` drawn (under the house style) once for all checks of this module."""
    import matplotlib.pyplot as plt

    figures = {}

    def draw(name: str):
        if name not in figures:
            spec = FIGURES[name]
            with style.paper_style():
                figures[name] = spec.plot(spec.data(quick_ctx))
                figures[name].canvas.draw()  # lay out the texts, so that their extents are final
        return figures[name]

    with plt.rc_context({"figure.max_open_warning": 0}):  # every registered figure stays open for the module
        yield draw
    for fig in figures.values():
        plt.close(fig)


def _panels(fig):
    return [ax for ax in fig.axes if ax.get_visible() and ax.axison]


def _series(ax) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(label, x, y) of each labelled line and each labelled error-bar series of ``ax``."""
    out = []
    for line in ax.lines:
        if not line.get_label().startswith("_"):
            out.append((line.get_label(), line.get_xdata(), line.get_ydata()))
    for container in ax.containers:
        if isinstance(container, ErrorbarContainer) and not str(container.get_label()).startswith("_"):
            data_line = container.lines[0]
            if data_line is not None:
                out.append((container.get_label(), data_line.get_xdata(), data_line.get_ydata()))
    return [(label, np.asarray(x, dtype=float), np.asarray(y, dtype=float)) for label, x, y in out]


def _equal(a: np.ndarray, b: np.ndarray, rtol: float) -> bool:
    if a.shape != b.shape:
        return False
    both_nan = np.isnan(a) & np.isnan(b)
    close = np.abs(a - b) <= rtol * np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))
    return bool(np.all(both_nan | close))


@pytest.mark.parametrize("name", list(FIGURES))
def test_bars_start_at_zero(name, drawn):
    for ax in _panels(drawn(name)):
        for container in ax.containers:
            if isinstance(container, BarContainer) and len(container):
                lo, hi = ax.get_ylim() if container.orientation == "vertical" else ax.get_xlim()
                assert min(lo, hi) <= 0 <= max(lo, hi), f"{name}: {ax.get_title()!r} bars hang from {lo:g}..{hi:g}"


@pytest.mark.parametrize("name", list(FIGURES))
def test_identical_series_are_marked(name, drawn):
    for ax in _panels(drawn(name)):
        for (la, xa, ya), (lb, xb, yb) in itertools.combinations(_series(ax), 2):
            if _equal(xa, xb, 0.0) and _equal(ya, yb, IDENTICAL_RTOL):
                assert IDENTICAL_NOTE in la or IDENTICAL_NOTE in lb, f"{name}: {lb!r} hides under {la!r}"


def _text_boxes(ax, renderer):
    texts = [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
    boxes = []
    for t in texts:
        box = t.get_window_extent(renderer)
        if box.width > 0 and box.height > 0:
            boxes.append((t.get_text(), box))
    return boxes


@pytest.mark.parametrize("name", list(FIGURES))
def test_panel_texts_do_not_overlap(name, drawn):
    fig = drawn(name)
    renderer = fig.canvas.get_renderer()
    for ax in _panels(fig):
        for (ta, a), (tb, b) in itertools.combinations(_text_boxes(ax, renderer), 2):
            assert not a.overlaps(b), f"{name}: {ta!r} overlaps {tb!r} in {ax.get_title()!r}"


# --- the helpers on synthetic axes ------------------------------------------------------------


@pytest.fixture
def ax():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def test_mark_identical_marks_the_later_of_two_equal_lines(ax):
    x = np.arange(5.0)
    first = ax.plot(x, x**2, "-o", label="F-CISPO")[0]
    second = ax.plot(x, x**2 * (1 + 1e-12), "-o", label="F-GRPO")[0]
    other = ax.plot(x, x**2 + 1e-3, label="GRPO")[0]
    pairs = style.mark_identical(ax)
    assert pairs == [("F-GRPO", "F-CISPO")]
    assert first.get_label() == "F-CISPO" and first.get_linestyle() == "-"
    assert second.get_label() == "F-GRPO (identical to F-CISPO)"
    assert second.get_linestyle() == "--" and second.get_marker() != first.get_marker()
    assert other.get_label() == "GRPO"
    assert style.mark_identical(ax) == []  # idempotent: an already marked series is left alone
    assert second.get_label() == "F-GRPO (identical to F-CISPO)"


def test_mark_identical_covers_error_bars_and_needs_same_x(ax):
    x = np.array([2.0, 4.0, 8.0])
    ax.errorbar(x, [0.1, 0.2, 0.3], yerr=0.01, label="GRPO")
    marked = ax.errorbar(x, [0.1, 0.2, 0.3], yerr=0.01, label="DAPO")
    ax.plot(x * 1.1, [0.1, 0.2, 0.3], label="shifted")  # same y, other x: not identical
    assert style.mark_identical(ax) == [("DAPO", "GRPO")]
    assert marked.get_label() == "DAPO (identical to GRPO)"
    assert marked.lines[0].get_linestyle() == "--"
    _, labels = ax.get_legend_handles_labels()
    assert "DAPO (identical to GRPO)" in labels and "shifted" in labels


def test_mark_identical_tolerance_is_relative_to_the_magnitude(ax):
    ax.plot([0, 1], [1e6, 2e6], label="a")
    ax.plot([0, 1], [1e6 + 1e-4, 2e6], label="b")  # |Δ| = 1e-4 ≤ 1e-9 · 2e6
    ax.plot([0, 1], [0.0, 1.0], label="c")
    ax.plot([0, 1], [1e-8, 1.0], label="d")  # |Δ| = 1e-8 > 1e-9 · max(1, |y|)
    assert style.mark_identical(ax) == [("b", "a")]


def test_flat_panel_gets_its_note(ax):
    ns = np.array([2, 8, 32])
    ax.errorbar(ns, 1 - np.array([1e-7, 3e-7, 0.0]), yerr=[1e-7, 0, 2e-7], marker="o", label="GRPO")
    ax.axhline(1.0, ls=":", label="SFT")
    value = style.note_flat(ax)
    assert value == pytest.approx(1.0, abs=FLAT_RTOL)
    (note,) = [t.get_text() for t in ax.texts]
    assert note == "flat: every value equals 1 to 1e-6"
    lo, hi = ax.get_ylim()
    assert hi - lo > 0.01  # the noise is not blown up into a trend
    assert style.note_flat(ax) == value and len(ax.texts) == 1  # idempotent


def test_panel_that_is_not_flat_gets_no_note(ax):
    ax.plot([2, 8, 32], [0.91, 0.92, 0.915], label="GRPO")
    before = ax.get_ylim()
    assert style.note_flat(ax) is None
    assert len(ax.texts) == 0 and ax.get_ylim() == before


def test_flat_note_ignores_vertical_reference_lines(ax):
    ax.plot([1, 2, 3], [0.5, 0.5, 0.5], label="run")
    ax.axvline(2.0, color="0.5")  # y in axes coordinates (0 to 1): not data
    assert style.note_flat(ax) == pytest.approx(0.5)


def test_label_bars_marks_zero_bars(ax):
    bars = ax.bar([0, 1, 2], [0.0, 0.25, 1.0])
    texts = style.label_bars(ax, bars)
    assert [t.get_text() for t in texts] == ["0", "0.25", "1"]
    assert ax.get_ylim()[0] <= 0


def test_label_bars_horizontal_and_zero_stroke(ax):
    bars = ax.barh([0, 1], [0.0, 0.5], color=["C0", "C1"])
    lines_before = len(ax.lines)
    texts = style.label_bars(ax, bars)
    assert [t.get_text() for t in texts] == ["0", "0.5"]
    (stroke,) = ax.lines[lines_before:]  # the zero bar's stroke at 0, in its colour, not in the legend
    assert stroke.get_label().startswith("_") and set(stroke.get_xdata()) == {0}


def test_honest_panels_takes_a_figure(ax):
    ax.plot([1, 2], [3.0, 3.0 + 1e-9], label="a")
    ax.plot([1, 2], [3.0, 3.0], label="b")
    style.honest_panels(ax.figure)
    assert ax.lines[1].get_label() == "b (identical to a)"
    assert [t.get_text() for t in ax.texts] == ["flat: every value equals 3 to 1e-6"]


def test_the_overlap_check_sees_overlapping_labels(ax):
    ax.plot([0, 1], [0, 1])
    ax.text(0.5, 0.5, "a label", ha="center")
    ax.text(0.5, 0.5, "another", ha="center")
    ax.text(0.1, 0.9, "far away")
    ax.figure.canvas.draw()
    boxes = _text_boxes(ax, ax.figure.canvas.get_renderer())
    overlapping = [(ta, tb) for (ta, a), (tb, b) in itertools.combinations(boxes, 2) if a.overlaps(b)]
    assert overlapping == [("a label", "another")]


def test_the_series_check_sees_error_bars_and_lines(ax):
    ax.errorbar([1, 2], [0.5, 0.6], yerr=0.1, label="GRPO")
    ax.plot([1, 2], [0.5, 0.6], label="F-GRPO")
    ax.plot([1, 2], [0.5, 0.6])  # unlabelled: not a series
    assert [label for label, _, _ in _series(ax)] == ["F-GRPO", "GRPO"]
