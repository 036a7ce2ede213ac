"""The local expectation dashboard, rendered by headless Chromium: charts there, numbers right."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from exactly_once.local.warehouse import Warehouse
from exactly_once.quality.dashboard import build_dashboard

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def chromium(*args: str, profile: Path) -> str:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make chromium` (make test does)")
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def dashboard(spark, quality_run, validated, tmp_path_factory):
    _, data_docs = validated
    out = tmp_path_factory.mktemp("dashboard") / "dashboard.html"
    data = build_dashboard(spark, quality_run.warehouse, out, data_docs=data_docs)
    return out, data


def _attr(dom: str, name: str) -> list[str]:
    return re.findall(rf'{name}="([^"]*)"', dom)


def test_dashboard_renders_charts_and_numbers_match_the_tables(spark, quality_run, dashboard,
                                                               tmp_path):
    out, _ = dashboard
    dom = chromium("--dump-dom", out.as_uri(), profile=tmp_path / "profile")
    # The inline script ran: four charts, with bars drawn.
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-charts="4"' in body
    assert int(re.search(r'data-bars="(\d+)"', body).group(1)) > 10
    for chart in ("expectations", "quarantine", "redelivery", "tables"):
        assert f'data-chart="{chart}"' in dom

    wh = quality_run.warehouse
    quarantine = spark.read.format("delta").load(str(wh / "quarantine"))
    assert _attr(dom, "data-quarantine-total") == [str(quarantine.count())]
    by_rule = {r.rule: r["count"] for r in quarantine.select(F.explode("errors").alias("rule"))
               .groupBy("rule").count().collect()}
    bars = dict(re.findall(r'data-label="([^"]+)" data-value="(\d+)"', dom))
    for rule, count in by_rule.items():
        assert bars[rule] == str(count)
    for table, rows in quality_run.result.table_rows.items():
        assert re.search(rf'data-table="{table}">.*?data-rows="{rows}"', dom, re.S), table

    log = spark.read.format("delta").load(str(Warehouse(wh).event_log_path()))
    expected = {(r.dataset, r.name): (r.passed, r.failed) for r in
                log.select(F.explode("details.flow_progress.data_quality.expectations")
                           .alias("e")).groupBy("e.dataset", "e.name")
                # each reader of a view counts the same rows: once per dataset, not summed
                .agg(F.max("e.passed_records").alias("passed"),
                     F.max("e.failed_records").alias("failed")).collect()}
    for (dataset, name), (passed, failed) in expected.items():
        row = re.search(rf'data-expectation="{dataset}.{name}">.*?data-passed="(\d+)".*?'
                        rf'data-failed="(\d+)"', dom, re.S)
        assert row and (int(row.group(1)), int(row.group(2))) == (passed, failed), name
    result = quality_run.result
    assert _attr(dom, "data-duplicates") == [str(result.total("duplicates_dropped"))]
    assert _attr(dom, "data-stale") == [str(result.total("cdc_stale"))]
    assert f'data-kpi="quarantined">{quarantine.count():,}<' in dom
    # Dropped by expectations: the well-formed records that broke a rule, each counted once
    # (quarantine holds them all; the malformed ones never reached the rules).
    broke_a_rule = quarantine.where(~F.exists("errors", lambda e: (e == "malformed_json")
                                              | e.startswith("invalid_"))).count()
    assert f'data-kpi="dropped">{broke_a_rule:,}<' in dom
    # Links into the Data Docs, relative, to pages that exist.
    for href in re.findall(r'href="([^"]+)"', dom):
        assert (out.parent / href).resolve().is_file(), href
    assert 'id="data-docs"' in dom and dom.count('class="suite-link"') == 4


def test_dashboard_screenshot(dashboard, tmp_path):
    out, _ = dashboard
    png = tmp_path / "dashboard.png"
    chromium(f"--screenshot={png}", "--window-size=1280,1400", "--hide-scrollbars",
             out.as_uri(), profile=tmp_path / "profile")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
