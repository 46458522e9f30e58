"""The gallery (one page per registered figure), the report as a page, and the tour notebook.

A figure computed from closed forms or a quick simulation is made by its code while the docs build (its page is a
MyST notebook the build executes); a figure that needs the small transformer trained shows the committed
``figures/NAME.png`` and the commands, and says so. Each page prints the ledger claims the figure shows
(:data:`FIGURE_CLAIMS`) with the committed report's verdicts.
"""

from __future__ import annotations

import json
import re
import shutil

from tailmiss_docs.common import GENERATED, ROOT, table_cell, write_if_changed

FIGURE_CLAIMS: dict[str, tuple[str, ...]] = {
    "fig1a": ("lemma31", "fig1a"),
    "fig3": ("fig3",),
    "fig4": ("fig4",),
    "fig5": ("fig5",),
    "fig2": ("fig2-rises", "fig2-nonmono", "fig2-lift", "fig2-alone"),
    "fig2-prob": ("fig2-rises", "fig2-nonmono", "fig2-lift", "fig2-alone"),
    "brorl-fig3": ("brorl-faster", "brorl-regress", "brorl-concave", "brorl-drops", "brorl-improved"),
    "llm-nsweep": ("t2-pass1", "t2-dip", "t2-reach", "t2-dnll"),
    "llm-objectives": ("t1-pass256", "t1-pass1", "t1-ood", "t1-values"),
    "maze": ("t4-pass1", "t4-pass256", "fig6", "fig7"),
    "bridge": ("fig2-zones",),
    "ladder": (),
    "frontier": (),
    "protocol": ("t2-protocol", "t2-reach", "t5"),
    "noise": ("appQ",),
    "controls": ("t3-lowlr", "t3-ds", "t3-best"),
    "gamma": ("t67-usual", "t67-two"),
    "passk": ("t1214",),
    "tradeoff": ("fig1bc",),
    "narrowing": ("t2-pass1", "t2-dip", "t2-reach", "t2-dnll"),
    "focal-frontier": ("appN-frontier", "fig1bc"),
    "focal-map": ("appN-frontier",),
    "shared-rung": (),
}
"""The ledger claims each figure shows (keys of ``tailmiss/studies/claims.toml``); the figure's page prints their
rows from the section of the report its study writes. A figure with none explains rather than judges."""


# --- gallery ---------------------------------------------------------------------------------------------------------


def _study_of(name: str):
    """The top-level study (a ``## `` section of the report) whose figures include ``name``."""
    from tailmiss.report.registry import STUDIES

    for top in STUDIES:
        if any(f.name == name for s in (top, *top.parts) for f in s.figures):
            return top
    raise ValueError(f"figure {name!r} belongs to no study")


def _ledger_rows(figure: str, heading: str) -> list[str]:
    """Markdown table rows of the committed report's ledger for ``figure``'s claims, read from the stamps file."""
    from tailmiss.studies.ledger import CATALOGUE

    stamps = json.loads((ROOT / "paper_repro.stamps.json").read_text())
    claims = {c.key: c for c in CATALOGUE}
    rows = []
    for key in FIGURE_CLAIMS[figure]:
        claim = claims[key]
        paper = f"| {table_cell(claim.source)} | {table_cell(claim.sentence)} |"
        judged = [r for r in stamps["ledger"] if r[0] == key and heading.startswith("## " + r[3])]
        for _, ours, verdict, _section in judged:
            rows.append(f"{paper} {table_cell(ours)} | **{verdict}** |")
        if not judged:
            why = claim.untestable or claim.note or "judged in another section of the report"
            rows.append(f"{paper} {table_cell(why)} | not judged here |")
    return rows


