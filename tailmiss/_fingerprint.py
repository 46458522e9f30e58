"""The code fingerprint behind every cache key: which sources can change a unit's numbers, and their digest.

A unit's *scope* is the import closure of its entry modules inside the package
(every ``tailmiss`` module they import, at any depth, lazily inside a function
too), less the modules that hold no numbers (atomic files, the store itself,
progress bars, run options, presets that only name other runs). Its digest
hashes what the code *does*, not how it is written or where it lives: each
module is parsed, its docstrings and string statements and its imports of the
package's own modules are dropped, and every remaining top-level statement is
written back by ``ast.unparse`` (comments, formatting and quoting vanish);
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
import dataclasses
import functools
import hashlib
import importlib.util
from collections.abc import Iterable
from pathlib import Path

__all__ = ["Scope", "SCOPES", "NO_NUMBERS", "OWN_SCOPE", "EQUIVALENT", "import_closure", "source_digest", "file_digest"]


@dataclasses.dataclass(frozen=True)
class Scope:
    """What can change one kind of unit's numbers: the entry modules ``entries`` (package paths; a folder stands for
    every module in it) and every package module they import (:func:`tailmiss._fingerprint.import_closure`), less
    :data:`NO_NUMBERS`, the scope's own ``no_numbers`` and :data:`OWN_SCOPE`. Its fingerprint is
    :func:`tailmiss.store.code_fingerprint`; ``name`` keys it in a unit's provenance and in :data:`EQUIVALENT`."""

    name: str
    entries: tuple[str, ...]
    no_numbers: tuple[str, ...] = ()


SCOPES: dict[str, Scope] = {"sim": Scope("sim", ("sim",)), "llm": Scope("llm", ("llm",))}
"""The scopes of the lower floors' units, by name: a simulation's is the simulator's; an LLM run's the trainer's
alone (a run's numbers follow from its config and the trainer, whichever sweep asked for it). A unit type above them
declares its own :class:`Scope` beside it and passes that (``tailmiss.experiments.sweep_result.SCOPE``,
``tailmiss.experiments.bridge.SCOPE``). Analysis, figures and the report are imported by none of them: rewording
or moving them keeps every unit."""
NO_NUMBERS: tuple[str, ...] = (
    "io.py",
    "store.py",
    "archive.py",
    "_units.py",
    "_provenance.py",
    "_fingerprint.py",
    "_checks.py",
    "options.py",
    "sim/presets.py",
    "sim/memory.py",
)
"""Modules in the closures that cannot change a unit's numbers: atomic files, this store, the evidence archive it
reads, the words of its decisions and what it records of a unit's host, argument checks (they only refuse), progress
bars, run options (how work runs; threads and device are recorded beside the fingerprint), the simulator's presets (a
unit's config is part of its key, so a preset names other units) and its memory estimate."""


OWN_SCOPE: tuple[str, ...] = ("llm/tasks/narrowing.py",)
"""Modules left out of every scope, each a scope of its own: a task the trainer runs only when a config names it.
Its digest (:func:`tailmiss.store.module_fingerprint`) is recorded beside the scope's in every unit's provenance,
and a unit that uses it (:func:`tailmiss.store.own_scope_of` its task) is judged by both, so editing such a task
stales its runs and no others."""


