"""`llmperf history --html PATH`: the results store as one self-contained page, a chart per test,
series and metric: every run as a dot, the levels between change points, each change point as a
dashed line with its size, and the committed baseline's band. Two selects filter the charts by
hardware and by engine (a few lines of inline script); the charts are inline SVG, so the page
loads nothing from anywhere and needs no plotting library.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from html import escape

from pytest_llmperf.history.series import is_point
from pytest_llmperf.metrics.registry import direction, formatter
from pytest_llmperf.reports.history_view import SeriesView
from pytest_llmperf.verdict.status import Status

__all__ = ["page"]

WIDTH, HEIGHT = 760, 230
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 16, 30
FAILING = {status.summary for status in Status if status.failing}
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #1f2328; }
h1 { font-size: 22px; } h2 { font-size: 15px; margin: 0 0 2px; }
.filters { margin: 12px 0 20px; } .filters label { margin-right: 16px; }
section { border: 1px solid #d0d7de; border-radius: 6px; padding: 10px 14px; margin: 14px 0; }
.meta, .note { color: #57606a; font-size: 12.5px; margin: 0 0 6px; }
.worse { color: #b42318; font-weight: 600; } .better { color: #1a7f37; font-weight: 600; }
svg text { font: 11px system-ui, sans-serif; fill: #57606a; }
"""
SCRIPT = """
function applyFilters() {
  const hw = document.getElementById('hardware').value;
  const engine = document.getElementById('engine').value;
  let shown = 0;
  for (const chart of document.querySelectorAll('section.chart')) {
    const keep = (!hw || chart.dataset.hardware === hw)
      && (!engine || chart.dataset.engine === engine);
    chart.style.display = keep ? '' : 'none';
    shown += keep ? 1 : 0;
  }
  document.getElementById('shown').textContent = shown;
}
"""


def _scale(low: float, high: float, pixels_low: float, pixels_high: float):
    span = (high - low) or abs(high) or 1.0
    return lambda value: pixels_low + (value - low) / span * (pixels_high - pixels_low)


def _extent(view: SeriesView) -> tuple[float, float]:
    """The y range: the series' points and the band (a wild run that is not a point of the
    series would squash it; it is drawn at the edge instead)."""
    values = list(view.series.values) or [
        v for p in view.points if (v := _value(p, view.metric)) is not None]
    if view.band:
        values += [view.band.low, view.band.high]
    low, high = min(values), max(values)
    pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
    return low - pad, high + pad


def _value(point, metric: str) -> float | None:
    entry = point.values.get(metric)
    return None if entry is None else entry.value


def _dot(point, x: float, y: float, fmt, metric: str) -> str:
    if not is_point(point):
        style = 'fill="white" stroke="#8c959f"'
    elif point.verdict in FAILING:
        style = 'fill="#cf222e"'
    else:
        style = 'fill="#0969da"'
    when = point.started_at.strftime("%Y-%m-%d %H:%M") if point.started_at else ""
    tip = (f"run {point.run_id} {when} commit {(point.commit or '-')[:10]}: "
           f"{fmt(_value(point, metric))} ({point.verdict or 'no verdict'})")
    return (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" {style}>'
            f"<title>{escape(tip)}</title></circle>")


def _band(view: SeriesView, y, fmt) -> list[str]:
    if view.band is None:
        return []
    top, bottom = y(view.band.high), y(view.band.low)
    base = y(view.band.baseline)
    return [f'<rect x="{LEFT}" y="{top:.1f}" width="{WIDTH - LEFT - RIGHT}" '
            f'height="{bottom - top:.1f}" fill="#2da44e" fill-opacity="0.10"/>',
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{base:.1f}" y2="{base:.1f}" '
            'stroke="#2da44e" stroke-dasharray="2 3"/>',
            f'<text x="{WIDTH - RIGHT - 4}" y="{top - 3:.1f}" text-anchor="end">baseline '
            f"{escape(fmt(view.band.baseline))} and its band</text>"]


