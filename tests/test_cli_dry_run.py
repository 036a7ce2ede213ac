"""`exactly-once dry-run` and `exactly-once graph`, in this process's Spark session: each kind of
mistake a pipeline file can make is one line naming its file and dataset, and exit 1."""

from __future__ import annotations

import json
import re
from textwrap import dedent

import pytest

from exactly_once import cli
from exactly_once.paths import PIPELINES_DIR, PROJECT_ROOT
from exactly_once.services.processes import free_port

ERROR = "exactly-once: error: "

# A stream of (id, ts, name) from the rate source: never started by a dry run.
CHANGES = '''
from pyspark import pipelines as dp

@dp.table(name="changes")
def changes():
    return spark.readStream.format("rate").load().selectExpr(
        "value AS id", "timestamp AS ts", "'x' AS name")
'''



def pipeline_dir(tmp_path, **files: str):
    root = tmp_path / "pipelines"
    root.mkdir()
    for name, text in files.items():
        (root / f"{name}.py").write_text(dedent(text))
    return root


def dry_run(root, capsys, *extra: str) -> tuple[int, list[str], str]:
    code = cli.main(["dry-run", "--pipelines", str(root), *extra])
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert all(line.startswith(ERROR) for line in lines), err
    return code, [line.removeprefix(ERROR) for line in lines], out


def test_the_project_s_pipeline_passes_reading_nothing(in_session, capsys):
    # A broker nobody listens on: declaring the Kafka source reads nothing.
    code, errors, out = dry_run(PIPELINES_DIR, capsys, "--set",
                                f"kafka.bootstrap_servers=127.0.0.1:{free_port()}")
    assert (code, errors) == (0, []), errors
    assert "12 pipeline files, 16 datasets, 17 flows; no problems" in out
    assert "materialized view  player_xp" in out and "AUTO CDC SCD2" in out
    assert "flow quarantine_player_rewards append             reads parsed_player_rewards" in out


def test_a_file_that_does_not_import(in_session, tmp_path, capsys):
    root = pipeline_dir(tmp_path, changes=CHANGES, broken="import no_such_module\n")
    code, errors, _ = dry_run(root, capsys)
    assert code == 1
    assert errors == [f"{root / 'broken.py'}: ModuleNotFoundError: No module named "
                      "'no_such_module'"]


def test_a_read_of_a_dataset_nobody_defines(in_session, tmp_path, capsys):
    root = pipeline_dir(tmp_path, changes=CHANGES, reader='''
        from pyspark import pipelines as dp

        @dp.table(name="reader")
        def reader():
            return spark.readStream.table("no_such_dataset")
        ''')
    code, errors, _ = dry_run(root, capsys)
    assert code == 1
    assert len(errors) == 1 and errors[0].startswith(
        f"{root / 'reader.py'}: dataset `reader`: reads table `no_such_dataset` "
        "(main.exactly_once_root.no_such_dataset), which the pipeline does not define (its "
        "datasets: changes, reader) and the local catalog does not hold: supply it as "), errors


def test_datasets_that_read_each_other(in_session, tmp_path, capsys):
    root = pipeline_dir(tmp_path, loop='''
        from pyspark import pipelines as dp

        @dp.table(name="a")
        def a():
            return spark.readStream.table("b")

        @dp.table(name="b")
        def b():
            return spark.readStream.table("a")
        ''')
    code, errors, _ = dry_run(root, capsys)
    assert code == 1
    assert errors == [f"{root / 'loop.py'}: dataset `a`: datasets read each other in a cycle: "
                      "a -> b -> a"]


