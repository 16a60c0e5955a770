"""One stored night (a run of the results store) as the exports read it: every result the run
recorded, with every metric it stored, and the run's own facts (shape, host, commit, CI job).

Read through the store's public interface (HistoryStore.test_ids, metric_names, points), so an
export sees exactly what `llmperf history` shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pytest_llmperf.history.store import HistoryError, HistoryStore, Point

__all__ = ["LATEST", "Night", "Result", "read_night"]

LATEST = "latest"


@dataclass(frozen=True)
class Result:
    """One stored result of the night: its test and its point (values: every stored metric)."""

    test_id: str
    point: Point


@dataclass(frozen=True)
class Night:
    run_id: int
    results: tuple[Result, ...]

    @property
    def first(self) -> Point:
        return self.results[0].point

    @property
    def started_at(self) -> datetime | None:
        return self.first.started_at


def _all_results(store: HistoryStore) -> list[Result]:
    found: list[Result] = []
    for test_id, _count in store.test_ids():
        names = store.metric_names(test_id)
        found += [Result(test_id, point) for point in store.points(test_id, names)]
    return found


def read_night(store: HistoryStore, run: str) -> Night:
    """The night `run` ("latest", or a run number as `llmperf history` shows it); HistoryError
    (one line naming the fix) where the store holds no such run."""
    if run != LATEST and not run.isdigit():
        raise HistoryError(f"--run {run!r}: give a run number (as `llmperf history TEST` shows "
                           "it) or 'latest'")
    found = _all_results(store)
    if not found:
        raise HistoryError(f"{store.where.shown} holds no runs yet; a pytest run with "
                           "--llmperf-history stores one")
    wanted = max(r.point.run_id or 0 for r in found) if run == LATEST else int(run)
    results = tuple(r for r in found if r.point.run_id == wanted)
    if not results:
        raise HistoryError(f"--run {run}: {store.where.shown} holds no run {run}; "
                           "`llmperf history TEST` shows the run numbers, or give --run latest")
    return Night(wanted, results)
