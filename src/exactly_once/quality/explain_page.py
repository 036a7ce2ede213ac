# ruff: noqa: E501  (HTML template lines)
"""The dashboard's search: a key's (or an event's) explanation as a page, served next to the
dashboard (`quality dashboard --serve`, serve.py), with the same search box on top.

The explanation is `exactly-once explain`'s (local/inspect/explain.py), read when the page is
asked for: every delivery in log order with its verdict, then the key's gold rows. What is not
there (a key, an event, a table) is the command's one line, shown on the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from markupsafe import Markup
from pyspark.sql import SparkSession

from exactly_once.errors import ExactlyOnceError
from exactly_once.local.inspect import explain
from exactly_once.local.inspect.explain_text import cell, event_line, heading, moment
from exactly_once.settings.pipeline import Settings

EVENT = ""  # the `table` the form sends to search by event ID

SEARCH_FORM = r"""<form id="explain" method="get" action="explain">
<label>Explain <select name="table">
{% for t in tables %}<option value="{{ t }}"{% if t == table %} selected{% endif %}>{{ t }}</option>
{% endfor %}<option value=""{% if table == "" %} selected{% endif %}>event ID</option></select></label>
<input name="key" value="{{ key }}" placeholder="a key, e.g. o-00042, or an event ID" size="40" required>
<button type="submit">Explain</button>
<span class="hint">every delivery of the key, from Kafka to gold (<code>exactly-once explain</code>)</span>
</form>"""

PAGE = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>exactly-once · explain {{ key }}</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1f2933; background: #f5f7fa; }
  h1 { font-size: 20px; margin: 0 0 8px; } h2 { font-size: 16px; margin: 16px 0 6px; }
  .card { background: #fff; border-radius: 8px; padding: 16px; box-shadow: 0 1px 3px #0002; margin-bottom: 16px; overflow-x: auto; }
  table { border-collapse: collapse; font-size: 13px; } th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #e4e7eb; vertical-align: top; }
  .error { color: #c81e1e; font-weight: 600; } .sub, .hint, .note { color: #616e7c; font-size: 12px; }
  .v-applied, .v-tombstoned { color: #057a55; } .v-quarantined, .v-past-watermark { color: #c81e1e; }
  .v-stale, .v-redelivery, .v-late, .v-pending { color: #b45309; }
  td.kind { font-weight: 600; white-space: nowrap; } code { font-size: 12px; }
</style>
</head>
<body>
<h1>Explain · <a href="./">dashboard</a></h1>
<div class="card">{{ search }}</div>
{% if error %}<div class="card"><p class="error">{{ error }}</p></div>{% endif %}
{% if x %}
<div class="card" id="deliveries">
<h2>{{ heading }}</h2>
<table>
<tr><th>partition@offset</th><th>Kafka timestamp</th><th>key</th><th>event</th><th>verdict</th><th>why</th></tr>
{% for d in x.deliveries %}<tr class="delivery" data-partition="{{ d.partition if d.partition is not none else '' }}" data-offset="{{ d.offset if d.offset is not none else '' }}" data-verdict="{{ d.verdict.kind }}">
<td><code>{{ d.position.split('/', 1)[1] }}</code></td><td>{{ moment(d.timestamp) }}</td><td>{{ d.key if d.key is not none else 'NULL' }}</td>
<td>{{ event_line(d) }}</td><td class="kind v-{{ d.verdict.kind|replace(' ', '-') }}">{{ d.verdict.kind }}</td>
<td>{{ d.verdict.text }}{% for n in d.notes %}<div class="note">{{ n }}</div>{% endfor %}</td></tr>
{% endfor %}</table>
</div>
<div class="card" id="gold">
{% for g in x.gold %}<section class="gold" data-table="{{ g.table }}" data-rows="{{ g.rows|length }}">
<h2>{{ g.table }}</h2><div class="sub">{{ g.summary }}</div>
{% if g.rows %}<table><tr>{% for c in g.rows[0] %}<th>{{ c }}</th>{% endfor %}</tr>
{% for r in g.rows %}<tr>{% for c in r %}<td>{{ cell(r[c]) }}</td>{% endfor %}</tr>{% endfor %}</table>{% endif %}
</section>
{% endfor %}
{% for n in x.notes %}<p class="note">{{ n }}</p>{% endfor %}
<p class="sub">Read at Delta versions: {% for name, v in x.versions.items() %}{{ name }} {{ v if v >= 0 else '(none yet)' }}{{ ', ' if not loop.last }}{% endfor %}.</p>
</div>
{% endif %}
</body>
</html>
"""


def search_form(tables: list[str], table: str | None = None, key: str = "") -> Markup:
    """The search box: a table of the key's topic (or "event ID") and the key."""
    from jinja2 import Environment

    return Markup(Environment(autoescape=True).from_string(SEARCH_FORM).render(
        tables=tables, table=tables[0] if table is None and tables else table, key=key))


def explain_page(spark: SparkSession, warehouse: Path, settings: Settings,
                 query: Mapping[str, str]) -> str:
    """The page for a search (`table`, `key`; an empty table: `key` is an event ID)."""
    from jinja2 import Environment

    table, key = query.get("table", EVENT), query.get("key", "").strip()
    tables = list(explain.explainable(settings))
    found, error = None, None
    try:
        if not key:
            error = "give a key, or an event ID"
        elif table == EVENT:
            found = explain.explain_event(spark, warehouse, settings, key)
        else:
            found = explain.explain_key(spark, warehouse, settings, table, key)
    except ExactlyOnceError as err:
        error = str(err)
    return Environment(autoescape=True).from_string(PAGE).render(
        key=key, search=search_form(tables, table, key), error=error, x=found,
        heading=heading(found) if found else "", moment=moment, event_line=event_line, cell=cell)
