"""House rules of the package's layering, checked on the source with :mod:`ast`.

The figures only plot: no module under ``tailmiss/figures/`` may import (at any
level, module or function) a training or simulation entry point or the modules
that hold them; they obtain results through :mod:`tailmiss.results`.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tailmiss"

FORBIDDEN_NAMES = {
    "run_sweep",
    "run_ladder",
    "run_sim",
    "run_cached",
    "train_all",
    "train_rl",
    "train_sft",
    "run_bridge",
}
FORBIDDEN_MODULES = {
    "tailmiss.llm.sweep",
    "tailmiss.llm.ladder",
    "tailmiss.llm.pool",
    "tailmiss.sim.runner",
    "tailmiss.bridge",
}
"""``tailmiss.bridge`` holds the bridge's runner (:func:`tailmiss.bridge.run_bridge`)."""


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


def test_figures_import_no_training_or_simulation_entry_point():
    assert violations(PACKAGE / "figures") == []


def test_the_check_catches_a_violation(tmp_path):
    """A figure module that trains (a function-level import) or names a runner module is caught."""
    bad = tmp_path / "figures"
    bad.mkdir()
    (bad / "a.py").write_text("def data(ctx):\n    from tailmiss.llm.sweep import run_sweep\n    return run_sweep\n")
    (bad / "b.py").write_text("import tailmiss.sim.runner\n")
    (bad / "c.py").write_text("from tailmiss import bridge\n")
    (bad / "d.py").write_text("from tailmiss.results import sweep_result\n")
    found = violations(bad)
    assert any("a.py:2: run_sweep" in f for f in found), found
    assert any("b.py:1: tailmiss.sim.runner" in f for f in found), found
    assert any("c.py:1: tailmiss.bridge" in f for f in found), found
    assert not any("d.py" in f for f in found), found