def test_an_unknown_column_and_a_type_error(in_session, tmp_path, capsys):
    root = pipeline_dir(tmp_path, changes=CHANGES, typo='''
        from pyspark import pipelines as dp

        @dp.table(name="typo")
        def typo():
            return spark.readStream.table("changes").select("nmae")
        ''', types='''
        from pyspark import pipelines as dp
        from pyspark.sql import functions as F

        @dp.materialized_view(name="types")
        def types():
            return spark.read.table("changes").select(F.array_contains("name", "x"))
        ''')
    code, errors, _ = dry_run(root, capsys)
    assert code == 1 and len(errors) == 2, errors
    types, typo = errors  # in the files' order
    assert typo.startswith(f"{root / 'typo.py'}: dataset `typo`: [UNRESOLVED_COLUMN.")
    assert "`nmae`" in typo and "`name`" in typo  # Spark's suggestion
    assert types.startswith(f"{root / 'types.py'}: dataset `types`: [DATATYPE_MISMATCH.")


@pytest.mark.parametrize("constraint, problem", [
    ("id >= ", "does not analyze: [PARSE_SYNTAX_ERROR]"),
    ("idd >= 0", "does not analyze: [UNRESOLVED_COLUMN."),
    ("id >>> 1", "is not a condition: its type is bigint"),  # >>>: a shift, not a comparison
])
def test_an_expectation_that_is_not_a_condition(in_session, tmp_path, capsys, constraint,
                                                problem):
    root = pipeline_dir(tmp_path, changes=CHANGES, checked=f'''
        from pyspark import pipelines as dp

        @dp.table(name="checked")
        @dp.expect("positive", "{constraint}")
        def checked():
            return spark.readStream.table("changes")
        ''')
    code, errors, _ = dry_run(root, capsys)
    assert code == 1
    (error,) = errors
    assert error.startswith(f"{root / 'checked.py'}: dataset `checked`: expectation `positive` "
                            f"({constraint!r}) {problem}"), error


@pytest.mark.parametrize("argument, problem", [
    ('keys=["order_id"]', "keys names `order_id`, not in `changes` (its columns: id, ts, name)"),
    ('keys=["id"], column_list=["id", "nmae"]',
     "column_list names `nmae`, not in `changes` (its columns: id, ts, name)"),
    ('keys=["id"], except_column_list=["nmae"]', "except_column_list names `nmae`, not in"),
    ('keys=["id"], stored_as_scd_type=2, track_history_column_list=["nmae"]',
     "track_history_column_list names `nmae`, not in"),
])
def test_auto_cdc_columns_not_in_the_source(in_session, tmp_path, capsys, argument, problem):
    root = pipeline_dir(tmp_path, changes=CHANGES, current=f'''
        from pyspark import pipelines as dp

        dp.create_streaming_table(name="current")
        dp.create_auto_cdc_flow(target="current", source="changes", sequence_by="ts",
                                {argument})
        ''')
    code, errors, _ = dry_run(root, capsys)
    assert code == 1
    (error,) = errors
    assert error.startswith(f"{root / 'current.py'}: dataset `current`: AUTO CDC flow `current`: "
                            + problem), error


def test_an_auto_cdc_sequence_not_in_the_source(in_session, tmp_path, capsys):
    root = pipeline_dir(tmp_path, changes=CHANGES, current='''
        from pyspark import pipelines as dp
        from pyspark.sql import functions as F

        dp.create_streaming_table(name="current")
        dp.create_auto_cdc_flow(target="current", source="changes", keys=["id"],
                                sequence_by=F.struct("version", "ts"))
        ''')
    code, errors, _ = dry_run(root, capsys)
    assert code == 1
    (error,) = errors
    assert error.startswith(f"{root / 'current.py'}: dataset `current`: AUTO CDC flow `current`: "
                            "sequence_by does not analyze against `changes`: "
                            "[UNRESOLVED_COLUMN."), error


def test_an_invalid_setting(in_session, tmp_path, capsys):
    root = pipeline_dir(tmp_path, changes=CHANGES)
    code, errors, _ = dry_run(root, capsys, "--set", "kafka.isolation_level=dirty")
    assert code == 1
    (error,) = errors
    assert "kafka.isolation_level" in error and "dirty" in error, error


