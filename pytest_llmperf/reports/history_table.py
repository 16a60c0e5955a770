"""`llmperf history`'s table: one metric of one series, a row per stored run, oldest first, the
first run of each new level marked with the change and what else changed at that run:

    test_suite.py::test_a  tpot_s.p50  (lower is better; a change counts beyond x1.1)
    hardware cpu: AMD EPYC, 2 cores (cpu-1a2b3c4d5e) | engine m seqs=32 | workload a x20
    run  date        commit      vllm    value     verdict  change
    ---  ----------  ----------  ------  --------  -------  ------------------------------
      6  2026-11-25  1a2b3c4d5e  0.32.0  10.0 ms   pass
      7  2026-11-25  5e6f7a8b9c  0.32.0  12.5 ms   pass     >> 10.0 ms -> 12.5 ms (+25.5%,
                                                             worse); commit 1a2b... -> 5e6f...

A run whose measurement was not of the engine (CLIENT LIMITED, DISTURBED, ...) is listed with
"not a point" and never starts a change (history/series.py).
"""

from __future__ import annotations

from pytest_llmperf.history.series import changed_text, is_point
from pytest_llmperf.history.store import Point
from pytest_llmperf.metrics.registry import direction, formatter
from pytest_llmperf.reports.history_view import SeriesView
from pytest_llmperf.reports.text_table import aligned

__all__ = ["HEADER", "table_lines"]

HEADER = ["run", "date", "commit", "vllm", "value", "verdict", "change"]
RIGHT = {"run", "value"}


def _value(point: Point, metric: str, fmt) -> str:
    entry = point.values.get(metric)
    return "-" if entry is None or entry.value is None else fmt(entry.value)


def _row(view: SeriesView, point: Point, marks: dict[int, str], fmt) -> list[str]:
    when = point.started_at.date().isoformat() if point.started_at else ""
    commit = (point.commit or "")[:10]
    change = marks.get(id(point), "" if is_point(point) else "not a point")
    return [str(point.run_id), when, commit, str(point.fingerprint.get("vllm") or ""),
            _value(point, view.metric, fmt), point.verdict, change]


def _marks(view: SeriesView, fmt) -> dict[int, str]:
    """The change cell of each run that starts a new level, by the point's identity."""
    marks = {}
    lower = direction(view.metric) == "lower"
    for change in view.series.changes:
        worse = (change.ratio > 1) == lower
        what = changed_text(view.series, change).split(": ", 1)
        detail = what[1] if len(what) > 1 else "nothing recorded changed"
        marks[id(view.series.at(change))] = (
            f">> {fmt(change.before)} -> {fmt(change.after)} ({(change.ratio - 1) * 100:+.1f}%, "
            f"{'worse' if worse else 'better'}); {detail}")
    return marks


def table_lines(view: SeriesView) -> list[str]:
    values = [p.values[view.metric].value for p in view.points
              if view.metric in p.values and p.values[view.metric].value is not None]
    fmt = formatter(view.metric, *values) if values else str
    marks = _marks(view, fmt)
    rows = [_row(view, point, marks, fmt) for point in view.points]
    band = (f"; baseline {fmt(view.band.baseline)}, band {fmt(view.band.low)} to "
            f"{fmt(view.band.high)} ({view.baseline_file})" if view.band else "")
    last = view.last
    return [f"{view.test_id}  {view.metric}  ({direction(view.metric)} is better; a change "
            f"counts beyond x{1 + view.tolerance:g}){band}",
            f"hardware {view.hardware} | engine {view.engine} | workload {last.workload_label}",
            *aligned(HEADER, rows, RIGHT),
            f"{len(view.series.changes)} change(s) in {len(view.series.points)} points "
            f"({len(view.points)} runs)"]
