"""The daily `players` export: its generator, the sample files the local target reads, and how the
pipeline finds the next export (no Spark here)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from exactly_once import cli
from exactly_once.exports.files import dated_exports, next_export
from exactly_once.exports.players import (
    COLUMNS,
    PlayersExportConfig,
    daily_exports,
    write_player_exports,
)
from exactly_once.paths import PROJECT_ROOT
from exactly_once.settings.pipeline import load_settings

SAMPLE = PROJECT_ROOT / "data" / "exports" / "players"


def test_the_sample_exports_are_the_generator_s(tmp_path):
    written = write_player_exports(tmp_path, PlayersExportConfig())
    assert [p.name for p in written] == sorted(p.name for p in SAMPLE.iterdir())
    for path in written:
        assert path.read_bytes() == (SAMPLE / path.name).read_bytes(), path.name


def test_the_local_target_reads_the_sample():
    assert Path(load_settings("local").export("players").path) == SAMPLE.resolve()


def test_each_day_changes_what_a_history_keeps(tmp_path):
    days = daily_exports(PlayersExportConfig(players=30, days=4, seed=3))
    assert [d for d, _ in days] == [date(2026, 11, 20), date(2026, 11, 21), date(2026, 11, 22),
                                    date(2026, 11, 23)]
    changes: set[str] = set()
    for (_, before), (_, after) in zip(days, days[1:], strict=False):
        old, new = ({r["player_id"]: r for r in rows} for rows in (before, after))
        changes |= {"join" for p in new if p not in old} | {"leave" for p in old if p not in new}
        changes |= {c for p in new if p in old for c in COLUMNS if old[p][c] != new[p][c]}
    assert changes == {"join", "leave", "tier", "country", "display_name"}
    assert all(len({r["player_id"] for r in rows}) == len(rows) for _, rows in days)


def test_the_next_export_is_the_first_dated_after_the_latest(tmp_path):
    write_player_exports(tmp_path, PlayersExportConfig(days=3))  # the sample's two, and one
    (tmp_path / ".players_2026-11-23.csv.tmp").write_text("half an export")  # being written
    (tmp_path / "README.txt").write_text("not an export")
    (tmp_path / "orders_2026-11-21.csv").write_text("another export")
    assert [d for d, _ in dated_exports(tmp_path, "players")] == [
        date(2026, 11, 20), date(2026, 11, 21), date(2026, 11, 22)]
    assert next_export(tmp_path, "players", None) == (
        date(2026, 11, 20), tmp_path / "players_2026-11-20.csv")
    assert next_export(tmp_path, "players", date(2026, 11, 20))[0] == date(2026, 11, 21)
    assert next_export(tmp_path, "players", date(2026, 11, 22)) is None


def test_an_export_named_with_an_impossible_date_is_an_error(tmp_path):
    (tmp_path / "players_2026-02-30.csv").write_text("player_id\n")
    with pytest.raises(ValueError, match="2026-02-30 is not a date"):
        dated_exports(tmp_path, "players")


def test_export_players_writes_the_days_asked_for(tmp_path, capsys):
    assert cli.main(["export-players", "--days", "2", "--players", "5", "--start", "2027-01-01",
                     "--output", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "players_2027-01-01.csv", "players_2027-01-02.csv"]
    assert "wrote 2 daily players exports" in capsys.readouterr().out
    header, *rows = (tmp_path / "players_2027-01-01.csv").read_text().splitlines()
    assert header == ",".join(COLUMNS) and len(rows) == 5