def test_every_problem_is_reported_not_only_the_first(in_session, tmp_path, capsys):
    root = pipeline_dir(tmp_path, changes=CHANGES, broken="raise ValueError('nope')\n",
                        typo='''
        from pyspark import pipelines as dp

        @dp.table(name="typo")
        def typo():
            return spark.readStream.table("changes").select("nmae")

        @dp.table(name="downstream")
        def downstream():
            return spark.readStream.table("typo")
        ''')
    code, errors, out = dry_run(root, capsys)
    assert code == 1 and "2 problem(s)" in out
    # `downstream` is not analyzed: its problem is upstream, already reported.
    assert [e.split(": ")[0:2] for e in errors] == [
        [str(root / "broken.py"), "ValueError"], [str(root / "typo.py"), "dataset `typo`"]]


def test_no_pipeline_files(in_session, tmp_path, capsys):
    assert cli.main(["dry-run", "--pipelines", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"{ERROR}no pipeline files (*.py, *.sql) in {tmp_path}\n"


# -- graph -------------------------------------------------------------------------------------
def test_graph_of_the_project_as_json(in_session, capsys):
    assert cli.main(["graph", "--format", "json"]) == 0
    graph = json.loads(capsys.readouterr().out)
    kinds = {d["name"]: d["kind"] for d in graph["datasets"]}
    assert kinds["bronze_kafka_events"] == "streaming table"
    assert kinds["player_xp"] == "materialized view"
    assert kinds["checked_orders"] == "temporary view"
    flows = {f["name"]: f for f in graph["flows"]}
    assert flows["orders"]["kind"] == "AUTO CDC SCD1"
    assert flows["orders_history"]["kind"] == "AUTO CDC SCD2"
    assert flows["player_xp"]["kind"] == "materialized view"
    assert flows["silver_orders"]["kind"] == "append"
    assert flows["bronze_kafka_events"]["reads"] == []
    assert flows["player_xp"]["reads"] == [{"dataset": "player_xp_ledger", "streaming": False}]
    # A view's reads are the view's, not its reader's.
    assert flows["silver_orders"]["reads"] == [{"dataset": "checked_orders", "streaming": True}]
    assert flows["checked_orders"]["reads"] == [{"dataset": "parsed_orders", "streaming": True}]
    assert flows["quarantine_orders"]["target"] == "quarantine"
    # Reference data from the daily players export: its function, not a dataset, is the source.
    assert (flows["players_history"]["kind"], flows["players_history"]["reads"],
            flows["players_history"]["source"]) == (
        "AUTO CDC FROM SNAPSHOT SCD2", [], "next_players_export()")


def test_graph_as_mermaid_and_dot(in_session, tmp_path, capsys):
    root = pipeline_dir(tmp_path, changes=CHANGES, totals='''
        from pyspark import pipelines as dp

        @dp.materialized_view(name="totals")
        def totals():
            return spark.read.table("changes").groupBy("name").count()
        ''')
    assert cli.main(["graph", "--pipelines", str(root)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "flowchart LR",
        '  changes["changes<br/><i>streaming table</i>"]',
        '  totals[["totals<br/><i>materialized view</i>"]]',
        "  changes_source((source)) -->|append| changes",
        "  changes -.->|materialized view| totals",
    ]
    assert cli.main(["graph", "--pipelines", str(root), "--format", "dot"]) == 0
    assert '"changes" -> "totals" [label="totals: materialized view", style=dashed];' in \
        capsys.readouterr().out


def test_the_project_graph_the_docs_show_is_what_graph_prints(in_session, capsys):
    """docs/pipeline.md shows the project's graph as `exactly-once graph` prints it."""
    page = (PROJECT_ROOT / "docs" / "pipeline.md").read_text()
    shown = re.search(r"^```mermaid\n(.*?)^```", page, re.S | re.M)
    assert shown, "docs/pipeline.md has no mermaid graph"
    assert cli.main(["graph"]) == 0
    assert capsys.readouterr().out == shown.group(1)


def test_graph_of_a_broken_pipeline_is_its_problems(in_session, tmp_path, capsys):
    root = pipeline_dir(tmp_path, broken="import no_such_module\n")
    assert cli.main(["graph", "--pipelines", str(root)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"{ERROR}{root / 'broken.py'}: ModuleNotFoundError")
