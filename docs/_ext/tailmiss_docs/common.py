"""What the build-time pages share: where things are, and writing a page only when it changed."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[2]
ROOT = DOCS.parent
GENERATED = DOCS / "_generated"


def write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it already holds it (so Sphinx rereads only what changed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file() and path.read_text() == text:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def table_cell(text: str) -> str:
    """A table cell: no pipes or line breaks."""
    return text.replace("|", "\\|").replace("\n", " ")
