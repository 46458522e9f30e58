"""Figure registry: one function pair per figure, results separate from plot.

Each :class:`FigureSpec` has ``data(ctx)``, which obtains the figure's results
through the results layer (:mod:`tailmiss.results`: typed, cached simulations,
sweeps, ladders and bridges, or a tidy frame of closed forms), and
``plot(data) -> Figure`` (pure plotting), so restyling never reruns a
simulation. No module of this package runs a simulation or trains a model.
:func:`make` renders PNG and PDF atomically. The registry itself lives in
:mod:`tailmiss.figures.registry`.
"""

from __future__ import annotations

from tailmiss.figures.registry import FIGURES, FigureSpec, figure_data, make, register
from tailmiss.results import Context  # noqa: F401  (the type every FigureSpec.data takes; its home is tailmiss.results)

# registration side effects, in this order (the order of FIGURES, `figures list` and `figures make --all`)
# isort: off
from tailmiss.figures import ladder, llm, bridge, controls, protocol, simulation, theory  # noqa: E402,F401
# isort: on

__all__ = ["FigureSpec", "FIGURES", "register", "make", "figure_data"]
