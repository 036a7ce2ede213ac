"""A snapshot's changes (diff.py) written to the target: one Delta MERGE, SCD1 or SCD2; into
an empty target, where every change is an insert, one append (`inserted_rows`).

SCD1: the target holds the snapshot's rows; inserted keys are inserted, updated keys take the
snapshot's columns, deleted keys are deleted.

Into a new target, several snapshots are applied in memory (`applied_in_memory`: the rows the
MERGEs would leave) and written as one append.

SCD2: the target holds the snapshot's columns plus `__START_AT` / `__END_AT`, typed like the
version. A new key opens a version at the snapshot's version; a change of a tracked column closes
the current version (`__END_AT` = the snapshot's version) and opens a new one; a change of
untracked columns only updates the current version in place; a deleted key's current version is
closed. The MERGE matches on the keys and `__START_AT`.

The MERGE is computed from the target's current rows, so applying a snapshot the target already
reflects changes nothing: after a crash between the MERGE and the version log's record, the
snapshot asked for again finds no change, and is recorded (so too after the append). These
functions build the MERGE or the rows; the caller writes them (with its commit marker,
`idempotent`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from delta.tables import DeltaMergeBuilder, DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructField, StructType

from exactly_once.local.auto_cdc.from_snapshot.diff import (
    CHANGE,
    DELETE,
    INSERT,
    TARGET,
    TRACKED_CHANGE,
    UPDATE,
)
from exactly_once.local.auto_cdc.scd2 import END_AT, START_AT
from exactly_once.local.engine.sql_columns import column, from_source, identifier, matched_on

OP = "__op"  # SCD2: open (insert a version) | close (end the current one) | update (in place)


def target_schema(snapshot: StructType, scd_type: int, version_type: DataType) -> StructType:
    """The target's columns: the snapshot's, then (SCD2) `__START_AT` and `__END_AT`."""
    fields = [StructField(f.name, f.dataType, True) for f in snapshot.fields]
    if scd_type == 2:
        fields += [StructField(START_AT, version_type, True), StructField(END_AT, version_type,
                                                                          True)]
    return StructType(fields)


def snapshot_part(target: StructType) -> StructType:
    """The target's columns a snapshot has (all but `__START_AT` / `__END_AT`)."""
    return StructType([f for f in target.fields if f.name not in (START_AT, END_AT)])


def current_rows(target: DataFrame, scd_type: int) -> DataFrame:
    """The rows a snapshot is compared with: the target (SCD1), or its current versions."""
    if scd_type == 1:
        return target
    return target.where(F.col(END_AT).isNull()).drop(END_AT)


def inserted_rows(changes: DataFrame, target: StructType, version: Any,
                  version_type: DataType) -> DataFrame:
    """The changes of a snapshot into an empty target (every one an insert) as the target's
    rows: SCD2's open at the snapshot's version."""
    values = {START_AT: F.lit(version).cast(version_type), END_AT: F.lit(None).cast(version_type)}
    return changes.select(*[values.get(f.name, column(f.name)).alias(f.name)
                            for f in target.fields])


def merge_scd1(spark: SparkSession, target_path: str, changes: DataFrame, keys: Sequence[str],
               data: Sequence[str]) -> DeltaMergeBuilder:
    columns = from_source([*keys, *data])
    merge = (DeltaTable.forPath(spark, target_path).alias("t")
             .merge(changes.alias("s"), matched_on(keys))
             .whenMatchedDelete(condition=f"s.{CHANGE} = '{DELETE}'"))
    if data:  # a snapshot of keys alone has nothing to update
        merge = merge.whenMatchedUpdate(condition=f"s.{CHANGE} = '{UPDATE}'",
                                        set=from_source(data))
    return merge.whenNotMatchedInsert(condition=f"s.{CHANGE} = '{INSERT}'", values=columns)


def scd2_operations(changes: DataFrame, keys: Sequence[str], data: Sequence[str], version: Any,
                    version_type: DataType) -> DataFrame:
    """The changes as MERGE rows on (keys, `__START_AT`): versions to open, close, update."""
    at = F.lit(version).cast(version_type)
    current_start = column(TARGET + START_AT)
    change, tracked = F.col(CHANGE), F.col(TRACKED_CHANGE)
    key_cols = [column(k) for k in keys]
    values = [column(c) for c in data]
    nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in changes.schema.fields
             if f.name in data]
    opens = changes.where((change == INSERT) | ((change == UPDATE) & tracked)).select(
        *key_cols, *values, at.alias(START_AT), F.lit("open").alias(OP))
    closes = changes.where((change == DELETE) | ((change == UPDATE) & tracked)).select(
        *key_cols, *nulls, current_start.alias(START_AT), F.lit("close").alias(OP))
    in_place = changes.where((change == UPDATE) & ~tracked).select(
        *key_cols, *values, current_start.alias(START_AT), F.lit("update").alias(OP))
    return opens.unionByName(closes).unionByName(in_place)


def merge_scd2(spark: SparkSession, target_path: str, operations: DataFrame,
               keys: Sequence[str], data: Sequence[str], version: Any,
               version_type: DataType) -> DeltaMergeBuilder:
    at = F.lit(version).cast(version_type)
    inserted = from_source([*keys, *data, START_AT])
    inserted[identifier(END_AT)] = F.lit(None).cast(version_type)
    merge = (DeltaTable.forPath(spark, target_path).alias("t")
             .merge(operations.alias("s"), matched_on([*keys, START_AT]))
             .whenMatchedUpdate(condition=f"s.{OP} = 'close'", set={identifier(END_AT): at}))
    if data:  # a snapshot of keys alone has nothing to update in place
        merge = merge.whenMatchedUpdate(condition=f"s.{OP} = 'update'",
                                        set=from_source(data))
    return merge.whenNotMatchedInsert(condition=f"s.{OP} = 'open'", values=inserted)


def applied_in_memory(rows: DataFrame, changes: DataFrame, scd_type: int, keys: Sequence[str],
                      data: Sequence[str], version: Any, version_type: DataType) -> DataFrame:
    """The target's `rows` after `changes`, as `merge_scd1` / `merge_scd2` would leave them,
    computed without a table: how a new target takes several snapshots in one write."""
    key_cols = [column(k) for k in keys]
    if scd_type == 1:
        kept = rows.join(changes.where(F.col(CHANGE) != INSERT).select(*key_cols), list(keys),
                         "left_anti")
        new = changes.where(F.col(CHANGE) != DELETE).select(*key_cols,
                                                             *[column(c) for c in data])
        return kept.unionByName(new).select(*[column(c) for c in rows.columns])
    operations = scd2_operations(changes, keys, data, version, version_type)
    incoming = {c: f"__new_{c}" for c in data}
    edits = operations.where(F.col(OP) != "open").select(
        *key_cols, START_AT, OP, *[column(c).alias(incoming[c]) for c in data])
    edited = rows.join(edits, [*keys, START_AT], "left")
    updated = F.col(OP) == "update"
    values = {c: F.when(updated, column(incoming[c])).otherwise(column(c))
              for c in data}
    values[END_AT] = F.when(F.col(OP) == "close", F.lit(version).cast(version_type)) \
        .otherwise(F.col(END_AT))
    kept = edited.select(*[values.get(c, column(c)).alias(c) for c in rows.columns])
    opened = operations.where(F.col(OP) == "open").select(
        *key_cols, *[column(c) for c in data], START_AT,
        F.lit(None).cast(version_type).alias(END_AT))
    return kept.unionByName(opened).select(*[column(c) for c in rows.columns])
