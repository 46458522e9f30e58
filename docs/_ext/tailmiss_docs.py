"""Build-time pages of the tailmiss docs, and references to re-exported names.

At ``builder-inited`` this writes, under ``docs/_generated/`` (ignored by git):

- ``gallery/``: one page per registered figure (:data:`tailmiss.report.registry.FIGURES`), with the code that makes
  it at quick size, the paper's claim it checks and the committed report's verdict beside it. A figure computed from
  closed forms or a quick simulation is made by that code while the docs build (the page is a MyST notebook that
  the build executes); a figure that needs the small transformer trained shows the committed ``figures/NAME.png`` and
  the commands, and says so.
- ``report.md``: ``paper_repro.md`` as a page, each figure name linked to its gallery page.
- ``analytic_tour.ipynb``: the closed-form tour from ``examples/``, executed by the build.

At ``missing-reference`` it resolves a name that a package re-exports (``tailmiss.analytic.pass_at_k``) to the page
of the module that defines it (``tailmiss.analytic.pass_at_k.pass_at_k``), by importing it: the docs document each
object once, where it is defined, and the package's name is what users type.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import json
import re
import shutil
import sys
import types
import typing
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.pycode import ModuleAnalyzer
from sphinx.util.nodes import nested_parse_with_titles

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
GENERATED = DOCS / "_generated"

FIGURE_CLAIMS: dict[str, tuple[str, ...]] = {
    "fig1a": ("lemma31", "fig1a"),
    "fig3": ("fig3",),
    "fig4": ("fig4",),
    "fig5": ("fig5",),
    "fig2": ("fig2-rises", "fig2-nonmono", "fig2-lift", "fig2-alone"),
    "fig2-prob": ("fig2-rises", "fig2-nonmono", "fig2-lift", "fig2-alone"),
    "brorl-fig3": ("brorl-faster", "brorl-regress", "brorl-concave", "brorl-drops", "brorl-improved"),
    "llm-nsweep": ("t2-pass1", "t2-dip", "t2-reach", "t2-dnll"),
    "llm-objectives": ("t1-pass256", "t1-pass1", "t1-ood", "t1-values"),
    "maze": ("t4-pass1", "t4-pass256", "fig6", "fig7"),
    "bridge": ("fig2-zones",),
    "ladder": (),
    "frontier": (),
    "protocol": ("t2-protocol", "t2-reach", "t5"),
    "noise": ("appQ",),
    "controls": ("t3-lowlr", "t3-ds", "t3-best"),
    "gamma": ("t67-usual", "t67-two"),
    "passk": ("t1214",),
    "tradeoff": ("fig1bc",),
    "narrowing": ("t2-pass1", "t2-dip", "t2-reach", "t2-dnll"),
    "focal-frontier": ("appN-frontier", "fig1bc"),
}
"""The ledger claims each figure shows (keys of ``tailmiss/studies/claims.toml``); the figure's page prints their
rows from the section of the report its study writes. A figure with none explains rather than judges."""


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it already holds it (so Sphinx rereads only what changed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file() and path.read_text() == text:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _cell(text: str) -> str:
    """A table cell: no pipes or line breaks."""
    return text.replace("|", "\\|").replace("\n", " ")


# --- gallery -----------------------------------------------------------------------------------------------------


def _study_of(name: str):
    """The top-level study (a ``## `` section of the report) whose figures include ``name``."""
    from tailmiss.report.registry import STUDIES

    for top in STUDIES:
        if any(f.name == name for s in (top, *top.parts) for f in s.figures):
            return top
    raise ValueError(f"figure {name!r} belongs to no study")


def _ledger_rows(figure: str, heading: str) -> list[str]:
    """Markdown table rows of the committed report's ledger for ``figure``'s claims, read from the stamps file."""
    from tailmiss.studies.ledger import CATALOGUE

    stamps = json.loads((ROOT / "paper_repro.stamps.json").read_text())
    claims = {c.key: c for c in CATALOGUE}
    rows = []
    for key in FIGURE_CLAIMS[figure]:
        claim = claims[key]
        judged = [r for r in stamps["ledger"] if r[0] == key and heading.startswith("## " + r[3])]
        if judged:
            for _, ours, verdict, _section in judged:
                rows.append(f"| {_cell(claim.source)} | {_cell(claim.sentence)} | {_cell(ours)} | **{verdict}** |")
        else:
            why = claim.untestable or claim.note or "judged in another section of the report"
            rows.append(f"| {_cell(claim.source)} | {_cell(claim.sentence)} | {_cell(why)} | not judged here |")
    return rows


def _claims_block(name: str, heading: str) -> str:
    rows = _ledger_rows(name, heading)
    section = heading.removeprefix("## ")
    if not rows:
        return (
            "This figure judges no claim of the paper by itself: it shows why the results of other figures come out "
            f"as they do. The report's section *{section}* reads it.\n"
        )
    return (
        f"What it checks, and the verdict of the committed report (section *{section}* of "
        "[the report](../report.md); the verdicts come from the report's one noise rule):\n\n"
        "| source | the paper's claim | ours | verdict |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )


_EXECUTED_HEADER = """---
file_format: mystnb
kernelspec:
  name: python3
  display_name: Python 3
  language: python
---
"""


def _figure_page(spec) -> str:
    study = _study_of(spec.name)
    trained = bool(spec.llm)
    title = f"{spec.paper_ref}: `{spec.name}`"
    code = (
        "from tailmiss.options import RunOptions\n"
        "from tailmiss.report.registry import FIGURES, figure_data\n"
        "from tailmiss.studies.context import Context\n"
        "from tailmiss.studies.style import paper_style\n\n"
        "ctx = Context(quick=True, options=RunOptions(progress=False))  # quick size, no progress bars\n"
        f'data = figure_data("{spec.name}", ctx)'
        + ("  # trains the quick runs first, or reuses them from runs/llm/" if trained else "")
        + "\nwith paper_style():\n"
        f'    fig = FIGURES["{spec.name}"].plot(data)\n'
        "fig\n"
    )
    parts = [] if trained else [_EXECUTED_HEADER]
    parts += [f"# {title}\n", f"{spec.description}\n", _claims_block(spec.name, study.heading)]
    commands = (
        "```bash\n"
        f"tailmiss figures make {spec.name} --quick    # quick size, into runs/quick/figures/\n"
        f"tailmiss figures make {spec.name}            # full size, into figures/\n"
        "```\n"
    )
    if trained:
        families = ", ".join(f"`{f}`" for f in spec.llm)
        parts += [
            "## The committed figure\n",
            f"![{spec.name}](../../../figures/{spec.name}.png)\n",
            "This figure needs the small transformer trained (its data reads the run families "
            f"{families}): minutes of CPU at quick size and up to hours at full size, so the docs build does not "
            "make it. The image above is the committed `figures/"
            f"{spec.name}.png`, made by `tailmiss repro` from the full presets (the report's stamps record the "
            "code and presets that made it; `tailmiss repro --check` says whether it is still current).\n",
            "## Make it\n",
            commands,
            "In Python, at quick size:\n",
            "```python\n" + code + "```\n",
        ]
    else:
        what = "a quick simulation" if spec.simulated else "closed forms"
        parts += [
            "## Make it\n",
            f"The figure below is made from {what} by this code while the docs are built (quick size, in a "
            "temporary folder).\n",
            "```{code-cell} python\n:tags: [remove-cell]\n\n%matplotlib inline\n```\n",
            "```{code-cell} python\n" + code + "```\n",
            commands,
            f"The full-size figure, as committed in `figures/{spec.name}.png`:\n",
            f"![{spec.name}](../../../figures/{spec.name}.png)\n",
        ]
    return "\n".join(parts)


def _gallery_index(specs) -> str:
    lines = [
        "# Figure gallery\n",
        "Every figure the toolkit draws, one page each: the paper's claim it checks, the committed report's "
        "verdict, and the code that makes it at quick size. `tailmiss figures list` prints the same registry; "
        "`tailmiss repro` renders them all into `figures/`.\n",
        "| figure | what it shows | made in the docs build |\n|---|---|---|",
    ]
    for spec in specs:
        made = "no: needs training" if spec.llm else "yes, at quick size"
        lines.append(f"| [{spec.name}]({spec.name}.md) | {_cell(spec.description)} | {made} |")
    lines += ["", "```{toctree}", ":hidden:", "", *[spec.name for spec in specs], "```", ""]
    return "\n".join(lines)


def write_gallery() -> None:
    from tailmiss.report.registry import FIGURES

    unknown = sorted(set(FIGURES) ^ set(FIGURE_CLAIMS))
    if unknown:
        raise ValueError(f"docs/_ext/tailmiss_docs.FIGURE_CLAIMS and the figure registry differ on {unknown}")
    folder = GENERATED / "gallery"
    for spec in FIGURES.values():
        _write(folder / f"{spec.name}.md", _figure_page(spec))
    _write(folder / "index.md", _gallery_index(FIGURES.values()))


# --- report and notebook -----------------------------------------------------------------------------------------

_FIGURE_NAME = re.compile(r"`([a-z0-9-]+)\.png`")


def write_report() -> None:
    """``paper_repro.md`` as a page: each `` `NAME.png` `` of a registered figure links to its gallery page."""
    from tailmiss.report.registry import FIGURES

    text = (ROOT / "paper_repro.md").read_text()

    def link(match: re.Match) -> str:
        name = match.group(1)
        return f"[`{name}.png`](gallery/{name}.md)" if name in FIGURES else match.group(0)

    title, _, body = text.partition("\n")
    page = f"# The report\n\n**{title.removeprefix('# ')}** (`paper_repro.md`, as committed)\n{body}"
    _write(GENERATED / "report.md", _FIGURE_NAME.sub(link, page))


def write_notebook() -> None:
    source = ROOT / "examples" / "analytic_tour.ipynb"
    target = GENERATED / "analytic_tour.ipynb"
    if not target.is_file() or target.read_bytes() != source.read_bytes():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def generate(app) -> None:
    write_api()
    write_gallery()
    write_report()
    write_notebook()


# --- references to re-exported names -----------------------------------------------------------------------------


def _walk(target: str):
    """``(object, its canonical dotted name)`` of the tailmiss object ``target`` names, or None: each step through a
    class, function or module takes that object's own name, so a re-exported name leads to where it is defined."""
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        name = obj.__name__
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return None
            obj = getattr(obj, attr)
            if inspect.ismodule(obj):
                name = obj.__name__
            elif inspect.isclass(obj) or inspect.isroutine(obj):
                name = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', attr)}"
            else:
                name = f"{name}.{attr}"
        return obj, name
    return None


def _documented(target: str, objects) -> str | None:
    """The documented name of the object ``target`` names, or None."""
    found = _walk(target)
    if found is None:
        return None
    obj, name = found
    if name in objects:
        return name
    # data (a registry, a constant) has no name of its own: the tailmiss module that holds it and documents it
    attr = target.rpartition(".")[2]
    for module in sorted(m for m in list(sys.modules) if m.startswith("tailmiss")):
        if getattr(sys.modules[module], attr, None) is obj and f"{module}.{attr}" in objects:
            return f"{module}.{attr}"
    return None


def resolve_reexport(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "").lstrip("~.")
    module, cls = node.get("py:module"), node.get("py:class")
    tries = [target] if target.startswith("tailmiss") else []
    if module and not target.startswith("tailmiss"):
        tries += ([f"{module}.{cls}.{target}"] if cls else []) + [f"{module}.{target}"]
    domain = env.get_domain("py")
    for candidate in tries:
        name = _documented(candidate, domain.objects)
        if name is None:
            continue
        new = domain.resolve_xref(env, node["refdoc"], app.builder, "obj", name, node, contnode)
        if new is not None:
            return new
    return None


# --- a package's public names -------------------------------------------------------------------------------------

INTERNALS = ("tailmiss._fingerprint", "tailmiss._checks", "tailmiss._device", "tailmiss._dist", "tailmiss._hash")
"""Private modules that have pages of their own (the API reference's "Internals")."""

_ROLE = re.compile(r":(?!math:)[a-z:]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")


def _summary(obj) -> str:
    """The first sentence of ``obj``'s docstring, its cross-references as plain literals (they are relative to the
    module that defines it, not to the package page that lists it)."""
    doc = inspect.getdoc(obj) or ""
    first = doc.split("\n\n")[0].replace("\n", " ").strip()
    return _ROLE.sub(lambda m: f"``{m.group(1).lstrip('.')}``", first)


def _has_page(module: str) -> bool:
    return module in INTERNALS or not any(part.startswith("_") for part in module.split(".")[1:])


def _documented_at(package: str, name: str, obj) -> str | None:
    """The module whose page documents ``obj`` (``package``'s public ``name``), or None where no page does: a leaf
    page documents its ``__all__``, a package page the functions and classes its own ``__init__`` defines."""
    routine = inspect.isclass(obj) or inspect.isroutine(obj)
    home = getattr(obj, "__module__", "") if routine else ""
    if home == package:
        return package
    if home and _has_page(home) and not hasattr(sys.modules[home], "__all__"):
        return home  # a leaf page without __all__ documents every public name the module defines
    for module in sorted(m for m in list(sys.modules) if m.startswith("tailmiss.") and m != package):
        held = sys.modules[module]
        if (
            _has_page(module)
            and not hasattr(held, "__path__")
            and name in getattr(held, "__all__", ())
            and getattr(held, name, None) is obj
        ):
            return module
    return None


def exports_rst(package: str) -> str:
    """reST for the public names of ``package`` (its ``__all__``): a table linking each to its definition; a name
    that no page documents (defined in a private module, or data the package's ``__init__`` defines without a
    docstring) is documented here, under the package's name."""
    module = importlib.import_module(package)
    rows, inline = [], []
    for name in getattr(module, "__all__", ()):
        obj = getattr(module, name)
        if inspect.ismodule(obj):
            continue
        routine = inspect.isclass(obj) or inspect.isroutine(obj)
        if _documented_at(package, name, obj) is None:
            if not routine and ("", name) in ModuleAnalyzer.for_module(package).find_attr_docs():
                inline.append(f".. autodata:: {package}.{name}\n   :no-value:\n")
            elif not routine:  # no docstring of its own: say what it is rather than show its class's docstring
                kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
                inline.append(f".. py:data:: {package}.{name}\n\n   An instance of :class:`{kind}`.\n")
            elif isinstance(obj, type) and issubclass(obj, BaseException):
                inline.append(f".. autoexception:: {package}.{name}\n")
            else:
                inline.append(f".. auto{'class' if inspect.isclass(obj) else 'function'}:: {package}.{name}\n")
        summary = _summary(obj) if routine else ""
        where = _documented_at(package, name, obj)
        target = f"{package}.{name}"
        if where is not None and routine:
            target = f"{obj.__module__}.{obj.__qualname__}"
        elif where is not None:
            target = f"{where}.{name}"
        rows.append(f"   * - :py:obj:`{name} <{target}>`\n     - {summary or ' '}")
    if not rows:
        return ""
    table = [
        ".. rubric:: Public names",
        "",
        f"What ``from {package} import ...`` gives; each links to the page of the module that defines it.",
        "",
        ".. list-table::",
        "   :widths: 30 70",
        "",
        *rows,
        "",
    ]
    return "\n".join(table + inline)


class Exports(Directive):
    """``.. tailmiss-exports:: PACKAGE``: :func:`exports_rst` of ``PACKAGE``."""

    required_arguments = 1

    def run(self):
        text = exports_rst(self.arguments[0])
        node = nodes.container()
        self.state.nested_parse(StringList(text.split("\n"), source=self.arguments[0]), self.content_offset, node)
        return node.children


# --- the API pages ------------------------------------------------------------------------------------------------

API = DOCS / "api" / "generated"


def public_modules(package: str = "tailmiss") -> list[str]:
    """Every public module below ``package`` (no name part starting with an underscore), packages first."""
    import pkgutil

    root = importlib.import_module(package)
    found = [package] if package != "tailmiss" else []
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            found.append(info.name)
    return found


def _submodules(package: str) -> list[str]:
    import pkgutil

    module = importlib.import_module(package)
    if not hasattr(module, "__path__"):
        return []
    return [f"{package}.{info.name}" for info in pkgutil.iter_modules(module.__path__) if not info.name.startswith("_")]


def modules_rst(entries: list[str]) -> str:
    """reST: a table of the modules ``entries`` name (``[folder/]module``, as the toctree reaches their pages) with
    the first sentence of each one's docstring, and a hidden toctree of their pages."""
    names = [e.rpartition("/")[2] for e in entries]
    rows = [f"   * - :py:mod:`{n}`\n     - {_summary(importlib.import_module(n)) or ' '}" for n in names]
    toc = [f"   {e}" for e in entries]
    return "\n".join(
        [".. list-table::", "   :widths: 35 65", "", *rows, "", ".. toctree::", "   :hidden:", "", *toc, ""]
    )


def _module_page(name: str) -> str:
    module = importlib.import_module(name)
    lines = [name, "=" * len(name), ""]
    subs = _submodules(name)
    if not subs:
        return "\n".join([*lines, f".. automodule:: {name}", "   :members:", "   :undoc-members:", ""])
    lines += [f".. automodule:: {name}", "   :no-members:", ""]
    for attr in sorted(vars(module)):
        obj = getattr(module, attr)
        if attr.startswith("_") or getattr(obj, "__module__", None) != name:
            continue
        if inspect.isclass(obj):
            lines += [f".. autoclass:: {name}.{attr}", "   :members:", ""]
        elif inspect.isfunction(obj):
            lines += [f".. autofunction:: {name}.{attr}", ""]
    lines += [f".. tailmiss-exports:: {name}", "", ".. rubric:: Modules", "", f".. tailmiss-modules:: {name}", ""]
    return "\n".join(lines)


def write_api() -> None:
    """One page per public module (and per internal module of :data:`INTERNALS`) under ``docs/api/generated/``."""
    for name in [*public_modules(), *INTERNALS]:
        _write(API / f"{name}.rst", _module_page(name))


class ModuleTable(Directive):
    """``.. tailmiss-modules:: PACKAGE`` (its public submodules) or with the module names as content: a table of
    modules with their summaries, and their pages in the toctree."""

    optional_arguments = 1
    has_content = True

    def run(self):
        names = _submodules(self.arguments[0]) if self.arguments else [n.strip() for n in self.content if n.strip()]
        node = nodes.container()
        self.state.nested_parse(StringList(modules_rst(names).split("\n"), source="modules"), self.content_offset, node)
        return node.children


# --- the command line ----------------------------------------------------------------------------------------------


_KINDS = {"Path": "path", "int": "integer", "float": "number", "str": "text", "bool": "flag"}


def _kind(param) -> str:
    """What an option takes, in words: from click's type where the parameter has one, else from its annotation."""
    if hasattr(param, "type"):
        return getattr(param.type, "name", "").lower()
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Literal:
        return " | ".join(map(str, args))
    if args and typing.get_origin(annotation) in (list, tuple, typing.Union, types.UnionType):
        annotation = args[0]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(str(m.value) for m in annotation)
    return _KINDS.get(getattr(annotation, "__name__", ""), getattr(annotation, "__name__", "") or "")


def _option_row(param) -> str:
    names = ", ".join(f"``{n}``" for n in [*param.opts, *getattr(param, "secondary_opts", [])])
    if getattr(param, "param_type_name", "") == "argument":
        names = f"``{param.name.upper()}``"
    kind = "flag" if getattr(param, "is_flag", False) else _kind(param)
    if getattr(param, "multiple", False) or getattr(param, "nargs", 1) == -1:
        kind += ", repeatable"
    default = param.default
    if callable(default) or default in (None, (), []) or getattr(param, "is_flag", False) and default is False:
        default = ""
    elif isinstance(default, (list, tuple)):
        default = ", ".join(map(str, default))
    shown = f"``{default}``" if default != "" else ("required" if param.required else "")
    help_text = " ".join((getattr(param, "help", None) or "").split()).replace("`", "``").replace("````", "``")
    return f"   * - {names}\n     - {kind or ' '}\n     - {shown or ' '}\n     - {help_text or ' '}"


def _command_rst(command, path: list[str], level: int, parent=None) -> list[str]:
    """reST for ``command`` (reached as ``tailmiss PATH``) and, for a group, each of its sub-commands."""
    context = (
        type(parent)(command, info_name=path[-1], parent=parent)
        if parent
        else command.make_context(path[-1], ["--help"], resilient_parsing=True)
    )
    marks = "=-~^"
    title = " ".join(path)
    lines = [f".. _cli-{'-'.join(path)}:", "", title, marks[level] * len(title), ""]
    help_text = inspect.cleandoc(command.help or "")
    if help_text:
        lines += [help_text.replace("`", "``").replace("````", "``"), ""]
    subcommands = getattr(command, "commands", None)
    usage = " ".join(command.get_usage(context).split()).removeprefix("Usage: ")
    lines += [".. code-block:: text", "", f"   {usage}", ""]
    params = [p for p in command.params if p.name != "help" and not getattr(p, "hidden", False)]
    if params:
        lines += [
            ".. list-table::",
            "   :header-rows: 1",
            "   :widths: 25 12 13 50",
            "",
            "   * - option\n     - takes\n     - default\n     - what it does",
        ]
        lines += [_option_row(p) for p in params] + [""]
    for name, sub in sorted((subcommands or {}).items()):
        if not getattr(sub, "hidden", False):
            lines += _command_rst(sub, [*path, name], min(level + 1, 3), context)
    return lines


def cli_rst() -> str:
    """reST for every command of ``tailmiss``, from the Typer app itself, so it cannot drift from ``--help``."""
    import typer.main

    from tailmiss.cli import app

    return "\n".join(_command_rst(typer.main.get_command(app), ["tailmiss"], 0))


class CommandLine(Directive):
    """``.. tailmiss-cli::``: :func:`cli_rst`."""

    def run(self):
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(cli_rst().split("\n"), source="tailmiss --help"), node)
        return node.children


def setup(app):
    app.connect("builder-inited", generate)
    app.connect("missing-reference", resolve_reexport)
    app.add_directive("tailmiss-exports", Exports)
    app.add_directive("tailmiss-cli", CommandLine)
    app.add_directive("tailmiss-modules", ModuleTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
