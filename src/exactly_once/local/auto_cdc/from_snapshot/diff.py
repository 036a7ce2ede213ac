"""A snapshot against the target's current rows, by key: what to insert, update and delete.

Databricks' rule (docs/auto_cdc.md, "AUTO CDC FROM SNAPSHOT"): a key new to the target is
inserted, a key whose columns changed is updated, an unchanged key is left alone, and a key the
snapshot no longer has is deleted. The comparison is null-safe (NULL equals NULL). For SCD2 an
update also says whether a tracked column changed (a new version) or only untracked ones (the
current version changes in place).

One Spark job computes the changes and, on the way (`Observation`), the snapshot's checks and
counts: rows, keys given more than once (the most repeated, and how often), rows with a NULL
key, and the keys inserted, updated and deleted. The caller checks them before it writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from exactly_once.local.engine.sql_columns import column, identifier

CHANGE = "__change"  # insert | update | delete
TRACKED_CHANGE = "__tracked_change"  # an update changes a tracked column (SCD2: a new version)
TARGET = "__target_"  # prefix of the target's columns next to the snapshot's
INSERT, UPDATE, DELETE = "insert", "update", "delete"
_COUNT, _ROW, _IN_TARGET = "__count", "__row", "__in_target"


@dataclass(frozen=True)
class SnapshotCounts:
    """What the diff's job observed about the snapshot."""

    rows: int
    duplicated_keys: int  # keys given more than once
    most_repeated_key: str | None  # `k=v, ...` of the key given most often
    most_repeated_times: int
    null_key_rows: int
    inserted: int
    updated: int
    deleted: int


def data_columns(schema: StructType, keys: Sequence[str]) -> list[str]:
    return [f.name for f in schema.fields if f.name not in keys]


def schema_mismatch(snapshot: StructType, target: StructType) -> str | None:
    """How the snapshot's columns differ from the target's (names and types), or None."""
    def typed(schema: StructType) -> dict[str, str]:
        return {f.name: f.dataType.simpleString() for f in schema.fields}

    have, want = typed(snapshot), typed(target)
    if have == want:
        return None
    parts = []
    if extra := [c for c in have if c not in want]:
        parts.append(f"new columns {', '.join(extra)}")
    if missing := [c for c in want if c not in have]:
        parts.append(f"no columns {', '.join(missing)}")
    if retyped := [f"{c} {want[c]} -> {have[c]}" for c in have if c in want and have[c] != want[c]]:
        parts.append(f"other types ({', '.join(retyped)})")
    return "; ".join(parts)


def _differs(columns: Sequence[str]) -> Column:
    differs = F.lit(False)
    for c in columns:
        differs = differs | ~column(c).eqNullSafe(column(TARGET + c))
    return differs


def snapshot_changes(snapshot: DataFrame, current: DataFrame, keys: Sequence[str],
                     tracked: Sequence[str], observation: Observation) -> DataFrame:
    """The keys that change, with the snapshot's columns, CHANGE and TRACKED_CHANGE, and the
    target's columns as `__target_<column>` (SCD2 needs its `__START_AT`).

    `current` is the target's current rows (SCD2: the versions with `__END_AT IS NULL`); its
    columns besides the snapshot's are carried, not compared. `observation` receives
    `SnapshotCounts`' fields when the result is first computed.
    """
    data = data_columns(snapshot.schema, keys)
    key_cols = [column(k) for k in keys]
    row = [F.first(F.struct(*[column(c) for c in data])).alias(_ROW)] if data else []
    grouped = snapshot.groupBy(*key_cols).agg(F.count(F.lit(1)).alias(_COUNT), *row).select(
        *key_cols, _COUNT, *[F.col(f"{_ROW}.{identifier(c)}").alias(c) for c in data])
    carried = [c for c in current.columns if c not in keys]
    renamed = current.select(*key_cols, *[column(c).alias(TARGET + c) for c in carried],
                             F.lit(True).alias(_IN_TARGET))
    joined = grouped.join(renamed, list(keys), "full_outer")
    in_snapshot, in_target = F.col(_COUNT).isNotNull(), F.col(_IN_TARGET).isNotNull()
    change = (F.when(in_snapshot & ~in_target, F.lit(INSERT))
              .when(~in_snapshot & in_target, F.lit(DELETE))
              .when(_differs(data), F.lit(UPDATE)))
    key_text = F.concat_ws(", ", *[F.concat(F.lit(f"{k}="), F.coalesce(
        column(k).cast("string"), F.lit("NULL"))) for k in keys])
    null_key = F.lit(False)
    for k in keys:
        null_key = null_key | column(k).isNull()
    counts = joined.select("*", change.alias(CHANGE), _differs(tracked).alias(TRACKED_CHANGE),
                           key_text.alias("__key_text"))
    observed = counts.observe(
        observation,
        F.coalesce(F.sum(_COUNT), F.lit(0)).alias("rows"),
        F.count_if(F.col(_COUNT) > 1).alias("duplicated_keys"),
        F.max_by("__key_text", F.struct(F.col(_COUNT), F.col("__key_text")))
        .alias("most_repeated_key"),
        F.coalesce(F.max(_COUNT), F.lit(0)).alias("most_repeated_times"),
        F.coalesce(F.sum(F.when(null_key & in_snapshot, F.col(_COUNT))), F.lit(0))
        .alias("null_key_rows"),
        *[F.count_if(F.col(CHANGE) == kind).alias(name)
          for kind, name in ((INSERT, "inserted"), (UPDATE, "updated"), (DELETE, "deleted"))])
    return observed.where(F.col(CHANGE).isNotNull()).drop(_COUNT, _IN_TARGET, "__key_text")


def observed_counts(observation: Observation) -> SnapshotCounts:
    """The counts of `snapshot_changes`, once its result has been computed."""
    values = observation.get
    return SnapshotCounts(
        rows=int(values["rows"]), duplicated_keys=int(values["duplicated_keys"]),
        most_repeated_key=values["most_repeated_key"],
        most_repeated_times=int(values["most_repeated_times"]),
        null_key_rows=int(values["null_key_rows"]), inserted=int(values["inserted"]),
        updated=int(values["updated"]), deleted=int(values["deleted"]))
