"""Build-time pages of the tailmiss docs (a Sphinx extension).

At ``builder-inited`` it writes, from the code, what would otherwise drift from it: one API page per public module
(``docs/api/generated/``, :mod:`tailmiss_docs.api`), and under ``docs/_generated/`` (ignored by git) the figure
gallery, the report as a page and the tour notebook (:mod:`tailmiss_docs.gallery`). Its directives put a package's
exported names, a table of modules and the command-line reference (:mod:`tailmiss_docs.cli`) into pages; at
``missing-reference`` it resolves names that packages re-export.
"""

from __future__ import annotations

from tailmiss_docs.api import Exports, ModuleTable, exports_rst, resolve_reexport, write_api
from tailmiss_docs.cli import CommandLine, cli_rst
from tailmiss_docs.gallery import FIGURE_CLAIMS, figure_page, write_gallery, write_notebook, write_report

__all__ = ["FIGURE_CLAIMS", "cli_rst", "exports_rst", "figure_page", "setup"]


def generate(app) -> None:
    write_api()
    write_gallery()
    write_report()
    write_notebook()


def setup(app):
    app.connect("builder-inited", generate)
    app.connect("missing-reference", resolve_reexport)
    app.add_directive("tailmiss-exports", Exports)
    app.add_directive("tailmiss-cli", CommandLine)
    app.add_directive("tailmiss-modules", ModuleTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
