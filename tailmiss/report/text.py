"""Text helpers shared by the report's sections (:mod:`tailmiss.report`, :mod:`tailmiss.report.llm`,
:mod:`tailmiss.report.ladder`): markdown tables and verdict words."""

from __future__ import annotations

__all__ = ["yes", "table"]


def yes(flag: bool) -> str:
    """``yes``, or a bold ``**no**`` that stands out in the report."""
    return "yes" if flag else "**no**"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table; ``|`` inside a cell is escaped."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in r) + " |" for r in rows]
    return "\n".join(lines)
