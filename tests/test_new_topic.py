"""A new topic (issue 52, item 6; docs/contract-changes.md): `exactly-once add-topic` adds a
third topic to a copy of the project (conf/, pipeline files, published JSON Schema, bundle
configuration) and one update of that copy's pipeline takes its records from bronze to gold,
the other topics going on as before. Gold is compared with the reference model.

The command runs as a user runs it, in the copy (a process of its own, no Spark); the update
runs the copy's conf/ and pipelines/ in this process's Spark session (the runtime's entry
point, as `exactly-once run` calls it), so the suite starts no second JVM for it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from events import Clock, order
from reference import Delivered, current_orders, latest_by_key

from exactly_once.kafka.kcat import KafkaRecord, write_kcat_jsonl
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.paths import PROJECT_ROOT
from exactly_once.settings.pipeline import load_settings

SCHEMA = "event_id STRING, event_type STRING, shipment_id STRING, occurred_at TIMESTAMP, " \
    "carrier STRING, parcels INT"
EXTRA = {"event_type": str, "carrier": str, "parcels": int}
CLOCK = Clock.ago(hours=1)
# What a copy of the project needs to add a topic and run: its settings, pipeline files,
# bundle files and code (the rest, tests and docs, it does not).
PROJECT = ("conf", "pipelines", "resources", "databricks.yml", "src", "data")


def shipment(event_id: str, shipment_id: str, at: float, carrier: str, **fields) -> dict:
    return {"event_id": event_id, "event_type": "shipment_updated", "shipment_id": shipment_id,
            "occurred_at": CLOCK.at(at), "carrier": carrier, "parcels": 1} | fields


def exactly_once(project: Path, *args: str) -> subprocess.CompletedProcess:
    """A command of the copy's own code, in the copy."""
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "EXACTLY_ONCE_ENGINE": "off"}
    return subprocess.run([sys.executable, "-m", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def project(tmp_path) -> Path:
    copy = tmp_path / "project"
    for name in PROJECT:
        source = PROJECT_ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, copy / name)
    return copy


def test_add_topic_adds_a_third_topic_that_runs_end_to_end(spark, project, tmp_path):
    added = exactly_once(project, "exactly_once.cli", "add-topic", "shipments",
                         "--key", "shipment_id", "--schema", SCHEMA)
    assert added.returncode == 0, added.stderr
    assert "added topic shipments: conf/base.yml, pipelines/parsed_shipments.py" in added.stdout
    published = json.loads((project / "conf" / "shipments.schema.json").read_text())
    assert list(published["properties"]) == [
        "event_id", "event_type", "shipment_id", "occurred_at", "carrier", "parcels"]
    assert set(published["required"]) == {"event_id", "shipment_id", "occurred_at"}
    checked = exactly_once(project, "exactly_once.deploy", "check")
    assert checked.returncode == 0, checked.stderr  # bundle configuration and contracts in step
    again = exactly_once(project, "exactly_once.cli", "add-topic", "shipments",
                         "--key", "shipment_id", "--schema", SCHEMA)
    assert (again.returncode, again.stderr.strip()) == (
        1, "exactly-once: error: conf/ has topic `shipments` already")

    now = int(time.time() * 1000)
    sent = [("shipments", "sh1", shipment("s1", "sh1", 1, "DHL")),
            ("shipments", "sh1", shipment("s2", "sh1", 3, "UPS", parcels=2)),
            ("shipments", "sh2", shipment("s3", "sh2", 2, "DHL")),
            ("shipments", "sh2", shipment("s4", "sh2", 1, "FEDEX")),  # older: loses
            ("shipments", "sh9", shipment("s5", "sh3", 1, "DHL")),  # key mismatch: quarantined
            ("shipments", "sh4", shipment("s6", "sh4", 1, "DHL", parcels="2")),  # no integer
            ("shipments", "sh5", shipment("s7", "sh5", 1, "DHL", coupon="X")),  # rescued
            ("shipments", "sh1", shipment("s1", "sh1", 1, "DHL")),  # a redelivery
            ("orders", "o1", order("e1", "o1", 1, occurred_at=CLOCK.at(1)))]
    offsets: dict[str, int] = {}
    records = []
    for topic, key, event in sent:
        offset = offsets[topic] = offsets.get(topic, -1) + 1
        records.append(KafkaRecord(topic, key, json.dumps(event), 0, offset, now))
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    write_kcat_jsonl(inbox / "1.jsonl", records)
    settings = dataclasses.replace(load_settings("local", project / "conf"),
                                   source=f"file:{inbox}")
    warehouse = tmp_path / "warehouse"
    result = run_pipeline(spark, settings, warehouse, pipelines_dir=project / "pipelines")

    delivered = [Delivered(r.topic, 0, r.offset, r.key, r.payload, r.timestamp_ms)
                 for r in records]

    def table(name: str) -> list:
        return spark.read.format("delta").load(str(warehouse / name)).collect()

    assert {"parsed_shipments", "silver_shipments", "shipments"} <= set(result.table_rows)
    gold = {r["shipment_id"]: (r["event_id"], r["carrier"], r["parcels"])
            for r in table("shipments")}
    assert gold == {key: (e["event_id"], e["carrier"], e["parcels"])
                    for key, e in latest_by_key(delivered, "shipments", "shipment_id",
                                                EXTRA).items()} == {
        "sh1": ("s2", "UPS", 2), "sh2": ("s3", "DHL", 1), "sh5": ("s7", "DHL", 1)}
    assert "rescued_fields" not in {f.name for f in spark.read.format("delta").load(
        str(warehouse / "shipments")).schema}
    silver = {r["event_id"]: r["rescued_fields"] for r in table("silver_shipments")}
    assert silver == {"s1": None, "s2": None, "s3": None, "s4": None, "s7": '{"coupon":"X"}'}
    quarantined = {json.loads(r["value"])["event_id"]: (r["errors"], r["shipments_fields"])
                   for r in table("quarantine") if r["kafka_topic"] == "shipments"}
    assert {e: errors for e, (errors, _) in quarantined.items()} == {
        "s5": ["key_matches_shipment_id"], "s6": ["invalid_parcels"]}
    assert quarantined["s5"][1]["carrier"] == "DHL"  # the typed fields, as for every topic
    assert {r["order_id"] for r in table("orders")} == set(current_orders(delivered))
