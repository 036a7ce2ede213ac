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

    def dataset_name(self, text: str) -> str:
        """The pipeline's name of the dataset `text` (one to three parts, `LIVE.x` too) would
        be (`dataset_key`). Not such a name: NameSyntaxError."""
        return self.dataset_key(self.qualify(split(text)))

    def dataset_key(self, table: TableName) -> str:
        """The name the pipeline knows the dataset it publishes as `table` by: its last part in
        the pipeline's own catalog and schema; `schema.name` in another schema of its catalog;
        `catalog.schema.name` in another catalog. Catalogs and schemas compare case-blind, as
        Unity Catalog's do, so they are written in lower case."""
        own = self.own(table)
        if own is not None:
            return own
        parts: tuple[str, ...] = (table.schema.lower(), table.name)
        if table.catalog.lower() != self.catalog.lower():
            parts = (table.catalog.lower(), *parts)
        return ".".join(quoted(p) for p in parts)

    def table_of(self, key: str) -> TableName:
        """The table the dataset named `key` (`dataset_key`) is published as."""
        try:
            parts = split(key)
        except NameSyntaxError:
            parts = (key,)
        return TableName(self.catalog, self.schema, key) if len(parts) == 1 \
            else self.qualify(parts)

    def own(self, table: TableName) -> str | None:
        """The dataset name, when `table` is in this namespace (names compare case-blind, as
        Unity Catalog's do); else None."""
        if (table.catalog.lower(), table.schema.lower()) == (self.catalog.lower(),
                                                             self.schema.lower()):
            return table.name
        return None
