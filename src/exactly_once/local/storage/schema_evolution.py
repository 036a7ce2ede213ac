"""A Delta table's schema against the schema its flow now writes: what changed, and the table
evolved to take it, as a Databricks pipeline evolves a streaming table or an AUTO CDC target on
its next update (https://docs.databricks.com/aws/en/ldp/streaming-table-schema-evolution).

Two kinds of change are applied, each a metadata-only commit that rewrites no data file:
- a column (or a field of a struct column) the flow writes and the table lacks is added, in the
  place a table created with the new schema would have it (`ADD COLUMNS ... AFTER`); the rows
  written before hold NULL in it;
- a column whose type the flow writes wider (INT to BIGINT, DECIMAL(p, s) to DECIMAL(p + a,
  s + b) with a >= b >= 0, FLOAT to DOUBLE, DATE to TIMESTAMP_NTZ) is widened with Delta's
  type widening (`delta.enableTypeWidening`, https://docs.delta.io/delta-type-widening/).

Every other difference (a column the flow no longer writes, a type narrowed or changed) cannot
be applied to the rows already written; `changes` reports it and `evolve` refuses it, so an
update checks the whole pipeline first (execution/schema_check.py) and writes nothing.

Each change is its own commit, found again from the log by the next update: a crash between two
of them leaves the rest for the next update, and a change already made is not made twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from exactly_once.errors import FlowError
from exactly_once.local.storage import delta_log

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType, StructType

ADDED, WIDENED = "added", "widened"
REMOVED, CHANGED = "removed", "changed"  # incompatible: the rows written cannot follow
TYPE_WIDENING = "delta.enableTypeWidening"


@dataclass(frozen=True)
class SchemaChange:
    """One difference between a table's schema and the one its flow writes: `column` is a
    dotted path (`orders_fields.coupon` for a field of a struct column), as messages and the
    event log show it; `parts` the names along it, each whole (a name may hold a dot), when
    known: a change read back from the event log has its `column` only."""

    column: str
    change: str  # ADDED | WIDENED | REMOVED | CHANGED
    data_type: str | None  # the type written (None: REMOVED)
    previous_type: str | None = None  # the table's type (None: ADDED)
    after: str | None = None  # ADDED: the column it follows ("" for the first)
    parts: tuple[str, ...] = ()

    @property
    def compatible(self) -> bool:
        return self.change in (ADDED, WIDENED)

    def described(self) -> str:
        """As a message names it: `coupon STRING added`, `xp INT -> BIGINT`."""
        if self.change == ADDED:
            return f"`{self.column}` {_shown(self.data_type)} added"
        if self.change == REMOVED:
            return f"`{self.column}` removed"
        return f"`{self.column}` {_shown(self.previous_type)} -> {_shown(self.data_type)}"


def _shown(type_name: str | None) -> str:
    return (type_name or "").upper()


def widens(old: DataType, new: DataType) -> bool:
    """Whether Delta's type widening takes a column of type `old` to `new` without touching
    the values stored (Delta 4.0's table of supported changes, the integer-to-decimal ones
    left out: they are only applied by hand, never by schema evolution)."""
    from pyspark.sql.types import (
        ByteType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        ShortType,
        TimestampNTZType,
    )

    integers = (ByteType, ShortType, IntegerType, LongType)
    if isinstance(old, integers) and isinstance(new, integers):
        return integers.index(type(new)) > integers.index(type(old))
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        more_digits, more_places = new.precision - old.precision, new.scale - old.scale
        return (more_digits, more_places) != (0, 0) and more_digits >= more_places >= 0
    return (isinstance(old, FloatType) and isinstance(new, DoubleType)) or \
        (isinstance(old, DateType) and isinstance(new, TimestampNTZType))


def changes(stored: StructType, written: StructType,
            prefix: tuple[str, ...] = ()) -> list[SchemaChange]:
    """What differs between the table's schema `stored` and `written`, field by field (into
    struct columns), ignoring nullability: a column's NULLs are allowed either way."""
    from pyspark.sql.types import StructType

    found: list[SchemaChange] = []
    have = {f.name.lower(): f for f in stored.fields}
    previous = ""
    for field in written.fields:
        path = (*prefix, field.name)
        old = have.pop(field.name.lower(), None)
        if old is None:
            found.append(SchemaChange(".".join(path), ADDED, field.dataType.simpleString(),
                                      after=previous, parts=path))
        elif isinstance(old.dataType, StructType) and isinstance(field.dataType, StructType):
            found += changes(old.dataType, field.dataType, path)
        elif old.dataType != field.dataType:
            kind = WIDENED if widens(old.dataType, field.dataType) else CHANGED
            found.append(SchemaChange(".".join(path), kind, field.dataType.simpleString(),
                                      old.dataType.simpleString(), parts=path))
        previous = field.name
    found += [SchemaChange(".".join((*prefix, f.name)), REMOVED, None,
                           f.dataType.simpleString(), parts=(*prefix, f.name))
              for f in have.values()]
    return found


def stored_schema(path: str) -> StructType | None:
    """The schema of the table's latest version, from its log; None when the log cannot say."""
    from pyspark.sql.types import StructType

    text = delta_log.schema_string(path)
    return None if text is None else StructType.fromJson(_json(text))


def _json(text: str) -> dict:
    import json

    return dict(json.loads(text))


def _quoted(parts: tuple[str, ...]) -> str:
    """`parts` (a column, or a struct's field) as SQL names it."""
    from exactly_once.local.engine.sql_columns import identifier

    return ".".join(map(identifier, parts))


def _type_sql(spark: SparkSession, schema: StructType, parts: tuple[str, ...]) -> str:
    """The type of the column or field `parts` of `schema` as SQL writes it: a struct's field
    names quoted (`simpleString` leaves them bare: `struct<a.b:int>` does not parse)."""
    data_type: Any = schema
    for name in parts:
        data_type = data_type[name].dataType
    session: Any = spark
    return str(session._jsparkSession.parseDataType(data_type.json()).sql())


def evolve(spark: SparkSession, path: str, written: StructType,
           removed_allowed: bool = True) -> list[SchemaChange]:
    """Add and widen what `written` has beyond the table at `path`; the changes made.

    `removed_allowed`: a column the table has and `written` lacks is left as it is (a table
    several flows write, each with its own columns); else it is an incompatible change. An
    incompatible change is a FlowError, raised before anything is changed."""
    stored = stored_schema(path)
    if stored is None:
        from pyspark.sql.types import StructType

        stored = StructType(spark.read.format("delta").load(path).schema.fields)
    found = [c for c in changes(stored, written)
             if not (removed_allowed and c.change == REMOVED)]
    broken = [c for c in found if not c.compatible]
    if broken:
        raise FlowError(f"the table at {path} cannot take the schema now written: "
                        + "; ".join(c.described() for c in broken)
                        + "; rebuild it from its sources")
    table = f"delta.`{path}`"
    widened = [c for c in found if c.change == WIDENED]
    if widened and delta_log.table_property(path, TYPE_WIDENING) != "true":
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('{TYPE_WIDENING}' = 'true')")
    for change in found:
        if change.change == ADDED:
            position = f" AFTER {_quoted((change.after,))}" if change.after else " FIRST"
            spark.sql(f"ALTER TABLE {table} ADD COLUMNS ({_quoted(change.parts)} "
                      f"{_type_sql(spark, written, change.parts)}{position})")
        elif change.change == WIDENED:
            spark.sql(f"ALTER TABLE {table} ALTER COLUMN {_quoted(change.parts)} "
                      f"TYPE {change.data_type}")
    return found
