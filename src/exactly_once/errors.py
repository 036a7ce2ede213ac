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


class WarehouseLockedError(ExactlyOnceError):
    """Another update holds the warehouse."""


class GraphError(ExactlyOnceError):
    """The declared graph is inconsistent (duplicate names, flows into undeclared datasets...)."""


class RefreshError(GraphError):
    """A refresh names a table the pipeline does not have, or one it must not reset."""


class ExpectationError(ExactlyOnceError):
    """An expectation is declared wrongly (not a SQL expression, duplicate name...)."""


class FlowError(ExactlyOnceError, RuntimeError):
    """A flow failed; the message names it."""


class SourceUnavailableError(FlowError):
    """A flow's source, the Kafka broker, stopped answering; the message names the broker."""


class SnapshotError(FlowError):
    """An AUTO CDC FROM SNAPSHOT flow's source broke its contract (versions out of order, a key
    twice in a snapshot, no first snapshot, a return value of the wrong shape); the message
    names the flow."""


class DataLossError(FlowError):
    """Kafka no longer has records the pipeline had not read (retention, a deleted topic); the
    message names the topic, partitions and offsets."""


class InspectError(ExactlyOnceError):
    """A finished warehouse cannot show what was asked of it (`show`, `events`, `explain`): no
    warehouse, table, event log, update, flow, key or event of that name; the message names what
    is there."""


# -- quality tooling -----------------------------------------------------------------------------
class QualityError(ExactlyOnceError):
    """Validation or the dashboard could not run (missing table...); the message says why."""
