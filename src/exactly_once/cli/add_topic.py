"""`exactly-once add-topic NAME --key FIELD --schema DDL`: a new topic in one step
(deploy/new_topic.py), then the bundle's configuration and the published contracts regenerated
as `make bundle-config` does."""

from __future__ import annotations

import argparse

from exactly_once.cli import common


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "add-topic", handle, help="add a topic to the contract: "
                            "its settings in conf/base.yml, its pipeline files (parse, silver, "
                            "gold current state) and its published JSON Schema")
    parser.add_argument("name", help="the topic's name in conf/ and its datasets "
                        "(parsed_NAME, silver_NAME, NAME)")
    parser.add_argument("--key", required=True, help="the field that is the Kafka key and "
                        "entity ID")
    parser.add_argument("--schema", required=True, help="the event's fields as DDL, e.g. "
                        "\"event_id STRING, event_type STRING, shipment_id STRING, occurred_at "
                        "TIMESTAMP\" (event_id, occurred_at and the key among them)")
    parser.add_argument("--topic", dest="kafka_topic", help="the Kafka topic (default: NAME "
                        "with `-` for `_`)")


def handle(args: argparse.Namespace) -> int:
    from exactly_once.deploy.__main__ import main as deploy
    from exactly_once.deploy.new_topic import add_topic
    from exactly_once.paths import PROJECT_ROOT

    kafka_topic = args.kafka_topic or args.name.replace("_", "-")
    written = add_topic(args.name, kafka_topic, args.key, args.schema)
    print("added topic " + args.name + ": " + ", ".join(
        str(p.relative_to(PROJECT_ROOT)) for p in written))
    return deploy(["write"])
