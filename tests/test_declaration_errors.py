"""Every kind of bad declaration is one line naming its file, its dataset and what is wrong, the
same line from `exactly-once dry-run` and from `exactly-once run`, found while the pipeline
loads: `run` writes no table.

Each case is a small pipeline folder, run in this process's Spark session (`in_session`).
"""

from __future__ import annotations

import json
from textwrap import dedent

import pytest
from test_cli_dry_run import CHANGES, ERROR, dry_run, pipeline_dir
from test_cli_errors import covers

from exactly_once import cli
from exactly_once.errors import DeclarationError, PipelineFileError

HEADER = """
from pyspark import pipelines as dp
from pyspark.sql import functions as F
"""
TARGET = 'dp.create_streaming_table(name="current")\n'


def auto_cdc(arguments: str) -> dict[str, str]:
    """`current`: an AUTO CDC flow over `changes`, with `arguments` after target and source."""
    return {"changes": CHANGES, "current": HEADER + TARGET + dedent(f"""
        dp.create_auto_cdc_flow(target="current", source="changes", {arguments})
        """)}


def from_snapshot(arguments: str) -> dict[str, str]:
    """`current`: an AUTO CDC FROM SNAPSHOT flow, with `arguments` after its target."""
    return {"current": HEADER + TARGET + dedent(f"""
        def snapshots(latest):
            return None

        dp.create_auto_cdc_from_snapshot_flow(target="current", {arguments})
        """)}


def checked(decorators: str, table: str = '@dp.table(name="checked")') -> dict[str, str]:
    """`checked`: a table over `changes` with expectation `decorators` below `table`."""
    return {"changes": CHANGES, "checked": HEADER + f"""
{table}
{decorators}
def checked():
    return spark.readStream.table("changes")
"""}


def properties(table_properties: dict[str, str]) -> dict[str, str]:
    return {"changes": CHANGES, "current": HEADER + dedent(f"""
        dp.create_streaming_table(name="current", table_properties={table_properties!r})
        dp.create_auto_cdc_flow(target="current", source="changes", keys=["id"],
                                sequence_by="ts")
        """)}


