"""Pipelines written against the legacy `dlt` module, which Databricks still runs: each name is
the `dp` API it became, resolved when it is called, and `LIVE.` in a dataset's name is the
pipeline's own dataset. Ours is what a pipeline file's `import dlt` gives; a `dlt` package the
user installed for something else (dlthub's, on PyPI) is what every other module imports.

Databricks' pages: the DLT Python language reference
(https://docs.databricks.com/aws/en/dlt/python-ref: `import dlt`, with append_flow,
apply_changes, apply_changes_from_snapshot, create_sink, create_streaming_table, expectations,
table, view), `create_streaming_table` (create_target_table() and create_streaming_live_table()
deprecated names of it, https://docs.databricks.com/aws/en/dlt-ref/dlt-python-ref-streaming-table)
and the LIVE schema (legacy), https://docs.databricks.com/aws/en/dlt/live-schema.
"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap

import pytest
from pyspark import pipelines as dp

from exactly_once.errors import DeclarationError
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.graph import legacy_dlt
from exactly_once.local.graph.loader import load_graph
from exactly_once.paths import pipeline_files

# legacy name -> the `dp` name it calls
RENAMED = {
    "table": "table",
    "view": "temporary_view",
    "materialized_view": "materialized_view",
    "temporary_view": "temporary_view",
    "create_streaming_table": "create_streaming_table",
    "create_target_table": "create_streaming_table",
    "create_streaming_live_table": "create_streaming_table",
    "apply_changes": "create_auto_cdc_flow",
    "create_auto_cdc_flow": "create_auto_cdc_flow",
    "apply_changes_from_snapshot": "create_auto_cdc_from_snapshot_flow",
    "create_auto_cdc_from_snapshot_flow": "create_auto_cdc_from_snapshot_flow",
    "append_flow": "append_flow",
    "create_sink": "create_sink",
    **{name: name for name in ("expect", "expect_or_drop", "expect_or_fail", "expect_all",
                               "expect_all_or_drop", "expect_all_or_fail")},
}


@pytest.mark.parametrize("legacy, current", sorted(RENAMED.items()))
def test_each_legacy_name_calls_what_dp_has_when_it_is_called(monkeypatch, legacy, current):
    """Resolved at the call, not at import: whatever stand-in is installed on `dp` then (the
    local runtime's, while pipeline files load) is the one a `dlt` name runs."""
    calls = []
    monkeypatch.setattr(dp, current, lambda *args, **kwargs: calls.append((args, kwargs)) or 7,
                        raising=False)
    assert getattr(legacy_dlt, legacy)("x", name="y") == 7
    assert calls == [(("x",), {"name": "y"})]


def test_temporary_is_the_legacy_word_for_private(monkeypatch):
    calls = []
    monkeypatch.setattr(dp, "table", lambda *args, **kwargs: calls.append(kwargs))
    legacy_dlt.table(name="t", temporary=True)
    assert calls == [{"name": "t", "private": True}]
    with pytest.raises(DeclarationError, match="give private or temporary"):
        legacy_dlt.table(name="t", temporary=True, private=True)


def test_a_name_dlt_never_had_is_an_attribute_error():
    with pytest.raises(AttributeError):
        legacy_dlt.no_such_function  # noqa: B018


# A user's own `dlt` (dlthub's data load tool on PyPI) and a module of theirs that uses it.
DLTHUB = 'WHO = "dlthub"\n'
HELPER = "import dlt\nWHO = dlt.WHO\n"

LEGACY = """
    import dlt
    import helper  # the user's module: it imports their own `dlt`
    from pyspark.sql import functions as F

    assert helper.WHO == "dlthub" and not hasattr(dlt, "WHO")

    @dlt.table(comment="changes as they arrive")
    def raw():
        return spark.readStream.schema("id BIGINT, seq BIGINT, v STRING").json("{inbox}")

    @dlt.view
    @dlt.expect_or_drop("has_v", "v IS NOT NULL")
    def valid():
        return dlt.read_stream("LIVE.raw")

    dlt.create_streaming_live_table("kept")

    @dlt.append_flow(target="kept")
    def kept_from_valid():
        return spark.readStream.table("LIVE.valid")

    dlt.create_target_table("latest")
    dlt.apply_changes(target="latest", source="raw", keys=["id"], sequence_by="seq")

    @dlt.materialized_view
    def counts():
        kept = spark.table("LIVE.kept").count()  # a batch read, made while the query is built
        return dlt.read("LIVE.latest").select(F.lit(kept).alias("kept"), "id", "v")

    dlt.create_streaming_table("snapshot")

    def next_snapshot(latest):
        return None if latest else (spark.createDataFrame([(1, "x")], "id INT, v STRING"), 1)

    dlt.apply_changes_from_snapshot(target="snapshot", source=next_snapshot, keys=["id"])
"""


@pytest.fixture
def dlthub(tmp_path, monkeypatch):
    """An installed `dlt` that is not Databricks', and a module of the user's importing it."""
    site = tmp_path / "site"
    (site / "dlt").mkdir(parents=True)
    (site / "dlt" / "__init__.py").write_text(DLTHUB)
    (site / "helper.py").write_text(HELPER)
    monkeypatch.syspath_prepend(str(site))
    for name in ("dlt", "helper"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield
    for name in ("dlt", "helper"):
        sys.modules.pop(name, None)


def test_a_legacy_pipeline_runs_and_leaves_the_user_s_dlt_alone(spark, settings, tmp_path,
                                                                 dlthub):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    changes = [{"id": 1, "seq": 1, "v": "a"}, {"id": 1, "seq": 2, "v": "b"},
               {"id": 2, "seq": 1, "v": None}]
    (inbox / "0.json").write_text("".join(json.dumps(c) + "\n" for c in changes))
    root = tmp_path / "pipelines"
    root.mkdir()
    (root / "legacy.py").write_text(textwrap.dedent(LEGACY.replace("{inbox}", str(inbox))))
    warehouse = tmp_path / "warehouse"
    result = run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    assert result.table_rows == {"raw": 3, "kept": 2, "latest": 2, "counts": 2, "snapshot": 1}

    def rows(table):
        return sorted(tuple(r) for r in spark.read.format("delta")
                      .load(str(warehouse / table)).collect())

    assert rows("kept") == [(1, 1, "a"), (1, 2, "b")]
    assert rows("counts") == [(2, 1, "b"), (2, 2, None)]
    assert rows("snapshot") == [(1, "x")]
    # Everything else imports the user's `dlt`, during the load (helper) and after it.
    assert importlib.import_module("dlt").WHO == "dlthub"


def test_dlt_outside_a_pipeline_file_is_not_ours(spark, tmp_path):
    """Without a `dlt` installed, `import dlt` outside pipeline files fails as it always did,
    during a load too."""
    sys.modules.pop("dlt", None)
    root = tmp_path / "pipelines"
    root.mkdir()
    (root / "a.py").write_text(textwrap.dedent("""
        import importlib
        import dlt

        try:
            importlib.import_module("dlt")
        except ModuleNotFoundError:
            pass
        else:
            raise AssertionError("importlib found a dlt")

        @dlt.table
        def t():
            return spark.readStream.format("rate").load()
        """))
    graph = load_graph(spark, pipeline_files(root))
    assert list(graph.outputs) == ["t"]
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("dlt")
