"""Every code block of the docs and of the README runs, or is checked as far as it can be without running.

The convention (docs/dev/index.md, "Code blocks in the docs"): a fenced block is tested by its language, and an HTML
comment on the line right before the fence changes how:

- ``python``: executed, a page's blocks in order in one namespace, in a fresh folder. ``<!-- docs-test: slow -->``:
  it trains or simulates for longer, so it runs only with ``-m slow`` and the fast suite compiles it and imports
  every name it imports. ``<!-- docs-test: skip: REASON -->``: it cannot run here (a GPU, a model hub); compiled and
  its tailmiss imports checked.
- ``bash``: each command line is checked without running it: a ``tailmiss`` command (also behind ``torchrun -m``,
  ``python -m``, ``srun``) is parsed by the real command line, ``pip install`` extras must exist, and the example,
  benchmark and test files it names must exist. ``<!-- docs-test: run -->`` runs its ``tailmiss`` lines.
- ``toml`` and ``json`` are parsed; ``text`` (printed output, trees) is not run, except that a ``text`` block marked
  ``<!-- docs-test: output -->`` is what the python block right before it prints, exactly. Every fence names its
  language.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import json
import re
import shlex
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

try:  # typer vendors its own click from 0.2x on; the command line's errors are that click's
    from typer._click import ClickException
except ImportError:  # pragma: no cover - an older typer on the real click
    from click import ClickException
try:
    from typer import Exit
except ImportError:  # pragma: no cover
    from click.exceptions import Exit

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
LANGUAGES = {"python", "bash", "toml", "json", "text"}
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<mode>run|slow|skip|output)(?::\s*(?P<reason>.*?))?\s*-->\s*$")


def doc_files() -> list[Path]:
    """The README and every Markdown page of the docs (not the pages the build generates)."""
    docs = ROOT / "docs"
    pages = [p for p in sorted(docs.rglob("*.md")) if not {"_generated", "_build", "generated"} & set(p.parts)]
    return [ROOT / "README.md", *pages]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    text: str
    mode: str
    """"default", "run", "slow" or "skip" (the marker before the fence)."""
    reason: str = ""

    def __str__(self) -> str:
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of ``path`` (MyST directive fences such as ```` ```{toctree} ```` excluded)."""
    lines = path.read_text().split("\n")
    out, i = [], 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, info, indent = match["fence"], match["info"].strip(), len(match["indent"])
        end = i + 1
        while end < len(lines) and not re.match(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[end]):
            end += 1
        body = "\n".join(line[indent:] if not line[:indent].strip() else line.lstrip() for line in lines[i + 1 : end])
        marker = _MARKER.match(lines[i - 1]) if i else None
        if not info.startswith("{"):
            language = info.split()[0] if info else ""
            mode, reason = (marker["mode"], marker["reason"] or "") if marker else ("default", "")
            out.append(Block(path, i + 1, language, body, mode, reason))
        i = end + 1
    return out


ALL_BLOCKS = [b for path in doc_files() for b in blocks(path)]
_ids = str


def test_the_docs_have_code_blocks_and_every_fence_names_a_known_language():
    assert len(ALL_BLOCKS) > 50
    bad = [f"{b}: {b.language or '(none)'}" for b in ALL_BLOCKS if b.language not in LANGUAGES]
    assert not bad, "fences without a known language (use text for output): " + "; ".join(bad)
    for b in ALL_BLOCKS:
        if b.mode == "skip":
            assert b.reason, f"{b}: a skipped block says why (<!-- docs-test: skip: REASON -->)"
        if b.mode in ("slow", "skip"):
            assert b.language == "python", f"{b}: slow and skip mark python blocks"
        if b.mode == "run":
            assert b.language == "bash", f"{b}: run marks bash blocks"
        if b.mode == "output":
            assert b.language == "text", f"{b}: output marks the text block that a python block prints"


# --- python ------------------------------------------------------------------------------------------------------


def _check_imports(block: Block) -> None:
    """Compile ``block`` and import every tailmiss name it imports."""
    tree = ast.parse(block.text, filename=str(block))
    compile(tree, str(block), "exec")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "tailmiss":
                    importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tailmiss":
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name) or importlib.util.find_spec(f"{node.module}.{alias.name}"), (
                    f"{block}: {node.module} has no {alias.name}"
                )


def _pages(modes: set[str]) -> list[tuple[Path, list[Block]]]:
    """Each page's python blocks, each with the block marked as its printed output when one follows it."""
    pages: dict[Path, list] = {}
    for b, after in zip(ALL_BLOCKS, [*ALL_BLOCKS[1:], None]):
        if b.language == "python":
            output = after if after is not None and after.path == b.path and after.mode == "output" else None
            pages.setdefault(b.path, []).append((b, output))
    return [(p, bs) for p, bs in pages.items() if any(b.mode in modes for b, _ in bs)]


