"""Table names as Databricks resolves them in a pipeline: one, two or three parts.

A pipeline publishes to a default catalog and schema (its resource's `catalog` and `schema`, or
the older `target`). A name of one part is a table of that schema, of two parts a schema of that
catalog, of three parts fully qualified. The legacy `LIVE.` prefix names the pipeline's own
dataset (https://docs.databricks.com/aws/en/dlt/live-schema).
"""

from __future__ import annotations

from dataclasses import dataclass

LIVE = "live"
DEFAULT_CATALOG = "main"  # a Unity Catalog metastore's default catalog, as on Databricks
DEFAULT_SCHEMA = "default"


class NameSyntaxError(ValueError):
    """Text that is not a multi-part name."""


def split(text: str) -> tuple[str, ...]:
    """`a.b.c`, each part plain or in backticks (`` `a.b`.c ``, a doubled backtick escaping one),
    as Spark's parser splits a multi-part identifier."""
    parts: list[str] = []
    part, quoted, i = "", False, 0
    pending = True  # a part is expected (start, or after a dot)
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "`" and text[i + 1:i + 2] == "`":
                part, i = part + "`", i + 2
                continue
            if c == "`":
                quoted = False
            else:
                part += c
        elif c == "`" and not part:
            quoted = True
        elif c == ".":
            if not part.strip():
                raise NameSyntaxError(f"not a table name: {text!r}")
            parts.append(part.strip())
            part = ""
        else:
            part += c
        pending = c == "."
        i += 1
    if quoted or pending or not part.strip():
        raise NameSyntaxError(f"not a table name: {text!r}")
    parts.append(part.strip())
    return tuple(parts)


def quoted(part: str) -> str:
    """A name part as SQL writes it where it needs backticks."""
    return part if part.replace("_", "").isalnum() and not part[:1].isdigit() \
        else f"`{part.replace('`', '``')}`"


@dataclass(frozen=True)
class TableName:
    catalog: str
    schema: str
    name: str

    def __str__(self) -> str:
        return ".".join(quoted(p) for p in (self.catalog, self.schema, self.name))

    @property
    def file_stem(self) -> str:
        """`catalog.schema.name`: a fixture file's name before its extension."""
        return f"{self.catalog}.{self.schema}.{self.name}"


@dataclass(frozen=True)
class Namespace:
    """A pipeline's default catalog and schema: where it publishes, and what its one- and
    two-part names mean."""

    catalog: str = DEFAULT_CATALOG
    schema: str = DEFAULT_SCHEMA

    def qualify(self, parts: tuple[str, ...]) -> TableName:
        """The table a name of 1-3 parts means here (`LIVE.x` is `x`)."""
        if len(parts) == 2 and parts[0].lower() == LIVE:
            parts = parts[1:]
        if len(parts) == 1:
            return TableName(self.catalog, self.schema, parts[0])
        if len(parts) == 2:
            return TableName(self.catalog, parts[0], parts[1])
        if len(parts) == 3:
            return TableName(*parts)
        raise NameSyntaxError(f"a table name has at most three parts: {'.'.join(parts)}")

    def dataset_name(self, text: str) -> str | None:
        """The dataset of this namespace that `text`, a name of one to three parts (`LIVE.x`
        too), names: its last part, or None when it names another catalog or schema. Not such
        a name: NameSyntaxError."""
        return self.own(self.qualify(split(text)))

    def own(self, table: TableName) -> str | None:
        """The dataset name, when `table` is in this namespace (names compare case-blind, as
        Unity Catalog's do); else None."""
        if (table.catalog.lower(), table.schema.lower()) == (self.catalog.lower(),
                                                             self.schema.lower()):
            return table.name
        return None
