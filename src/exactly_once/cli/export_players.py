"""`exactly-once export-players`: a synthetic daily `players` export (exports/players.py), one
CSV per day, into the directory `players_history` reads (`exports.players.path`) or another."""

from __future__ import annotations

import argparse
from datetime import date
from pathlib import Path

from exactly_once.cli import common
from exactly_once.exports.players import PlayersExportConfig

DEFAULTS = PlayersExportConfig()  # the sample exports under data/exports/players


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "export-players", handle,
                            help="write a synthetic daily players export, one CSV per day")
    parser.add_argument("--players", type=common.positive, default=DEFAULTS.players,
                        help="players on the first day")
    parser.add_argument("--days", type=common.positive, default=DEFAULTS.days)
    parser.add_argument("--start", type=date.fromisoformat, default=DEFAULTS.start,
                        help="the first day, YYYY-MM-DD")
    parser.add_argument("--seed", type=int, default=DEFAULTS.seed)
    parser.add_argument("--output", type=Path, help="the directory (default: exports.players.path "
                        "of the target's settings)")


def handle(args: argparse.Namespace) -> int:
    from exactly_once.exports.players import write_player_exports

    directory = args.output or Path(common.settings_of(args).export("players").path)
    written = write_player_exports(directory, PlayersExportConfig(
        players=args.players, days=args.days, start=args.start, seed=args.seed))
    print(f"wrote {len(written)} daily players exports to {directory} "
          f"({written[0].name} .. {written[-1].name})")
    return 0
