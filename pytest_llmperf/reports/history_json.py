"""`llmperf history --json`: what the dashboard shows, as one JSON document for other tools (a
Grafana JSON data source, a bot, a notebook). Its shape is in docs/history.md ("--json"); the
version changes when a field is removed or changes meaning, not when one is added.

The same views (history_view.py) and regressions (reports/regressions.py) as the page: a tool
reads the numbers a person sees, never a second computation of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pytest_llmperf.history.series import is_point
from pytest_llmperf.history.store import Point
from pytest_llmperf.metrics.registry import direction
from pytest_llmperf.reports.history_page import regression_of
from pytest_llmperf.reports.history_view import ChangeFact, SeriesView, change_facts
from pytest_llmperf.reports.regressions import Regression

__all__ = ["FORMAT", "VERSION", "document"]

FORMAT = "pytest-llmperf history"
VERSION = 1


def _date(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def _point(point: Point, metric: str) -> dict[str, Any]:
    entry = point.values.get(metric)
    return {"run": point.run_id, "date": _date(point.started_at),
            "value": None if entry is None else entry.value,
            "spread": None if entry is None else entry.spread, "verdict": point.verdict,
            "point": is_point(point), "commit": point.commit, "host": point.host or None,
            "vllm": point.fingerprint.get("vllm"), "ci_url": point.ci_url or None}


def _change(fact: ChangeFact) -> dict[str, Any]:
    return {"number": fact.number, "run": fact.at.run_id, "date": _date(fact.at.started_at),
            "run_before": fact.before.run_id, "before": fact.change.before,
            "after": fact.change.after,
            "percent": round((fact.change.ratio - 1) * 100, 3), "worse": fact.worse,
            "what_changed": list(fact.what), "text": fact.clause,
            "ci_url": fact.at.ci_url or None, "ci_url_before": fact.before.ci_url or None}


def _regression(found: Regression | None) -> dict[str, Any] | None:
    if found is None:
        return None
    ack = found.ack
    return {"state": found.state, "test_id": found.test_id, "metric": found.metric,
            "series": found.series, "run": found.at.run_id, "date": _date(found.at.started_at),
            "percent": round(found.percent, 3), "nights": found.nights, "line": found.line,
            "ci_url": found.at.ci_url or None,
            "ack": None if ack is None else {
                "who": ack.who, "reason": ack.reason, "recorded_at": _date(ack.recorded_at),
                "until": _date(ack.until)}}


def _series(view: SeriesView, regressions: Sequence[Regression]) -> dict[str, Any]:
    last, band = view.last, view.band
    return {"test_id": view.test_id, "metric": view.metric, "series": last.series,
            "direction": direction(view.metric), "hardware": view.hardware,
            "hardware_class": last.hardware_class or None, "family": last.family,
            "engine": view.engine, "workload": last.workload_label, "hosts": view.hosts,
            "tolerance": view.tolerance,
            "baseline": None if band is None else {
                "value": band.baseline, "low": band.low, "high": band.high,
                "file": view.baseline_file},
            "points": [_point(point, view.metric) for point in view.points],
            "changes": [_change(fact) for fact in change_facts(view)],
            "regression": _regression(regression_of(view, regressions))}


def document(found: Sequence[SeriesView], where: str, regressions: Sequence[Regression],
             generated_at: datetime) -> dict[str, Any]:
    """The document of `found` (history_view.views) from the store shown as `where`."""
    return {"format": FORMAT, "version": VERSION, "store": where,
            "generated_at": generated_at.isoformat(),
            "series": [_series(view, regressions) for view in found],
            "regressions": [_regression(r) for r in regressions]}