# (pipeline files, the file the line names, the dataset, what is wrong)
CASES = {
    # -- create_auto_cdc_flow ----------------------------------------------------------------------
    "an SCD type of no kind": (
        auto_cdc('keys=["id"], sequence_by="ts", stored_as_scd_type=3'), "current", "current",
        "create_auto_cdc_flow: stored_as_scd_type must be 1 or 2, got 3"),
    "no key": (
        auto_cdc('keys=[], sequence_by="ts"'), "current", "current",
        "create_auto_cdc_flow needs at least one key"),
    "a key that is an expression": (
        auto_cdc('keys=[F.col("id") + 1], sequence_by="ts"'), "current", "current",
        "create_auto_cdc_flow: keys takes column names, got the expression +(id, 1)"),
    "column_list and except_column_list": (
        auto_cdc('keys=["id"], sequence_by="ts", column_list=["id"], except_column_list=["ts"]'),
        "current", "current",
        "create_auto_cdc_flow: give column_list or except_column_list, not both"),
    "truncates in SCD2": (
        auto_cdc('keys=["id"], sequence_by="ts", stored_as_scd_type=2, '
                 'apply_as_truncates="name = \'t\'"'), "current", "current",
        "create_auto_cdc_flow: apply_as_truncates is supported for SCD type 1 only"),
    "history columns in SCD1": (
        auto_cdc('keys=["id"], sequence_by="ts", track_history_column_list=["name"]'),
        "current", "current",
        "create_auto_cdc_flow: track_history_column_list / track_history_except_column_list "
        "need stored_as_scd_type=2"),
    "both history lists": (
        auto_cdc('keys=["id"], sequence_by="ts", stored_as_scd_type=2, '
                 'track_history_column_list=["name"], track_history_except_column_list=["ts"]'),
        "current", "current",
        "create_auto_cdc_flow: give track_history_column_list or "
        "track_history_except_column_list, not both"),
    "a sequence that does not parse": (
        auto_cdc('keys=["id"], sequence_by="ts +"'), "current", "current",
        "AUTO CDC flow `current`: sequence_by does not analyze against `changes`: "
        "[PARSE_SYNTAX_ERROR] Syntax error at or near end of input. SQLSTATE: 42601 "
        "(line 1, pos 4)"),
    # -- create_auto_cdc_from_snapshot_flow ------------------------------------------------------
    "a snapshot source of no kind": (
        from_snapshot('source=42, keys=["id"]'), "current", "current",
        "create_auto_cdc_from_snapshot_flow: source must be the name of a table or view, or a "
        "function next_snapshot_and_version(latest_version); got 42"),
    "a snapshot flow with no key": (
        from_snapshot('source=snapshots, keys=[]'), "current", "current",
        "create_auto_cdc_from_snapshot_flow needs at least one key"),
    "a snapshot flow of SCD type 3": (
        from_snapshot('source=snapshots, keys=["id"], stored_as_scd_type="3"'), "current",
        "current", "create_auto_cdc_from_snapshot_flow: stored_as_scd_type must be 1 or 2, "
        "got '3'"),
    # -- expectations ----------------------------------------------------------------------------
    "expect_all without a dict": (
        checked('@dp.expect_all("id >= 0")'), "checked", "checked",
        "expect_all* takes a dict of name -> SQL constraint"),
    "an expectation above @dp.table": (
        checked('', table='@dp.expect("positive", "id >= 0")\n@dp.table(name="checked")'),
        "checked", "checked",
        "expectation decorators go below @dp.table / @dp.materialized_view / @dp.append_flow, "
        "on the function"),
    "an expectation name twice": (
        checked('@dp.expect("positive", "id >= 0")\n@dp.expect_or_drop("positive", "id < 9")'),
        "checked", "checked",
        "dataset `checked` declares an expectation name twice: ['positive', 'positive']"),
    # -- table properties ------------------------------------------------------------------------
    "a reset flag that is not a boolean": (
        properties({"pipelines.reset.allowed": "no"}), "current", "current",
        "table_properties: pipelines.reset.allowed must be true or false, got 'no'"),
    "a tombstone threshold that is not a number": (
        properties({"pipelines.cdc.tombstoneGCThresholdInSeconds": "2 days"}), "current",
        "current", "table_properties: pipelines.cdc.tombstoneGCThresholdInSeconds must be a "
        "number of seconds, 0 or more, got '2 days'"),
    "a negative tombstone threshold": (
        properties({"pipelines.cdc.tombstoneGCThresholdInSeconds": "-1"}), "current",
        "current", "table_properties: pipelines.cdc.tombstoneGCThresholdInSeconds must be a "
        "number of seconds, 0 or more, got '-1'"),
    # -- the graph -------------------------------------------------------------------------------
    "a dataset declared twice": (
        {"changes": CHANGES, "copy": CHANGES}, "copy", "changes",
        "dataset `changes` is defined twice"),
    "a flow into an undeclared dataset": (
        {"stray": HEADER + dedent("""
            @dp.append_flow(target="nowhere")
            def stray():
                return spark.readStream.format("rate").load()
            """)}, "stray", "nowhere", "flow `stray` writes to `nowhere`, which no file declares"),
    "an AUTO CDC source the pipeline lacks": (
        auto_cdc('keys=["id"], sequence_by="ts"') | {"changes": CHANGES.replace('"changes"',
                                                                                '"changed"')},
        "current", "current",
        "AUTO CDC flow `current` reads `changes`, which the pipeline does not define"),
    "an AUTO CDC flow into a materialized view": (
        {"changes": CHANGES, "current": HEADER + dedent("""
            @dp.materialized_view(name="current")
            def current():
                return spark.range(1)

            dp.create_auto_cdc_flow(target="current", source="changes", keys=["id"],
                                    sequence_by="ts", name="cdc")
            """)}, "current", "current", "AUTO CDC target `current` must be a streaming table"),
    "a flow into a temporary view": (
        {"changes": CHANGES, "recent": HEADER + dedent("""
            @dp.temporary_view(name="recent")
            def recent():
                return spark.readStream.table("changes")

            @dp.append_flow(target="recent")
            def more():
                return spark.readStream.table("changes")
            """)}, "recent", "recent",
        "temporary view `recent` has no flow but its own query; `more` also write(s) it"),
    "a dataset with no flow": (
        {"lonely": HEADER + 'dp.create_streaming_table(name="lonely")\n'}, "lonely", "lonely",
        "dataset `lonely` has no flow"),
}


