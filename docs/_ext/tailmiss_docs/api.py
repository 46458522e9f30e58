"""The API reference: one page per public module, a package's exported names, and references to re-exported names.

A name that a package re-exports (``tailmiss.analytic.pass_at_k``) resolves to the page of the module that defines
it (``tailmiss.analytic.pass_at_k.pass_at_k``), by importing it: the docs document each object once, where it is
defined, and the package's name is what users type.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.pycode import ModuleAnalyzer

from tailmiss_docs.common import DOCS, write_if_changed


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


# --- a package's public names ---------------------------------------------------------------------------------------

INTERNALS = (
    "tailmiss._fingerprint",
    "tailmiss._units",
    "tailmiss._provenance",
    "tailmiss._checks",
    "tailmiss._device",
    "tailmiss._dist",
    "tailmiss._hash",
)
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
        where = _documented_at(package, name, obj)
        target = f"{package}.{name}"
        if where is None:
            if not routine and ("", name) in ModuleAnalyzer.for_module(package).find_attr_docs():
                inline.append(f".. autodata:: {package}.{name}\n   :no-value:\n")
            elif not routine:  # no docstring of its own: say what it is rather than show its class's docstring
                kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
                inline.append(f".. py:data:: {package}.{name}\n\n   An instance of :class:`{kind}`.\n")
            elif isinstance(obj, type) and issubclass(obj, BaseException):
                inline.append(f".. autoexception:: {package}.{name}\n")
            else:
                inline.append(f".. auto{'class' if inspect.isclass(obj) else 'function'}:: {package}.{name}\n")
        elif routine:
            target = f"{obj.__module__}.{obj.__qualname__}"
        else:
            target = f"{where}.{name}"
        summary = _summary(obj) if routine else ""
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


# --- the API pages --------------------------------------------------------------------------------------------------

API = DOCS / "api" / "generated"


def public_modules() -> list[str]:
    """Every public module of tailmiss (no name part starting with an underscore), each package before its modules."""
    import pkgutil

    import tailmiss

    found = pkgutil.walk_packages(tailmiss.__path__, "tailmiss.")
    return [i.name for i in found if not any(part.startswith("_") for part in i.name.split(".")[1:])]


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
        write_if_changed(API / f"{name}.rst", _module_page(name))


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
