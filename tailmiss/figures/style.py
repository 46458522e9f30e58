"""One look for every figure."""

from __future__ import annotations

import contextlib

import matplotlib

matplotlib.use("Agg")  # figures are files; never need a display

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

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
