"""One look for every figure: the theme, the axes helpers, and (from :mod:`tailmiss.studies.panels`) the helpers
that keep a panel from misleading (:func:`mark_identical`, :func:`mark_coincident`, :func:`note_flat`,
:func:`label_bars`, :func:`honest_panels`, :func:`seeds_note`).
"""

from __future__ import annotations

import contextlib

import matplotlib

matplotlib.use("Agg")  # figures are files; never need a display

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from tailmiss.studies.panels import (  # noqa: E402,F401  (re-exported: the figures import them from here)
    COINCIDENT_NOTE,
    DODGE_SHARE,
    FLAT_GID,
    FLAT_RTOL,
    IDENTICAL_NOTE,
    IDENTICAL_RTOL,
    coincident_pairs,
    dodged,
    honest_panels,
    label_bars,
    mark_coincident,
    mark_identical,
    note_flat,
    same_values,
    seeds_note,
)

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
