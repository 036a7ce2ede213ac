"""The contract evolves (issue 52): a field added to `topics.<topic>.schema` takes effect on the
next update, with no full refresh and no checkpoint reset (docs/contract-changes.md).

Each test runs the real pipeline through the CLI (`exactly-once run`, in this process's Spark
session) on kcat dumps, the contract changed for one run with `--set`, and compares every table
with the reference model (tests/reference.py) extended by the new field.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import time
from decimal import Decimal
from pathlib import Path

import pytest
from crash_points import kill_at
from events import ORDERS, REWARDS, Clock, Event, as_logged, grant, kafka_records, order
from pyspark.sql import functions as F
from reference import (
    ORDER_RULES,
    Contract,
    Delivered,
    Extra,
    current_orders,
    distinct_order_events,
    order_history,
    quarantined_offsets,
    rank_of,
    xp_ledger,
)

from exactly_once import cli
from exactly_once.kafka.admin import ensure_topics
from exactly_once.kafka.kcat import write_kcat_jsonl
from exactly_once.kafka.producer import produce_records
from exactly_once.local.auto_cdc.changes import IS_DELETE, SEQUENCE, tie_break
from exactly_once.local.inspect import event_view
from exactly_once.local.storage import delta_log, schema_evolution
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.settings.pipeline import OCCURRED_AT_IN_FUTURE, load_settings

TOPICS = {ORDERS: "order_id", REWARDS: "player_id"}
SCHEMA = load_settings("local").topic("orders").schema  # conf/base.yml's contract
WITH_COUPON = f"{SCHEMA}, coupon STRING"
COUPON = {"coupon": str}  # the model's view of the new field: a string, or absent
CLOCK = Clock.ago(hours=1)
EVENT_TABLES = ("parsed_orders", "silver_orders", "orders", "orders_history")


def coupon_order(event_id: str, order_id: str, sequence: int, coupon: object = None,
                 **fields) -> dict:
    """An `orders` event of the evolved contract: `coupon` last, when given."""
    payload = order(event_id, order_id, sequence, occurred_at=CLOCK.at(sequence), **fields)
    return payload | ({} if coupon is None else {"coupon": coupon})


class Stream:
    """A log sent run by run, each run followed by one update through the CLI (in this
    process's Spark session): as kcat dumps into an inbox the file source reads, or, given a
    broker, to topics of the stream's own on it."""

    def __init__(self, root: Path, bootstrap: str | None = None):
        self.inbox, self.warehouse = root / "inbox", root / "warehouse"
        self.inbox.mkdir(parents=True)
        self.runs: list[list[Event]] = []
        self.bootstrap = bootstrap
        self.topics = {ORDERS: f"orders-{root.name}", REWARDS: f"rewards-{root.name}"}
        if bootstrap:  # one partition each: the offsets the model gives them
            ensure_topics(bootstrap, dict.fromkeys(self.topics.values(), 1))

    @property
    def delivered(self) -> list[Delivered]:
        return [d for run in as_logged(self.runs, CLOCK.start) for d in run]

    def run(self, events: list[Event], *options: str) -> tuple[int, str]:
        """Send `events` and run one update; the command's exit code and its last line on
        stderr."""
        self.send(events)
        return self.command("run", "--quiet", *options)

    def send(self, events: list[Event]) -> None:
        """`events` as one more run of the log."""
        self.runs.append(events)
        logged = as_logged(self.runs, CLOCK.start)[-1]
        if self.bootstrap:
            produce_records(self.bootstrap, kafka_records(logged, self.topics))
        else:
            write_kcat_jsonl(self.inbox / f"{len(self.runs)}.jsonl", kafka_records(logged))

    def arguments(self, command: str, *options: str) -> list[str]:
        """The command line of `command` over this stream's source and warehouse."""
        source = [f"file:{self.inbox}"] if not self.bootstrap else [
            "kafka", "--bootstrap-servers", self.bootstrap,
            "--set", f"topics.orders.topic={self.topics[ORDERS]}",
            "--set", f"topics.player_rewards.topic={self.topics[REWARDS]}"]
        return [command, "--source", *source, "--warehouse", str(self.warehouse), *options]

    def command(self, command: str, *options: str) -> tuple[int, str]:
        """Run `command` in this process (its Spark session is the test's: cli_in_session);
        its exit code and its last line on stderr."""
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(self.arguments(command, *options))
        lines = err.getvalue().strip().splitlines()
        return code, lines[-1] if lines else ""

    def fork(self, root: Path) -> Stream:
        """The same log and inbox, and a copy of the warehouse as it is now."""
        copy = Stream.__new__(Stream)
        copy.inbox, copy.warehouse = self.inbox, root / "warehouse"
        copy.runs, copy.bootstrap, copy.topics = list(self.runs), self.bootstrap, self.topics
        shutil.copytree(self.warehouse, copy.warehouse)
        return copy

    def files(self) -> dict[str, int]:
        """Every file of the warehouse and its modification time, but the lock's."""
        return {str(p.relative_to(self.warehouse)): p.stat().st_mtime_ns
                for p in self.warehouse.rglob("*") if p.is_file() and p.name != "lock"}

    def table(self, spark, name: str):
        return read_latest(spark, str(self.warehouse / name))

    def journal(self, spark, target: str = "orders_history"):
        return read_latest(spark, str(self.warehouse / "_pipeline" / "auto_cdc" / target))

    def schema_changes(self, spark, update: int | None = None) -> set[tuple[str, str, str, str]]:
        """(flow, column, change, type) of every schema change in the event log; of the
        `update`-th update only (0 the first), when given."""
        log = self.table(spark, "event_log").where("event_type = 'flow_progress'")
        if update is not None:
            updates = [r.update_id for r in log.groupBy("origin.update_id").agg(
                F.min("sequence.control_plane_seq_no").alias("first")).orderBy("first")
                .collect()]
            log = log.where(F.col("origin.update_id") == updates[update])
        rows = log.select("origin.flow_name", "details.flow_progress.schema_changes").collect()
        return {(r.flow_name, c.column, c.change, c.data_type)
                for r in rows for c in r.schema_changes or []}


def order_values(row) -> tuple:
    return (row["event_id"], row["sequence"], row["status"], row["amount"],
            row.asDict().get("coupon"))


def event_values(event: dict) -> tuple:
    return (event["event_id"], event["sequence"], event["status"],
            Decimal(event["amount"]).quantize(Decimal("0.01")), event.get("coupon"))


@contextlib.contextmanager
def cli_in_session(spark):
    """The CLI's commands in `spark` (conftest's `in_session`, for a module's fixture)."""
    from exactly_once.local.engine import session

    build, stop = session.build_session, spark.stop
    session.build_session = lambda *args, **kwargs: spark
    spark.stop = lambda: None
    try:
        yield
    finally:
        session.build_session, spark.stop = build, stop


@pytest.fixture(scope="module")
def added_field(spark, tmp_path_factory):
    """One update on conf/base.yml's contract, then the contract gains `coupon STRING` (with
    `--set`, for the updates after it): new events carry it, old ones do not, some break it."""
    stream = Stream(tmp_path_factory.mktemp("added-field"))
    with cli_in_session(spark):
        before = stream.run([Event.of(order("e1", "o1", 1, occurred_at=CLOCK.at(1))),
                             Event.of(order("e2", "o2", 1, occurred_at=CLOCK.at(1))),
                             Event.of(grant("g1", "p1", 5, occurred_at=CLOCK.at(1)))])
        evolved = stream.run([
            Event.of(coupon_order("e3", "o1", 2, "SAVE10")),  # untracked by the history
            Event.of(coupon_order("e4", "o3", 1, "WELCOME")),
            Event.of(coupon_order("e5", "o2", 2, status="shipped")),  # no coupon: NULL
            Event.of(coupon_order("e6", "o4", 1, "KEPT", amount="-1.00"),
                     breaks="non_negative_amount"),  # quarantined: the typed coupon is kept
            Event.of(coupon_order("e7", "o5", 1, 5), breaks="invalid_coupon"),
        ], "--set", f"topics.orders.schema={WITH_COUPON}")
        again = stream.run([Event.of(coupon_order("e8", "o3", 2, "WELCOME", status="shipped"))],
                           "--set", f"topics.orders.schema={WITH_COUPON}")
    return stream, (before, evolved, again)


def test_an_added_field_takes_effect_on_the_next_update(spark, added_field):
    stream, results = added_field
    assert results == ((0, ""), (0, ""), (0, "")), results
    for name in EVENT_TABLES:
        columns = stream.table(spark, name).columns
        assert "coupon" in columns, name
    # Where a table built with the new contract from the start would have it: after `currency`.
    silver = stream.table(spark, "silver_orders").columns
    assert silver[silver.index("currency") + 1] == "coupon"


def test_gold_and_silver_equal_the_model_with_the_new_field(spark, added_field):
    stream, _ = added_field
    delivered = stream.delivered
    assert_gold_is_the_models(spark, stream)
    journal = stream.journal(spark).select("order_id", F.col(SEQUENCE).alias("s"), "coupon")
    assert sorted((r["order_id"], rank_of(r["s"])) for r in journal.collect()) == \
        distinct_order_events(delivered, ORDERS, COUPON)
    silver = {r["event_id"]: r["coupon"] for r in stream.table(spark, "silver_orders").collect()}
    assert silver == {"e1": None, "e2": None, "e3": "SAVE10", "e4": "WELCOME", "e5": None,
                      "e8": "WELCOME"}, "rows written before the field hold NULL"


def test_quarantine_holds_the_typed_field(spark, added_field):
    stream, _ = added_field
    rows = stream.table(spark, "quarantine").collect()
    assert sorted((r["kafka_topic"], r["kafka_partition"], r["kafka_offset"]) for r in rows) == \
        quarantined_offsets(stream.delivered, TOPICS, {ORDERS: COUPON})
    by_event = {json.loads(r["value"])["event_id"]: r for r in rows}
    assert by_event["e6"]["orders_fields"]["coupon"] == "KEPT"
    assert by_event["e6"]["errors"] == ["non_negative_amount"]
    assert by_event["e7"]["orders_fields"]["coupon"] is None  # 5 is no string
    assert by_event["e7"]["errors"] == ["invalid_coupon"]


def test_the_event_log_records_the_schema_change_once(spark, added_field):
    stream, _ = added_field
    assert stream.schema_changes(spark, update=1) == {
        *((flow, "coupon", "added", "string") for flow in EVENT_TABLES),
        ("quarantine_orders", "orders_fields.coupon", "added", "string")}
    assert stream.schema_changes(spark, update=2) == set(), "the next update changes nothing"
    update = event_view.updates(spark, Warehouse(stream.warehouse))[1]  # newest first
    (line,) = event_view.event_lines(spark, Warehouse(stream.warehouse), update, "orders")[:1]
    assert "COMPLETED" in line and "schema: `coupon` STRING added" in line, line


def assert_gold_is_the_models(spark, stream: Stream, contract: Extra = COUPON) -> None:
    """`orders` and `orders_history` are the model's of the whole log under `contract`."""
    delivered = stream.delivered
    assert {r["order_id"]: order_values(r) for r in stream.table(spark, "orders").collect()} == {
        key: event_values(e) for key, e in current_orders(delivered, ORDERS, contract).items()}
    history = stream.table(spark, "orders_history").collect()
    assert sorted((r["order_id"], rank_of(r["__START_AT"]), rank_of(r["__END_AT"]),
                   *order_values(r)) for r in history) == sorted(
        (v.order_id, v.start, v.end, *event_values(v.event))
        for v in order_history(delivered, ORDERS, extra=contract))


@pytest.mark.kafka
def test_a_field_that_appears_between_two_micro_batches_of_an_update(spark, kafka_broker,
                                                                     tmp_path, monkeypatch):
    """Through a real broker, two offsets per micro-batch: the update that first knows
    `coupon` parses records without it, then records with it; downstream, silver reads rows
    parsed before the column existed (by an update that refreshed only bronze and the parse)
    and rows parsed after it in one stream.

    Each table's schema change is made slow, so the queries downstream of it are built against
    it before it changes (their threads race its update; this decides the race): silver's
    fails to build (it selects `coupon`, which parsed_orders does not have yet), gold's builds
    against silver's old columns; both are built again once their upstream has evolved."""
    evolve = schema_evolution.evolve

    def slow_evolve(*args, **kwargs):
        time.sleep(1.5)
        return evolve(*args, **kwargs)

    monkeypatch.setattr(schema_evolution, "evolve", slow_evolve)
    stream = Stream(tmp_path, kafka_broker.bootstrap)
    small = ("--set", "kafka.max_offsets_per_trigger=2")
    with cli_in_session(spark):
        # Two updates, so each checkpoint is past its first batch (whose queries wait for
        # their upstream instead: update.py).
        assert stream.run([Event.of(order("e1", "o1", 1, occurred_at=CLOCK.at(1))),
                           Event.of(order("e2", "o2", 1, occurred_at=CLOCK.at(1)))]) == (0, "")
        assert stream.run([Event.of(coupon_order("e3", "o1", 2, status="shipped"))]) == (0, "")
        assert stream.run([Event.of(coupon_order("e4", "o2", 2))],
                          "--refresh", "bronze_kafka_events,parsed_orders") == (0, "")
        assert stream.run([  # bronze's first micro-batch: no coupon; its second: coupons
            Event.of(coupon_order("e5", "o4", 1)), Event.of(coupon_order("e6", "o5", 1)),
            Event.of(coupon_order("e7", "o1", 3, "SAVE10", status="shipped")),
            Event.of(coupon_order("e8", "o3", 1, "WELCOME")),
        ], *small, "--set", f"topics.orders.schema={WITH_COUPON}") == (0, "")
    log = stream.table(spark, "event_log").where(
        "event_type = 'flow_progress' AND origin.flow_name = 'bronze_kafka_events'")
    batches = [r.n for r in log.orderBy("sequence.control_plane_seq_no").select(
        F.col("details.flow_progress.metrics.num_batches").alias("n")).collect()]
    assert batches[-1] == 2, batches
    parsed = {r["event_id"]: r["coupon"] for r in stream.table(spark, "parsed_orders").collect()}
    assert parsed == {"e1": None, "e2": None, "e3": None, "e4": None, "e5": None, "e6": None,
                      "e7": "SAVE10", "e8": "WELCOME"}
    silver = {r["event_id"]: r["coupon"] for r in stream.table(spark, "silver_orders").collect()}
    assert silver == parsed
    assert_gold_is_the_models(spark, stream)


def test_a_crash_in_the_update_that_first_writes_the_new_column(spark, tmp_path):
    """SIGKILL the update that first knows `coupon` after it evolved the SCD2 journal of
    `orders_history` and before it evolved the target (parsed and silver already hold the new
    column and rows): the next update evolves the target and ends with the model's tables."""
    stream = Stream(tmp_path)
    with cli_in_session(spark):
        assert stream.run([Event.of(order("e1", "o1", 1, occurred_at=CLOCK.at(1))),
                           Event.of(order("e2", "o2", 1, occurred_at=CLOCK.at(1)))]) == (0, "")
    stream.send([Event.of(coupon_order("e3", "o1", 2, "SAVE10")),
                 Event.of(coupon_order("e4", "o2", 2, status="shipped")),
                 Event.of(coupon_order("e5", "o3", 1, "WELCOME"))])
    evolve = ("--set", f"topics.orders.schema={WITH_COUPON}")
    journal = stream.warehouse / "_pipeline" / "auto_cdc" / "orders_history"
    evolved = journal / "_delta_log" / f"{delta_log.latest_version(journal) + 1:020d}.json"
    kill_at(stream.arguments("run", "--quiet", *evolve), evolved, "journal-evolved", tmp_path)
    assert "coupon" in delta_log.column_names(journal)
    assert "coupon" not in delta_log.column_names(stream.warehouse / "orders_history")
    with cli_in_session(spark):
        assert stream.command("run", "--quiet", *evolve) == (0, "")
    assert_gold_is_the_models(spark, stream)
    assert {r["event_id"]: r["coupon"] for r in stream.journal(spark).collect()} == {
        "e1": None, "e2": None, "e3": "SAVE10", "e4": None, "e5": "WELCOME"}


def test_a_column_null_in_every_earlier_event_changes_no_tie(spark):
    """AUTO CDC breaks equal sequences by a hash of the event's content (docs/auto_cdc.md,
    "Ties"): the hash leaves NULL columns out, so an event from before the field existed
    hashes, and wins or loses a tie, as it would had the contract had the field all along."""
    events = spark.createDataFrame([("e1", "paid", None), ("e2", "paid", "SAVE10")],
                                   "event_id STRING, status STRING, coupon STRING") \
        .withColumn(IS_DELETE, F.lit(False))
    ties = events.select("event_id", tie_break(["event_id", "status"]).alias("before"),
                         tie_break(["event_id", "status", "coupon"]).alias("after")).collect()
    assert [r.before == r.after for r in ties] == [True, False]


REFUSED = "exactly-once: error: the tables cannot take this change of the pipeline, nothing " \
    "was written: "


def test_an_incompatible_change_is_refused_before_anything_moves(spark, added_field, tmp_path):
    """A type changed, a key changed: `run` and `dry-run` refuse it in one line naming the
    change, the tables it breaks and the command that rebuilds them; the warehouse is left
    exactly as it was."""
    stream = added_field[0].fork(tmp_path)
    before = stream.files()
    text_amount = ("--set", "topics.orders.schema=" +
                   WITH_COUPON.replace("amount DECIMAL(18,2)", "amount STRING"))
    other_key = ("--set", f"topics.orders.schema={WITH_COUPON}",
                 "--set", "topics.orders.key=customer_id")
    with cli_in_session(spark):
        run = stream.command("run", "--quiet", *text_amount)
        dry = stream.command("dry-run", *text_amount)
        key = stream.command("run", "--quiet", *other_key)
    assert run == (1, REFUSED + "`amount` DECIMAL(18,2) -> STRING; `orders_fields.amount` "
                   "DECIMAL(18,2) -> STRING; it breaks parsed_orders, quarantine, silver_orders, "
                   "orders, orders_history; rebuild them from bronze with "
                   "`exactly-once rederive parsed_orders`")
    assert dry == run
    assert key == (1, REFUSED + "AUTO CDC flow `orders`'s keys order_id -> customer_id; AUTO "
                   "CDC flow `orders_history`'s keys order_id -> customer_id; it breaks orders, "
                   "orders_history; rebuild them from bronze with "
                   "`exactly-once rederive orders orders_history`")
    assert stream.files() == before, "nothing was written"


def test_rederive_rebuilds_what_a_refused_change_breaks(spark, added_field, tmp_path):
    """`sequence` narrowed to INT: refused; `exactly-once rederive parsed_orders` rebuilds that
    table and every one that reads it from bronze, and gold is the model's again."""
    stream = added_field[0].fork(tmp_path)
    narrowed = ("--set", "topics.orders.schema=" +
                WITH_COUPON.replace("sequence BIGINT", "sequence INT"))
    with cli_in_session(spark):
        refused = stream.command("run", "--quiet", *narrowed)
        rebuilt = stream.command("rederive", "--quiet", "parsed_orders", *narrowed)
        again = stream.run([Event.of(coupon_order("e9", "o2", 3, "LATE"))], *narrowed)
    assert refused[0] == 1 and refused[1].startswith(REFUSED + "`sequence` BIGINT -> INT;")
    assert refused[1].endswith("it breaks parsed_orders, quarantine, silver_orders, orders, "
                               "orders_history; rebuild them from bronze with "
                               "`exactly-once rederive parsed_orders`")
    assert rebuilt == (0, "") and again == (0, "")
    assert dict(stream.table(spark, "silver_orders").dtypes)["sequence"] == "int"
    assert_gold_is_the_models(spark, stream)


def test_a_widened_type_is_widened_in_place(spark, added_field, tmp_path):
    """`amount` DECIMAL(18,2) -> DECIMAL(20,2) and `xp` INT -> BIGINT take effect on the next
    update with Delta's type widening, the protected XP ledger included: no table is rebuilt,
    and values only the wider types hold reach gold."""
    stream = added_field[0].fork(tmp_path)
    rewards = load_settings("local").topic("player_rewards").schema
    wider = ("--set", "topics.orders.schema=" +
             WITH_COUPON.replace("amount DECIMAL(18,2)", "amount DECIMAL(20,2)"),
             "--set", f"topics.player_rewards.schema={rewards.replace('xp INT', 'xp BIGINT')}")
    ledger_id = delta_log.table_id(stream.warehouse / "player_xp_ledger")
    with cli_in_session(spark):
        assert stream.run([
            Event.of(coupon_order("e9", "o2", 3, amount="123456789012345678.50")),
            Event.of(grant("g2", "p1", 3_000_000_000, occurred_at=CLOCK.at(9))),
        ], *wider) == (0, "")
    assert dict(stream.table(spark, "silver_orders").dtypes)["amount"] == "decimal(20,2)"
    assert dict(stream.table(spark, "orders_history").dtypes)["amount"] == "decimal(20,2)"
    assert dict(stream.table(spark, "player_xp_ledger").dtypes)["xp"] == "bigint"
    assert delta_log.table_id(stream.warehouse / "player_xp_ledger") == ledger_id, "not rebuilt"
    assert ("player_xp_ledger", "xp", "widened", "bigint") in stream.schema_changes(spark, 3)
    assert_gold_is_the_models(spark, stream)
    ledger = {r["event_id"]: r["xp"] for r in stream.table(spark, "player_xp_ledger").collect()}
    assert ledger == {e: g["xp"] for e, g in xp_ledger(stream.delivered).items()}
    assert {r["player_id"]: r["total_xp"] for r in stream.table(spark, "player_xp").collect()} \
        == {"p1": 3_000_000_005}


def test_columns_and_fields_whose_names_have_a_dot_or_a_backtick_are_added_and_widened(
        spark, tmp_path):
    """A column named `a.b` is one column, not field b of struct a: the table gains and widens
    what the written schema has, by their whole names, a new struct's fields' too."""
    path = str(tmp_path / "table")
    spark.createDataFrame([(1, 2, (3,))], "id BIGINT, `n.x` INT, `s.t` STRUCT<`f.g`: INT>") \
        .write.format("delta").save(path)
    written = ("id BIGINT, `a.b` STRING, `n.x` BIGINT, "
               "`s.t` STRUCT<`f.g`: INT, `h``i`: STRING>, `u.v` STRUCT<`w.x`: INT>")
    made = schema_evolution.evolve(spark, path, spark.createDataFrame([], written).schema)
    assert [(c.column, c.change) for c in made] == [
        ("a.b", "added"), ("n.x", "widened"), ("s.t.h`i", "added"), ("u.v", "added")]
    assert spark.read.format("delta").load(path).schema.simpleString() == (
        "struct<id:bigint,a.b:string,n.x:bigint,s.t:struct<f.g:int,h`i:string>,"
        "u.v:struct<w.x:int>>")


@pytest.mark.parametrize("source", ["file", pytest.param("kafka", marks=pytest.mark.kafka)])
def test_fields_sent_before_the_contract_knows_them(spark, tmp_path, source, request):
    """Producers deploy first: `coupon` and `bonus` arrive before conf/ names them. Nothing is
    lost: the events enter silver with the fields kept aside (`rescued_fields`), gold goes on.
    The contract then names both; new events carry them at once, and `exactly-once rederive`
    rebuilds from bronze what was derived before, protected XP ledger included: gold is the
    model's of the whole log with the fields known from the start. On the file source and
    through a real broker."""
    bootstrap = request.getfixturevalue("kafka_broker").bootstrap if source == "kafka" else None
    stream = Stream(tmp_path, bootstrap)
    bonus = {"bonus": int}
    rewards = load_settings("local").topic("player_rewards").schema
    known = ("--set", f"topics.orders.schema={WITH_COUPON}",
             "--set", f"topics.player_rewards.schema={rewards}, bonus INT")
    early_grant = grant("g1", "p1", 5, occurred_at=CLOCK.at(1)) | {"bonus": 2}
    with cli_in_session(spark):
        assert stream.run([Event.of(coupon_order("e1", "o1", 1, "EARLY")),
                           Event.of(coupon_order("e2", "o2", 1)),
                           Event.of(early_grant)]) == (0, "")
        silver = {r["event_id"]: r["rescued_fields"]
                  for r in stream.table(spark, "silver_orders").collect()}
        ledger_before = stream.table(spark, "player_xp_ledger").collect()
        assert stream.run([Event.of(coupon_order("e3", "o3", 1, "NEW")),
                           Event.of(grant("g2", "p1", 1, occurred_at=CLOCK.at(2)) | {"bonus": 3})],
                          *known) == (0, "")
        before_rederive = {r["order_id"]: r["coupon"]
                           for r in stream.table(spark, "orders").collect()}
        rebuilt = stream.command("rederive", "--quiet", *known)
    assert silver == {"e1": '{"coupon":"EARLY"}', "e2": None}
    assert [r["event_id"] for r in ledger_before] == ["g1"]
    assert before_rederive == {"o1": None, "o2": None, "o3": "NEW"}
    assert rebuilt == (0, "")
    assert_gold_is_the_models(spark, stream)
    delivered = stream.delivered
    ledger = {r["event_id"]: (r["xp"], r["bonus"])
              for r in stream.table(spark, "player_xp_ledger").collect()}
    assert ledger == {e: (g["xp"], g.get("bonus"))
                      for e, g in xp_ledger(delivered, extra=bonus).items()} == {
        "g1": (5, 2), "g2": (1, 3)}
    assert {r["event_id"]: r["rescued_fields"]
            for r in stream.table(spark, "silver_orders").collect()} == {
        "e1": None, "e2": None, "e3": None}


# A rule of `orders` fixed (a cancelled order's refund is a negative amount) and one added
# (only the currencies the business takes), in conf/ and in the model.
RULES = {name: sql for name, sql in load_settings("local").topic("orders").rules.items()
         if name != OCCURRED_AT_IN_FUTURE}
FIXED_RULES = json.dumps(RULES | {
    "non_negative_amount": "amount IS NULL OR amount >= 0 OR event_type <=> 'order_cancelled'",
    "known_currency": "currency IS NULL OR currency IN ('EUR', 'USD')"})
FIXED = Contract(rules={
    "non_negative_amount": lambda e: ORDER_RULES["non_negative_amount"](e)
    or e.get("event_type") == "order_cancelled",
    "known_currency": lambda e: e.get("currency") in (None, "EUR", "USD")})


@pytest.mark.kafka
def test_a_rule_fixed_or_added_applies_to_new_records_and_rederive_replays_it(
        spark, kafka_broker, tmp_path):
    """Through a real broker: the rules change between two updates. The next update applies
    them to new records only; `exactly-once rederive parsed_orders` replays them over bronze:
    a quarantined refund now passes, a silver order in pounds now fails, and gold and the
    quarantine are the model's of the whole log under the new rules."""
    stream = Stream(tmp_path, kafka_broker.bootstrap)
    fixed = ("--set", f"topics.orders.rules={FIXED_RULES}")
    with cli_in_session(spark):
        assert stream.run([
            Event.of(order("e1", "o1", 1, occurred_at=CLOCK.at(1))),
            Event.of(order("e2", "o2", 1, event_type="order_cancelled", amount="-5.00",
                           occurred_at=CLOCK.at(1)), breaks="non_negative_amount"),
            Event.of(order("e3", "o3", 1, currency="GBP", occurred_at=CLOCK.at(1)))]) == (0, "")
        assert stream.run([
            Event.of(order("e4", "o4", 1, currency="GBP", occurred_at=CLOCK.at(2)),
                     breaks="known_currency"),
            Event.of(order("e5", "o5", 1, event_type="order_cancelled", amount="-1.00",
                           occurred_at=CLOCK.at(2)))], *fixed) == (0, "")
        next_update = sorted(r["order_id"] for r in stream.table(spark, "orders").collect())
        quarantined = {json.loads(r["value"])["event_id"]: r["errors"]
                       for r in stream.table(spark, "quarantine").collect()}
        assert stream.command("rederive", "--quiet", "parsed_orders", *fixed) == (0, "")
        replayed = {json.loads(r["value"])["event_id"]: r["errors"]
                    for r in stream.table(spark, "quarantine").collect()}
    assert next_update == ["o1", "o3", "o5"], "the new rules judge new records only"
    assert quarantined == {"e2": ["non_negative_amount"], "e4": ["known_currency"]}
    assert replayed == {"e3": ["known_currency"], "e4": ["known_currency"]}
    assert sorted(r["event_id"] for r in stream.table(spark, "silver_orders").collect()) == \
        ["e1", "e2", "e5"]
    assert_gold_is_the_models(spark, stream, FIXED)
    assert sorted((r["kafka_partition"], r["kafka_offset"])  # of the stream's own topic
                  for r in stream.table(spark, "quarantine").collect()) == [
        (partition, offset) for _, partition, offset
        in quarantined_offsets(stream.delivered, TOPICS, {ORDERS: FIXED})]
