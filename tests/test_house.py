"""House rules of the package's layering, checked on the source with :mod:`ast`.

- The figures only plot and the report only writes: no module under ``tailmiss/figures/``
  or ``tailmiss/report/`` may import (at any level, module or function) a training or
  simulation entry point or the modules that hold them; they obtain results through
  :mod:`tailmiss.studies`.
- Every module at the package root is named, with its reason, in the package docstring.
- No import cycle: the graph counts every ``import`` / ``from ... import`` of a
  module, at module level or inside a function (a lazy import is still an arrow),
  resolved to the deepest ``tailmiss`` module it names.
- No module over about 400 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tailmiss"

FORBIDDEN_NAMES = {
    "run_sweep",
    "run_ladder",
    "run_sim",
    "run_cached",
    "simulate",
    "train_all",
    "train_rl",
    "train_sft",
    "run_bridge",
}
FORBIDDEN_MODULES = {
    "tailmiss.experiments",
    "tailmiss.sim.runner",
    "tailmiss.sim.engine",
    "tailmiss.llm.train",
    "tailmiss.llm.sft",
}
"""The trainer's and the simulator's entry points, and the package that runs them (:mod:`tailmiss.experiments`)."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _forbidden(hit: str) -> bool:
    return hit in FORBIDDEN_NAMES or any(hit == m or hit.startswith(m + ".") for m in FORBIDDEN_MODULES)


def violations(root: Path) -> list[str]:
    """``path:line: name`` for each forbidden import in the ``.py`` files under ``root`` (at any level)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path) if path.is_relative_to(PACKAGE) else path.stem
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            hits: list[str] = []
            if isinstance(node, ast.Import):
                hits = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(node, module, path.name == "__init__.py")
                hits = [source] + [a.name for a in node.names] + [f"{source}.{a.name}" for a in node.names]
            for hit in hits:
                if _forbidden(hit):
                    found.append(f"{path}:{node.lineno}: {hit}")
    return found


DATA_MODULES = ("runs.py", "data.py")
"""The studies' data collection: the only modules of the studies that run or load results."""


RESULT_TYPES = {"SweepResult", "LadderResult", "Variant", "METRICS", "SCOPE"}
"""Result types (and a metric list, and a result's declared code scope) that claims and stamps read from the modules
that also hold the runners: a type import, not a run; allowed until the types live apart from the runners."""


def _type_only(found: list[str]) -> set[str]:
    """The ``path:line`` of each import line whose forbidden hits are only result types and their modules."""
    by_line: dict[str, list[str]] = {}
    for v in found:
        where, _, hit = v.rpartition(": ")
        by_line.setdefault(where, []).append(hit)
    modules = {"tailmiss.experiments.sweep_result", "tailmiss.experiments.sweep_config", "tailmiss.experiments.ladder"}
    return {
        w
        for w, hits in by_line.items()
        if all(h in modules or h in RESULT_TYPES or h.rpartition(".")[2] in RESULT_TYPES for h in hits)
    }


@pytest.mark.parametrize("place", ["studies", "report"])
def test_studies_and_report_import_no_training_or_simulation_entry_point(place):
    found = [v for v in violations(PACKAGE / place) if Path(v.split(":")[0]).name not in DATA_MODULES]
    types = _type_only(found)
    assert [v for v in found if v.rpartition(": ")[0] not in types] == []


def test_the_check_catches_a_violation(tmp_path):
    """A figure module that trains (a function-level import) or names a runner module is caught."""
    bad = tmp_path / "figures"
    bad.mkdir()
    (bad / "a.py").write_text(
        "def data(ctx):\n    from tailmiss.experiments.sweep import run_sweep\n    return run_sweep\n"
    )
    (bad / "b.py").write_text("import tailmiss.sim.runner\n")
    (bad / "c.py").write_text("from tailmiss.experiments import bridge\n")
    (bad / "d.py").write_text("from tailmiss.results import sweep_result\n")
    found = violations(bad)
    assert any("a.py:2: run_sweep" in f for f in found), found
    assert any("b.py:1: tailmiss.sim.runner" in f for f in found), found
    assert any("c.py:1: tailmiss.experiments" in f for f in found), found
    assert not any("d.py" in f for f in found), found


# --- import cycles and module sizes ----------------------------------------------------------------

ROOT = PACKAGE.parent
MAX_LINES = 420  # "about 400": a module past this is due for a split


