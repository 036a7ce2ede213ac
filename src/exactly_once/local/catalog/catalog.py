"""The local catalog: Unity Catalog's three-level names over Delta tables on this machine.

    <root>/<catalog>/<schema>/<table>/            a table the catalog holds (a Delta table), such
                                                  as one seeded from a fixture file
    <root>/<catalog>/<schema>/<table>/_location   a table a pipeline publishes: where it is
                                                  stored (its warehouse, or its declared path)
    <root>/<catalog>/<schema>/<table>/_fixture.sha256
                                                  the hash of the fixture file it was seeded from
    <root>/_volumes/<catalog>/<schema>/<volume>/  the files of /Volumes/<catalog>/<schema>/<volume>

The directories are the catalog: any process that opens them sees the same tables (the CLI, a
second run, a notebook, a pytest session), and a Delta table keeps its own schema, properties
and comments, so a name and a location are all an entry holds. Spark resolves the names
through the catalog plugin (engine/catalog_plugin.py, engine/jvm/local-catalog/); this module
writes entries.
Why not a metastore: README, "Your own bundle".

Tables the pipeline reads from outside come from the bundle's `fixtures/` folder: a file
`<catalog>.<schema>.<table>.json|csv|parquet` holds the rows the table holds for the next
update (fixtures.py); a changed file is seeded again before the update reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from exactly_once.errors import CatalogError, MissingTableError
from exactly_once.local.catalog import fixtures
from exactly_once.local.catalog.names import Namespace, NameSyntaxError, TableName, split
from exactly_once.local.engine import catalog_plugin
from exactly_once.local.storage.snapshot_files import read_latest

LOCATION_FILE = "_location"  # as engine/jvm/local-catalog reads it
FIXTURE_HASH_FILE = "_fixture.sha256"
VOLUMES_DIR = "_volumes"
VOLUMES_PREFIX = "/Volumes/"


@dataclass(frozen=True)
class LocalCatalog:
    root: Path
    fixtures: Path | None = None  # the bundle's fixtures/ folder
    # Tables whose rows a test gave (testing/harness.py): no fixture file replaces them.
    given: frozenset[TableName] = frozenset()
    # Where fixture tables are seeded once and shared by every catalog that names this folder
    # (a pytest session's tests, each with a catalog of its own): each catalog then holds a
    # pointer to the seeded table, never written through it. None: each catalog its own.
    seeded_in: Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).absolute())

    # -- entries ----------------------------------------------------------------------------
    def entry(self, table: TableName) -> Path:
        return self.root / table.catalog / table.schema / table.name

    def location(self, table: TableName) -> str | None:
        """Where `table` is stored, or None when the catalog has no such table."""
        entry = self.entry(table)
        pointer = entry / LOCATION_FILE
        if pointer.is_file():
            return pointer.read_text().strip()
        return str(entry) if (entry / "_delta_log").is_dir() else None

    def catalogs(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir()
                      if p.is_dir() and not p.name.startswith(("_", ".")))

    def tables(self) -> list[TableName]:
        """Every table of the catalog, in name order."""
        found = []
        for catalog in self.catalogs():
            for schema in sorted(p for p in (self.root / catalog).iterdir() if p.is_dir()):
                for entry in sorted(p for p in schema.iterdir() if p.is_dir()):
                    table = TableName(catalog, schema.name, entry.name)
                    if self.location(table) is not None:
                        found.append(table)
        return found

    def publish(self, table: TableName, location: str) -> None:
        """`table` names the table stored at `location` from now on (a pipeline's dataset)."""
        entry = self.entry(table)
        pointer = entry / LOCATION_FILE
        if pointer.is_file() and pointer.read_text().strip() == location:
            return
        if (entry / "_delta_log").is_dir():
            raise CatalogError(f"{table} is a table of the local catalog ({entry}"
                               f"{self._supplied_by(table)}): a pipeline cannot publish a "
                               f"dataset under its name")
        entry.mkdir(parents=True, exist_ok=True)
        temporary = entry / f".{LOCATION_FILE}.tmp"
        temporary.write_text(location + "\n")
        temporary.replace(pointer)  # atomic: a reader sees the old location or the new

    # -- fixtures ---------------------------------------------------------------------------
    def fixture_files(self) -> dict[TableName, Path]:
        """The fixture files that supply a table: `<catalog>.<schema>.<table>.<ext>`."""
        if self.fixtures is None or not self.fixtures.is_dir():
            return {}
        found: dict[TableName, Path] = {}
        for path in sorted(self.fixtures.iterdir()):
            if path.suffix.lower() not in fixtures.SUFFIXES or not path.is_file():
                continue
            parts = path.stem.split(".")
            if len(parts) == 3 and all(parts):
                table = TableName(*parts)
                if table in found:
                    raise CatalogError(f"{found[table].name} and {path.name} in {self.fixtures} "
                                       f"both supply {table}: keep one")
                found[table] = path
        return found

    def refuse_fixtures_over(self, namespace: Namespace, datasets: Iterable[str]) -> None:
        """A fixture may not supply a table the pipeline publishes (Databricks refuses a table
        of one name from two owners): one line before anything is written."""
        own = set(datasets)
        for table, path in self.fixture_files().items():
            name = namespace.dataset_key(table)
            if name in own:
                raise CatalogError(f"{path} supplies {table}, which the pipeline publishes as "
                                   f"its dataset `{name}`: rename the fixture or the dataset")

    def seed(self, spark: SparkSession) -> list[TableName]:
        """Every fixture table whose file changed since it was seeded, written again (the
        file's rows replace the table's); the tables written."""
        written = []
        for table, path in self.fixture_files().items():
            if table in self.given:
                continue
            entry = self.entry(table)
            stamp = entry / FIXTURE_HASH_FILE
            digest = fixtures.digest(path)
            if stamp.is_file() and stamp.read_text().strip() == digest:
                continue
            if (entry / LOCATION_FILE).is_file() and not stamp.is_file():
                raise CatalogError(f"{path} supplies {table}, which a pipeline publishes as its "
                                   f"own dataset: rename the fixture or the dataset")
            if self.seeded_in is None:
                _write_fixture(spark, path, entry)
            else:
                shared = self.seeded_in / f"{table.file_stem}-{digest[:16]}"
                if not (shared / "_delta_log").is_dir():
                    _write_fixture(spark, path, shared)
                entry.mkdir(parents=True, exist_ok=True)
                (entry / LOCATION_FILE).write_text(f"{shared}\n")
            stamp.write_text(digest + "\n")
            written.append(table)
        return written

    def _supplied_by(self, table: TableName) -> str:
        path = self.fixture_files().get(table)
        return f", from {path}" if path else ""

    # -- Spark --------------------------------------------------------------------------------
    def attach(self, spark: SparkSession, namespace: Namespace | None = None,
               seed: bool = True, datasets: Iterable[str] = ()) -> None:
        """Make the catalog the session's: fixtures seeded (unless `seed` is False: nothing is
        written), each catalog name registered; none may supply one of `datasets`, the tables
        the pipeline publishes in `namespace`."""
        if namespace is not None:
            self.refuse_fixtures_over(namespace, datasets)
        if seed:
            self.root.mkdir(parents=True, exist_ok=True)
            self.seed(spark)
        names = set(self.catalogs()) | {t.catalog for t in self.fixture_files()}
        if namespace is not None:  # its own, and those it publishes datasets to
            names |= {namespace.catalog, *(namespace.table_of(d).catalog for d in datasets)}
        catalog_plugin.register(spark, self.root, sorted(names))

    def read(self, spark: SparkSession, table: TableName, streaming: bool,
             options: Mapping[str, str] | None = None) -> DataFrame | None:
        """`table` as a flow reads it, with its reader's `options`: by its location (a stream of
        a Delta table by path: Delta cannot stream a table a non-session catalog loads by path);
        None when the catalog has no such table. A fixture not seeded yet (dry-run writes
        nothing) is read from its file."""
        location = self.location(table)
        if location is None:
            path = self.fixture_files().get(table)
            if path is None or streaming:
                return None
            return fixtures.read_fixture(spark, path)
        if not streaming and not options:
            # Its latest version as the files its log names (storage/snapshot_files.py): the
            # rows Delta's reader gives, without the Spark jobs that rebuild the state of a
            # table this session has not read at that version (a test's fixture, new each time).
            return read_latest(spark, location)
        reader = spark.readStream if streaming else spark.read
        return reader.format("delta").options(**(options or {})).load(location)

    def schema_of(self, spark: SparkSession, table: TableName) -> StructType | None:
        """`table`'s schema, from its Delta log or its fixture file; None when nothing
        supplies it. Reads no rows."""
        location = self.location(table)
        if location is not None:
            return spark.read.format("delta").load(location).schema
        path = self.fixture_files().get(table)
        return None if path is None else fixtures.read_fixture(spark, path).schema

    def missing(self, text: str, table: TableName, dataset: str | None = None,
                datasets: Iterable[str] = ()) -> MissingTableError:
        """The error of a read of `table` (written `text`) that nothing supplies; `datasets`:
        the pipeline's, which the line lists."""
        where = self.fixtures or Path("fixtures")
        listed = ", ".join(datasets)
        qualified = "" if str(table) == text else f" ({table})"
        return MissingTableError(
            f"reads table `{text}`{qualified}, which the pipeline does not define "
            f"{f'(its datasets: {listed}) ' if listed else ''}and the local catalog does not "
            f"hold: supply it as {where / table.file_stem}.json (an array of row objects), .csv "
            f"(with a header) or .parquet", dataset=dataset)

    # -- volumes ----------------------------------------------------------------------------
    def volume_path(self, path: str) -> str:
        """`/Volumes/<catalog>/<schema>/<volume>/...` as the local directory that holds it; any
        other path as it is. The volume itself exists, as a volume a pipeline names does on
        Databricks (an empty one: a stream of it starts with no files); a folder in it is
        there once something writes it."""
        if not path.startswith(VOLUMES_PREFIX):
            return path
        parts = path[len(VOLUMES_PREFIX):].split("/")
        if len(parts) < 3 or not all(parts[:3]):
            raise CatalogError(f"{path}: a volume path is /Volumes/<catalog>/<schema>/<volume>/...")
        self.root.joinpath(VOLUMES_DIR, *parts[:3]).mkdir(parents=True, exist_ok=True)
        return str(self.root.joinpath(VOLUMES_DIR, *parts))


def _write_fixture(spark: SparkSession, path: Path, table: Path) -> None:
    (fixtures.read_fixture(spark, path).write.format("delta").mode("overwrite")
     .option("overwriteSchema", True).save(str(table)))


def local_path(spark: SparkSession, path: str) -> str:
    """`path` as this session reads it: a `/Volumes/...` path in the local catalog the session
    is attached to (LocalCatalog.volume_path), any other path as it is."""
    if not path.startswith(VOLUMES_PREFIX):
        return path
    root = spark.conf.get(catalog_plugin.ROOT_KEY, None)
    if not root:
        raise CatalogError(f"{path}: a volume path needs the local catalog, which an update "
                           f"attaches; none is attached to this session")
    return LocalCatalog(Path(root)).volume_path(path)


def parse(text: str, namespace: Namespace) -> TableName:
    """The table `text` names in `namespace`; a malformed name is one line."""
    try:
        return namespace.qualify(split(text))
    except NameSyntaxError as err:
        raise CatalogError(str(err)) from None


