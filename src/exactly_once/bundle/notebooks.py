"""A pipeline library file as the source the runtime runs: a Python or SQL file as it is, a
Databricks notebook as its code.

Source-format notebooks (`# Databricks notebook source` / `-- Databricks notebook source` on
the first line; cells split by `# COMMAND ----------` / `-- COMMAND ----------`; a cell in
another language written as `# MAGIC` / `-- MAGIC` lines starting with `%<magic>`) become the
file's code with every line where it was: the header, the separators and the magic lines are
blank lines, so a message's line number is the notebook's. In a SQL notebook a cell ends its
statement, as a cell runs on its own on Databricks: each separator becomes `;`.

Databricks runs a pipeline notebook in one language ("each file can contain only one
language"), so per cell:

- `%md` (and `%md-sandbox`): documentation, dropped;
- `%pip`: Databricks installs the packages before the pipeline's code runs; locally the
  environment is the one the runtime runs in, so the commands are returned (`pip`, with their
  lines) for the caller to show or check, and dropped from the code;
- a magic of the notebook's own language (`%python` in a Python notebook, `%sql` in a SQL
  one): its code, kept;
- any other (`%sql` in a Python notebook, `%python` in a SQL one, `%run`, `%sh`, `%fs`,
  `%scala`, `%r`, ...): an error naming the file and line; Databricks runs no such cell in a
  pipeline.

Jupyter notebooks (`.ipynb`): the language is the notebook's Databricks metadata
(`application/vnd.databricks.v1+notebook`.language, as the CLI reads it), else its kernel's,
else Python; markdown and raw cells are dropped, code cells follow the same magic rules, and are
joined with a `# COMMAND ---------- cell <n>` line (`;` and a `-- cell <n>` comment in SQL).
Line numbers are the joined text's (a `.ipynb` is JSON): messages name the cell by that line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple

from exactly_once.bundle.pipelines import NOTEBOOK_HEADERS, is_notebook
from exactly_once.bundle.yaml_files import located_file
from exactly_once.errors import BundleError

PYTHON, SQL = "python", "sql"
_COMMENT = {PYTHON: "#", SQL: "--"}
_LANGUAGE = {".py": PYTHON, ".sql": SQL}
_MAGIC_NAME = re.compile(r"%([\w-]+)")
_DOCUMENTATION = ("md", "md-sandbox")
_NAMES = {PYTHON: "Python", SQL: "SQL"}


class LibrarySource(NamedTuple):
    """What a library file runs: its `language` (`python` or `sql`), the source `text`, and
    the `%pip` commands a notebook holds (line, command), which are not in `text`."""

    language: str
    text: str
    pip: tuple[tuple[int, str], ...] = ()


def read_library(path: Path) -> LibrarySource:
    """The source of pipeline library `path` (.py, .sql or .ipynb; a notebook or not)."""
    if path.suffix == ".ipynb":
        return _jupyter(path)
    language = _LANGUAGE.get(path.suffix)
    if language is None:
        raise BundleError(f"{located_file(path)}: not a pipeline source file (.py, .sql, "
                          f".ipynb)")
    text = path.read_text(encoding="utf-8")
    if not is_notebook(path):
        return LibrarySource(language, text)
    return _source_format(path, language, text)


def _source_format(path: Path, language: str, text: str) -> LibrarySource:
    comment = _COMMENT[language]
    magic_prefix = f"{comment} MAGIC"
    separator = re.compile(rf"^{re.escape(comment)} COMMAND -+\s*$")
    lines = text.split("\n")
    out: list[str] = []
    pip: list[tuple[int, str]] = []
    cell_magic: str | None = None  # the magic of the cell the lines belong to
    for number, line in enumerate(lines, start=1):
        if number == 1 and line.rstrip("\r") == NOTEBOOK_HEADERS[path.suffix]:
            out.append("")
            continue
        if separator.match(line):
            out.append(";" if language == SQL else "")
            cell_magic = None
            continue
        if not line.startswith(magic_prefix):
            if line.strip():
                cell_magic = cell_magic or "code"
            out.append(line)
            continue
        body = line[len(magic_prefix):].removeprefix(" ")
        if cell_magic not in (None, "code"):  # a line of the cell's magic
            if cell_magic == "pip" and body.strip():
                pip.append((number, body.strip()))
            out.append(body if cell_magic == language else "")
            continue
        magic = _MAGIC_NAME.match(body)
        if magic is None:
            if not body.strip():
                out.append("")
                continue
            _refuse(located_file(path, number), "a `MAGIC` line that starts no magic command")
        assert magic is not None
        cell_magic = _accept(located_file(path, number), language, magic.group(1))
        if cell_magic == "pip":
            pip.append((number, body.strip()))
        out.append(body[magic.end():].lstrip() if cell_magic == language else "")
    return LibrarySource(language, "\n".join(out), tuple(pip))


def _accept(where: str, language: str, magic: str) -> str:
    """What magic `%magic` in a `language` notebook is: documentation, pip, or code (the
    language's name); any other is an error."""
    if magic in _DOCUMENTATION:
        return "md"
    if magic == "pip":
        return "pip"
    if magic == language:
        return language
    if magic in (PYTHON, SQL):
        _refuse(where, f"a %{magic} cell in a {_NAMES[language]} notebook: a pipeline source "
                       f"file has one language (move the cell to a {_NAMES[magic]} file)")
    if magic == "run":
        _refuse(where, "%run in a pipeline notebook is not run by the pipeline; import "
                            "the code as a module (the pipeline's root_path is importable)")
    _refuse(where, f"%{magic} cells do not run in a pipeline (Python or SQL only)")
    raise AssertionError  # _refuse raises


def _refuse(where: str, message: str) -> None:
    raise BundleError(f"{where}: {message}")


def _jupyter(path: Path) -> LibrarySource:
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise BundleError(f"{located_file(path)}: not a Jupyter notebook: {err}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list) \
            or not isinstance(notebook.get("metadata"), dict):
        raise BundleError(f"{located_file(path)}: not a Jupyter notebook (no `cells` and "
                          f"`metadata`)")
    language = _jupyter_language(path, notebook["metadata"])
    comment = _COMMENT[language]
    out: list[str] = []
    pip: list[tuple[int, str]] = []
    for index, cell in enumerate(notebook["cells"], start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        if language == SQL and out:
            out.append(";")
        out.append(f"{comment} COMMAND ---------- cell {index}")
        cell_lines = text.split("\n")
        first = next((line for line in cell_lines if line.strip()), "")
        magic = _MAGIC_NAME.match(first.strip())
        at = len(out) + 1
        if magic is None:
            out.extend(cell_lines)
            continue
        kind = _accept(f"{located_file(path)}: cell {index}", language, magic.group(1))
        if kind == "pip":
            pip.extend((at + i, line.strip()) for i, line in enumerate(cell_lines)
                       if line.strip())
            out.extend("" for _ in cell_lines)
        elif kind == language:
            out.extend([line.replace(f"%{language}", "", 1) if line == first else line
                        for line in cell_lines])
        else:
            out.extend("" for _ in cell_lines)
    return LibrarySource(language, "\n".join(out) + "\n", tuple(pip))


def _jupyter_language(path: Path, metadata: dict[str, Any]) -> str:
    databricks = metadata.get("application/vnd.databricks.v1+notebook")
    candidates = [databricks.get("language") if isinstance(databricks, dict) else None,
                  (metadata.get("kernelspec") or {}).get("language"),
                  (metadata.get("language_info") or {}).get("name")]
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.lower() in (PYTHON, SQL):
            return candidate.lower()
        if isinstance(candidate, str) and candidate:
            raise BundleError(f"notebook language `{candidate}`: a pipeline runs Python or "
                              f"SQL notebooks")
    return PYTHON
