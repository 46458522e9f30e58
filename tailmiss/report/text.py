"""Text helpers shared by the report's sections (:mod:`tailmiss.report`, :mod:`tailmiss.report.llm`,
:mod:`tailmiss.report.ladder`): markdown tables and verdict words."""

from __future__ import annotations

__all__ = ["yes", "table", "mean_sd", "deferred"]


def yes(flag: bool) -> str:
    """``yes``, or a bold ``**no**`` that stands out in the report."""
    return "yes" if flag else "**no**"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table; ``|`` inside a cell is escaped."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in r) + " |" for r in rows]
    return "\n".join(lines)


def mean_sd(means, sds, digits: int = 3) -> str:
    """A curve's seed means and sds by N as ``"m±s, m±s, ..."``."""
    return ", ".join(f"{m:.{digits}f}±{s:.{digits}f}" for m, s in zip(means, sds))


def deferred(heading: str, name: str, full: str, why: str) -> str:
    """The text a section ``name`` left out of the first look (``tailmiss repro --quick``) keeps under its ``heading``.

    ``full`` names the full presets (in backquotes), ``why`` says why the quick reproduction leaves it out; the
    commands that write the section in its place follow.
    """
    return (
        f"{heading}\n\n*Not in the first look.* {why} `tailmiss repro --quick --only {name}` writes its quick version "
        f"here; `tailmiss repro --only {name}` writes it from the full preset{'s' if ',' in full else ''} {full}.\n"
    )
