"""Figures that cannot mislead: checks on every registered figure's Axes, and unit tests of the helpers.

Every figure of :data:`tailmiss.report.registry.FIGURES` is drawn from its quick-mode data (the session ``quick_ctx``
of ``conftest.py``) and each of its Axes is checked:

(a) every bar container's value axis includes 0 (a bar hanging from a truncated axis exaggerates differences);
(b) no two labelled line series (plain lines and error-bar lines) with the same x data (or x data dodged apart,
    :func:`tailmiss.studies.style.dodged`) have the same y values, to the noise rule's tolerance, unless one's legend
    label says so (the identical-note of :func:`tailmiss.studies.style.mark_identical`);
(c) no two visible text labels inside a panel overlap (their rendered bounding boxes);
(d) no marker-only point hides under another series' marker unless its label says so (the note of
    :func:`tailmiss.studies.style.mark_coincident`);
(e) a colour means one thing across a figure's panels: every labelled artist of one colour names the same series
    (its label up to the first " (", " − ", ": " or ", ": colour for one variable, line style for another);
(f) no title or subtitle states a verdict (the report's ledger and sections give them, with their tests).
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from matplotlib.colors import to_hex
from matplotlib.container import BarContainer, ErrorbarContainer

from tailmiss.report.registry import FIGURES
from tailmiss.studies import style  # sets the Agg backend before pyplot is imported
from tailmiss.studies.rule import IDENTICAL_TOL
from tailmiss.studies.style import COINCIDENT_NOTE, FLAT_RTOL, IDENTICAL_NOTE, IDENTICAL_RTOL


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
            if style.dodged(xa, xb) and _equal(ya, yb, IDENTICAL_RTOL):
                assert IDENTICAL_NOTE in la or IDENTICAL_NOTE in lb, f"{name}: {lb!r} hides under {la!r}"


def test_the_figures_tolerance_for_identical_series_is_the_rules():
    assert IDENTICAL_RTOL == IDENTICAL_TOL


@pytest.mark.parametrize("name", list(FIGURES))
def test_coincident_points_are_marked(name, drawn):
    for ax in _panels(drawn(name)):
        for later, earlier in style.coincident_pairs(ax):
            notes = (COINCIDENT_NOTE, IDENTICAL_NOTE)
            assert any(n in later or n in earlier for n in notes), f"{name}: {later!r} hides {earlier!r}"


def _key(label: str) -> str:
    """The series a legend label names: the label up to its first " (", " − ", ": " or ", "."""
    return re.split(r" \(| − |: |, ", label, maxsplit=1)[0].strip()


def _colours(fig) -> dict:
    """Colour (hex) → the series names (:func:`_key`) of every labelled artist of that colour in ``fig``."""
    seen: dict = {}
    for ax in _panels(fig):
        artists = [(line.get_label(), line.get_color()) for line in ax.lines]
        for c in ax.containers:
            if isinstance(c, ErrorbarContainer) and c.lines[0] is not None:
                artists.append((str(c.get_label()), c.lines[0].get_color()))
        for coll in ax.collections:
            face = coll.get_facecolor()
            if len(face):
                artists.append((str(coll.get_label()), face[0]))
        for patch in ax.patches:
            artists.append((str(patch.get_label()), patch.get_facecolor()))
        for label, colour in artists:
            if label and not label.startswith("_"):
                seen.setdefault(to_hex(colour), set()).add(_key(label))
    return seen


@pytest.mark.parametrize("name", list(FIGURES))
def test_a_colour_means_one_series_across_the_figure(name, drawn):
    reused = {c: keys for c, keys in _colours(drawn(name)).items() if len(keys) > 1}
    assert not reused, f"{name}: one colour names several series: {reused}"


_VERDICT = re.compile(r"\b(reproduced|refuted|partly|not resolved|cannot tell)\b|: (yes|no)\b", re.IGNORECASE)


@pytest.mark.parametrize("name", list(FIGURES))
def test_no_title_states_a_verdict(name, drawn):
    fig = drawn(name)
    titles = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    titles += [ax.get_title(loc) for ax in fig.axes for loc in ("left", "center", "right")]
    said = [t for t in titles if _VERDICT.search(t)]
    assert not said, f"{name}: a title states a verdict: {said}"


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
    second = ax.plot(x, x**2 * (1 + 1e-9), "-o", label="F-GRPO")[0]
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
    ax.plot([0, 1], [1e6 + 1.0, 2e6], label="b")  # |Δ| = 1 ≤ 1e-6 · 2e6
    ax.plot([0, 1], [0.0, 1.0], label="c")
    ax.plot([0, 1], [1e-5, 1.0], label="d")  # |Δ| = 1e-5 > 1e-6 · max(1, |y|)
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


def test_dodged_x_is_one_x_and_a_shift_as_wide_as_a_step_is_not(ax):
    x = np.array([0.0, 0.5, 1.0, 2.0])
    assert style.dodged(x, x) and style.dodged(x, x + 0.03) and style.dodged(x, x - 0.05)
    assert not style.dodged(x, x + 0.2)  # 0.2 > 0.25 × the smallest gap (0.5)
    assert not style.dodged(x, x * 1.01) and not style.dodged(x, x[:3])


def test_mark_identical_sees_through_a_dodge(ax):
    """F-GRPO Tables 6-7's γ plot once drew CISPO beside GRPO, shifted by 0.03 in γ, with GRPO's numbers."""
    g = np.array([0.0, 0.5, 1.0, 2.0])
    ax.errorbar(g - 0.03, [0.46, 0.464, 0.461, 0.454], yerr=0.001, label="GRPO")
    ax.errorbar(g + 0.03, [0.46, 0.464, 0.461, 0.454 + 5e-7], yerr=0.001, label="CISPO")
    assert style.mark_identical(ax) == [("CISPO", "GRPO")]


def test_mark_coincident_rings_each_point_on_another(ax):
    kw = {"ls": "", "marker": "o", "ms": 7}
    ax.errorbar([0.4625], [0.824], xerr=0.001, label="GRPO N=8", **kw)
    ax.errorbar([0.4626], [0.8242], label="entropy bonus", **kw)
    ax.errorbar([0.4624], [0.8239], label="KL penalty", **kw)
    ax.errorbar([0.43], [0.77], label="GRPO N=2", **kw)
    ax.set_xlim(0.42, 0.49)
    ax.set_ylim(0.76, 0.89)
    assert style.mark_coincident(ax) == [("entropy bonus", "GRPO N=8"), ("KL penalty", "GRPO N=8")]
    labels = [str(c.get_label()) for c in ax.containers]
    assert labels[1] == "entropy bonus (on GRPO N=8)" and labels[3] == "GRPO N=2"
    sizes = [c.lines[0].get_markersize() for c in ax.containers]
    assert sizes[0] < sizes[1] < sizes[2]  # rings of their own widths
    assert ax.containers[1].lines[0].get_markerfacecolor() == "none"
    assert style.mark_coincident(ax) == []  # marked ones are left alone


def test_the_colour_check_sees_a_colour_with_two_meanings(ax):
    fig = ax.figure
    other = fig.add_subplot(2, 1, 2)
    ax.plot([1, 2], [0.1, 0.2], color="C0", label="GRPO N=2")
    other.plot([1, 2], [0.1, 0.3], color="C0", label="F-GRPO γ=0.5 N=8 − GRPO N=8 (exact)")
    other.plot([1, 2], [0.1, 0.4], color="C3", label="F-GRPO γ=0.5 N=8 − GRPO N=8 (sampled)")
    other.fill_between([1, 2], [0, 0], [0.1, 0.1], color="C3", label="F-GRPO γ=0.5 N=8: tie band (exact)")
    seen = _colours(fig)
    assert seen[to_hex("C0")] == {"GRPO N=2", "F-GRPO γ=0.5 N=8"}
    assert seen[to_hex("C3")] == {"F-GRPO γ=0.5 N=8"}


def test_the_title_check_sees_a_verdict():
    assert _VERDICT.search("low-LR between GRPO and F-GRPO: reproduced; F-GRPO best pass@1: partly")
    assert _VERDICT.search("does it narrow: no")
    assert not _VERDICT.search("F-GRPO − GRPO at N = 8: pass@1 +0.002, pass@256 +0.013 (5 seeds)")


def test_seeds_note_names_each_series_that_has_another_count():
    assert style.seeds_note({"GRPO N=8": 10, "F-GRPO": 10}) == "10 seeds"
    assert style.seeds_note({"GRPO N=8": 10, "F-GRPO": 10, "GRPO N=8 low-LR": 5}) == "10 seeds; GRPO N=8 low-LR: 5"
    assert style.seeds_note({"a": 1}) == "1 seed"
    with pytest.raises(ValueError):
        style.seeds_note({})
