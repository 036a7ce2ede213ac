"""File discovery: `read_files` and Auto Loader find every file under the directory they are
given, its subdirectories included; a glob limits them to the directories it matches, and what
is under them (the page's strict-globber table: `/a/*/c/` finds `/a/b/c/d/file.txt`).

Pages:
- read_files, "File discovery": "read_files discovers all files under the provided directory
  recursively unless a glob is provided":
  https://docs.databricks.com/aws/en/sql/language-manual/functions/read_files
- Auto Loader (`cloudFiles`): https://docs.databricks.com/aws/en/ingestion/cloud-object-storage/auto-loader/
"""

from __future__ import annotations

from docs_corpus import dp_file, json_files, pipeline, rows, run

READ_FILES = "https://docs.databricks.com/aws/en/sql/language-manual/functions/read_files"


def test_read_files_and_auto_loader_read_subdirectories(spark, settings, tmp_path):
    """READ_FILES: a file at the top, one a level down, one two levels down: all three, in a
    batch `read_files`, a `STREAM read_files` and an Auto Loader stream; a glob over the first
    level's directories reads what is under them, at any depth, and not the top file."""
    data = tmp_path / "landing"
    json_files(data, a=[{"id": 1}])
    json_files(data / "2026-11-27", b=[{"id": 2}])
    json_files(data / "2026-11-27" / "late", c=[{"id": 3}])
    sql = f"""
        CREATE OR REFRESH MATERIALIZED VIEW batch_read AS
        SELECT id FROM read_files('{data}', format => 'json');

        CREATE OR REFRESH STREAMING TABLE stream_read AS
        SELECT id FROM STREAM read_files('{data}', format => 'json');

        CREATE OR REFRESH MATERIALIZED VIEW globbed AS
        SELECT id FROM read_files('{data}/2026-*', format => 'json');
        """
    root = pipeline(tmp_path, loader=dp_file(f'''
        @dp.table
        def auto_loaded():
          return (spark.readStream.format("cloudFiles")
                  .option("cloudFiles.format", "json")
                  .load("{data}")
                  .select("id"))
        '''))
    (root / "files.sql").write_text(sql)
    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse)
    for table in ("batch_read", "stream_read"):  # read_files infers column types
        assert rows(spark, warehouse / table) == [(1,), (2,), (3,)], table
    assert rows(spark, warehouse / "auto_loaded") == [("1",), ("2",), ("3",)]  # as strings
    assert rows(spark, warehouse / "globbed") == [(2,), (3,)]
