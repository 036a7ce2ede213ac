"""`exactly-once test [PYTEST ARGS]`: pytest, in this process, or in the resident engine's warm
session when one runs (cli/engine_client.py): the bundle's tests without a JVM start. A plain
`pytest` goes to the engine the same way (testing/plugin.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from exactly_once.cli import common

VALUED_OPTIONS = ("--bundle", "--target", "-t", "--var")  # the main parser's (common.py)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "test", handle, help="run pytest (the bundle's tests), "
                            "in the resident engine's session when one runs")
    # What follows `test` is pytest's (cli.parse): listed here for --help and the reference.
    parser.add_argument("pytest_args", nargs="*", metavar="PYTEST ARGS",
                        help="what pytest takes: test files, -k, -x, ...")


def handle(args: argparse.Namespace) -> int:
    import pytest

    forget_modules_under(Path.cwd())  # a second run in the engine imports edited tests anew
    return int(pytest.main(list(args.pytest_args)))


def position(argv: list[str]) -> int | None:
    """Where `test` is in `argv` when it is the command (after the main parser's options and
    their values), else None."""
    i = 0
    while i < len(argv):
        if argv[i] == "test":
            return i
        if argv[i] in VALUED_OPTIONS:
            i += 2
        elif argv[i].startswith("-"):
            i += 1
        else:
            return None  # another command
    return None


def forget_modules_under(folder: Path) -> None:
    """Modules imported from `folder` (a bundle's tests, conftest and helpers) dropped from
    `sys.modules`, so that the next import reads their files again."""
    root = str(folder.resolve()) + os.sep
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", "") or "").startswith(root):
            del sys.modules[name]
