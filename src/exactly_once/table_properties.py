"""Table properties the pipeline files set, with the meaning Databricks gives them.

They are declared in the pipeline files (`table_properties=`), so Databricks and the local
runtime read the same values from the same place. The values the runtime reads are checked when
the graph loads (`check`): a value it could not read is a DeclarationError naming the dataset,
not a table that silently behaves otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from exactly_once.errors import DeclarationError

# `false`: a full refresh leaves the table, its checkpoints and its AUTO CDC state as they are
# (Databricks skips it; locally `--full-refresh-all` skips it and `--full-refresh T` refuses it).
RESET_ALLOWED = "pipelines.reset.allowed"
# How long AUTO CDC keeps the tombstone of a deleted key, in seconds of processing time.
TOMBSTONE_GC_THRESHOLD = "pipelines.cdc.tombstoneGCThresholdInSeconds"
DEFAULT_TOMBSTONE_GC_SECONDS = 2 * 24 * 3600  # Databricks' default when the property is unset
# A century: no tombstone expires while the pipeline exists. Not a larger number: Databricks
# converts the property to milliseconds in a 64-bit long.
TOMBSTONE_GC_NEVER_SECONDS = 100 * 365 * 24 * 3600

# Tables that hold what Kafka keeps only for its retention period: a full refresh, which
# rebuilds from what Kafka still holds, would erase the rest.
KEPT_THROUGH_FULL_REFRESH = {RESET_ALLOWED: "false"}
# Row tracking on a materialized view's source lets Databricks (serverless) refresh the view
# incrementally, from the source's changed rows, instead of recomputing it.
INCREMENTAL_VIEW_SOURCE = {"delta.enableRowTracking": "true"}
# A deleted key stays deleted however late an older event for it arrives.
TOMBSTONES_KEPT = {TOMBSTONE_GC_THRESHOLD: str(TOMBSTONE_GC_NEVER_SECONDS)}


def reset_allowed(properties: Mapping[str, str]) -> bool:
    return str(properties.get(RESET_ALLOWED, "true")).strip().lower() != "false"


def tombstone_gc_seconds(properties: Mapping[str, str]) -> float:
    """Tombstone retention from the target's properties, else Databricks' default."""
    value = properties.get(TOMBSTONE_GC_THRESHOLD)
    return float(value) if value is not None else float(DEFAULT_TOMBSTONE_GC_SECONDS)


def check(properties: Mapping[str, object], dataset: str) -> None:
    """The properties the runtime reads, each a value it can read; `dataset` declares them."""
    def error(key: str, expected: str) -> DeclarationError:
        return DeclarationError(f"table_properties: {key} must be {expected}, "
                                f"got {properties[key]!r}", dataset=dataset)

    if RESET_ALLOWED in properties \
            and str(properties[RESET_ALLOWED]).strip().lower() not in ("true", "false"):
        raise error(RESET_ALLOWED, "true or false")
    if TOMBSTONE_GC_THRESHOLD in properties:
        try:
            seconds = float(str(properties[TOMBSTONE_GC_THRESHOLD]))
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds >= 0):
            raise error(TOMBSTONE_GC_THRESHOLD, "a number of seconds, 0 or more")
