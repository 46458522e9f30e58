"""Text helpers shared by the studies' sections: what a section returns (:class:`~tailmiss.studies.text.Section`),
markdown tables and verdict words."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Section", "blocks", "yes", "table", "mean_sd", "deferred", "fence", "fenced", "quick_note"]


@dataclass(frozen=True)
class Section:
    """What a study's section writer returns: its markdown and its claims-ledger rows.

    Attributes
    ----------
    text : str
        The section's markdown, heading first.
    rows : list
        ``(key, ours, verdict)`` of each claim the section judges (:func:`tailmiss.studies.ledger.row`), in the order
        it judged them; a later row on the same claim replaces an earlier one.
    """

    text: str
    rows: list


def blocks(*parts: str | list[str]) -> str:
    """Markdown of ``parts`` in order, each followed by a blank line: a string is one block, a list of lines is one
    block of those lines (an empty list adds the blank line alone)."""
    lines: list[str] = []
    for part in parts:
        lines += [part] if isinstance(part, str) else part
        lines.append("")
    return "\n".join(lines)


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


def fence(name: str) -> tuple[str, str]:
    """The two lines that bound study ``name``'s text in the report (markdown comments: invisible when rendered)."""
    return f"<!-- study:{name} -->", f"<!-- /study:{name} -->"


def fenced(name: str, body: str) -> str:
    """``body`` between the fences of study ``name``, so that it can be found and written again without reading it."""
    start, end = fence(name)
    return f"{start}\n{body.rstrip(chr(10))}\n{end}\n"


def quick_note(body: str, presets: list[tuple[str, str]]) -> str:
    """``body`` (a section, heading first) with one line after its heading naming the quick presets it read in place
    of their full versions (``presets``: ``(quick, full)`` pairs; nothing added when there are none)."""
    named = list(dict.fromkeys(presets))
    if not named:
        return body
    heading, _, rest = body.partition("\n")
    many = "s" if len(named) > 1 else ""
    note = (
        f"*Quick version{many}*: {', '.join(f'`{q}`' for q, _ in named)} in place of the full preset{many} "
        f"{', '.join(f'`{f}`' for _, f in named)} (`tailmiss repro` runs {'them' if many else 'it'})."
    )
    return f"{heading}\n\n{note}\n{rest}"