def _levels(view: SeriesView, x, y) -> list[str]:
    """A line at each level's median, from its first point to its last."""
    series, out = view.series, []
    index = {id(p): i for i, p in enumerate(view.points)}
    edges = [0, *(c.index for c in series.changes), len(series.points)]
    for start, end in zip(edges, edges[1:]):
        if end <= start:
            continue
        ordered = sorted(series.values[start:end])
        level = ordered[len(ordered) // 2]
        x1, x2 = x(index[id(series.points[start])]), x(index[id(series.points[end - 1])])
        out.append(f'<line x1="{x1 - 4:.1f}" x2="{x2 + 4:.1f}" y1="{y(level):.1f}" '
                   f'y2="{y(level):.1f}" stroke="#57606a" stroke-width="1.5"/>')
    return out


def _changes(view: SeriesView, x) -> list[str]:
    index = {id(p): i for i, p in enumerate(view.points)}
    lower, out = direction(view.metric) == "lower", []
    for change in view.series.changes:
        at = index[id(view.series.at(change))]
        worse = (change.ratio > 1) == lower
        color = "#cf222e" if worse else "#1a7f37"
        cx = x(at - 0.5)
        label = f"{(change.ratio - 1) * 100:+.1f}% at run {view.series.at(change).run_id}"
        out += [f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" '
                f'stroke="{color}" stroke-dasharray="5 4" stroke-width="1.5"/>',
                f'<text x="{cx + 4:.1f}" y="{TOP + 10}" style="fill:{color}">'
                f"{escape(label)}</text>"]
    return out


def _axes(view: SeriesView, x, y, low: float, high: float, fmt) -> list[str]:
    out = [f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" stroke="#d0d7de"/>',
           f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{HEIGHT - BOTTOM}" '
           f'y2="{HEIGHT - BOTTOM}" stroke="#d0d7de"/>']
    for step in range(5):
        value = low + (high - low) * step / 4
        out.append(f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">'
                   f"{escape(fmt(value))}</text>")
    last = len(view.points) - 1
    for i in sorted({0, last // 2, last}):
        out.append(f'<text x="{x(i):.1f}" y="{HEIGHT - 10}" text-anchor="middle">run '
                   f"{view.points[i].run_id}</text>")
    return out


def chart(view: SeriesView) -> str:
    """One view as an inline SVG."""
    low, high = _extent(view)
    fmt = formatter(view.metric, low, high)
    x = _scale(0, max(len(view.points) - 1, 1), LEFT + 10, WIDTH - RIGHT - 10)
    y = _scale(low, high, HEIGHT - BOTTOM, TOP)
    dots = [_dot(p, x(i), y(min(max(v, low), high)), fmt, view.metric)
            for i, p in enumerate(view.points) if (v := _value(p, view.metric)) is not None]
    parts = [*_band(view, y, fmt), *_axes(view, x, y, low, high, fmt), *_levels(view, x, y),
             *_changes(view, x), *dots]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(view.metric)}">'
            + "".join(parts) + "</svg>")


def _section(view: SeriesView) -> list[str]:
    fmt = formatter(view.metric, *view.series.values) if view.series.values else str
    lower = direction(view.metric) == "lower"
    changes = [f'<span class="{"worse" if (c.ratio > 1) == lower else "better"}">'
               f"{escape(fmt(c.before))} -> {escape(fmt(c.after))} at run "
               f"{view.series.at(c).run_id}</span>" for c in view.series.changes]
    return [f'<section class="chart" data-hardware="{escape(view.hardware)}" '
            f'data-engine="{escape(view.engine)}">',
            f"<h2>{escape(view.test_id)} &mdash; {escape(view.metric)}</h2>",
            f'<p class="meta">{escape(view.hardware)} | {escape(view.engine)} | '
            f"{escape(view.last.workload_label)} | {len(view.points)} runs, changes beyond "
            f"x{1 + view.tolerance:g}: {', '.join(changes) or 'none'}</p>",
            chart(view), "</section>"]


def _select(name: str, title: str, options: Sequence[str]) -> str:
    items = "".join(f'<option value="{escape(o)}">{escape(o)}</option>' for o in options)
    return (f'<label>{title} <select id="{name}" onchange="applyFilters()">'
            f'<option value="">all</option>{items}</select></label>')


def page(found: Sequence[SeriesView], where: str) -> str:
    """The dashboard of `found` (history_view.views) from the store shown as `where`."""
    hardware = sorted({v.hardware for v in found})
    engines = sorted({v.engine for v in found})
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             "<title>pytest-llmperf history</title>", f"<style>{STYLE}</style>",
             f"<script>{SCRIPT}</script>", "</head>", "<body>",
             "<h1>pytest-llmperf history</h1>",
             f'<p class="note">{escape(where)}, {now}; dots are runs (hollow: not a point of '
             "the series, e.g. CLIENT LIMITED; red: a failed verdict), grey lines the levels, "
             "dashed lines the change points, the green band the committed baseline's.</p>",
             '<div class="filters">', _select("hardware", "hardware", hardware),
             _select("engine", "engine", engines),
             f'<span class="note"><span id="shown">{len(found)}</span> charts</span></div>']
    for view in found:
        lines += _section(view)
    if not found:
        lines.append('<p class="note">the store holds no runs yet</p>')
    lines += ["</body>", "</html>"]
    return "\n".join(lines) + "\n"