def _claims_block(name: str, heading: str) -> str:
    rows = _ledger_rows(name, heading)
    section = heading.removeprefix("## ")
    if not rows:
        return (
            "This figure judges no claim of the paper by itself: it shows why the results of other figures come out "
            f"as they do. The report's section *{section}* reads it.\n"
        )
    return (
        f"What it checks, and the verdict of the committed report (section *{section}* of "
        "[the report](../report.md); the verdicts come from the report's one noise rule):\n\n"
        "| source | the paper's claim | ours | verdict |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )


_EXECUTED_HEADER = """---
file_format: mystnb
kernelspec:
  name: python3
  display_name: Python 3
  language: python
---
"""


def figure_page(spec) -> str:
    study = _study_of(spec.name)
    trained = bool(spec.llm)
    title = f"{spec.paper_ref}: `{spec.name}`"
    code = (
        "from tailmiss.options import RunOptions\n"
        "from tailmiss.report.registry import FIGURES, figure_data\n"
        "from tailmiss.studies.context import Context\n"
        "from tailmiss.studies.style import paper_style\n\n"
        "ctx = Context(quick=True, options=RunOptions(progress=False))  # quick size, no progress bars\n"
        f'data = figure_data("{spec.name}", ctx)'
        + ("  # trains the quick runs first, or reuses them from runs/llm/" if trained else "")
        + "\nwith paper_style():\n"
        f'    fig = FIGURES["{spec.name}"].plot(data)\n'
        "fig\n"
    )
    parts = [] if trained else [_EXECUTED_HEADER]
    parts += [f"# {title}\n", f"{spec.description}\n", _claims_block(spec.name, study.heading)]
    commands = (
        "```bash\n"
        f"tailmiss figures make {spec.name} --quick    # quick size, into runs/quick/figures/\n"
        f"tailmiss figures make {spec.name}            # full size, into figures/\n"
        "```\n"
    )
    if trained:
        families = ", ".join(f"`{f}`" for f in spec.llm)
        parts += [
            "## The committed figure\n",
            f"![{spec.name}](../../../figures/{spec.name}.png)\n",
            "This figure needs the small transformer trained (its data reads the run families "
            f"{families}): minutes of CPU at quick size and up to hours at full size, so the docs build does not "
            "make it. The image above is the committed `figures/"
            f"{spec.name}.png`, made by `tailmiss repro` from the full presets (the report's stamps record the "
            "code and presets that made it; `tailmiss repro --check` says whether it is still current).\n",
            "## Make it\n",
            commands,
            "In Python, at quick size:\n",
            "```python\n" + code + "```\n",
        ]
    else:
        what = "a quick simulation" if spec.simulated else "closed forms"
        parts += [
            "## Make it\n",
            f"The figure below is made from {what} by this code while the docs are built (quick size, in a "
            "temporary folder).\n",
            "```{code-cell} python\n:tags: [remove-cell]\n\n%matplotlib inline\n```\n",
            "```{code-cell} python\n" + code + "```\n",
            commands,
            f"The full-size figure, as committed in `figures/{spec.name}.png`:\n",
            f"![{spec.name}](../../../figures/{spec.name}.png)\n",
        ]
    return "\n".join(parts)


def _gallery_index(specs) -> str:
    lines = [
        "# Figure gallery\n",
        "Every figure the toolkit draws, one page each: the paper's claim it checks, the committed report's "
        "verdict, and the code that makes it at quick size. `tailmiss figures list` prints the same registry; "
        "`tailmiss repro` renders them all into `figures/`.\n",
        "| figure | what it shows | made in the docs build |\n|---|---|---|",
    ]
    for spec in specs:
        made = "no: needs training" if spec.llm else "yes, at quick size"
        lines.append(f"| [{spec.name}]({spec.name}.md) | {table_cell(spec.description)} | {made} |")
    lines += ["", "```{toctree}", ":hidden:", "", *[spec.name for spec in specs], "```", ""]
    return "\n".join(lines)


def write_gallery() -> None:
    from tailmiss.report.registry import FIGURES

    unknown = sorted(set(FIGURES) ^ set(FIGURE_CLAIMS))
    if unknown:
        raise ValueError(f"docs/_ext/tailmiss_docs.FIGURE_CLAIMS and the figure registry differ on {unknown}")
    folder = GENERATED / "gallery"
    for spec in FIGURES.values():
        write_if_changed(folder / f"{spec.name}.md", figure_page(spec))
    write_if_changed(folder / "index.md", _gallery_index(FIGURES.values()))


# --- report and notebook ---------------------------------------------------------------------------------------------

_FIGURE_NAME = re.compile(r"`([a-z0-9-]+)\.png`")


def write_report() -> None:
    """``paper_repro.md`` as a page: each `` `NAME.png` `` of a registered figure links to its gallery page."""
    from tailmiss.report.registry import FIGURES

    text = (ROOT / "paper_repro.md").read_text()

    def link(match: re.Match) -> str:
        name = match.group(1)
        return f"[`{name}.png`](gallery/{name}.md)" if name in FIGURES else match.group(0)

    title, _, body = text.partition("\n")
    page = f"# The report\n\n**{title.removeprefix('# ')}** (`paper_repro.md`, as committed)\n{body}"
    write_if_changed(GENERATED / "report.md", _FIGURE_NAME.sub(link, page))


def write_notebook() -> None:
    source = ROOT / "examples" / "analytic_tour.ipynb"
    target = GENERATED / "analytic_tour.ipynb"
    if not target.is_file() or target.read_bytes() != source.read_bytes():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
