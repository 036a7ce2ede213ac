"""Whether a materialized view's inputs changed since the refresh that wrote it (issue 58).

A materialized view is its query over its inputs: when neither changed since its last refresh,
recomputing it writes the same rows again (Databricks then refreshes nothing, or only what
changed). So the local runtime recomputes it only when something it reads changed, and the
event log's `flow_progress` row says SKIPPED when nothing did.

What a refresh read is its fingerprint, kept in the userMetadata of the overwrite commit, so it
is written with the rows it describes and a crash leaves both or neither: the pipeline tables
the query read, with their Delta table ids and versions; the pipeline's definition (its files
and settings, schema_check.fingerprint); and the query's optimized plan, its nodes' text without
the numbers a session hands out (expression ids, the optimizer's common subexpressions) and
without the observations that count expectations (`current_timestamp()` replaced by its value,
or anything else the code decides at run time, makes another plan). A query is fingerprinted
only when every source of its plan is one of those tables (their files, or an empty table's
empty relation), it is deterministic and it calls no function whose body its plan does not
show (a UDF); any other (a file or catalog table outside the pipeline, a subquery, `rand()`, a
Python UDF) is recomputed at every update, as before.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame

from exactly_once.local.storage import delta_log
from exactly_once.local.storage.files import StoragePath

REFRESH_KEY = "exactly_once.refresh"
# Numbered per session, not per query: expression ids, and the names the optimizer gives the
# common subexpressions it pulls out (`_common_expr_0`, then `_common_expr_2` next build).
_SESSION_NUMBERS = re.compile(r"#\d+L?|(?<=_common_expr_)\d+")
_ALL_FIELDS = 2**31 - 1
_CLASS = re.compile(r'"class"\s*:\s*"([^"]+)"')
_USER_CODE = re.compile(r"Python|Pandas|Arrow|ScalaUDF|ScalaUDAF|ScalaAggregator|UserDefined|"
                        r"\.hive\.")

# A pipeline table the query read: (its path, its Delta version when read)
TableRead = tuple[str, int]


def fingerprint(query: DataFrame, reads: Mapping[str, TableRead], definition: str
                ) -> str | None:
    """The refresh's fingerprint (the userMetadata its commit carries), or None when the
    query reads something besides `reads`, or is not deterministic."""
    plan = query._jdf.queryExecution().optimizedPlan()
    text = _plan_text(plan)
    if not plan.deterministic() or "subquery" in text.lower() or _runs_user_code(plan):
        return None
    roots = [_local(path).rstrip("/") + "/" for path, _ in reads.values()]
    leaves = plan.collectLeaves()
    for i in range(leaves.size()):
        if not _read_of(leaves.apply(i), roots):
            return None
    return json.dumps({REFRESH_KEY: {
        # A table's id with its version: a table rebuilt (a full refresh) numbers from 0 again.
        "reads": {name: [delta_log.table_id(path), version]
                  for name, (path, version) in sorted(reads.items())},
        "definition": definition,
        "plan": hashlib.sha256(_SESSION_NUMBERS.sub("", text).encode()).hexdigest()}},
        sort_keys=True)


def _runs_user_code(plan: Any) -> bool:
    """Whether the plan calls a function whose body it does not show (a Python or pandas UDF,
    `mapInPandas`, a JVM or Hive UDF): its code may change while the plan's text does not. Its
    JSON names every node's and expression's class; a plan that has none is taken to run code."""
    try:
        classes = _CLASS.findall(plan.toJSON())
    except Exception:  # a node Spark cannot write as JSON: recomputed, as any unknown
        return True
    return not classes or any(_USER_CODE.search(name) for name in classes)


def _plan_text(plan: Any) -> str:
    """Each node of the plan on a line of its own, all its fields shown; an observation's node
    (its name is new at every build) left out, its child kept."""
    lines, stack = [], [(plan, 0)]
    while stack:
        node, depth = stack.pop()
        if node.getClass().getSimpleName() != "CollectMetrics":
            lines.append("  " * depth + node.simpleString(_ALL_FIELDS))
        children = node.children()
        stack.extend((children.apply(i), depth + 1) for i in reversed(range(children.size())))
    return "\n".join(lines)


def refreshed_with(path: StoragePath | str, stamp: str) -> bool:
    """Whether the table's latest commit is the refresh that `stamp` fingerprints."""
    version = delta_log.latest_version(path)
    return version >= 0 and delta_log.commit_info(path, version).get("userMetadata") == stamp


def _read_of(leaf: Any, roots: list[str]) -> bool:
    """Whether a leaf of the plan reads only files under `roots` (an empty relation: a table
    without files, as snapshot_files.read_latest reads it)."""
    kind = leaf.getClass().getSimpleName()
    if kind == "LocalRelation":
        return bool(leaf.data().isEmpty())
    if kind != "LogicalRelation" or \
            leaf.relation().getClass().getSimpleName() != "HadoopFsRelation":
        return False
    paths = leaf.relation().location().rootPaths()
    return all(any((_local(paths.apply(j).toString()) + "/").startswith(root) for root in roots)
               for j in range(paths.size()))


def _local(path: str) -> str:
    """A path as the warehouse names it: Hadoop's `file:` scheme dropped."""
    return re.sub(r"^file:(//)?", "", str(path))
