"""`exactly-once explain`: every delivery of a key judged from the tables, against the reference
model per delivery (tests/reference_deliveries.py), and the dashboard's search.

ONE pipeline run for the module (two updates, so decisions also cross micro-batches): a
generated stream (kafka/generator.py: redeliveries, late redeliveries, reordering, deletes,
malformed records) plus hand-written keys for the cases the generator lacks (ties, a key only
ever quarantined, an event delivered five times, a delete followed by older deliveries, XP
grants delivered past max_event_age, a redelivery whose bytes differ).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import threading
import urllib.request
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

import pytest
from browser import chromium
from events import ORDERS, REWARDS, Clock, Event, as_logged, grant, kafka_records, order
from pyspark.sql import functions as F
from reference import Delivered
from reference_deliveries import (
    deliveries_of_key,
    grant_verdicts,
    keys,
    order_verdicts,
)

from exactly_once import cli
from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import write_kcat_jsonl
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.inspect import explain_reads
from exactly_once.local.inspect.delivery import KINDS, PENDING
from exactly_once.local.inspect.explain import (
    Explanation,
    explain_event,
    explain_key,
    explain_keys,
    explainable,
)
from exactly_once.local.inspect.explain_reads import GOLD, CurrentStateGold, LedgerGold
from exactly_once.local.inspect.explain_text import as_dict, plain
from exactly_once.settings.pipeline import load_settings

ERROR = "exactly-once: error: "
# Event times near now: an order happens `sequence` seconds after CLOCK.start, a grant 5 seconds
# after it. The broker receives the i-th hand-written delivery at LOG_START + i s.
CLOCK = Clock.ago(hours=2)
LOG_START = CLOCK.start + timedelta(minutes=10)

FIVE = Event.of(order("x-o5-1", "x-o5", 1, event_type="order_created", occurred_at=CLOCK.at(1)))
DEL_2 = Event.of(order("x-od-2", "x-od", 2, status="shipped", occurred_at=CLOCK.at(2)))
TIE_A = Event.of(order("x-ot-2a", "x-ot", 2, status="paid", occurred_at=CLOCK.at(2)))
LATE_ONLY = Event.of(grant("x-pl-1", "x-pl", 100, occurred_at=CLOCK.at(5)), late_by_log=True)
LATE_FIRST = Event.of(grant("x-pl-2", "x-pl", 20, occurred_at=CLOCK.at(5)))
IN_TIME_FIRST = Event.of(grant("x-pl-3", "x-pl", 3, occurred_at=CLOCK.at(5)))
RESPACED = Event.of(grant("x-pl-4", "x-pl", 4, occurred_at=CLOCK.at(5)))
HAND_RUNS = [
    [Event(ORDERS, "x-oq", "not json {"),  # a key only ever quarantined
     Event.of(order("x-oq-1", "x-oq", 1, amount="-1.00", occurred_at=CLOCK.at(1))),
     FIVE, FIVE, FIVE,  # an event delivered five times (twice more in the next update)
     Event.of(order("x-od-1", "x-od", 1, event_type="order_created", occurred_at=CLOCK.at(1))),
     DEL_2,
     Event.of(order("x-od-3", "x-od", 3, event_type="order_deleted", occurred_at=CLOCK.at(3))),
     Event.of(order("x-ox-1", "x-ox", 1, event_type="order_created", occurred_at=CLOCK.at(1))),
     Event.of(order("x-ox-3", "x-ox", 3, event_type="order_deleted", occurred_at=CLOCK.at(3))),
     Event.of(order("x-ot-1", "x-ot", 1, event_type="order_created", occurred_at=CLOCK.at(1))),
     Event.of(order("x-ot-2b", "x-ot", 2, status="shipped",
                    occurred_at=CLOCK.at(2))),  # a tie: the higher event_id wins
     TIE_A,  # ... so this loses, though delivered after it
     Event.of(order("x-or-1", "x-or", 1, event_type="order_created", occurred_at=CLOCK.at(1))),
     Event.of(order("x-or-2", "x-or", 2, event_type="order_deleted", occurred_at=CLOCK.at(2))),
     Event.of(order("x-or-3", "x-or", 3, status="created", event_type="order_created",
                    occurred_at=CLOCK.at(3))),  # re-created
     replace(Event.of(order("x-or-9", "x-or", 9, occurred_at=CLOCK.at(9))),
             key=None),  # no Kafka key: has_key
     LATE_ONLY,  # its only delivery arrives past max_event_age: late_events
     replace(LATE_FIRST, late_by_log=True),  # late first, in time in the next update
     IN_TIME_FIRST,
     RESPACED, Event(REWARDS, "x-pl", RESPACED.payload.replace(", ", ",  ")),  # other bytes
     Event.of(grant("x-pq-1", "x-pq", 0, occurred_at=CLOCK.at(5)))],  # no XP: quarantined
    [FIVE, FIVE,
     Event(ORDERS, "x-od", DEL_2.payload.replace(", ", ",  ")),  # after the delete, other bytes
     Event.of(order("x-od-1", "x-od", 1, event_type="order_created",
                    occurred_at=CLOCK.at(1))),  # exact redelivery after the delete
     Event.of(order("x-ox-2", "x-ox", 2, status="shipped",
                    occurred_at=CLOCK.at(2))),  # first delivered after the newer delete
     TIE_A,  # the tie's loser again
     LATE_FIRST,  # in time now: applied, leaves late_events
     replace(IN_TIME_FIRST, late_by_log=True)],  # a late copy of an applied grant
]


@dataclass
class ExplainRun:
    warehouse: Path
    deliveries: list[Delivered]


@pytest.fixture(scope="module")
def explain_run(spark, tmp_path_factory) -> ExplainRun:
    generated = generate_stream(GeneratorConfig(
        events=120, orders=12, players=6, duplicate_rate=0.25, late_redelivery_rate=0.1,
        out_of_order_rate=0.3, delete_rate=0.3, malformed_rate=0.07, seed=28))
    cut = len(generated) * 2 // 3
    runs = as_logged([[*generated[:cut], *HAND_RUNS[0]], [*generated[cut:], *HAND_RUNS[1]]],
                     LOG_START)
    root = tmp_path_factory.mktemp("explain")
    inbox, warehouse = root / "inbox", root / "warehouse"
    inbox.mkdir()
    settings = load_settings("local", overrides={"exactly_once.source": f"file:{inbox}/*.jsonl"})
    for i, run in enumerate(runs):
        write_kcat_jsonl(inbox / f"{i}.jsonl", kafka_records(run))
        run_pipeline(spark, settings, warehouse)
    return ExplainRun(warehouse, [d for run in runs for d in run])


MODELS = {ORDERS: ("orders", "order_id"), REWARDS: ("player_xp", "player_id")}


@pytest.fixture(scope="module")
def explained(spark, settings, explain_run) -> dict[str, dict[str, Explanation]]:
    """topic -> key -> its explanation, for every key of the stream: one read of each table per
    topic (`explain_keys`), shared by the tests below."""
    found = {}
    for topic, (table, entity) in MODELS.items():
        all_keys = sorted(keys(explain_run.deliveries, topic, entity))
        found[topic] = dict(zip(all_keys, explain_keys(
            spark, explain_run.warehouse, settings, table, all_keys), strict=True))
    return found


# -- every key against the model -------------------------------------------------------------------
@pytest.mark.parametrize("topic, table, entity, model", [
    (ORDERS, "orders", "order_id", order_verdicts),
    (REWARDS, "player_xp", "player_id", grant_verdicts),
])
def test_every_delivery_of_every_key_has_the_reference_model_s_verdict(
        explain_run, explained, topic, table, entity, model):
    everything = explain_run.deliveries
    expected = model(everything)
    kinds_seen = set()
    for key, explanation in explained[topic].items():
        assert explanation.table == table
        mine = deliveries_of_key(everything, topic, entity, key)
        # Every delivery once, each with exactly one verdict, none of them "not read yet".
        assert sorted(d.offset for d in explanation.deliveries) == sorted(
            d.offset for d in mine), key
        assert [d.offset for d in explanation.deliveries] == sorted(d.offset for d in mine), \
            f"{key}: log order"
        for d in explanation.deliveries:
            verdict, want = d.verdict, expected[d.offset]
            assert verdict is not None and verdict.kind in KINDS and verdict.kind != PENDING
            kinds_seen.add(verdict.kind)
            got = (verdict.kind, verdict.of[1] if verdict.of else None,
                   tuple(verdict.lost_to.values()) if verdict.lost_to else None)
            assert got == (want.kind, want.of, want.lost_to), (key, d.offset, verdict.text)
    assert kinds_seen == ({"quarantined", "redelivery", "applied", "stale", "tombstoned"}
                          if topic == ORDERS else
                          {"quarantined", "redelivery", "applied", "late"})


def _rows(spark, warehouse: Path, table: str) -> list[dict]:
    return [plain(r.asDict(recursive=True)) for r in
            spark.read.format("delta").load(str(warehouse / table)).collect()]


def test_the_gold_rows_shown_are_the_tables_rows(spark, explain_run, explained):
    wh = explain_run.warehouse
    for topic, (_, entity) in MODELS.items():
        tables = {name: _rows(spark, wh, name) for name in (
            ["orders", "orders_history"] if topic == ORDERS else
            ["player_xp_ledger", "player_xp", "late_events"])}
        for explanation in explained[topic].values():
            shown = {g.table: plain(g.rows) for g in explanation.gold}
            assert set(shown) == set(tables)
            for name, rows in tables.items():
                if name == "late_events":
                    ids = {d.event.get("event_id") for d in explanation.deliveries}
                    want = [r for r in rows if r["event_id"] in ids]
                else:
                    want = [r for r in rows if r[entity] == explanation.key]
                assert sorted(map(repr, shown[name])) == sorted(map(repr, want)), \
                    (explanation.key, name)
            if topic == ORDERS:  # the history in version order
                starts = [tuple(r["__START_AT"].values()) for r in shown["orders_history"]]
                assert starts == sorted(starts)


# -- the cases, one key each -----------------------------------------------------------------------
def _kinds(explanation) -> list[str]:
    return [d.verdict.kind for d in explanation.deliveries]


def test_a_key_whose_only_deliveries_were_quarantined(explained):
    explanation = explained[ORDERS]["x-oq"]
    assert _kinds(explanation) == ["quarantined", "quarantined"]
    first, second = (d.verdict for d in explanation.deliveries)
    assert first.reasons == ("malformed_json",) and "non_negative_amount" in second.reasons
    assert second.text == "non_negative_amount" and second.decided_by == "quarantine"
    assert [g.summary for g in explanation.gold] == ["no row yet", "no versions yet"]
    assert explanation.deliveries[0].event == {}  # nothing readable: the value is shown
    assert explanation.deliveries[0].value == "not json {"


def test_an_event_delivered_five_times(explained):
    explanation = explained[ORDERS]["x-o5"]
    assert _kinds(explanation) == ["applied"] + ["redelivery"] * 4
    first = explanation.deliveries[0]
    assert all(d.verdict.of == (0, first.offset) and d.verdict.decided_by == "silver_orders"
               for d in explanation.deliveries[1:])
    assert first.verdict.text.endswith("; the current row of orders")
    # Two of the copies came in the second update, after the first was applied.
    assert len({d.ingested_at for d in explanation.deliveries}) == 2


def test_a_delete_followed_by_older_deliveries(explained):
    explanation = explained[ORDERS]["x-od"]
    by_event = [(d.event["event_id"], d.verdict) for d in explanation.deliveries]
    assert [(e, v.kind) for e, v in by_event] == [
        ("x-od-1", "applied"), ("x-od-2", "applied"), ("x-od-3", "tombstoned"),
        ("x-od-2", "redelivery"), ("x-od-1", "redelivery")]
    respaced, exact = by_event[3][1], by_event[4][1]
    # Other bytes: silver let it through, and gold ignored it, older than the delete.
    assert respaced.decided_by == "orders" and respaced.lost_to == {
        "sequence": 3, "event_id": "x-od-3"}
    assert exact.decided_by == "silver_orders"
    assert "the key stays deleted" in by_event[2][1].text
    assert explanation.gold[0].rows == [] and explanation.gold[0].summary.startswith(
        "no row: deleted at sequence 3 (event x-od-3)")
    # First delivered after a newer delete: stale, yet in the history where it belongs.
    older = explained[ORDERS]["x-ox"]
    stale = older.deliveries[-1]
    assert stale.verdict.kind == "stale" and stale.verdict.lost_to == {
        "sequence": 3, "event_id": "x-ox-3"}
    assert "orders_history: in the version from sequence 2 (event x-ox-2)" in stale.notes[0]


def test_a_tie_and_a_key_re_created_after_its_delete(explained):
    tie = explained[ORDERS]["x-ot"]
    assert [(d.event["event_id"], d.verdict.kind) for d in tie.deliveries] == [
        ("x-ot-1", "applied"), ("x-ot-2b", "applied"), ("x-ot-2a", "stale"),
        ("x-ot-2a", "redelivery")]
    assert tie.deliveries[2].verdict.lost_to == {"sequence": 2, "event_id": "x-ot-2b"}
    revived = explained[ORDERS]["x-or"]
    kinds = [(d.key, d.verdict.kind) for d in revived.deliveries]
    assert kinds == [("x-or", "applied"), ("x-or", "tombstoned"), ("x-or", "applied"),
                     (None, "quarantined")]  # found by its order_id, with no Kafka key
    assert revived.deliveries[1].verdict.text.endswith(
        "re-created by sequence 3 (event x-or-3)")
    assert revived.gold[0].rows[0]["event_id"] == "x-or-3"


def test_xp_grants_delivered_late(explained):
    explanation = explained[REWARDS]["x-pl"]
    verdicts = [(d.event["event_id"], d.verdict) for d in explanation.deliveries]
    assert [(e, v.kind) for e, v in verdicts] == [
        ("x-pl-1", "late"), ("x-pl-2", "late"), ("x-pl-3", "applied"), ("x-pl-4", "applied"),
        ("x-pl-4", "redelivery"), ("x-pl-2", "applied"), ("x-pl-3", "late")]
    assert "kept aside in late_events" in verdicts[0][1].text
    # Late first, then in time: the late delivery names the one applied instead.
    assert verdicts[1][1].of == (0, explanation.deliveries[5].offset)
    assert verdicts[4][1].decided_by == "player_xp_ledger"  # other bytes: the ledger's guard
    late, ledger, total = explanation.gold[2], explanation.gold[0], explanation.gold[1]
    assert [r["event_id"] for r in late.rows] == ["x-pl-1"]
    assert sorted(r["event_id"] for r in ledger.rows) == ["x-pl-2", "x-pl-3", "x-pl-4"]
    assert total.summary == "total 27 XP from 3 grants"


# -- the command line ------------------------------------------------------------------------------
def error_line(capsys) -> str:
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(ERROR)
    return line.removeprefix(ERROR)


def test_the_command_prints_each_delivery_with_its_verdict(in_session, explain_run, capsys):
    wh = str(explain_run.warehouse)
    assert cli.main(["explain", "orders", "x-od", "--warehouse", wh]) == 0
    out = capsys.readouterr().out
    assert out.startswith("order_id x-od: 5 deliveries on topic orders, in log order")
    assert len(re.findall(r"^      (APPLIED|TOMBSTONED|REDELIVERY|STALE): ", out, re.M)) == 5
    assert "  orders: no row: deleted at sequence 3 (event x-od-3)" in out
    assert "read at Delta versions: orders " in out

    assert cli.main(["explain", "--event", "x-pl-2", "--format", "json", "--warehouse", wh]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["event_id"], doc["key"], doc["topic"]) == ("x-pl-2", "x-pl", "player_rewards")
    assert [d["verdict"]["kind"] for d in doc["deliveries"]] == ["late", "applied"]
    assert {g["table"] for g in doc["gold"]} == {"player_xp_ledger", "player_xp", "late_events"}
    assert doc["deliveries"][0]["verdict"]["of"] == {
        "partition": 0, "offset": doc["deliveries"][1]["offset"]}


@pytest.mark.parametrize("args, message", [
    (["explain", "ordres", "o-1"], "cannot explain a key of `ordres`; explain one of orders, "
                                   "orders_history, silver_orders, parsed_orders, "
                                   "player_xp_ledger, player_xp, late_events, "
                                   "silver_player_rewards, parsed_player_rewards, or an event "
                                   "with --event"),
    (["explain", "orders", "x-o55"], "no delivery of order_id `x-o55` in {wh}; topic orders "
                                     "has "),
    (["explain", "--event", "x-o5-2"], "no event `x-o5-2` in {wh}; it has "),
])
def test_what_is_not_there_is_one_line_naming_what_is(in_session, explain_run, capsys, args,
                                                      message):
    wh = explain_run.warehouse
    assert cli.main([*args, "--warehouse", str(wh)]) == 1
    line = error_line(capsys)
    assert line.startswith(message.format(wh=wh)), line
    if "x-o5" in " ".join(args):  # a typo gets the keys (or event IDs) nearest to it
        assert re.search(r"; the closest: .*x-o5(, |-1)", line), line


def test_no_warehouse_and_bad_arguments(tmp_path, capsys):
    assert cli.main(["explain", "orders", "o-1", "--warehouse", str(tmp_path / "no")]) == 1
    assert error_line(capsys) == f"no warehouse at {tmp_path / 'no'}; run `exactly-once run` first"
    for args in (["explain", "orders"], ["explain", "orders", "o-1", "--event", "e"]):
        with pytest.raises(SystemExit) as exit_:
            cli.main(args)
        assert exit_.value.code == 2


# -- what the tables cannot tell, and a delivery not read yet ------------------------------------
@pytest.fixture
def warehouse_copy(explain_run, tmp_path) -> Path:
    copy = tmp_path / "warehouse"
    shutil.copytree(explain_run.warehouse, copy)
    return copy


def test_what_a_table_no_longer_holds_is_said_plainly(spark, settings, explained,
                                                     warehouse_copy):
    """Rows deleted by hand from bronze and silver: the deliveries later tables kept are still
    judged, saying bronze (or parsed) no longer holds them; a grant with no delivery left keeps
    its ledger row, shown and said."""
    before = explained[ORDERS]["x-od"]
    for table, where in [
            ("bronze_kafka_events", "CAST(key AS STRING) IN ('x-od', 'x-pl')"),
            ("parsed_orders", "kafka_key = 'x-od' AND sequence = 1"),
            ("parsed_player_rewards", "kafka_key = 'x-pl'"),
            ("silver_player_rewards", "player_id = 'x-pl'")]:
        spark.sql(f"DELETE FROM delta.`{warehouse_copy / table}` WHERE {where}")
    after = explain_key(spark, warehouse_copy, settings, "orders", "x-od")
    assert [(d.offset, d.verdict.kind) for d in after.deliveries] == [
        (d.offset, d.verdict.kind) for d in before.deliveries if d.event["sequence"] != 1 or
        d.verdict.kind == "applied"]  # silver kept the first; the dropped copy left no trace
    assert all("bronze_kafka_events no longer holds this delivery" in d.notes[0]
               for d in after.deliveries)
    assert "parsed_orders no longer holds this delivery" in after.deliveries[0].notes

    grant = explain_event(spark, warehouse_copy, settings, "x-pl-3")
    assert grant.deliveries == [] and grant.key == "x-pl"
    assert any(n.startswith("player_xp_ledger holds event x-pl-3, but no table holds a "
                            "delivery of it any more") for n in grant.notes)


def test_a_delivery_bronze_holds_and_the_next_table_has_not_read_is_pending(
        spark, settings, warehouse_copy):
    """As while an update runs: bronze committed a batch its downstream flows have not read."""
    bronze = str(warehouse_copy / "bronze_kafka_events")
    rows = spark.read.format("delta").load(bronze).where(
        "topic = 'orders' AND CAST(key AS STRING) = 'x-or'")
    first = min(r["offset"] for r in rows.select("offset").collect())
    rows.where(F.col("offset") == first).withColumn("offset", F.lit(10_000).cast("bigint")) \
        .withColumn("ingested_at", F.current_timestamp()) \
        .write.format("delta").mode("append").save(bronze)
    explanation = explain_key(spark, warehouse_copy, settings, "orders", "x-or")
    last = explanation.deliveries[-1]
    assert (last.offset, last.verdict.kind, last.verdict.text) == (
        10_000, PENDING, "parsed_orders has not read it yet")


def test_each_table_is_read_with_the_key_s_filter(spark, settings, explain_run, monkeypatch):
    """Not whole tables: each read's filter names the key and reaches the Parquet scan (Delta's
    data skipping reads the same filters), but for `late_events`, found also by the key inside
    its event JSON (a small table: late grants only)."""
    plans: dict[str, str] = {}
    collect = explain_reads._collect

    def recording(df, where):
        if df is not None:
            plan = df.where(where)._jdf.queryExecution().executedPlan().toString()
            plans[re.search(r"\[file:[^\]]*/(\w+)\]", plan).group(1)] = plan
        return collect(df, where)

    monkeypatch.setattr(explain_reads, "_collect", recording)
    length = "spark.sql.maxMetadataStringLength"  # the plan names each table's whole path
    before = spark.conf.get(length)
    spark.conf.set(length, "10000")
    try:
        explain_key(spark, explain_run.warehouse, settings, "player_xp", "x-pl")
    finally:
        spark.conf.set(length, before)
    assert set(plans) == {"bronze_kafka_events", "parsed_player_rewards", "quarantine",
                          "silver_player_rewards", "player_xp_ledger", "player_xp",
                          "late_events"}
    for table, plan in plans.items():
        pushed = re.search(r"PushedFilters: \[(.*?)\], ", plan).group(1)
        if table == "late_events":
            assert "get_json_object(event" in plan and "x-pl" in plan
        else:  # the key as text, or as bytes (bronze's binary key)
            assert "x-pl" in pushed or table == "bronze_kafka_events" and "key" in pushed, \
                (table, pushed)


# -- the gold tables named are the pipeline's ------------------------------------------------------
def test_the_gold_tables_explained_are_the_pipeline_s(spark, settings):
    from exactly_once.local.graph.loader import load_graph
    from exactly_once.paths import PIPELINES_DIR, pipeline_files

    for key, value in settings.to_conf().items():
        spark.conf.set(key, value)
    graph = load_graph(spark, pipeline_files(PIPELINES_DIR))
    specs = {s.target: s for s in graph.auto_cdc_flows}
    for suffix, gold in GOLD.items():
        topic = settings.topic(suffix)
        if isinstance(gold, CurrentStateGold):
            for target, scd in [(gold.current, 1), (gold.history, 2)]:
                spec = specs[target]
                assert (spec.source, spec.keys, spec.stored_as_scd_type) == (
                    f"silver_{suffix}", (topic.key,), scd), target
        else:
            assert isinstance(gold, LedgerGold)
            assert specs[gold.ledger].keys == specs[gold.late].keys == ("event_id",)
            assert graph.is_materialized_view(gold.totals)


# -- the dashboard's search ------------------------------------------------------------------------
def test_the_dashboard_search_shows_the_explanation(spark, settings, explain_run, explained,
                                                   tmp_path):
    from exactly_once.local.storage.warehouse import Warehouse
    from exactly_once.quality.dashboard import build_dashboard
    from exactly_once.quality.explain_page import explain_page
    from exactly_once.quality.serve import LivePage, dashboard_server

    wh = explain_run.warehouse
    out = tmp_path / "site" / "dashboard.html"
    page = LivePage(out, Warehouse(wh).event_log_path(), lambda: build_dashboard(
        spark, wh, out, refresh_seconds=30, search=list(explainable(settings))))
    page.build()
    server = dashboard_server(page, 0, explain=lambda query: explain_page(
        spark, wh, settings, query))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/"
    try:
        dom = chromium("--dump-dom", base, profile=tmp_path / "profile")
        form = re.search(r'<form id="explain"[^>]*action="explain"[^>]*>.*?</form>', dom, re.S)
        assert form and 'name="table"' in form.group(0) and 'name="key"' in form.group(0)
        assert '<option value="orders" selected' in form.group(0)  # the first: gold first
        # What the form sends for "orders" / "x-od": the same explanation as the command's.
        dom = chromium("--dump-dom", base + "explain?table=orders&key=x-od",
                       profile=tmp_path / "profile")
        expected = as_dict(explained[ORDERS]["x-od"])
        shown = [dict(re.findall(r'data-([a-z-]+)="([^"]*)"', tag))
                 for tag in re.findall(r"<tr class=\"delivery\"[^>]*>", dom)]
        assert [(int(s["offset"]), s["verdict"]) for s in shown] == [
            (d["offset"], d["verdict"]["kind"]) for d in expected["deliveries"]]
        for d in expected["deliveries"]:
            assert html.escape(d["verdict"]["text"], quote=False) in dom
        assert 'value="x-od"' in dom  # the box keeps the query
        gold = re.findall(r'<section class="gold" data-table="([^"]+)" data-rows="(\d+)"', dom)
        assert gold == [(g["table"], str(len(g["rows"]))) for g in expected["gold"]]
        missing = urllib.request.urlopen(base + "explain?table=orders&key=nope",
                                         timeout=120).read().decode()
        assert 'class="error"' in missing and "no delivery of order_id `nope`" in missing
    finally:
        server.shutdown()
        server.server_close()


def test_records_without_kafka_coordinates_are_told_apart(spark, settings, quality_run):
    """A kcat file without partition and offset (the quality tests' stream): every bronze row
    is one delivery of one key, judged, none left "not read yet"."""
    wh = quality_run.warehouse
    bronze = spark.read.format("delta").load(str(wh / "bronze_kafka_events"))
    assert bronze.where("partition IS NULL AND offset IS NULL").count() == bronze.count()
    for topic, table in [(ORDERS, "orders"), (REWARDS, "player_xp")]:
        rows = bronze.where(F.col("topic") == topic)
        all_keys = sorted({r[0] for r in rows.select(F.col("key").cast("string")).collect()
                           if r[0] is not None})
        explanations = explain_keys(spark, wh, settings, table, all_keys)
        deliveries = [d for e in explanations for d in e.deliveries]
        keyless = rows.where("key IS NULL").count()  # found under the entity their event names
        assert len(deliveries) == rows.count() - keyless + sum(
            1 for d in deliveries if d.key is None)
        for d in deliveries:
            assert d.verdict.kind not in (PENDING, "past watermark"), (topic, d.event)
            assert not any("no longer holds" in note for note in d.notes), (topic, d.event)
        assert {d.verdict.kind for d in deliveries} >= {"applied", "redelivery", "quarantined"}
