"""One chart of the history page (history_page.py): a metric of one series as inline SVG, over
the runs' start times. Every run is a dot (a link to its CI job where the store has one), the
levels between change points are grey lines, each change point a dashed line with a numbered
marker whose tooltip says what changed (the caption list under the chart says it in full), and
the committed baseline's band is green.

The x axis is time, not run order, because a team reads a night by its date ("since Tuesday")
and a gap in the nights is a gap on the axis: a tick a day (every few days over a long span),
every few hours within a day, the date on the first tick of each day. A chart with a run of
unknown start (a run file without a date) falls back to run order, labelled by run number.

The SVG has a viewBox and no fixed size: the page's style sizes it to the full width of its
section, and no narrower than MIN_WIDTH_PX (a phone scrolls it sideways rather than shrink its
11-pixel labels below about 9 pixels).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from html import escape

from pytest_llmperf.history.series import is_point
from pytest_llmperf.metrics.registry import formatter
from pytest_llmperf.reports.history_view import ChangeFact, SeriesView
from pytest_llmperf.verdict.status import Status

__all__ = ["HEIGHT", "MIN_WIDTH_PX", "WIDTH", "chart", "date_ticks", "label_rows", "when"]

WIDTH, HEIGHT = 960, 230
MIN_WIDTH_PX = 760
# The top 34 pixels hold the change points' two lines (size, then what changed) above the dots.
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 34, 30
FAILING = {status.summary for status in Status if status.failing}
WORSE, BETTER = "#cf222e", "#1a7f37"
# At most eight labels under the 870-pixel axis: a "2026-11-29 03:00" label is about 100 pixels.
TICKS = 8
HOUR, DAY = 3600, 86400
HOUR_STEPS = (1, 2, 3, 4, 6, 12)  # hours between ticks within a day or two
# What changed, on the chart: as many characters as fit beside a change point in half the
# chart's width (the tooltip and the caption under the chart say it whole).
WHAT_SHOWN = 60
# A change point's two lines of label take a row of ROW pixels; labels that would touch go to
# the next row down, each row adding ROW to the chart's height. CHAR_PX: the widest a character
# of the 11-pixel labels takes (bold digits and capitals), so a row's texts never touch.
ROW, CHAR_PX = 26, 7.0


def when(point) -> str:
    return point.started_at.strftime("%Y-%m-%d %H:%M UTC") if point.started_at else "no date"


def _scale(low: float, high: float, pixels_low: float, pixels_high: float):
    span = (high - low) or abs(high) or 1.0
    return lambda value: pixels_low + (value - low) / span * (pixels_high - pixels_low)


def _value(point, metric: str) -> float | None:
    entry = point.values.get(metric)
    return None if entry is None else entry.value


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


def _positions(view: SeriesView) -> tuple[dict[int, float], list[tuple[float, str]]]:
    """Each point's x (by its identity) and the axis' labels: by start time, else run order."""
    dated = all(p.started_at for p in view.points)
    keys = [p.started_at.timestamp() if dated else float(i) for i, p in enumerate(view.points)]
    x = _scale(min(keys), max(keys), LEFT + 10, WIDTH - RIGHT - 10)
    where = {id(p): x(k) for p, k in zip(view.points, keys)}
    if not dated:
        last = len(view.points) - 1
        return where, [(x(i), f"run {view.points[i].run_id}") for i in sorted({0, last // 2,
                                                                               last})]
    return where, [(x(t), label) for t, label in date_ticks(min(keys), max(keys))]


def date_ticks(first: float, last: float) -> list[tuple[float, str]]:
    """Ticks at whole hours (UTC, every 1-12 hours) over a span of up to two days, else at
    midnights every few days; at most TICKS. A tick's label is its date where it is the first
    tick of its day, else its time."""
    def moment(seconds: float) -> datetime:
        return datetime.fromtimestamp(seconds, timezone.utc)

    if last <= first:
        return [(first, moment(first).strftime("%Y-%m-%d %H:%M"))]
    tick, step = _grid(moment(first), last - first)
    out, day = [], None
    while tick.timestamp() <= last:
        if tick.timestamp() >= first:
            dated = tick.date() != day
            out.append((tick.timestamp(), tick.strftime(
                ("%Y-%m-%d" if tick.hour == 0 else "%Y-%m-%d %H:%M") if dated else "%H:%M")))
            day = tick.date()
        tick += step
    if not out:  # a span within one step: its two ends
        out = [(first, moment(first).strftime("%Y-%m-%d %H:%M")),
               (last, moment(last).strftime("%H:%M"))]
    return out


def _grid(start: datetime, span_s: float) -> tuple[datetime, timedelta]:
    """The first tick (over two days: the first midnight from `start` on; else the whole hour
    of the step at or before it, which date_ticks skips) and the step between ticks."""
    if span_s > 2 * DAY:
        midnight = start.replace(hour=0, minute=0, second=0, microsecond=0)
        first = midnight if midnight == start else midnight + timedelta(days=1)
        return first, timedelta(days=max(1, -(-int(span_s // DAY) // TICKS)))
    hours = next((h for h in HOUR_STEPS if span_s / (h * HOUR) < TICKS), HOUR_STEPS[-1])
    hour = start.replace(minute=0, second=0, microsecond=0)
    return hour.replace(hour=hour.hour - hour.hour % hours), timedelta(hours=hours)


def _dot(point, x: float, y: float, fmt, metric: str) -> str:
    if not is_point(point):
        style = 'fill="white" stroke="#8c959f"'
    elif point.verdict in FAILING:
        style = f'fill="{WORSE}"'
    else:
        style = 'fill="#0969da"'
    tip = (f"run {point.run_id}, {when(point)}, host {point.host or '-'}, commit "
           f"{(point.commit or '-')[:10]}: {fmt(_value(point, metric))} "
           f"({point.verdict or 'no verdict'})" + (f"; CI job {point.ci_url}" if point.ci_url
                                                    else ""))
    dot = (f'<circle class="run" data-host="{escape(point.host)}" cx="{x:.1f}" cy="{y:.1f}" '
           f'r="3.5" {style}><title>{escape(tip)}</title></circle>')
    return f'<a href="{escape(point.ci_url)}">{dot}</a>' if point.ci_url else dot


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


def _levels(view: SeriesView, x: dict[int, float], y) -> list[str]:
    """A line at each level's median, from its first point to its last."""
    series, out = view.series, []
    edges = [0, *(c.index for c in series.changes), len(series.points)]
    for start, end in zip(edges, edges[1:]):
        if end <= start:
            continue
        ordered = sorted(series.values[start:end])
        level = y(ordered[len(ordered) // 2])
        x1, x2 = x[id(series.points[start])], x[id(series.points[end - 1])]
        out.append(f'<line x1="{x1 - 4:.1f}" x2="{x2 + 4:.1f}" y1="{level:.1f}" '
                   f'y2="{level:.1f}" stroke="#57606a" stroke-width="1.5"/>')
    return out


def label_rows(spans: list[tuple[float, float]]) -> list[int]:
    """The row of each label (its x extent, left to right on the chart): the first row where it
    touches no label already placed there."""
    rows: list[list[tuple[float, float]]] = []
    found = []
    for low, high in spans:
        row = next((i for i, taken in enumerate(rows)
                    if all(high < a or low > b for a, b in taken)), len(rows))
        if row == len(rows):
            rows.append([])
        rows[row].append((low, high))
        found.append(row)
    return found


def _texts(fact: ChangeFact) -> tuple[str, str]:
    label = f"{fact.number}: {(fact.change.ratio - 1) * 100:+.1f}% at run {fact.at.run_id}"
    what = ", ".join(fact.what) or "nothing recorded changed"
    return label, what if len(what) <= WHAT_SHOWN else what[:WHAT_SHOWN - 3] + "..."


def _span(cx: float, texts: tuple[str, str]) -> tuple[float, float, str, int]:
    """The x extent of a change's label, its anchor and offset from its line."""
    width = CHAR_PX * max(map(len, texts))
    if cx < WIDTH / 2:
        return cx + 4, cx + 4 + width, "start", 4
    return cx - 4 - width, cx - 4, "end", -4


def _changes(facts: list[ChangeFact], x: dict[int, float]) -> tuple[list[str], int]:
    """A dashed line between a change's first run and the run before it, and its marker: the
    number of its caption under the chart, its size, and what changed as the tooltip; and how
    many label rows they take (drawn above the plot, which moves down by the rows after the
    first)."""
    centres = [(x[id(fact.before)] + x[id(fact.at)]) / 2 for fact in facts]
    texts = [_texts(fact) for fact in facts]
    spans = [_span(cx, text) for cx, text in zip(centres, texts)]
    rows = label_rows([(low, high) for low, high, _, _ in spans])
    extra = ROW * max(rows, default=0)
    out = []
    for fact, cx, (label, what), (_, _, anchor, dx), row in zip(facts, centres, texts, spans,
                                                                rows):
        color, top = (WORSE if fact.worse else BETTER), ROW * row
        tip = f"{label} ({when(fact.at)}); {fact.clause}"
        out += [f'<g class="change"><title>{escape(tip)}</title>',
                f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{4 + top}" y2="{HEIGHT - BOTTOM + extra}" '
                f'stroke="{color}" stroke-dasharray="5 4" stroke-width="1.5"/>',
                f'<text x="{cx + dx:.1f}" y="{13 + top}" text-anchor="{anchor}" '
                f'style="fill:{color};font-weight:600">{escape(label)}</text>',
                f'<text x="{cx + dx:.1f}" y="{26 + top}" text-anchor="{anchor}">'
                f"{escape(what)}</text></g>"]
    return out, extra


def _axes(x_labels: list[tuple[float, str]], y, low: float, high: float, fmt) -> list[str]:
    out = [f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" stroke="#d0d7de"/>',
           f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{HEIGHT - BOTTOM}" '
           f'y2="{HEIGHT - BOTTOM}" stroke="#d0d7de"/>']
    for step in range(5):
        value = low + (high - low) * step / 4
        out.append(f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">'
                   f"{escape(fmt(value))}</text>")
    for px, label in x_labels:
        out += [f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{HEIGHT - BOTTOM}" '
                f'y2="{HEIGHT - BOTTOM + 4}" stroke="#8c959f"/>',
                f'<text x="{px:.1f}" y="{HEIGHT - 10}" text-anchor="middle">'
                f"{escape(label)}</text>"]
    return out


def chart(view: SeriesView, facts: list[ChangeFact]) -> str:
    """One view as an inline SVG; `facts` are its change points (history_view.change_facts)."""
    low, high = _extent(view)
    fmt = formatter(view.metric, low, high)
    x, x_labels = _positions(view)
    y = _scale(low, high, HEIGHT - BOTTOM, TOP)
    dots = [_dot(p, x[id(p)], y(min(max(v, low), high)), fmt, view.metric)
            for p in view.points if (v := _value(p, view.metric)) is not None]
    changes, extra = _changes(facts, x)
    plot = [*_band(view, y, fmt), *_axes(x_labels, y, low, high, fmt), *_levels(view, x, y),
            *dots]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" '
            f'viewBox="0 0 {WIDTH} {HEIGHT + extra}" role="img" '
            f'aria-label="{escape(view.metric)}">' + "".join(changes)
            + f'<g transform="translate(0 {extra})">' + "".join(plot) + "</g></svg>")