def expected(root, file: str, dataset: str, message: str) -> str:
    return f"{root / (file + '.py')}: dataset `{dataset}`: {message}"


@covers(DeclarationError)
@pytest.mark.parametrize("files, file, dataset, message",
                         [pytest.param(*case, id=name) for name, case in CASES.items()])
def test_dry_run_names_the_file_the_dataset_and_the_mistake(in_session, tmp_path, capsys,
                                                            files, file, dataset, message):
    root = pipeline_dir(tmp_path, **files)
    code, errors, _ = dry_run(root, capsys)
    assert (code, errors) == (1, [expected(root, file, dataset, message)])


# -- through `run` -------------------------------------------------------------------------------
def run(root, tmp_path, capsys, monkeypatch) -> tuple[int, str]:
    """`exactly-once run` of the pipeline files in `root` (from a kcat dump: no broker); the
    error line; and no table written."""
    dump = tmp_path / "dump.jsonl"
    dump.write_text(json.dumps({"topic": "orders", "key": "o1", "payload": "{}"}) + "\n")
    warehouse = tmp_path / "warehouse"
    code = cli.main(["run", "--quiet", "--pipelines", str(root), "--source", f"file:{dump}",
                     "--warehouse", str(warehouse)])
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith(ERROR), out + err
    assert list(warehouse.rglob("_delta_log")) == []
    return code, err.removeprefix(ERROR).rstrip("\n")


@pytest.mark.parametrize("case", ["an SCD type of no kind", "a snapshot source of no kind",
                                  "a sequence that does not parse", "a flow into a temporary view",
                                  "an AUTO CDC source the pipeline lacks",
                                  "a tombstone threshold that is not a number",
                                  "an expectation name twice", "a dataset with no flow"])
def test_run_prints_the_same_line_and_writes_no_table(in_session, tmp_path, capsys, monkeypatch,
                                                     case):
    files, file, dataset, message = CASES[case]
    root = pipeline_dir(tmp_path, **files)
    assert run(root, tmp_path, capsys, monkeypatch) == (
        1, expected(root, file, dataset, message))


def test_an_expectation_that_does_not_parse_stops_run_before_any_table(
        in_session, tmp_path, capsys, monkeypatch):
    """`changes` would be written first were the constraint parsed only when `checked` runs."""
    root = pipeline_dir(tmp_path, **checked('@dp.expect("positive", "id >= ")'))
    code, line = run(root, tmp_path, capsys, monkeypatch)
    assert code == 1
    assert line == expected(root, "checked", "checked",
                            "expectation `positive` ('id >= ') does not analyze: "
                            "[PARSE_SYNTAX_ERROR] Syntax error at or near end of input. "
                            "SQLSTATE: 42601 (line 1, pos 6)"), line


@covers(PipelineFileError)
def test_a_file_that_does_not_import_is_one_line_from_run(in_session, tmp_path, capsys,
                                                          monkeypatch):
    root = pipeline_dir(tmp_path, changes=CHANGES, broken="import no_such_module\n")
    assert run(root, tmp_path, capsys, monkeypatch) == (
        1, f"{root / 'broken.py'}: ModuleNotFoundError: No module named 'no_such_module'")
