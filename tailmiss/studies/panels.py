"""Panels that cannot mislead: the helpers every figure applies before its legend.

:func:`mark_identical` marks a series that would hide under an identical one, :func:`mark_coincident` a point that
would hide under another's marker, :func:`note_flat` writes a note in a panel whose values differ only by float
noise, :func:`label_bars` keeps bars of height 0 visible; :func:`honest_panels` applies the identical and flat checks
to every panel of a figure; :func:`seeds_note` says how many seeds each series has. The registry-wide checks of
``tests/test_figures_honest.py`` use the same definitions.
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from tailmiss.studies.comparison import IDENTICAL_TOL

__all__ = [
    "IDENTICAL_RTOL",
    "IDENTICAL_NOTE",
    "COINCIDENT_NOTE",
    "COINCIDENT_SHARE",
    "DODGE_SHARE",
    "FLAT_RTOL",
    "FLAT_GID",
    "same_values",
    "dodged",
    "mark_identical",
    "coincident_pairs",
    "mark_coincident",
    "seeds_note",
    "note_flat",
    "honest_panels",
    "label_bars",
]

IDENTICAL_RTOL = IDENTICAL_TOL
"""Two series are identical when every ``|Δy| ≤ IDENTICAL_RTOL · max(1, |y|)`` on the same x data (or x data
dodged by a constant, :func:`dodged`): the noise rule's :data:`~tailmiss.studies.rule.IDENTICAL_TOL`, so that a
figure marks the runs the report calls identical, and no others."""

DODGE_SHARE = 0.25
"""x data shifted by a constant of at most this share of their smallest spacing are one x dodged for legibility."""

COINCIDENT_SHARE = 1.0
"""Two markers whose centres are closer than this share of the wider one's width overlap too much to both be seen."""

COINCIDENT_NOTE = " (on "
"""What :func:`mark_coincident` appends to a marked point's legend label (followed by the other label and ``)``)."""

IDENTICAL_NOTE = " (identical to "
"""What :func:`mark_identical` appends to a marked series' legend label (followed by the other label and ``)``)."""

FLAT_RTOL = 1e-6
"""A panel is flat when its y range is at most ``FLAT_RTOL · max(1, |y|)``: float noise, not a trend."""

FLAT_GID = "tailmiss-flat-note"
"""The ``gid`` of the note :func:`note_flat` writes (one per panel)."""


def _floats(values) -> np.ndarray | None:
    try:
        return np.ma.filled(np.ma.asarray(values, dtype=float), np.nan).ravel()
    except (TypeError, ValueError):
        return None  # categorical or date data: not compared


def same_values(a, b, rtol: float = IDENTICAL_RTOL) -> bool:
    """Whether two arrays are equal to ``|a - b| ≤ rtol · max(1, |a|, |b|)`` elementwise.

    Parameters
    ----------
    a, b : array_like
        Numbers of the same shape; NaN equals NaN.
    rtol : float, optional
        The relative tolerance (absolute below magnitude 1).

    Returns
    -------
    bool
        False when the shapes differ or either array is not numeric.
    """
    a, b = _floats(a), _floats(b)
    if a is None or b is None or a.shape != b.shape:
        return False
    with np.errstate(invalid="ignore"):
        close = np.abs(a - b) <= rtol * np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))
    return bool(np.all(close | (np.isnan(a) & np.isnan(b))))


def dodged(a, b, share: float = DODGE_SHARE) -> bool:
    """Whether x data ``a`` and ``b`` are one x, equal or shifted by a constant of at most ``share`` of their
    smallest spacing (a dodge that keeps error bars apart: the points still stand for the same x).

    Parameters
    ----------
    a, b : array_like
        x data of two series.
    share : float, optional
        The largest shift, as a share of the smallest gap between neighbouring x.

    Returns
    -------
    bool
    """
    a, b = _floats(a), _floats(b)
    if a is None or b is None or a.shape != b.shape or not len(a):
        return False
    shift = b - a
    if not np.all(np.isfinite(shift)) or np.ptp(shift) > 1e-9 * max(1.0, float(np.abs(a).max())):
        return False
    gaps = np.diff(np.unique(a))
    return bool(shift[0] == 0 or (len(gaps) and abs(shift[0]) <= share * gaps.min()))