EQUIVALENT: dict[str, dict[str, str]] = {
    "llm": {
        "a68c558cb2ce8d99": "117117d0b75cd23e",
        "117117d0b75cd23e": "f341c04fe1964577",
        "f341c04fe1964577": "d1818015221c25f0",
        "d1818015221c25f0": "69bd297a87793a41",
        "69bd297a87793a41": "1b2f56e5f964b4d3",
    },
    "llm/tasks/narrowing.py": {
        "f5db74b68d10f4b6": "38ec6ea86bd98ef5",
        "38ec6ea86bd98ef5": "3e04cd9a7cb372c2",
        "3e04cd9a7cb372c2": "5386c614580a3823",
    },
    "sweep": {"5351701407ce2b36": "000eb2fe025ce4da", "000eb2fe025ce4da": "c46b0d7bea8f0571"},
    "bridge": {"cb224b6f9153c055": "b7e8eed4c5d24b2a", "b7e8eed4c5d24b2a": "0111bd33098e8fa4"},
    "by-type": {"1dd0624370c35e46": "d8a010b2b02ebe46", "d8a010b2b02ebe46": "d66695ece44759d9"},
    "rung-simulation": {"9e9a190247506527": "c1869f1b1be89d0c", "c1869f1b1be89d0c": "bce2a172f354218b"},
    "attribution": {"3b36f63ad1cdbe08": "c1faca198558d641"},
}
"""Code declared to compute what earlier code did, per scope (a name of :data:`SCOPES`, an :data:`OWN_SCOPE` module,
or the name of a unit type's own :class:`Scope`, such as ``sweep``): ``{fingerprint of the
newer code: the fingerprint it replaces}``. A unit made by replaced code (directly or down a chain) is judged as made
by the newer code (:func:`tailmiss.store.same_code`). A declaration stands on a record of runs retrained by the
newer code that came out the same bit for bit, ``benchmarks/trainer_equivalence/<newer>.json``
(``benchmarks/trainer_equivalence.py``; checked by ``tests/test_store.py``). Any later edit of the scope gives a
fingerprint no declaration names, so it stales the units as usual (and the declaration must go).

* ``llm`` ``69bd297a87793a41`` replaces ``1b2f56e5f964b4d3``: the RL loop reshaped around one run object, the
  optimiser settings of SFT and RL gathered into one sub-config, three long functions split, the task registry
  naming the narrowing task; no arithmetic moved.
* ``llm/tasks/narrowing.py`` ``3e04cd9a7cb372c2`` replaces ``5386c614580a3823``: the task draws its prompts from
  the base task's stream instead of a copy of it, and no longer registers itself.
* ``llm`` ``d1818015221c25f0`` replaces ``69bd297a87793a41``, and ``llm/tasks/narrowing.py`` ``38ec6ea86bd98ef5``
  replaces ``3e04cd9a7cb372c2`` (the narrowing task inherits it): task (a)'s SFT batches are built with array
  operations (one draw of the batch's uniforms, the digits read off each prompt's cumulative law) instead of one
  ``Generator.choice`` per prompt; the same uniforms, the same digits, the same batches.
* ``llm`` ``f341c04fe1964577`` replaces ``d1818015221c25f0``: a third network-free policy (``shared``, a log-linear
  term shared across prompts) beside the table and factorized ones; the table reads its logits through one method
  (``action_logits``) that the shared policy overrides; no existing policy's arithmetic moved.
* ``llm`` ``117117d0b75cd23e`` replaces ``f341c04fe1964577``: one trainer path. The RL loop's stages are public
  (``open_run``, ``rollout_stream``, ``score``, ``first_round_info``, ``sampled_row``, ``plan_update``,
  ``rank_logprobs``, ``rank_loss``, ``UpdateStats``, ``save_run``, ``finish_run``; ``tailmiss.llm.loop`` was
  ``_loop``) and the run stack calls them instead of keeping copies; no arithmetic moved. Its record retrains runs
  of the evidence archive (histories and per-prompt evaluations; the archive keeps no weights) and locally trained
  runs with their weights, alone, stopped and resumed, and as one stack. The scopes of the units derived from LLM
  runs take the trainer's modules in, so the same change moved theirs: ``sweep``, ``bridge``, ``by-type`` and
  ``rung-simulation`` are declared beside it, on the record ``benchmarks/trainer_equivalence/derived-117117d0b75cd23e
  .json`` (``benchmarks/derived_equivalence.py``: the same runs, both codes, every derived unit the same).
* ``llm`` ``a68c558cb2ce8d99`` replaces ``117117d0b75cd23e``, and ``llm/tasks/narrowing.py`` ``f5db74b68d10f4b6``
  replaces ``38ec6ea86bd98ef5``: ``RLConfig.train_types`` (RL may draw some prompt types alone; ``None``, the
  default, draws as before), ``Task.prompts_where`` and the narrowing task's ``prompt_types``; no existing path's
  arithmetic moved. Runs do not come out bit for bit across CPUs, so the record compares the two codes on one host
  (an AMD EPYC): the replaced code trained the cover of the archive's runs again (``--keep``), and the newer code
  retrained those runs, alone, stopped and resumed, and as one stack. The derived scopes moved with it
  (``sweep``, ``bridge``, ``by-type``, ``rung-simulation`` and the attribution's), on the record
  ``benchmarks/trainer_equivalence/derived-a68c558cb2ce8d99.json``."""


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


