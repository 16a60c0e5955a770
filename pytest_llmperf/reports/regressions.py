"""Open and acknowledged regressions, as `llmperf history` lists them and its dashboard and JSON
show them: each series' last change for the worse that is still its level, with its age in
nights (runs since it), and whether an acknowledgement (`llmperf ack`, history/acks.py) covers
it: who, why, until when."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timezone

from pytest_llmperf.history import acks as acks_mod
from pytest_llmperf.history.acks import Ack
from pytest_llmperf.history.series import run_name, series_of
from pytest_llmperf.history.store import HistoryStore, Point
from pytest_llmperf.history.trend import is_worse
from pytest_llmperf.verdict import gate

__all__ = ["Regression", "regression_lines", "regressions"]


@dataclass(frozen=True)
class Regression:
    """One series' last change for the worse of one metric: `at` is its first run, `nights`
    the runs since (it included), `ack` the acknowledgement that covers it (None: open)."""

    test_id: str
    metric: str
    series: str  # the series' key (history/identity.py), as Point.series
    at: Point
    percent: float
    nights: int
    ack: Ack | None

    @property
    def state(self) -> str:
        return "open" if self.ack is None else "acknowledged"

    @property
    def line(self) -> str:
        what = (f"{self.test_id} {self.metric} {self.percent:+.1f}% since {run_name(self.at)}, "
                f"{self.nights} night{'s' * (self.nights != 1)}")
        return f"acknowledged: {what}; {self.ack.line()}" if self.ack else f"open: {what}"


def regressions(store: HistoryStore, now: datetime | None = None,
                tests: Collection[str] | None = None) -> list[Regression]:
    """The open regressions and the acknowledged ones of every test (or of `tests`), by test,
    then series, then metric."""
    now = now or datetime.now(timezone.utc)
    found = []
    for test, _ in store.test_ids():
        if tests is not None and test not in tests:
            continue
        acks = store.acks(test)
        for points in _by_series(store.points(test, None)):
            found += _series_regressions(test, points, acks, now)
    return found


def regression_lines(store: HistoryStore, now: datetime | None = None) -> list[str]:
    """`llmperf history`'s closing lines: one per regression (Regression.line)."""
    return [found.line for found in regressions(store, now)]


def _by_series(points: list[Point]) -> list[list[Point]]:
    found: dict[str, list[Point]] = {}
    for point in points:
        found.setdefault(point.series, []).append(point)
    return list(found.values())


def _series_regressions(test: str, points: list[Point], acks, now: datetime
                        ) -> list[Regression]:
    last = points[-1]
    tolerance = (last.gate or {}).get("tolerance") or gate.DEFAULT_TOLERANCE
    found = []
    for metric in sorted(last.values):
        series = series_of(points, metric, tolerance)
        if not series.changes or not is_worse(metric, series.changes[-1]):
            continue
        change = series.changes[-1]
        at = series.at(change)
        ack = acks_mod.covering(acks, metric, at.started_at, now, last.family or None)
        found.append(Regression(test, metric, last.series, at, (change.ratio - 1) * 100,
                                len(series.points) - change.index, ack))
    return found