def _labelled_series(ax) -> list[tuple[object, Line2D]]:
    """``(legend artist, data line)`` of each labelled line and error-bar series of ``ax``, in drawing order."""
    order = {id(line): i for i, line in enumerate(ax.lines)}
    found = [(line, line) for line in ax.lines if not line.get_label().startswith("_")]
    for container in ax.containers:
        if isinstance(container, ErrorbarContainer) and not str(container.get_label()).startswith("_"):
            if container.lines[0] is not None:
                found.append((container, container.lines[0]))
    return sorted(found, key=lambda pair: order.get(id(pair[1]), len(order)))


def _restyle_duplicate(line: Line2D) -> None:
    """Draw ``line`` so that the series under it shows through: dashed, with open markers of another shape."""
    linestyle = line.get_linestyle()
    if linestyle not in ("None", "", " "):
        line.set_linestyle(":" if linestyle == "--" else "--")
    marker = line.get_marker()
    line.set_marker("+" if marker == "x" else "x")
    line.set_markersize(max(line.get_markersize(), 6.0))
    points = len(line.get_xdata())
    if points > 40:
        line.set_markevery(max(1, points // 20))


def mark_identical(ax, rtol: float = IDENTICAL_RTOL) -> list[tuple[str, str]]:
    """Mark each labelled series that is identical to an earlier one, instead of hiding it under that one.

    A series (a labelled line, or the data line of a labelled error-bar series) is identical to an earlier
    one when both have the same x data (or x data :func:`dodged` apart) and :func:`same_values` y data. The later
    series is drawn dashed with markers of another shape, and its legend label gets
    ``" (identical to <earlier label>)"``.
    Call it before the panel's legend is drawn; marked series are left alone on a second call.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The panel.
    rtol : float, optional
        The tolerance of :func:`same_values`.

    Returns
    -------
    list of (str, str)
        ``(marked label, earlier label)`` for each series marked by this call, as the labels were before.
    """
    originals: list[tuple[str, Line2D]] = []
    marked = []
    for artist, line in _labelled_series(ax):
        label = str(artist.get_label())
        if IDENTICAL_NOTE in label:
            continue
        x, y = line.get_xdata(), line.get_ydata()
        match = next(
            (
                first
                for first, other in originals
                if dodged(other.get_xdata(), x) and same_values(y, other.get_ydata(), rtol)
            ),
            None,
        )
        if match is None:
            originals.append((label, line))
            continue
        artist.set_label(f"{label}{IDENTICAL_NOTE}{match})")
        _restyle_duplicate(line)
        marked.append((label, match))
    return marked


def _points(ax) -> list[tuple[object, Line2D]]:
    """``(legend artist, data line)`` of each labelled series of ``ax`` drawn as markers alone (no connecting line)."""
    return [
        (artist, line)
        for artist, line in _labelled_series(ax)
        if line.get_linestyle() in ("None", "", " ") and line.get_marker() not in (None, "None", "", " ")
    ]


def coincident_pairs(ax) -> list[tuple[str, str]]:
    """``(upper label, lower label)`` of each pair of marker-only series of ``ax`` with a point whose centre lies within
    :data:`COINCIDENT_SHARE` of a marker's width of the other's, on the drawn canvas: the upper one (higher zorder,
    else drawn later) would hide the lower's marker. Each upper series is paired with the first it covers."""
    found = []
    seen: list[tuple[str, np.ndarray, float]] = []
    points = sorted(enumerate(_points(ax)), key=lambda item: (item[1][1].get_zorder(), item[0]))
    for _, (artist, line) in points:
        xy = ax.transData.transform(np.column_stack([_floats(line.get_xdata()), _floats(line.get_ydata())]))
        size = line.get_markersize() * ax.figure.dpi / 72.0
        label = str(artist.get_label())
        for other, oxy, osize in seen:
            near = np.hypot(xy[:, None, 0] - oxy[None, :, 0], xy[:, None, 1] - oxy[None, :, 1])
            if np.any(near < COINCIDENT_SHARE * max(size, osize)):
                found.append((label, other))
                break
        seen.append((label, xy, size))
    return found


def mark_coincident(ax) -> list[tuple[str, str]]:
    """Mark each marker-only series with a point on another's (:func:`coincident_pairs`): drawn hollow and larger
    (wider for each further point on the same one), so that the point under it shows through, its legend label with
    ``" (on <other label>)"``.

    Call it once the layout is final (after ``tight_layout``: it measures distances on the canvas) and before the
    legend. Series already marked identical or coincident are left alone.

    Returns
    -------
    list of (str, str)
        ``(marked label, the other label)``, as the labels were before.
    """
    ax.figure.canvas.draw()
    artists = {str(a.get_label()): (a, line) for a, line in _points(ax)}
    marked, rings = [], {}
    for label, other in coincident_pairs(ax):
        if IDENTICAL_NOTE in label or COINCIDENT_NOTE in label:
            continue
        artist, line = artists[label]
        rings[other] = rings.get(other, 0) + 1  # a second point on the same one gets a wider ring
        line.set_markerfacecolor("none")
        line.set_markeredgewidth(1.6)
        line.set_markersize(line.get_markersize() * (1.3 + 0.6 * rings[other]))
        artist.set_label(f"{label}{COINCIDENT_NOTE}{other})")
        marked.append((label, other))
    return marked


def seeds_note(counts: dict) -> str:
    """How many seeds the series of a figure have: ``"10 seeds"`` when all have as many, else the most common count
    and each exception (``"10 seeds; GRPO N=8 low-LR: 5"``); ``"1 seed"`` for one.

    Parameters
    ----------
    counts : dict
        Series label → its number of seeds.
    """
    if not counts:
        raise ValueError("seeds_note needs at least one series")
    values = list(counts.values())
    usual = max(set(values), key=lambda v: (values.count(v), v))
    head = f"{usual} seed{'s' * (usual != 1)}"
    others = [f"{label}: {n}" for label, n in counts.items() if n != usual]
    return "; ".join([head, *others])


def _data_y(ax) -> np.ndarray:
    """Every y value drawn in data coordinates on ``ax``: lines (error-bar caps included), error bars, scatter
    points and filled bands; reference lines whose y is in axes coordinates (``axvline``) are left out."""
    values = []
    for line in ax.lines:
        if line.get_visible() and line.get_transform().contains_branch_seperately(ax.transData)[1]:
            values.append(_floats(line.get_ydata()))
    for collection in ax.collections:
        if not collection.get_visible():
            continue
        if isinstance(collection, LineCollection):
            values.extend(_floats(np.asarray(seg)[:, 1]) for seg in collection.get_segments() if len(seg))
        elif isinstance(collection, PolyCollection):
            values.extend(_floats(path.vertices[:, 1]) for path in collection.get_paths())
        elif len(collection.get_offsets()):
            values.append(_floats(np.asarray(collection.get_offsets())[:, 1]))
    values = [v for v in values if v is not None]
    y = np.concatenate(values) if values else np.array([])
    return y[np.isfinite(y)]


def _plain(value: float, step: float) -> str:
    """``value`` rounded to the decimal of ``step``, without trailing zeros."""
    decimals = max(0, int(-np.floor(np.log10(step))))
    text = f"{round(value, decimals):.{decimals}f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return "0" if text in ("-0", "") else text


def note_flat(ax, rtol: float = FLAT_RTOL) -> float | None:
    """Write "flat: every value equals X to <rtol>" in a panel whose y range is float noise.

    A panel is flat when it draws at least two finite y values in data coordinates and their range is at
    most ``rtol · max(1, |y|)``. Its y axis is then set to ``X ± max(0.05, 0.05 |X|)`` (unless the axis is
    shared with other panels), so that the noise is not drawn as a trend, and the note is written once.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The panel, with its data drawn.
    rtol : float, optional
        The flatness threshold.

    Returns
    -------
    float or None
        The value X every point equals, or None when the panel is not flat.
    """
    y = _data_y(ax)
    if len(y) < 2:
        return None
    lo, hi = float(y.min()), float(y.max())
    step = rtol * max(1.0, float(np.abs(y).max()))
    if hi - lo > step:
        return None
    value = (lo + hi) / 2
    if not any(t.get_gid() == FLAT_GID for t in ax.texts):
        shared = len(ax.get_shared_y_axes().get_siblings(ax)) > 1
        if not shared and ax.get_yscale() == "linear":
            pad = max(0.05, 0.05 * abs(value))
            ax.set_ylim(value - pad, value + pad)
        threshold = f"{rtol:.0e}".replace("e-0", "e-").replace("e+0", "e")
        ax.text(
            0.5,
            0.78,
            f"flat: every value equals {_plain(value, step)} to {threshold}",
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=8,
            color="0.2",
            bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": "0.7", "alpha": 0.9},
            gid=FLAT_GID,
        )
    return value


def honest_panels(axes) -> None:
    """Apply :func:`mark_identical` and :func:`note_flat` to every visible panel of ``axes``.

    Parameters
    ----------
    axes : matplotlib.axes.Axes, array of Axes, or matplotlib.figure.Figure
        The panels (a figure: all its axes). Call it after the data are drawn and before the legends.
    """
    panels = axes.axes if isinstance(axes, Figure) else np.ravel(np.asarray(axes, dtype=object))
    for ax in panels:
        if ax.get_visible() and ax.axison:
            mark_identical(ax)
            note_flat(ax)


def _bar_text(value: float) -> str:
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def label_bars(ax, bars, fmt=_bar_text, fontsize: float = 7) -> list:
    """Write each bar's value at its end, so that a bar of height 0 is still seen (its label reads "0").

    A bar of height 0 also gets a short stroke at 0 in its colour.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The panel.
    bars : matplotlib.container.BarContainer
        What ``ax.bar`` or ``ax.barh`` returned.
    fmt : callable, optional
        ``value -> str``; by default two decimals without trailing zeros.
    fontsize : float, optional
        The labels' font size.

    Returns
    -------
    list of matplotlib.text.Text
        One label per bar, in order.
    """
    vertical = bars.orientation == "vertical"
    texts = []
    for rect, value in zip(bars.patches, bars.datavalues):
        value = float(value)
        if vertical:
            x, y = rect.get_x() + rect.get_width() / 2, rect.get_y() + rect.get_height()
            offset, align = (0, 2 if value >= 0 else -2), {"ha": "center", "va": "bottom" if value >= 0 else "top"}
        else:
            x, y = rect.get_x() + rect.get_width(), rect.get_y() + rect.get_height() / 2
            offset, align = (2 if value >= 0 else -2, 0), {"ha": "left" if value >= 0 else "right", "va": "center"}
        if value == 0:
            lo, hi = (
                (rect.get_x(), rect.get_x() + rect.get_width())
                if vertical
                else (rect.get_y(), rect.get_y() + rect.get_height())
            )
            xs, ys = ((lo, hi), (0, 0)) if vertical else ((0, 0), (lo, hi))
            ax.plot(xs, ys, color=rect.get_facecolor(), lw=2.5, solid_capstyle="butt", label="_zero bar")
        texts.append(
            ax.annotate(fmt(value), (x, y), xytext=offset, textcoords="offset points", fontsize=fontsize, **align)
        )
    return texts
