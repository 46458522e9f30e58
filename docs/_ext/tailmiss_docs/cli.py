"""The command-line reference, read from the Typer app itself, so that it cannot drift from ``--help``."""

from __future__ import annotations

import enum
import inspect
import types
import typing

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.util.nodes import nested_parse_with_titles

_KINDS = {"Path": "path", "int": "integer", "float": "number", "str": "text", "bool": "flag"}


def _kind(param) -> str:
    """What an option takes, in words: from click's type where the parameter has one, else from its annotation."""
    if hasattr(param, "type"):
        return getattr(param.type, "name", "").lower()
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Literal:
        return " | ".join(map(str, args))
    if args and typing.get_origin(annotation) in (list, tuple, typing.Union, types.UnionType):
        annotation = args[0]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(str(m.value) for m in annotation)
    return _KINDS.get(getattr(annotation, "__name__", ""), getattr(annotation, "__name__", "") or "")


def _option_row(param) -> str:
    names = ", ".join(f"``{n}``" for n in [*param.opts, *getattr(param, "secondary_opts", [])])
    if getattr(param, "param_type_name", "") == "argument":
        names = f"``{param.name.upper()}``"
    kind = "flag" if getattr(param, "is_flag", False) else _kind(param)
    if getattr(param, "multiple", False) or getattr(param, "nargs", 1) == -1:
        kind += ", repeatable"
    default = param.default
    if callable(default) or default in (None, (), []) or getattr(param, "is_flag", False) and default is False:
        default = ""
    elif isinstance(default, (list, tuple)):
        default = ", ".join(map(str, default))
    shown = f"``{default}``" if default != "" else ("required" if param.required else "")
    help_text = " ".join((getattr(param, "help", None) or "").split()).replace("`", "``").replace("````", "``")
    return f"   * - {names}\n     - {kind or ' '}\n     - {shown or ' '}\n     - {help_text or ' '}"


def _command_rst(command, path: list[str], level: int, parent=None) -> list[str]:
    """reST for ``command`` (reached as ``tailmiss PATH``) and, for a group, each of its sub-commands."""
    context = (
        type(parent)(command, info_name=path[-1], parent=parent)
        if parent
        else command.make_context(path[-1], ["--help"], resilient_parsing=True)
    )
    marks = "=-~^"
    title = " ".join(path)
    lines = [f".. _cli-{'-'.join(path)}:", "", title, marks[level] * len(title), ""]
    help_text = inspect.cleandoc(command.help or "")
    if help_text:
        lines += [help_text.replace("`", "``").replace("````", "``"), ""]
    subcommands = getattr(command, "commands", None)
    usage = " ".join(command.get_usage(context).split()).removeprefix("Usage: ")
    lines += [".. code-block:: text", "", f"   {usage}", ""]
    params = [p for p in command.params if p.name != "help" and not getattr(p, "hidden", False)]
    if params:
        lines += [
            ".. list-table::",
            "   :header-rows: 1",
            "   :widths: 25 12 13 50",
            "",
            "   * - option\n     - takes\n     - default\n     - what it does",
        ]
        lines += [_option_row(p) for p in params] + [""]
    for name, sub in sorted((subcommands or {}).items()):
        if not getattr(sub, "hidden", False):
            lines += _command_rst(sub, [*path, name], min(level + 1, 3), context)
    return lines


def cli_rst() -> str:
    """reST for every command of ``tailmiss``, from the Typer app itself, so it cannot drift from ``--help``."""
    import typer.main

    from tailmiss.cli import app

    return "\n".join(_command_rst(typer.main.get_command(app), ["tailmiss"], 0))


class CommandLine(Directive):
    """``.. tailmiss-cli::``: :func:`cli_rst`."""

    def run(self):
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(cli_rst().split("\n"), source="tailmiss --help"), node)
        return node.children
