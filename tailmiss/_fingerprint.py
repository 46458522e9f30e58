"""The code fingerprint behind every cache key: which sources can change a unit's numbers, and their digest.

A unit's *scope* is the import closure of its entry modules inside the package
(every ``tailmiss`` module they import, at any depth, lazily inside a function
too), less the modules that hold no numbers (atomic files, the store itself,
progress bars, run options, presets that only name other runs). Its digest
hashes what the code *does*, not how it is written or where it lives: each
module is parsed, its docstrings and string statements and its imports of the
package's own modules are dropped, and every remaining top-level statement is
written back by :func:`ast.unparse` (comments, formatting and quoting vanish);
the digest is that of the sorted distinct statements of the whole scope,
without file names. So rewording a docstring, reformatting, or moving a function or a file
inside the scope keeps every cached unit, while editing a loss kernel, a
sampler or a default stales the units whose scope holds it.

What the digest does not see: the order of top-level statements (a later
definition of the same name shadowing an earlier one), a statement repeated
word for word, and which of two same-named definitions in the scope an
in-package import picks.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Iterable
from pathlib import Path

__all__ = ["import_closure", "source_digest"]

_ROOT = "tailmiss"


def _module_file(package: Path, dotted: str) -> Path | None:
    """The file of module ``dotted`` (``tailmiss.x.y``) in ``package``, or None (not a module of it)."""
    parts = dotted.split(".")
    if parts[0] != _ROOT:
        return None
    base = package.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _dotted(package: Path, path: Path) -> str:
    rel = path.relative_to(package).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([_ROOT, *parts])


def _imported(package: Path, path: Path) -> frozenset[str]:
    """Every package module that ``path`` imports (the parent packages included: importing runs them)."""
    here = _dotted(package, path)
    pkg = here if path.name == "__init__.py" else here.rpartition(".")[0]
    return frozenset(m for m in _imports(pkg, path.read_text()) if _module_file(package, m) is not None)


@functools.lru_cache(maxsize=1024)
def _imports(pkg: str, source: str) -> frozenset[str]:
    """The dotted names a module of package ``pkg`` with this ``source`` imports, and their parents."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)  # ``from pkg import submodule``
    out = set()
    for name in found:
        parts = name.split(".")
        out.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return frozenset(out)


def import_closure(package: Path, roots: Iterable[Path], excluded: Iterable[Path] = ()) -> list[Path]:
    """The files of ``roots`` and of every package module they import, at any depth, less ``excluded``.

    Parameters
    ----------
    package : Path
        The package folder (``tailmiss/``).
    roots : iterable of Path
        Entry files (a folder stands for every module in it).
    excluded : iterable of Path
        Files that hold no numbers: left out, and their imports not followed.
    """
    excluded = {Path(p) for p in excluded}
    todo: list[Path] = []
    for root in roots:
        todo += sorted(root.rglob("*.py")) if root.is_dir() else [root]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen or path in excluded or "__pycache__" in path.parts:
            continue
        seen.add(path)
        todo += [_module_file(package, m) for m in _imported(package, path)]
    return sorted(seen)


class _Normalise(ast.NodeTransformer):
    """Drops docstrings and other bare string statements, and imports of the package's own modules."""

    def _own(self, node) -> bool:
        if isinstance(node, ast.Import):
            return all(a.name.split(".")[0] == _ROOT for a in node.names)
        return bool(node.level) or (node.module or "").split(".")[0] == _ROOT

    def visit_Import(self, node):
        return None if self._own(node) else node

    visit_ImportFrom = visit_Import

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None
        return self.generic_visit(node)

    def generic_visit(self, node):
        super().generic_visit(node)
        if not isinstance(node, ast.Module) and isinstance(getattr(node, "body", None), list) and not node.body:
            node.body.append(ast.Pass())  # a block left empty (an ``if TYPE_CHECKING:`` of imports) stays valid
        return node


@functools.lru_cache(maxsize=1024)
def _normalised(source: str) -> tuple[str, ...]:
    """The top-level statements of a module with this ``source``, normalised (parsed once per text in a process)."""
    tree = _Normalise().visit(ast.parse(source))
    out = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue  # the public names: moving a function between modules changes two lists, not a number
        out.append(ast.unparse(node))
    return tuple(out)


def source_digest(files: Iterable[Path]) -> str:
    """SHA-256 (hex, 16 digits) of the distinct normalised top-level statements of ``files``, sorted, without file
    names (a moved function takes its module's ``import math`` along: the same statement twice counts once)."""
    digest = hashlib.sha256()
    for statement in sorted({s for path in files for s in _normalised(path.read_text())}):
        digest.update(statement.encode() + b"\0")
    return digest.hexdigest()[:16]
