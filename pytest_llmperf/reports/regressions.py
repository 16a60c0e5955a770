"""Open and acknowledged regressions, as `llmperf history` lists them: each series' last change
for the worse that is still its level, with its age in nights (runs since it), and whether an
acknowledgement (`llmperf ack`, history/acks.py) covers it: who, why, until when."""

from __future__ import annotations

from datetime import datetime, timezone

from pytest_llmperf.history import acks as acks_mod
from pytest_llmperf.history.series import run_name, series_of
from pytest_llmperf.history.store import HistoryStore, Point
from pytest_llmperf.history.trend import is_worse
from pytest_llmperf.verdict import gate

__all__ = ["regression_lines"]


def regression_lines(store: HistoryStore, now: datetime | None = None) -> list[str]:
    """Every test's open regressions (its series' last change for the worse, with its age in
    nights: runs since) and the acknowledged ones, with who, why and until when."""
    now = now or datetime.now(timezone.utc)
    lines = []
    for test, _ in store.test_ids():
        acks = store.acks(test)
        for points in _by_series(store.points(test, None)):
            lines += _series_lines(test, points, acks, now)
    return lines


def _by_series(points: list[Point]) -> list[list[Point]]:
    found: dict[str, list[Point]] = {}
    for point in points:
        found.setdefault(point.series, []).append(point)
    return list(found.values())


def _series_lines(test: str, points: list[Point], acks, now: datetime) -> list[str]:
    last = points[-1]
    tolerance = (last.gate or {}).get("tolerance") or gate.DEFAULT_TOLERANCE
    lines = []
    for metric in sorted(last.values):
        series = series_of(points, metric, tolerance)
        if not series.changes or not is_worse(metric, series.changes[-1]):
            continue
        change = series.changes[-1]
        nights = len(series.points) - change.index
        what = (f"{test} {metric} {(change.ratio - 1) * 100:+.1f}% since "
                f"{run_name(series.at(change))}, {nights} night{'s' * (nights != 1)}")
        ack = acks_mod.covering(acks, metric, series.at(change).started_at, now)
        lines.append(f"acknowledged: {what}; {ack.line()}" if ack else f"open: {what}")
    return lines
