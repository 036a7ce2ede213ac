"""A synthetic daily export of the `players` reference table, as an operational system writes it.

Day one lists `players` players; each later day, from a seeded random generator, some players
join, some leave (their account is closed: absent from that day's export on), some change tier
or country (what `players_history` keeps history of), and some rename themselves (updated in
place). The same config writes the same files, byte for byte: the sample exports under
`data/exports/players/` are `PlayersExportConfig()`'s, and tests/test_players_export.py checks it.

Each file is written under a temporary name and renamed into place, so a reader listing the
directory never sees half an export.
"""

from __future__ import annotations

import csv
import io
import os
import random
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from exactly_once.exports.files import export_file_name

NAME = "players"
COLUMNS = ("player_id", "display_name", "country", "tier")
TIERS = ("bronze", "silver", "gold", "platinum")
COUNTRIES = ("DE", "FR", "GB", "NL", "PL", "SE", "US")
_SYLLABLES = ("ka", "ri", "zo", "mel", "tan", "vu", "lin", "dor", "sha", "ne", "qu", "bo")


@dataclass(frozen=True)
class PlayersExportConfig:
    players: int = 12  # on the first day
    days: int = 2  # the sample: every kind of change on day two, and little for a test to run
    start: date = date(2026, 11, 20)
    seed: int = 7
    join_rate: float = 0.15  # new players per day, as a share of today's players
    leave_rate: float = 0.1
    tier_change_rate: float = 0.2
    move_rate: float = 0.05  # players changing country
    rename_rate: float = 0.1


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def _player(rng: random.Random, number: int) -> dict[str, str]:
    return {"player_id": f"p{number:04d}", "display_name": _name(rng),
            "country": rng.choice(COUNTRIES), "tier": rng.choice(TIERS)}


def daily_exports(config: PlayersExportConfig) -> list[tuple[date, list[dict[str, str]]]]:
    """Each day's export: its date and its rows, by player_id."""
    rng = random.Random(config.seed)
    players = {p["player_id"]: p for p in (_player(rng, n + 1) for n in range(config.players))}
    joined = config.players
    days = []
    for offset in range(config.days):
        if offset:
            for player_id in sorted(players):
                roll = rng.random()
                player = dict(players[player_id])
                if roll < config.leave_rate:
                    del players[player_id]
                    continue
                roll -= config.leave_rate
                if roll < config.tier_change_rate:
                    player["tier"] = rng.choice([t for t in TIERS if t != player["tier"]])
                elif (roll := roll - config.tier_change_rate) < config.move_rate:
                    player["country"] = rng.choice([c for c in COUNTRIES
                                                    if c != player["country"]])
                elif roll - config.move_rate < config.rename_rate:
                    player["display_name"] = _name(rng)
                players[player_id] = player
            for _ in range(round(len(players) * config.join_rate)):
                joined += 1
                players[f"p{joined:04d}"] = _player(rng, joined)
        days.append((config.start + timedelta(days=offset),
                     [dict(players[p]) for p in sorted(players)]))
    return days


def export_text(rows: list[dict[str, str]]) -> str:
    """One export's CSV: a header row, then a row per player."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def write_player_exports(directory: Path, config: PlayersExportConfig) -> list[Path]:
    """Write each day's export into `directory` (created if needed); the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for day, rows in daily_exports(config):
        path = directory / export_file_name(NAME, day)
        partial = directory / f".{path.name}.tmp"
        partial.write_text(export_text(rows), encoding="utf-8")
        os.replace(partial, path)
        written.append(path)
    return written
