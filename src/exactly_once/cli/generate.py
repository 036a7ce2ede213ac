"""`exactly-once generate`: a synthetic stream of both topics, published or written as kcat
JSONL."""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone
from pathlib import Path

from exactly_once.cli import common


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "generate", handle,
                            help="publish a synthetic stream of both topics")
    parser.add_argument("--events", type=common.positive, default=5000, help="original events")
    parser.add_argument("--orders", type=common.positive, default=500)
    parser.add_argument("--players", type=common.positive, default=200)
    parser.add_argument("--duplicate-rate", type=common.rate, default=0.2)
    parser.add_argument("--late-rate", type=common.rate, default=0.05, help="late redeliveries")
    parser.add_argument("--out-of-order-rate", type=common.rate, default=0.1)
    parser.add_argument("--delete-rate", type=common.rate, default=0.1)
    parser.add_argument("--malformed-rate", type=common.rate, default=0.01)
    parser.add_argument("--seed", type=int, default=None, help="default: from the clock")
    parser.add_argument("--start", type=common.timestamp, default=None,
                        help="event time of the first event (default: now)")
    parser.add_argument("--output", type=Path,
                        help="write kcat JSONL here instead of publishing")
    common.add_bootstrap_servers(parser)


def handle(args: argparse.Namespace) -> int:
    from exactly_once.kafka.generator import GeneratorConfig, generate_stream
    from exactly_once.kafka.kcat import as_consumed, write_kcat_jsonl
    from exactly_once.kafka.producer import produce_records

    settings = common.settings_of(args)
    config = GeneratorConfig(
        events=args.events, orders=args.orders, players=args.players,
        duplicate_rate=args.duplicate_rate, late_redelivery_rate=args.late_rate,
        out_of_order_rate=args.out_of_order_rate, delete_rate=args.delete_rate,
        malformed_rate=args.malformed_rate,
        seed=time.time_ns() % 2**31 if args.seed is None else args.seed,
        start=args.start or datetime.now(timezone.utc),
        orders_topic=settings.topic("orders").kafka_topic,
        rewards_topic=settings.topic("player_rewards").kafka_topic,
    )
    records = generate_stream(config)
    if args.output:
        write_kcat_jsonl(args.output, as_consumed(records))
        print(f"wrote {len(records):,} records to {args.output}")
        return 0
    common.require_broker(settings.kafka.bootstrap_servers)
    common.ensure_topics(settings)
    sent = produce_records(settings.kafka.bootstrap_servers, records)
    print(f"published {sent:,} records ({config.events:,} events plus redeliveries and "
          f"malformed records, seed {config.seed})")
    return 0
