"""`llmperf history --html PATH` (and `llmperf nightly --publish DIR`'s index.html): the results
store as one self-contained page a team shares. On top, the open and acknowledged regressions
(reports/regressions.py, the lines `llmperf history` prints); then a chart per test, series and
metric over the runs' dates (history_chart.py), with each change point's caption under it: when,
how much, what changed (the trend gate's words) and the CI jobs of the runs on either side.

Three selects filter the charts by hardware, host and engine (a few lines of inline script; a
host also fades the other hosts' runs), and the choice is kept in the address (#host=gpu-7), so
a filtered view is a link to send. The charts are inline SVG: the page loads nothing from
anywhere and needs no plotting library.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timezone
from html import escape

from pytest_llmperf.history.episodes import Episode
from pytest_llmperf.metrics.registry import formatter
from pytest_llmperf.reports.history_chart import MIN_WIDTH_PX, chart, when
from pytest_llmperf.reports.history_view import ChangeFact, SeriesView, change_facts
from pytest_llmperf.reports.regressions import Regression

__all__ = ["anchor", "page", "regression_of"]

FILTERS = (("hardware", "hardware"), ("host", "host"), ("engine", "engine"))
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #1f2328; }
h1 { font-size: 22px; } h2 { font-size: 15px; margin: 0 0 2px; }
.filters { margin: 12px 0 20px; } .filters label { margin-right: 16px; }
section { border: 1px solid #d0d7de; border-radius: 6px; padding: 10px 14px; margin: 14px 0; }
.meta, .note { color: #57606a; font-size: 12.5px; margin: 0 0 6px; }
.worse, .open { color: #b42318; font-weight: 600; } .better { color: #1a7f37; font-weight: 600; }
.acknowledged { color: #9a6700; font-weight: 600; }
ol.changes, ul.regressions { font-size: 12.5px; margin: 4px 0 0; padding-left: 22px; }
a { color: #0969da; } svg text { font: 11px system-ui, sans-serif; fill: #57606a; }
.plot-frame { overflow-x: auto; } h2, .meta, li { overflow-wrap: anywhere; }
svg.plot { display: block; width: 100%; height: auto; min-width: MIN_WIDTHpx; }
@media (max-width: 600px) { body { margin: 10px; } section { padding: 8px; } }
""".replace("MIN_WIDTH", str(MIN_WIDTH_PX))  # full width; a phone scrolls a chart sideways
SCRIPT = """
const FILTERS = ['hardware', 'host', 'engine'];
let anchor = '';  // a chart's link (#series-...), kept beside the filters in the address
function applyFilters() {
  const chosen = {};
  for (const name of FILTERS) chosen[name] = document.getElementById(name).value;
  let shown = 0;
  for (const chart of document.querySelectorAll('section.chart')) {
    const keep = (!chosen.hardware || chart.dataset.hardware === chosen.hardware)
      && (!chosen.engine || chart.dataset.engine === chosen.engine)
      && (!chosen.host || chart.dataset.hosts.split(' ').includes(chosen.host));
    chart.style.display = keep ? '' : 'none';
    shown += keep ? 1 : 0;
    for (const dot of chart.querySelectorAll('circle.run'))
      dot.style.opacity = !chosen.host || dot.dataset.host === chosen.host ? '' : '0.2';
  }
  document.getElementById('shown').textContent = shown;
  // A regression goes with its chart; one whose series is not charted stays.
  for (const item of document.querySelectorAll('ul.regressions li')) {
    const charts = [...document.querySelectorAll('section.chart')]
      .filter(c => c.dataset.key === item.dataset.key);
    item.style.display = !charts.length || charts.some(c => c.style.display !== 'none')
      ? '' : 'none';
  }
  const kept = FILTERS.filter(n => chosen[n]).map(n => n + '=' + encodeURIComponent(chosen[n]));
  if (anchor) kept.unshift(anchor);
  history.replaceState(null, '', kept.length ? '#' + kept.join('&') : location.pathname);
}
window.addEventListener('DOMContentLoaded', () => {
  for (const part of location.hash.slice(1).split('&')) {
    const [name, value] = part.split('=');
    if (value === undefined && name) anchor = name;
    const select = FILTERS.includes(name) && document.getElementById(name);
    if (select) select.value = decodeURIComponent(value || '');
  }
  applyFilters();
});
"""


def regression_of(view: SeriesView, found: Sequence[Regression]) -> Regression | None:
    """The regression (open or acknowledged) of this view's test, series and metric."""
    return next((r for r in found if (r.test_id, r.series, r.metric)
                 == (view.test_id, view.last.series, view.metric)), None)


def _key(test_id: str, series: str, metric: str) -> str:
    """What ties a regression to its chart on the page."""
    return escape(f"{series} {metric} {test_id}")


def anchor(series: str, metric: str) -> str:
    """The id of a series' chart: a link to it (#series-...) stays as long as its identity."""
    return "series-" + re.sub(r"[^A-Za-z0-9_-]", "-", f"{series}-{metric}")


def _ci(point, text: str = "CI job") -> str:
    return f'<a href="{escape(point.ci_url)}">{text}</a>' if point.ci_url else "no CI job recorded"