def _run(page: list, modes: set[str], folder: Path, monkeypatch) -> None:
    """Run the blocks of ``page`` whose mode is in ``modes`` in order in one namespace (the others are compiled and
    their imports checked); a block followed by an output block must print exactly that."""
    monkeypatch.chdir(folder)
    module = types.ModuleType("__docs__")  # a real module, so that a dataclass defined on the page finds its home
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    for b, output in page:
        if b.mode not in modes:
            _check_imports(b)
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(b.text, str(b), "exec"), namespace)  # noqa: S102 - the docs' own code
        if output is not None:
            assert printed.getvalue().rstrip("\n") == output.text.rstrip("\n"), f"{b}: prints other than {output}"


_FAST, _SLOW = _pages({"default", "slow", "skip"}), _pages({"slow"})


@pytest.mark.parametrize("path,page", _FAST, ids=[str(p.relative_to(ROOT)) for p, _ in _FAST])
def test_each_pages_python_blocks_run(path, page, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    _run(page, {"default"}, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("path,page", _SLOW, ids=[str(p.relative_to(ROOT)) for p, _ in _SLOW])
def test_each_pages_slow_python_blocks_run(path, page, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    _run(page, {"default", "slow"}, tmp_path, monkeypatch)


# --- bash --------------------------------------------------------------------------------------------------------


def _commands(text: str) -> list[list[str]]:
    """The simple commands of a bash block: continuation lines joined, comments dropped, split at ``&&``, ``||``,
    ``;`` and ``|``, leading ``VAR=value`` assignments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.split("\n"):
        words = shlex.split(line, comments=True)
        command: list[str] = []
        for word in [*words, "&&"]:
            if word in ("&&", "||", ";", "|"):
                while command and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", command[0]):
                    command.pop(0)
                if command:
                    out.append(command)
                command = []
            else:
                command.append(word)
    return out


def _tailmiss_args(command: list[str]) -> list[str] | None:
    """The arguments of the tailmiss command line that ``command`` runs, or None."""
    words = list(command)
    while words and words[0] in ("srun", "time", "nohup"):
        words.pop(0)
    if not words:
        return None
    if words[0] == "tailmiss":
        return words[1:]
    if words[0] in ("torchrun", "python", "python3") and "-m" in words:
        at = words.index("-m")
        if at + 1 < len(words) and words[at + 1] == "tailmiss":
            return words[at + 2 :]
    return None


def parse_tailmiss(args: list[str]):
    """Parse ``tailmiss ARGS`` down to its command, as the real command line would, without running it."""
    from tailmiss.cli import app

    command, name, parent = typer.main.get_command(app), "tailmiss", None
    while True:
        ctx = command.make_context(name, list(args), parent=parent)
        if not hasattr(command, "resolve_command"):  # a command, not a group
            return ctx
        rest = [*getattr(ctx, "_protected_args", getattr(ctx, "protected_args", [])), *ctx.args]
        if not rest:
            return ctx
        name, command, args = command.resolve_command(ctx, rest)
        parent = ctx


def _extras() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


def _check_command(block: Block, command: list[str]) -> None:
    args = _tailmiss_args(command)
    if args is not None:
        try:
            parse_tailmiss(args)
        except Exit as done:  # --help
            assert done.exit_code == 0
        except ClickException as exc:
            pytest.fail(f"{block}: `tailmiss {' '.join(args)}` does not parse: {exc.format_message()}")
        return
    program = Path(command[0]).name  # .venv-verl/bin/pip is pip
    if (program == "pip" and command[1:2] == ["install"]) or command[1:4] == ["-m", "pip", "install"]:
        for word in command:
            found = re.search(r"\.\[([a-z0-9,_-]+)\]", word)
            if found:
                unknown = set(found[1].split(",")) - _extras()
                assert not unknown, f"{block}: no extra {sorted(unknown)} in pyproject.toml"
        return
    if program in ("python", "python3", "pytest") and len(command) > 1:
        for word in command[1:]:
            if re.match(r"^(examples|benchmarks|tests)/", word):
                assert (ROOT / word.split("::")[0]).exists(), f"{block}: {word} does not exist"


_BASH = [b for b in ALL_BLOCKS if b.language == "bash"]


@pytest.mark.parametrize("block", _BASH, ids=_ids)
def test_each_bash_command_parses(block, monkeypatch):
    monkeypatch.chdir(ROOT)
    commands = _commands(block.text)
    assert commands, f"{block}: an empty bash block"
    for command in commands:
        _check_command(block, command)


@pytest.mark.parametrize("block", [b for b in _BASH if b.mode == "run"], ids=_ids)
def test_bash_blocks_marked_run_run(block, tmp_path, monkeypatch):
    from tailmiss.cli import app

    monkeypatch.chdir(tmp_path)
    ran = 0
    for command in _commands(block.text):
        args = _tailmiss_args(command)
        if args is not None:
            result = CliRunner().invoke(app, args)
            line = " ".join(args)
            assert result.exit_code == 0, f"{block}: `tailmiss {line}` exits {result.exit_code}: {result.output}"
            ran += 1
    assert ran, f"{block}: marked run but holds no tailmiss command"


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.language in ("toml", "json")], ids=_ids)
def test_toml_and_json_blocks_parse(block):
    if block.language == "toml":
        tomllib.loads(block.text)
    else:
        json.loads(block.text)


# --- the harness itself ------------------------------------------------------------------------------------------


def test_the_harness_reads_fences_markers_and_commands(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- docs-test: slow -->\n```python\nx = 1\n```\n\n````text\n```bash\nnot a block\n```\n````\n"
        "```{toctree}\nguide\n```\n  ```bash\n  A=1 tailmiss sim presets && cd x # c\n    indented\n  ```\n"
    )
    found = blocks(page)
    assert [(b.language, b.mode) for b in found] == [("python", "slow"), ("text", "default"), ("bash", "default")]
    page.write_text("```python\nprint(1 + 1)\n```\n<!-- docs-test: output -->\n```text\n3\n```\n")
    with pytest.raises(AssertionError, match="prints other than"):
        _run(list(zip(blocks(page)[:1], blocks(page)[1:])), {"default"}, tmp_path, monkeypatch)
    assert _commands(found[2].text) == [["tailmiss", "sim", "presets"], ["cd", "x"], ["indented"]]
    assert found[2].text.split("\n")[1] == "  indented"  # the fence's indent removed, the code's own kept
    assert _tailmiss_args(["srun", "torchrun", "--nnodes=2", "-m", "tailmiss", "sim", "run"]) == ["sim", "run"]


def test_a_command_the_cli_does_not_have_is_refused():
    assert parse_tailmiss(["sim", "run", "--preset", "fgrpo-fig2-quick"]).info_name == "run"
    with pytest.raises(ClickException):
        parse_tailmiss(["sim", "run", "--no-such-option"])
    with pytest.raises(ClickException):
        parse_tailmiss(["no-such-command"])


# --- the pages the docs build writes -----------------------------------------------------------------------------


def _docs_extension():
    pytest.importorskip("sphinx", reason="the [docs] extra builds the site")
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        return importlib.import_module("tailmiss_docs")
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))


def test_every_figure_has_a_gallery_entry_naming_claims_of_the_catalogue():
    from tailmiss.report.registry import FIGURES
    from tailmiss.studies.ledger import CATALOGUE

    ext = _docs_extension()
    assert set(ext.FIGURE_CLAIMS) == set(FIGURES)
    keys = {c.key for c in CATALOGUE}
    assert {k for claims in ext.FIGURE_CLAIMS.values() for k in claims} <= keys


def test_a_gallery_page_shows_its_claims_verdicts_and_how_it_is_made():
    from tailmiss.report.registry import FIGURES

    ext = _docs_extension()
    closed_form, trained = ext.figure_page(FIGURES["fig1a"]), ext.figure_page(FIGURES["narrowing"])
    assert "```{code-cell} python" in closed_form and "**reproduced**" in closed_form  # made by the build
    assert (
        "{code-cell}" not in trained and "figures/narrowing.png" in trained and "needs the small transformer" in trained
    )
    assert "tailmiss figures make narrowing --quick" in trained


def test_a_package_page_links_every_exported_name_and_the_cli_reference_names_every_command():
    import typer.main

    from tailmiss.cli import app

    ext = _docs_extension()
    import tailmiss.analytic as analytic

    table = ext.exports_rst("tailmiss.analytic")
    assert all(f":py:obj:`{name} <" in table for name in analytic.__all__)
    assert "<tailmiss.analytic.pass_at_k.pass_at_k>" in table  # the function, not the module of the same name
    reference = ext.cli_rst()

    def names(command, path):
        yield " ".join(path)
        for name, sub in getattr(command, "commands", {}).items():
            yield from names(sub, [*path, name])

    for name in names(typer.main.get_command(app), ["tailmiss"]):
        assert f"\n{name}\n" in reference


def test_the_api_pages_import_every_module_where_trl_is_absent(tmp_path):
    """The README's docs command installs the ``[docs]`` extra alone: with TRL (and transformers, accelerate) not
    importable, ``docs/conf.py`` mocks them for autodoc, and every module of the API reference then imports."""
    import subprocess

    script = tmp_path / "no_trl.py"
    script.write_text(
        "import importlib, importlib.abc, pkgutil, runpy, sys\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in ('trl', 'transformers', 'accelerate', 'datasets'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"conf = runpy.run_path({str(ROOT / 'docs' / 'conf.py')!r})\n"
        "from sphinx.ext.autodoc.mock import mock\n"
        "import tailmiss\n"
        "with mock(conf['autodoc_mock_imports']):\n"
        "    import tailmiss.integrations.trl\n"
        "    for info in pkgutil.walk_packages(tailmiss.__path__, 'tailmiss.'):\n"
        "        if not info.name.startswith('tailmiss.integrations.verl'):\n"
        "            importlib.import_module(info.name)\n"
        "print(sorted(conf['autodoc_mock_imports']))\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "trl" in done.stdout
