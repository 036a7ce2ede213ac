"""The documentation site's generated parts, written from the code at every build (mkdocs.yml's
`hooks:`), so nothing generated is committed and nothing can go stale:

    <!-- generated: cli-reference -->   every command and argument, from `cli.build_parser()`
    <!-- generated: import-layers -->   the package's layers and the runtime's wings, from
                                        `exactly_once.LAYERS` and `local.WINGS` (what
                                        tests/test_layering.py enforces)

A page that names a marker this file does not know fails the build, as does a marker left
unreplaced. tests/test_docs.py builds the site in strict mode and reads these parts back.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The tree this file sits in is the one documented, whichever checkout the venv installed.
sys.path.insert(0, str(ROOT / "src"))

MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")
USAGE_WIDTH = 96


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (MkDocs' hook)
    return MARKER.sub(lambda m: GENERATORS[m.group(1)]() if m.group(1) in GENERATORS
                      else _unknown(m.group(1), page.file.src_path), markdown)


def _unknown(name: str, page: str) -> str:
    raise ValueError(f"{page}: no generator named {name!r}; known: {', '.join(GENERATORS)}")


# -- the command line ------------------------------------------------------------------------------
def cli_reference() -> str:
    """Every command of `exactly-once` (subcommands of subcommands too): its help, its usage as
    `--help` prints it, and a row per argument with its help and default."""
    from exactly_once.cli import build_parser

    parser = build_parser()
    sections = ["Before the command, every command takes:",
                _arguments_table(parser, [a for a in parser._actions
                                          if not isinstance(a, argparse._SubParsersAction)])]
    for name, sub, summary in _subcommands(parser):
        sections.append(_command(f"exactly-once {name}", sub, summary, level=2))
    return _local_paths("\n\n".join(s for s in sections if s))


def _subcommands(parser: argparse.ArgumentParser):
    """(name, parser, the one-line help its parent lists it with), in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, sub, helps.get(name) or ""


def _command(prog: str, parser: argparse.ArgumentParser, summary: str, level: int) -> str:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=USAGE_WIDTH)
    parts = [f"{'#' * level} `{prog}`", _sentence(summary or parser.description or ""),
             f"```text\n{parser.format_usage().strip()}\n```",
             _arguments_table(parser, [a for a in parser._actions
                                       if not isinstance(a, argparse._SubParsersAction)])]
    for name, sub, sub_summary in _subcommands(parser):
        parts.append(_command(f"{prog} {name}", sub, sub_summary, level + 1))
    return "\n\n".join(p for p in parts if p)


def _arguments_table(parser: argparse.ArgumentParser, actions: list[argparse.Action]) -> str:
    formatter = argparse.HelpFormatter(parser.prog)
    rows = []
    for action in actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        invocation = formatter._format_action_invocation(action)
        text = formatter._expand_help(action) if action.help else ""
        if not text and action.choices:
            text = "one of: " + ", ".join(f"`{choice}`" for choice in action.choices)
        if (action.default not in (None, False, argparse.SUPPRESS) and action.option_strings
                and "default" not in text and "%(default)" not in (action.help or "")):
            text = f"{text} (default: {action.default})".strip()
        rows.append(f"| `{invocation}` | {_cell(text)} |")
    if not rows:
        return ""
    return "\n".join(["| argument | what it does |", "|---|---|", *rows])


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return f"{text[0].upper()}{text[1:]}." if text and not text.endswith(".") else text


def _local_paths(text: str) -> str:
    """Defaults that name this checkout's directories, as a reader's checkout has them."""
    from exactly_once.paths import LOCAL_DIR, PROJECT_ROOT

    return text.replace(f"{LOCAL_DIR}/", ".local/").replace(f"{PROJECT_ROOT}/", "")


# -- the import layers -----------------------------------------------------------------------------
def import_layers() -> str:
    """A Mermaid picture of `LAYERS` with `local/` opened into its `WINGS`, each part with the
    first line of its docstring, then the same as a table."""
    import exactly_once
    from exactly_once import local

    lines = ["```mermaid", "flowchart TB"]
    rows = ["| layer | part | what it owns |", "|---:|---|---|"]
    for number, layer in enumerate(exactly_once.LAYERS, start=1):
        if layer == ("local",):
            lines.append(f'  subgraph layer{number} ["local: the runtime, in wings"]')
            lines.append("    direction TB")
            for wing in local.WINGS:
                lines.append(f'    wing_{wing}["{wing}/"]')
            lines.append("    " + " --> ".join(f"wing_{wing}" for wing in local.WINGS))
            lines.append("  end")
        else:
            lines.append(f'  layer{number}["{" · ".join(layer)}"]')
        for part in layer:
            rows.append(f"| {number} | `{part}` | {_cell(_summary(f'exactly_once.{part}'))} |")
            if part == "local":
                rows.extend(f"| {number} | `local/{wing}/` | "
                            f"{_cell(_summary(f'exactly_once.local.{wing}'))} |"
                            for wing in local.WINGS)
    lines.append("  " + " --> ".join(f"layer{n}" for n in range(1, len(exactly_once.LAYERS) + 1)))
    lines.append("```")
    return "\n".join(lines) + "\n\n" + "\n".join(rows)


def _summary(module: str) -> str:
    doc = importlib.import_module(module).__doc__ or ""
    first = " ".join(doc.strip().split("\n\n")[0].split())
    return first[:-1] + "." if first.endswith(":") else first


GENERATORS = {"cli-reference": cli_reference, "import-layers": import_layers}
