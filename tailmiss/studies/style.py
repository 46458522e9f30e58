"""One look for every figure, and the helpers that keep a panel from misleading.

:func:`mark_identical` marks a series that would hide under an identical one, :func:`note_flat` writes a
note in a panel whose values differ only by float noise, :func:`label_bars` keeps bars of height 0 visible;
:func:`honest_panels` applies the first two to every panel of a figure.
"""

from __future__ import annotations

import contextlib

import matplotlib

matplotlib.use("Agg")  # figures are files; never need a display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.collections import LineCollection, PolyCollection  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

GAMMA_STYLE = {0.0: "-", 0.5: ":", 1.0: "--"}
"""Line style per focal γ: solid for the base method, dashed for γ = 1 (as in the paper)."""

RC = {
    "figure.dpi": 110,
    "savefig.dpi": 160,
    "savefig.bbox": "tight",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "font.family": "DejaVu Sans",
}


@contextlib.contextmanager
def paper_style():
    """Seaborn's ticks theme with our rc overrides, restored afterwards."""
    with plt.rc_context():
        sns.set_theme(style="ticks", context="paper", rc=RC)
        yield


def palette(n: int):
    """``n`` distinguishable colours, ordered from light-to-dark data (e.g. increasing N)."""
    return sns.color_palette("viridis", n) if n > 4 else sns.color_palette("colorblind", n)


def log2_axis(ax, lo_exp: int, hi_exp: int, step: int = 1) -> None:
    """Base-2 log x axis with ticks labelled ``2^k``."""
    ax.set_xscale("log", base=2)
    ticks = [2**k for k in range(lo_exp, hi_exp + 1, step)]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"$2^{{{k}}}$" for k in range(lo_exp, hi_exp + 1, step)])


# --- panels that cannot mislead ------------------------------------------------------------------

IDENTICAL_RTOL = 1e-9
"""Two series are identical when every ``|Δy| ≤ IDENTICAL_RTOL · max(1, |y|)`` on the same x data."""

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
    one when both have the same x data and :func:`same_values` y data. The later series is drawn dashed
    with markers of another shape, and its legend label gets ``" (identical to <earlier label>)"``.
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
                if same_values(x, other.get_xdata(), 0.0) and same_values(y, other.get_ydata(), rtol)
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


def n_axis(ax, ns) -> None:
    """Log-2 x axis with one labelled tick per group size."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns)
    ax.set_xticklabels([str(int(n)) for n in ns])
    ax.set_xlabel("group size N")


def sweep_title(result, what: str) -> str:
    """A figure title naming the sweep of ``result``, its steps and seeds."""
    config = result.config
    seeds = len(config.seeds)
    return f"{what} — sweep {config.name}, {int(config.rl.steps)} steps, {seeds} seed{'s' * (seeds > 1)}"
