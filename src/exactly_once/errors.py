"""Every error the project raises on purpose: one base class and a subclass per kind of failure.

A caller that only reports (the CLI) catches `ExactlyOnceError`; a caller that reacts to one
kind catches its subclass. Messages are written for the person running the command: they say
what is wrong and, where there is one, what to do about it.

Two classes also keep the builtin base they had before there was a hierarchy, because callers
catch them by it: `SettingsError` is a `ValueError`, `FlowError` a `RuntimeError`.
"""

from __future__ import annotations


class ExactlyOnceError(Exception):
    """A failure the project expects and explains; never a bug."""


# -- settings and the command line -------------------------------------------------------------
class SettingsError(ExactlyOnceError, ValueError):
    """A setting is missing or malformed; the message names its key."""


class CliError(ExactlyOnceError):
    """A command cannot start: a missing input file, an unreachable broker, no warehouse yet."""


class BundleError(ExactlyOnceError):
    """A Databricks Asset Bundle cannot be read as the Databricks CLI reads it, or asks for
    something with no local meaning the runtime would need (a `lookup` variable, a workspace
    path): no `databricks.yml`, invalid YAML, an unknown target or pipeline key, a `${...}`
    reference that does not resolve or goes round in a cycle, a library path or glob that
    matches nothing, a notebook cell in another language. One line, starting with the file
    (and line, where known) and the key it is about:
    `resources/etl.pipeline.yml:7: resources.pipelines.etl.catalog: reference does not exist:
    ${var.catalog}`."""


# -- Kafka tooling -------------------------------------------------------------------------------
class BrokerError(ExactlyOnceError):
    """The local broker could not be started, reached or configured."""


class ProducerError(ExactlyOnceError):
    """Some records were not delivered."""


class KcatFormatError(ExactlyOnceError):
    """A line of a kcat JSONL file is not a valid record envelope."""


# -- the local runtime ---------------------------------------------------------------------------
class MissingJarsError(ExactlyOnceError):
    """The Spark session's Delta and Kafka jars are not installed."""


class ClusterError(ExactlyOnceError):
    """The Spark standalone cluster could not be started or reached, or lost a daemon."""


class EngineError(ExactlyOnceError):
    """The resident engine could not be started or reached, or cannot run this command."""


class ObjectStoreError(ExactlyOnceError):
    """The warehouse's object store cannot be reached, or cannot do what the runtime needs."""


class FixtureError(ExactlyOnceError):
    """A fixture file (rows for a table or a test) cannot be read as rows: the message names
    the file and what it should hold."""


class CatalogError(ExactlyOnceError):
    """The local catalog cannot do what is asked: a name that is not a table name, a dataset
    published over a table the catalog owns."""


class WarehouseLockedError(ExactlyOnceError):
    """Another update holds the warehouse."""


class DeclarationError(ExactlyOnceError):
    """A pipeline file declares something the runtime cannot run: an AUTO CDC argument, an
    expectation, a table property, a rule of the graph. Raised while the graph loads, before any
    table is written; only a column the declaration names that its source lacks waits for the
    flow's query (before the flow writes).

    `file` is the pipeline file and `dataset` the dataset the declaration is about, each when
    known; the message starts with them, as `dry-run` reports a problem:
    `pipelines/gold_orders.py: dataset `orders`: create_auto_cdc_flow: ...`. The loader names
    the file of an error raised while a file runs (`in_file`).
    """

    def __init__(self, message: str, *, dataset: str | None = None, file: str | None = None):
        self.message, self.dataset, self.file = message, dataset, file
        super().__init__(located(message, file, dataset))

    def in_file(self, file: str | None) -> DeclarationError:
        """This error, naming `file` unless it names one already."""
        if self.file is None and file is not None:
            self.file = file
            self.args = (located(self.message, self.file, self.dataset),)
        return self


class PipelineFileError(DeclarationError):
    """A pipeline file raised an error of its own while it ran (an import that fails, a name it
    lacks...); the message is that error's type and first line."""


class GraphError(DeclarationError):
    """The declared graph is inconsistent (duplicate names, flows into undeclared datasets...)."""


class RefreshError(GraphError):
    """A refresh names a table the pipeline does not have, or one it must not reset."""


class ExpectationError(DeclarationError):
    """An expectation is declared wrongly (not a SQL expression, duplicate name...)."""


class MissingTableError(DeclarationError):
    """A dataset reads a table that the pipeline does not define and the local catalog does not
    hold; the message names the table and the fixture file that would supply it."""


class FlowError(ExactlyOnceError, RuntimeError):
    """A flow failed; the message names it."""


class SchemaEvolvedError(FlowError):
    """An Auto Loader stream met columns its schema lacks: with `addNewColumns` the schema
    location holds them now and the next update reads them, as on Databricks."""


class SourceUnavailableError(FlowError):
    """A flow's source, the Kafka broker, stopped answering; the message names the broker."""


class SnapshotError(FlowError):
    """An AUTO CDC FROM SNAPSHOT flow's source broke its contract (versions out of order, a key
    twice in a snapshot, no first snapshot, a return value of the wrong shape); the message
    names the flow."""


class DataLossError(FlowError):
    """Kafka no longer has records the pipeline had not read (retention, a deleted topic); the
    message names the topic, partitions and offsets."""


class SchemaChangeError(ExactlyOnceError):
    """The pipeline now writes a table in a way the rows it holds cannot follow (a column
    removed, a type narrowed or changed, AUTO CDC keys or sequence changed): found before an
    update writes anything; the message names the tables and the command that rebuilds them."""


class InspectError(ExactlyOnceError):
    """A finished warehouse cannot show what was asked of it (`show`, `events`, `explain`): no
    warehouse, table, event log, update, flow, key or event of that name; the message names what
    is there."""


# -- quality tooling -----------------------------------------------------------------------------
class QualityError(ExactlyOnceError):
    """Validation or the dashboard could not run (missing table...); the message says why."""


def located(message: str, file: str | None = None, dataset: str | None = None) -> str:
    """`message` after the file and dataset it is about: `file: dataset `d`: message`."""
    where = [file] if file else []
    if dataset:
        where.append(f"dataset `{dataset}`")
    return ": ".join([*where, message])


def first_line(err: BaseException) -> str:
    """An error's first line of text (a ParseException's message starts with a newline)."""
    return next((line.strip().removesuffix(";") for line in str(err).splitlines()
                 if line.strip()), type(err).__name__)