def _modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for path in (root / "tailmiss").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _targets(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    found = set()
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the ``tailmiss`` modules it imports anywhere in its body."""
    modules = _modules(root)
    return {m: _targets(m, p, modules) for m, p in modules.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_the_package_has_no_import_cycle():
    assert import_cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle_and_a_lazy_import_counts(tmp_path):
    pkg = tmp_path / "tailmiss"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from tailmiss.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from tailmiss import c\n")
    (pkg / "c.py").write_text("from .a import thing\n")
    (pkg / "d.py").write_text("import tailmiss.a\n")
    graph = import_graph(tmp_path)
    assert graph["tailmiss.a"] == {"tailmiss.sub.b"} and graph["tailmiss.c"] == {"tailmiss.a"}
    assert import_cycles(graph) == [["tailmiss.a", "tailmiss.c", "tailmiss.sub.b"]]
    (pkg / "c.py").write_text("")
    assert import_cycles(import_graph(tmp_path)) == []


@pytest.mark.parametrize("module", sorted(_modules()))
def test_no_module_is_oversized(module):
    lines = len(_modules()[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines (split it: about 400 at most)"


# --- the package root --------------------------------------------------------------------------------


def undocumented_root_modules(package: Path = PACKAGE) -> list[str]:
    """Modules at the package root that the package docstring does not name as ``name.py`` with a reason.

    A reason is the rest of the docstring line that names the module (at least a few words after it).
    """
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    named = {}
    for line in doc.splitlines():
        for word in line.replace("``", " ").split():
            if word.endswith(".py"):
                named[word] = line.split(word, 1)[1].strip(" :-—`")
    roots = sorted(p.name for p in package.glob("*.py") if p.name != "__init__.py")
    return [m for m in roots if len(named.get(m, "").split()) < 3]


def test_every_root_module_has_a_written_reason():
    assert undocumented_root_modules() == []


def test_the_root_check_catches_an_unexplained_module(tmp_path):
    pkg = tmp_path / "tailmiss"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""Root.\n\n``io.py``: atomic file writes used by every layer.\n``x.py``\n"""\n')
    for name in ("io.py", "x.py", "y.py"):
        (pkg / name).write_text("")
    assert undocumented_root_modules(pkg) == ["x.py", "y.py"]


# --- floors and studies -----------------------------------------------------------------------------------------

FLOORS = (
    ("analytic", "objectives", "sim", "llm", "_checks", "_device", "_dist", "_fingerprint", "_hash", "io", "options",
     "store", "archive", "_units", "_provenance"),
    ("experiments", "integrations", "diagnose"),
    ("studies",),
    ("report", "evidence", "cli", "__main__"),
)  # fmt: skip
"""The package's floors, bottom up, by first name under ``tailmiss``."""


def _floor(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return 0  # the package itself (its __init__)
    return next(i for i, names in enumerate(FLOORS) if parts[1] in names)


def test_no_import_runs_up_a_floor():
    up = sorted(
        f"{m} -> {t}"
        for m, targets in import_graph().items()
        for t in targets
        if _floor(t) > _floor(m) and m != "tailmiss"
    )
    assert up == []


def test_each_study_is_registered_once():
    from tailmiss.report.registry import all_studies

    names = [s.name for s in all_studies()]
    assert len(names) == len(set(names)), names
    packages = sorted(p.parent.name for p in (PACKAGE / "studies").glob("*/__init__.py"))
    registered = {s.write.__module__.split(".")[2] for s in all_studies() if s.write is not None} | {
        s.name for s in all_studies() if s.write is None
    }
    assert set(packages) == registered, (packages, registered)


def test_no_study_imports_another_studys_private_names():
    found = []
    for path in sorted((PACKAGE / "studies").glob("*/*.py")):
        own = path.parent.name
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tailmiss.studies."):
                other = node.module.split(".")[2]
                private = [a.name for a in node.names if a.name.startswith("_")]
                if other != own and private and (PACKAGE / "studies" / other).is_dir():
                    found.append(f"{path.relative_to(PACKAGE)}: {node.module} {private}")
    assert found == []


def test_a_study_record_is_read_from_its_package_layout():
    """``Study.of`` takes the name, heading, writer, figures and deferral text from the study's own ``section`` and
    ``figures`` modules, so that no record restates them; a field given overrides the layout's."""
    from tailmiss.report.registry import STUDIES
    from tailmiss.studies.controls import figures, section
    from tailmiss.studies.record import Study

    controls = next(s for s in STUDIES if s.name == "controls")
    assert controls.heading == section.HEADING and controls.write is section.write
    assert controls.figures == tuple(figures.FIGURES) and controls.deferrable
    assert controls.deferred_why == section.DEFERRED_WHY
    theory = next(s for s in STUDIES if s.name == "theory")
    assert not theory.deferrable and theory.deferred_why == ""
    bridge = next(p for s in STUDIES for p in s.parts if p.name == "bridge")
    assert bridge.write is None and bridge.parent == "transformer"
    one = Study.of(section, figures, "x", figures=(), name="other")
    assert one.figures == () and one.name == "other" and one.ledger == "x"


def test_the_claims_and_the_rule_import_where_torch_cannot_be_imported():
    """The verdicts are arithmetic on tables: every study's claims module, the noise rule, its comparisons, the dip
    and the ledger import in a process where torch cannot be imported."""
    import subprocess
    import sys

    claims = sorted(f"tailmiss.studies.{p.parent.name}.claims" for p in (PACKAGE / "studies").glob("*/claims.py"))
    modules = [*claims, "tailmiss.studies.rule", "tailmiss.studies.comparison", "tailmiss.studies.dip",
               "tailmiss.studies.ledger"]  # fmt: skip
    script = (
        "import importlib, importlib.abc, sys\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] == 'torch':\n"
        "            raise ModuleNotFoundError('torch is blocked')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.startswith('torch')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
    assert len(claims) >= 8


def test_no_source_or_docs_file_holds_a_control_character():
    r"""A ``\b`` or ``\t`` typed into a docstring that is not raw ends up as a backspace or a tab inside a formula;
    no text file of the package, its tests or its docs holds a control character other than tab and newline."""
    root = PACKAGE.parent
    files = [
        p for d in ("tailmiss", "tests", "docs") for p in (root / d).rglob("*") if p.suffix in (".py", ".md", ".toml")
    ]
    bad = [
        str(p.relative_to(root))
        for p in files
        if any(ord(ch) < 32 and ch not in "\t\n" for ch in p.read_text(encoding="utf-8"))
    ]
    assert not bad, bad
