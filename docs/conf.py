"""Sphinx configuration of the tailmiss documentation.

Build (from the repository root)::

    sphinx-build -W -n -b html docs docs/_build/html

``-W`` turns every warning into an error and ``-n`` checks every cross-reference, as CI does. The gallery pages, the
report page and the rendered notebook are generated at build time (``docs/_ext``) into ``docs/_generated/``, which
git ignores.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

import tailmiss  # noqa: E402

project = "tailmiss"
author = "the tailmiss authors"
copyright = "2026, the tailmiss authors"
version = release = tailmiss.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_nb",
    "sphinx_copybutton",
    "tailmiss_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]
root_doc = "index"

# MyST: $...$ and $$...$$ math, ::: fences, heading anchors for links like page.md#section
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist", "attrs_inline"]
myst_heading_anchors = 3
# the notebook and the gallery's quick figures are executed on every build, so their outputs are this code's
# (TAILMISS_DOCS_EXECUTE=off skips that while editing pages; CI builds with the default)
nb_execution_mode = os.environ.get("TAILMISS_DOCS_EXECUTE", "force")
nb_execution_in_temp = True
nb_output_stderr = "remove"  # progress bars and library warnings: the pages show results
nb_execution_timeout = 300
nb_execution_raise_on_error = True

# API reference: one page per public module, written by _ext/tailmiss_docs/api.py into api/generated/; numpydoc sections
autodoc_default_options = {"members": True}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# Offline build: no intersphinx (CI has no network). Types of other packages are named in signatures and docstrings
# but have no page here, so -n is told to leave exactly those alone; every reference into tailmiss is checked.
nitpick_ignore_regex = [
    (
        r"py:(class|obj|exc|data|func|meth|attr|mod)",
        r"(numpy|np|scipy|torch|pandas|pd|matplotlib|typer|click|rich|"
        r"trl|transformers|datasets|accelerate|verl|ray|pyarrow|typing|collections|pathlib|os|enum|dataclasses|builtins|"
        r"concurrent|subprocess|abc|contextlib|io|json|argparse|logging|tomllib|types)(\..*)?",
    ),
    (
        r"py:(class|obj)",
        r"(int|float|str|bool|bytes|list|dict|tuple|set|frozenset|object|callable|Callable|"
        r"Sequence|Iterable|Iterator|Mapping|Path|None|Any|optional|array_like|array-like|ndarray|Tensor|"
        r"DataFrame|Figure|Axes|Generator|type|slice|complex|range|ValueError|TypeError|RuntimeError|KeyError|"
        r"FileNotFoundError|OSError|Exception|NotImplementedError|KeyboardInterrupt|SystemExit)",
    ),
]

html_theme = "pydata_sphinx_theme"
html_title = "tailmiss"
html_static_path = ["_static"]
html_css_files = ["tailmiss.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_context = {"default_mode": "light"}
# the report's tables are wide: its page keeps the table of contents and drops the section navigation
html_sidebars = {"_generated/report": []}
# MathJax from its CDN by default; TAILMISS_DOCS_MATHJAX points the pages at a local copy to read them offline
mathjax_path = os.environ.get("TAILMISS_DOCS_MATHJAX", "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js")


autodoc_mock_imports: list[str] = []


def _trl_for_the_api_page() -> None:
    """Let autodoc import :mod:`tailmiss.integrations.trl` where TRL is absent.

    The ``[docs]`` extra does not install TRL (with transformers and accelerate, several hundred MB), so the README's
    docs command builds without it. The module's API page needs only its docstrings: autodoc then imports it with
    TRL's modules mocked. Where TRL is installed (CI's environment), the real ones are used.
    """
    try:
        import trl  # noqa: F401
    except ImportError:
        autodoc_mock_imports.extend(["trl", "transformers", "accelerate"])


_trl_for_the_api_page()


def _verl_for_the_api_page() -> None:
    """Let autodoc import :mod:`tailmiss.integrations.verl` where verl is absent.

    verl pins a transformers that the ``[trl]`` extra cannot share an environment with, so the docs are built
    without it. The module's API page needs only its docstrings; this puts in ``sys.modules`` the one verl module the
    plugin imports at its top (the estimator registry), with no PPO trainer, so the plugin registers its estimator
    on the stand-in and wraps nothing. Where verl is installed, the real one is used.
    """
    import importlib.util
    import types

    if importlib.util.find_spec("verl") is not None:
        return
    core_algos = types.ModuleType("verl.trainer.ppo.core_algos")
    core_algos.register_adv_est = lambda name: lambda fn: fn
    core_algos.compute_grpo_outcome_advantage = None
    core_algos.AdvantageEstimator = types.SimpleNamespace(GRPO="grpo")
    names = ["verl", "verl.trainer", "verl.trainer.ppo"]
    modules = {name: types.ModuleType(name) for name in names}
    modules["verl.trainer"].ppo = modules["verl.trainer.ppo"]
    modules["verl"].trainer = modules["verl.trainer"]
    modules["verl.trainer.ppo"].core_algos = core_algos
    for name, module in modules.items():
        module.__path__ = []  # a package, so that importing a missing submodule is an ImportError
        sys.modules[name] = module
    sys.modules["verl.trainer.ppo.core_algos"] = core_algos


_verl_for_the_api_page()
