# ruff: noqa: E501  (HTML template lines)
"""The local dashboard's HTML (jinja2): self-contained, inline SVG charts, no network, no server."""

DASHBOARD = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
{% if refresh_seconds %}<noscript><meta http-equiv="refresh" content="{{ refresh_seconds }}"></noscript>{% endif %}
<title>exactly-once · data quality</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1f2933; background: #f5f7fa; }
  h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 0 0 12px; }
  .sub { color: #616e7c; margin-bottom: 20px; }
  .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(460px, 1fr)); gap: 16px; }
  .card { background: #fff; border-radius: 8px; padding: 16px; box-shadow: 0 1px 3px #0002; }
  .kpis { display: flex; gap: 12px; flex-wrap: wrap; margin-bottom: 16px; }
  .kpi { background: #fff; border-radius: 8px; padding: 12px 16px; min-width: 150px;
         box-shadow: 0 1px 3px #0002; }
  .kpi .v { font-size: 24px; font-weight: 600; } .kpi .l { color: #616e7c; font-size: 12px; }
  table { border-collapse: collapse; width: 100%; font-size: 13px; margin-top: 8px; }
  th, td { text-align: left; padding: 4px 6px; border-bottom: 1px solid #e4e7eb; }
  td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
  .bad { color: #c81e1e; } .ok { color: #057a55; }
  svg text { font: 11px system-ui, sans-serif; fill: #3e4c59; }
  .legend span { display: inline-block; margin-right: 12px; font-size: 12px; }
  .sw { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
  a { color: #1a56db; }
  #graph { margin-bottom: 16px; overflow-x: auto; }
  svg.graph text { font: 12px system-ui, sans-serif; fill: #3e4c59; }
  svg.graph text.name { font-weight: 600; fill: #1f2933; } svg.graph text.status { font-size: 10px; font-weight: 600; }
  svg.graph g.node { cursor: pointer; } svg.graph g.node:hover rect:first-of-type, svg.graph g.node.open rect:first-of-type { stroke-width: 3; }
  .history { display: none; } .history:target { display: block; }
  .history td.b { font-size: 12px; color: #52606d; }
  #explain { margin-bottom: 8px; } #explain .hint { color: #616e7c; font-size: 12px; }
  .st-COMPLETED { color: #057a55; } .st-FAILED { color: #c81e1e; } .st-SKIPPED { color: #7b8794; }
</style>
</head>
<body>
<h1>Data quality · pipeline <code>{{ pipeline }}</code></h1>
<div class="sub">Built {{ built_at }} from <code>{{ event_log }}</code> ({{ updates|length }}
update{{ '' if updates|length == 1 else 's' }}). Latest update
<code>{{ latest.update_id if latest else '-' }}</code>.
{% if data_docs %}Great Expectations: <a id="data-docs" href="{{ data_docs.index }}">Data Docs</a>
{% for s in data_docs.suites %}· <a class="suite-link" href="{{ s.href }}">{{ s.name }}</a>
{% endfor %}{% else %}No Data Docs yet (run <code>exactly-once quality validate</code>).{% endif %}
</div>

{% if latest %}
<div class="kpis" id="kpis">
{% for k in kpis %}<div class="kpi"><div class="v" data-kpi="{{ k.key }}">{{ "{:,}".format(k.value) }}</div>
<div class="l">{{ k.label }} (latest update)</div></div>
{% endfor %}</div>
{% endif %}

{% if graph %}
<div class="card" id="graph">
<h2>Pipeline graph · update #{{ latest_update }}</h2>
{% if search %}{{ search }}{% else %}<div class="sub" id="explain-hint">To see what happened to every delivery of a key:
<code>exactly-once explain TABLE KEY</code>, or serve this page (<code>exactly-once quality dashboard --serve</code>) and search here.</div>{% endif %}
{{ graph }}
<div class="sub">Colored by each dataset's status in the latest update:
<span class="st-COMPLETED">COMPLETED</span>, <span class="st-FAILED">FAILED</span>,
<span class="st-SKIPPED">SKIPPED</span> (nothing new, not refreshed, stopped upstream, or never run). Seconds are
the flows' own time from the event log's timeline (waits for upstream left out); the pass rate counts
expectation checks; quarantined: the records of that dataset the quarantine took. Click a dataset
for its flow history.</div>
{% for h in histories %}
<section class="history" id="history-{{ h.name }}" data-history="{{ h.name }}">
<h2>{{ h.name }}: flow history <span class="st-{{ h.status }}">{{ h.status }}</span></h2>
<div class="sub">{{ h.updates }} update{{ '' if h.updates == 1 else 's' }} with a flow into it{% if h.shown < h.updates %}, the last {{ h.shown }} shown{% endif %}; newest first.</div>
<table>
<tr><th>update</th><th>flow</th><th>status</th><th class="n">micro-batches</th><th class="n">rows in</th>
<th class="n">rows written</th><th class="n">seconds</th><th class="n">expectations passed</th><th>batches (rows in, seconds)</th></tr>
{% for r in h.runs %}<tr data-run="{{ r.update }}" data-flow="{{ r.flow }}">
<td>#{{ r.update }} <code>{{ r.update_id[:8] }}</code> {{ r.started }}</td><td>{{ r.flow }}</td>
<td class="st-{{ r.status }}" title="{{ r.error or '' }}">{{ r.status }}</td>
<td class="n" data-batches="{{ r.batches }}">{{ r.batches }}</td>
<td class="n" data-rows-in="{{ r.rows_in }}">{{ "{:,}".format(r.rows_in) }}</td>
<td class="n" data-rows-written="{{ r.rows_written }}">{{ "{:,}".format(r.rows_written) }}</td>
<td class="n" data-seconds="{{ r.seconds if r.seconds is not none else '' }}">{{ "%.2f"|format(r.seconds) if r.seconds is not none else "-" }}</td>
<td class="n">{% if r.passed is not none and (r.passed + r.failed) %}{{ "%.1f"|format(100 * r.passed / (r.passed + r.failed)) }}%{% else %}-{% endif %}</td>
<td class="b">{% for b in r.micro_batches %}#{{ b[0] }}: {{ "{:,}".format(b[1]) }} ({{ "%.2f"|format(b[2]) }}s){{ ", " if not loop.last }}{% endfor %}</td></tr>
{% endfor %}</table>
</section>
{% endfor %}
</div>
{% endif %}

<div class="grid">
<div class="card" id="expectations">
<h2>Expectations: failure rate per update</h2>
{{ charts.expectations }}
<table>
<tr><th>expectation</th><th>dataset</th><th class="n">passed</th><th class="n">failed</th>
<th class="n">pass rate</th></tr>
{% for e in expectations %}<tr data-expectation="{{ e.dataset }}.{{ e.name }}">
<td>{{ e.name }}</td><td>{{ e.dataset }}</td><td class="n" data-passed="{{ e.passed }}">{{ "{:,}".format(e.passed) }}</td>
<td class="n {{ 'bad' if e.failed else 'ok' }}" data-failed="{{ e.failed }}">{{ "{:,}".format(e.failed) }}</td>
<td class="n">{{ "%.2f"|format(e.rate * 100) }}%</td></tr>
{% endfor %}</table>
<div class="sub">Latest update. A NULL constraint result counts as failed.</div>
</div>

<div class="card" id="quarantine">
<h2>Records quarantined by reason</h2>
{{ charts.quarantine }}
<div class="sub">All quarantined records: <b data-quarantine-total="{{ quarantine_total }}">{{ "{:,}".format(quarantine_total) }}</b>;
a record failing several rules counts under each.</div>
</div>

<div class="card" id="redelivery">
<h2>Redeliveries per update</h2>
{{ charts.redelivery }}
<table>
<tr><th>#</th><th>update</th><th>status</th><th class="n">duplicates dropped</th>
<th class="n">stale updates ignored</th><th class="n">late events</th><th class="n">dropped by expectations</th><th class="n">quarantined</th></tr>
{% for u in updates %}<tr data-update="{{ u.update_id }}">
<td>{{ loop.index }}</td><td><code>{{ u.update_id[:8] }}</code> {{ u.started }}</td>
<td class="{{ 'bad' if u.status == 'FAILED' else 'ok' }}">{{ u.status }}</td>
<td class="n" data-duplicates="{{ u.duplicates }}">{{ "{:,}".format(u.duplicates) }}</td>
<td class="n" data-stale="{{ u.stale }}">{{ "{:,}".format(u.stale) }}</td>
<td class="n" data-late="{{ u.late }}">{{ "{:,}".format(u.late) }}</td>
<td class="n" data-dropped="{{ u.dropped }}">{{ "{:,}".format(u.dropped) }}</td>
<td class="n" data-quarantined="{{ u.quarantined }}">{{ "{:,}".format(u.quarantined) }}</td></tr>
{% endfor %}</table>
</div>

<div class="card" id="tables">
<h2>Rows per table</h2>
{{ charts.tables }}
<table>{% for t in tables %}<tr data-table="{{ t.name }}"><td>{{ t.name }}</td>
<td class="n" data-rows="{{ t.rows }}">{{ "{:,}".format(t.rows) }}</td></tr>{% endfor %}</table>
</div>
</div>
<script>
  // Marks the page as rendered (the headless-browser test checks it): counts the drawn charts.
  document.body.dataset.charts = document.querySelectorAll("svg.chart").length;
  document.body.dataset.bars = document.querySelectorAll("svg.chart rect.bar").length;
  document.body.dataset.nodes = document.querySelectorAll("svg.graph g.node").length;
  // A click on a dataset opens its history (#history-<name>, shown by :target); the open one is
  // named on <body data-open> and its node outlined.
  function opened() {
    const section = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    const name = section && section.dataset.history ? section.dataset.history : "";
    document.body.dataset.open = name;
    document.querySelectorAll("svg.graph g.node").forEach(
      n => n.classList.toggle("open", n.dataset.node === name));
  }
  document.querySelectorAll("svg.graph g.node").forEach(n => {
    const open = () => { location.hash = "history-" + n.dataset.node; };
    n.addEventListener("click", open);
    n.addEventListener("keydown", e => { if (e.key === "Enter") open(); });
  });
  window.addEventListener("hashchange", opened);
  opened();
{% if refresh_seconds %}  // Served: reload every {{ refresh_seconds }}s for the newest update, but not while the search
  // box is in use (a reload would lose what is typed); <noscript> does it without scripts.
  document.body.dataset.refresh = "{{ refresh_seconds }}";
  function reload() {
    const box = document.querySelector("#explain input[name=key]");
    if (box && (document.activeElement === box || box.value)) return setTimeout(reload, {{ refresh_seconds * 1000 }});
    location.reload();
  }
  setTimeout(reload, {{ refresh_seconds * 1000 }});
{% endif %}</script>
</body>
</html>
"""
