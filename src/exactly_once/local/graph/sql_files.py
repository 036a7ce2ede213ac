"""A pipeline SQL file as statements: its `${key}` parameters replaced by the pipeline
configuration's values, then split where Spark splits a SQL file (Spark's own splitter,
`StringUtils.splitSemiColonWithIndex`, which open-source pipelines use for theirs), each
statement with the line it starts on and the first words messages name it by.

Parameters (https://docs.databricks.com/aws/en/ldp/parameters): "the value is injected into your
source code as a string before your source code logic evaluates"; a key the configuration does
not set is a one-line error at the statement that names it.

Also what the other SQL modules search statements with: `masked`, a statement's text with its
string literals, quoted identifiers and comments blanked, so a keyword found in it is SQL's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from exactly_once.errors import DeclarationError

PARAMETER = re.compile(r"\$\{([A-Za-z0-9_.\-]+)\}")
HEAD_WORDS = 6  # a statement is named in messages by its first words
BLANKS = re.compile(r"\s*(?:--[^\n]*\n?|/\*.*?\*/\s*)*\s*", re.DOTALL)


@dataclass(frozen=True)
class Statement:
    """One statement of a SQL file: its text (no terminating semicolon, nothing before its first
    word) and the file line it starts on."""

    text: str
    line: int

    @property
    def head(self) -> str:
        words = self.text.split()
        return " ".join(words[:HEAD_WORDS]) + (" ..." if len(words) > HEAD_WORDS else "")

    def error(self, message: str, dataset: str | None = None) -> DeclarationError:
        """`message` about this statement, naming it (the file and line come from the loader)."""
        return DeclarationError(f"`{self.head}`: {message}", dataset=dataset)


def statements(spark: SparkSession, text: str) -> list[Statement]:
    """The statements of SQL file `text`, in file order (`substituted` replaces a statement's
    parameters); chunks holding only comments and blanks are no statements."""
    jvm: Any = spark.sparkContext._jvm
    chunks = jvm.org.apache.spark.sql.catalyst.util.StringUtils.splitSemiColonWithIndex(
        text, False)
    found, offset = [], 0
    for i in range(chunks.length()):
        chunk = str(chunks.apply(i))
        start = text.find(chunk, offset)  # each chunk is the text up to its semicolon
        offset = start + len(chunk)
        lead = BLANKS.match(chunk)
        body = chunk[lead.end() if lead else 0:].rstrip()
        if not body:
            continue
        line = text.count("\n", 0, start + (lead.end() if lead else 0)) + 1
        found.append(Statement(body, line))
    return found


def substituted(spark: SparkSession, statement: Statement) -> Statement:
    """`statement` with each `${key}` outside literals and comments replaced by the
    configuration's value (the session's, where the runtime puts the configuration)."""
    blanked = masked(statement.text, keep_strings=True)
    pieces, last = [], 0
    for match in PARAMETER.finditer(blanked):
        key = match.group(1)
        value = spark.conf.get(key, None)
        if value is None:
            raise statement.error(f"${{{key}}} is not set in the pipeline configuration")
        pieces += [statement.text[last:match.start()], value]
        last = match.end()
    if not pieces:
        return statement
    return Statement("".join([*pieces, statement.text[last:]]), statement.line)


def masked(text: str, keep_strings: bool = False) -> str:
    """`text` with comments, and unless `keep_strings` string literals and the inside of
    back-quoted identifiers, replaced by blanks (newlines kept): the same length, so a position
    in one is the same in the other."""
    out, i, n = list(text), 0, len(text)

    def blank(start: int, end: int) -> None:
        for k in range(start, min(end, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("--", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end)
            i = end
        elif c in "'\"`":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" and c != "`" else 1
            if not keep_strings:
                blank(i + 1, j)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def closing(masked_text: str, open_at: int) -> int:
    """The position of the parenthesis that closes the one at `open_at` (-1 when none)."""
    depth = 0
    for k in range(open_at, len(masked_text)):
        if masked_text[k] == "(":
            depth += 1
        elif masked_text[k] == ")":
            depth -= 1
            if depth == 0:
                return k
    return -1