def _imported(package: Path, path: Path) -> tuple[list[Path], list[Path]]:
    """The package modules ``path`` imports by name (followed further) and their parent packages (run by the
    import, so hashed, but their own imports are not followed: ``from tailmiss.studies.theory.claims import x`` runs
    ``tailmiss/results/__init__.py`` without depending on what that file imports). A name that a package's
    ``__init__`` re-exports (``from tailmiss.results import Context``) leads to the module it comes from."""
    here = _dotted(package, path)
    pkg = here if path.name == "__init__.py" else here.rpartition(".")[0]
    named = []
    for module, names in _imports(pkg, path.read_text()):
        init = _module_file(package, module)
        reexports = _reexports(module, init.read_text()) if init is not None and init.name == "__init__.py" else {}
        for name in names or ("",):
            if name and _module_file(package, f"{module}.{name}") is not None:
                named.append(f"{module}.{name}")  # ``from pkg import submodule``
            elif name in reexports:
                named += [module + ".", reexports[name]]  # the package runs; the name comes from its source
            else:
                named.append(module)  # ``import a.b``, or a name the module defines itself
    targets = [f for f in (_module_file(package, m) for m in named if not m.endswith(".")) if f is not None]
    parents = []
    for name in named:
        parts = name.rstrip(".").split(".")
        top = len(parts) + 1 if name.endswith(".") else len(parts)
        parents += [_module_file(package, ".".join(parts[:i])) for i in range(1, top)]
    return targets, [f for f in parents if f is not None]


@functools.lru_cache(maxsize=1024)
def _reexports(module: str, source: str) -> dict[str, str]:
    """``name -> module`` of each package module a package's ``__init__`` imports a name from at its top level."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.module and (node.level or node.module.startswith(_ROOT)):
            source_module = node.module
            if node.level:
                source_module = importlib.util.resolve_name("." * node.level + node.module, module)
            for alias in node.names:
                out[alias.asname or alias.name] = source_module
    return out


@functools.lru_cache(maxsize=1024)
def _imports(pkg: str, source: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``(module, names)`` of every import of a module of package ``pkg`` with this ``source`` (``import a.b``:
    ``("a.b", ())``), lazy ones inside functions included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                module = importlib.util.resolve_name("." * node.level + (node.module or ""), pkg)
            else:
                module = node.module or ""
            found.append((module, tuple(a.name for a in node.names)))
    return tuple(found)


def import_closure(package: Path, roots: Iterable[Path], excluded: Iterable[Path] = ()) -> list[Path]:
    """The files of ``roots`` and of every package module they import, at any depth, less ``excluded``.

    A module imported by name is followed (its own imports join the closure); a parent package that the import only
    runs (``tailmiss/results/__init__.py`` for ``tailmiss.studies.theory.claims``) is in the closure, its imports
    are not followed unless a module imports a name from it.

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
    followed: set[Path] = set()
    run: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in followed or path in excluded or "__pycache__" in path.parts:
            continue
        followed.add(path)
        targets, parents = _imported(package, path)
        todo += targets
        run.update(p for p in parents if p not in excluded)
    return sorted(followed | run)


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


def file_digest(path: Path) -> str:
    """SHA-256 (hex, 16 digits) of one file's distinct normalised statements: :func:`source_digest` of that file
    alone, so that a report can say which files of a scope changed."""
    return source_digest([path])