def _caption(fact: ChangeFact, fmt) -> str:
    """One change point under its chart: when, how much, what changed, both runs' CI jobs."""
    size = escape(f"{fmt(fact.change.before)} -> {fmt(fact.change.after)} "
                  f"({(fact.change.ratio - 1) * 100:+.1f}%, {'worse' if fact.worse else 'better'})")
    what = ", ".join(fact.what) or "nothing recorded changed"
    return (f'<li value="{fact.number}"><b>{escape(when(fact.at))}, run {fact.at.run_id}</b>: '
            f'<span class="{"worse" if fact.worse else "better"}">{size}</span>; what changed: '
            f"{escape(what)} ({_ci(fact.before, f'run {fact.before.run_id}')}, "
            f"{_ci(fact.at, f'run {fact.at.run_id}')})</li>")


def _meta(view: SeriesView) -> str:
    last = view.last
    hosts = ", ".join(view.hosts) or "no host recorded"
    return (f'<p class="meta">{escape(view.hardware)} | {escape(view.engine)} | '
            f"{escape(last.workload_label)} | {len(view.points)} runs on {escape(hosts)} | "
            f"latest: run {last.run_id}, {escape(when(last))}, {escape(last.host or '-')}, "
            f"{_ci(last)} | a change counts beyond x{1 + view.tolerance:g}</p>")


def _section(view: SeriesView, found: Sequence[Regression]) -> list[str]:
    fmt = formatter(view.metric, *view.series.values) if view.series.values else str
    facts = change_facts(view)
    regression = regression_of(view, found)
    badge = (f' <span class="{regression.state}">{regression.state} regression</span>'
             if regression else "")
    captions = [_caption(fact, fmt) for fact in facts]
    link = anchor(view.last.series, view.metric)
    return [f'<section class="chart" id="{link}" data-hardware="{escape(view.hardware)}" '
            f'data-engine="{escape(view.engine)}" data-hosts="{escape(" ".join(view.hosts))}" '
            f'data-key="{_key(view.test_id, view.last.series, view.metric)}">',
            f"<h2>{escape(view.test_id)} &mdash; {escape(view.metric)}{badge} "
            f'<a href="#{link}" title="a link to this chart">#</a></h2>',
            _meta(view), f'<div class="plot-frame">{chart(view, facts)}</div>',
            f'<ol class="changes">{"".join(captions)}</ol>' if captions
            else '<p class="note">no change point</p>', "</section>"]


def _regressions(found: Sequence[Regression]) -> list[str]:
    if not found:
        return ['<p class="note">no open or acknowledged regression</p>']
    items = [f'<li data-key="{_key(r.test_id, r.series, r.metric)}"><span class="{r.state}">'
             f'{r.state}</span>: {escape(r.line.split(": ", 1)[1])} ({_ci(r.at)}, '
             f'<a href="#{anchor(r.series, r.metric)}">chart</a>)</li>'
             for r in found]
    return ["<h2>Regressions</h2>", f'<ul class="regressions">{"".join(items)}</ul>']


def _episodes(open_episodes: Sequence[Episode], now: datetime) -> list[str]:
    """The open episodes (history/episodes.py): what, since when, how many nights."""
    if not open_episodes:
        return []
    items = [f'<li><span class="open">{escape(e.kind)}</span>: {escape(e.line)} (open since '
             f"{e.opened_at:%Y-%m-%d}, {(now - e.opened_at).days} days, {e.nights} "
             f"night{'s' * (e.nights != 1)})</li>" for e in open_episodes]
    return ["<h2>Open episodes</h2>", f'<ul class="regressions">{"".join(items)}</ul>']


def _select(name: str, title: str, options: Sequence[str]) -> str:
    items = "".join(f'<option value="{escape(o)}">{escape(o)}</option>' for o in options)
    return (f'<label>{title} <select id="{name}" onchange="applyFilters()">'
            f'<option value="">all</option>{items}</select></label>')


def page(found: Sequence[SeriesView], where: str, regressions: Sequence[Regression] = (),
         episodes: Sequence[Episode] = ()) -> str:
    """The dashboard of `found` (history_view.views) from the store shown as `where`, with its
    `regressions` (reports/regressions.py) and open `episodes` (history/episode_book.py)."""
    options = {"hardware": sorted({v.hardware for v in found}),
               "host": sorted({h for v in found for h in v.hosts}),
               "engine": sorted({v.engine for v in found})}
    moment = datetime.now(timezone.utc)
    now = moment.strftime("%Y-%m-%d %H:%M UTC")
    lines = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             "<title>pytest-llmperf history</title>", f"<style>{STYLE}</style>",
             f"<script>{SCRIPT}</script>", "</head>", "<body>",
             "<h1>pytest-llmperf history</h1>",
             f'<p class="note">{escape(where)}, {now}; dots are runs by their start (hollow: not '
             "a point of the series, e.g. CLIENT LIMITED; red: a failed verdict; a click opens "
             "the run's CI job), grey lines the levels, dashed lines the change points "
             "(numbered as the list under the chart), the green band the committed "
             "baseline's.</p>", *_episodes(episodes, moment), *_regressions(regressions),
             '<div class="filters">',
             *(_select(name, title, options[name]) for name, title in FILTERS),
             f'<span class="note"><span id="shown">{len(found)}</span> charts</span></div>']
    for view in found:
        lines += _section(view, regressions)
    if not found:
        lines.append('<p class="note">the store holds no runs yet</p>')
    lines += ["</body>", "</html>"]
    return "\n".join(lines) + "\n"
