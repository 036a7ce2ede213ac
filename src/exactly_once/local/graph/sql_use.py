"""`USE CATALOG` and `USE SCHEMA` in a pipeline SQL file: the file's current catalog and schema
for the statements after it, as Databricks reads them
(https://docs.databricks.com/aws/en/ldp/target-schema: "scoped to the file containing these
commands"). sql_declarations.py reads the names after a USE against them.

Read: `USE CATALOG c` (and its twin `SET CATALOG c`), `USE [SCHEMA | DATABASE | NAMESPACE] s`
and `USE [SCHEMA] c.s`, each name as written; another form (`IDENTIFIER(...)`, a string) is
sql_statements.py's one-line refusal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from exactly_once.local.catalog.names import DEFAULT_SCHEMA, Namespace, NameSyntaxError, split


@dataclass(frozen=True)
class Use:
    """USE CATALOG c (or SET CATALOG c) / USE [SCHEMA | DATABASE | NAMESPACE] [c.]s: the
    file's current catalog and schema for the statements after it, which read a dataset's
    and a table's name of one or two parts against them
    (https://docs.databricks.com/aws/en/ldp/target-schema). A catalog alone is its schema
    `default`, as Databricks' USE CATALOG resets the schema."""

    catalog: str | None
    schema: str | None

    def applied_to(self, namespace: Namespace) -> Namespace:
        if self.schema is None:
            assert self.catalog is not None
            return Namespace(self.catalog, DEFAULT_SCHEMA)
        return Namespace(self.catalog or namespace.catalog, self.schema)


_PARTS = r"(?:`(?:[^`]|``)*`|\w+)(?:\s*\.\s*(?:`(?:[^`]|``)*`|\w+))*"
_USE_CATALOG = re.compile(rf"(?:USE|SET)\s+CATALOG\s+(?P<name>{_PARTS})\s*$", re.I)
_USE_SCHEMA = re.compile(rf"USE\s+(?:(?:SCHEMA|DATABASE|NAMESPACE)\s+)?(?P<name>{_PARTS})\s*$",
                         re.I)


def parse(text: str, blanked: str) -> Use | None:
    """The USE statement `text` (`blanked`: masked) is, if it is one in a form the runtime
    reads."""
    def name(found: re.Match[str]) -> tuple[str, ...]:
        return split(text[found.start("name"):found.end("name")])

    found = _USE_CATALOG.match(blanked)
    try:
        if found:
            parts = name(found)
            return Use(parts[0], None) if len(parts) == 1 else None
        found = _USE_SCHEMA.match(blanked)
        if found and found.group("name").lower() not in ("catalog", "schema", "database",
                                                         "namespace"):
            parts = name(found)
            return Use(None, parts[0]) if len(parts) == 1 else \
                Use(parts[0], parts[1]) if len(parts) == 2 else None
    except NameSyntaxError:
        return None
    return None
