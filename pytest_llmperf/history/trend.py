"""The trend gate (`--llmperf-trend`): a test fails when one of its gated metrics' series has a
change for the worse, larger than the test's tolerance, whose first run is one of the last
`window` runs (this one included). A change for the better is a note.

`TrendCheck` is a reference-like check (verdict/references.py's `Reference`: `compare(current,
gated, tolerance)`), given to `references.judge` beside the baseline: the verdict keeps one path.
The series is the stored one (same test, hardware family, engine spec and workload: identity.py)
plus this run's values as its last point, judged by changepoints.py's rule at the test's tolerance
as the minimum effect. A change of the last `window` runs is judged, and so is the series' last
change while it is for the worse: a regression nobody fixed stays red every night (not green after
`window` runs, when a runner without a committed baseline would stop failing it) until it is
acknowledged (`llmperf ack`, acks.py: the line then says by whom, why and until when; expired, it
is red again), the committed baseline is updated after it, or the level comes back.

One line says it all: the metric, the levels before and after, the change against the allowed
factor, the run where it changed and what else changed at that run:

    tpot_s.p50 changed for the worse at run 7 (2026-11-25, commit 1a2b3c4d5e): 2.24 ms -> 2.81
    ms (+25.4%, allowed +10.0%, lower is better), 2 runs ago in .llmperf/history.sqlite; what
    changed at run 7: vllm 0.32.0 -> 0.33.0; see: llmperf history "suites/test_cpu.py::test_x"
    --metric tpot_s.p50

A latency that changed for the worse also says which of its phases grew (metrics/phases.py),
from the medians of the runs on either side of the change, where those runs have the server's
timings: "...; queue grew most (means: queue +180.0 ms, prefill +3.0 ms, ...)".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from pytest_llmperf.history.acks import Ack, covering, expired_for
from pytest_llmperf.history.changepoints import Change
from pytest_llmperf.history.record import MetricValue
from pytest_llmperf.history.series import Series, changed_text, run_name, series_of
from pytest_llmperf.history.store import Point
from pytest_llmperf.metrics import phases
from pytest_llmperf.metrics.registry import direction, formatter
from pytest_llmperf.verdict import gate
from pytest_llmperf.verdict.references import Current, Judgement
from pytest_llmperf.verdict.status import Status

__all__ = ["DEFAULT_WINDOW", "TrendCheck", "change_line", "change_phases", "is_worse",
           "judged_changes", "with_value"]

DEFAULT_WINDOW = 3


def _allowed(tolerance: float, ratio: float) -> str:
    """The gate's factor band on the side the level moved to (gate.py)."""
    if ratio >= 1:
        return f"+{tolerance * 100:.1f}%"
    return f"-{tolerance / (1 + tolerance) * 100:.1f}%"


def change_line(series: Series, change: Change, tolerance: float, where: str) -> str:
    """The message of one change (module docstring), without the `see:` hint."""
    name = series.metric
    fmt = formatter(name, change.before, change.after)
    worse = (change.ratio > 1) == (direction(name) == "lower")
    ago = len(series.points) - change.index
    verb = "changed for the worse" if worse else "improved"
    return (f"{name} {verb} at {run_name(series.at(change))}: {fmt(change.before)} -> "
            f"{fmt(change.after)} ({(change.ratio - 1) * 100:+.1f}%, allowed "
            f"{_allowed(tolerance, change.ratio)}, {direction(name)} is better), {ago} run"
            f"{'s' if ago > 1 else ''} ago in {where}; {changed_text(series, change)}")


@dataclass(frozen=True)
class TrendCheck:
    """The stored `points` of this test's series, `now` the run being judged (run_id None,
    values filled from the current estimates at compare time), `where` the store as shown."""

    points: Sequence[Point]
    now: Point
    where: str
    test_id: str
    window: int = DEFAULT_WINDOW
    acks: Sequence[Ack] = ()  # this test's acknowledgements (acks.py)
    clock: datetime | None = None  # now; None: the wall clock
    # When the test's committed table was written: a change before it was accepted by that
    # update (--llmperf-update-baselines after the change is the team acting on it).
    baseline_at: datetime | None = None

    def compare(self, current: Current, gated: Sequence[str],
                tolerance: float | None = None) -> Judgement:
        band = gate.DEFAULT_TOLERANCE if tolerance is None else tolerance
        verdicts, notes = [], []
        for name in gated:
            estimate = current.estimates.get(name)
            if estimate is None or not math.isfinite(estimate.value):
                continue
            now = self._now_with(name, estimate.value, current)
            series = series_of([*self.points, now], name, band)
            for change in judged_changes(series, self.window):
                line = change_line(series, change, band, self.where)
                if not is_worse(series.metric, change):
                    notes.append(line)
                    continue
                acked, line = self._acknowledged(series, change, line)
                if acked:
                    notes.append(line)
                    continue
                hint = f'; see: llmperf history "{self.test_id}" --metric {name}'
                verdicts.append(gate.Verdict(
                    name, Status.REGRESSION, estimate.value, change.before,
                    (change.ratio - 1) * 100, abs(change.after - change.before), band * 100,
                    line + hint))
        return Judgement(report=gate.GateReport(tuple(verdicts)), notes=notes)

    def _acknowledged(self, series: Series, change: Change, line: str) -> tuple[bool, str]:
        """Whether an active acknowledgement covers a change for the worse, and its line: with
        the acknowledgement, or the phases that grew and an expired acknowledgement."""
        clock = self.clock or datetime.now(timezone.utc)
        at = series.at(change).started_at
        # A table's date is kept to the second (verdict/baseline_provenance.py): a change whose
        # first run began in the second the table was written, or before, came before it.
        if at is not None and self.baseline_at is not None \
                and at.replace(microsecond=0) <= self.baseline_at:
            return True, (f"{line}; accepted: the committed baseline was updated since "
                          f"({self.baseline_at.date().isoformat()})")
        ack = covering(self.acks, series.metric, at, clock, self.now.family or None)
        if ack is not None:
            return True, f"{line}; {ack.line()}"
        grew = change_phases(series, change)
        line += f"; {grew}" if grew else ""
        expired = expired_for(self.acks, series.metric, at, clock, self.now.family or None)
        return False, line + (f"; expired: {expired.line()}" if expired else "")

    def _now_with(self, name: str, value: float, current: Current) -> Point:
        """The run being judged, holding `value` as its `name` and the phases' means a split
        needs (metrics/phases.py), from the current estimates."""
        point = with_value(self.now, name, value)
        found = {key: MetricValue(estimate.value, None, None, direction(key))
                 for key in phases.SPLIT_NAMES
                 if (estimate := current.estimates.get(key)) is not None}
        return replace(point, values={**found, **point.values})


def is_worse(metric: str, change: Change) -> bool:
    return (change.ratio > 1) == (direction(metric) == "lower")


def judged_changes(series: Series, window: int) -> list[Change]:
    """The changes the trend gate judges: those of the last `window` runs, and the series'
    last change where it was for the worse: the level it is at now, red every night until
    someone acknowledges it (acks.py) or the level comes back."""
    changes = series.recent(window)
    last = series.changes[-1] if series.changes else None
    if last is not None and last not in changes and is_worse(series.metric, last):
        changes = [last, *changes]
    return changes


def change_phases(series: Series, change: Change) -> str | None:
    """Which phases of a latency grew at `change` (metrics/phases.py): the medians of the runs
    of the segment before it against those of the segment from it on; None where either
    segment's runs lack the server's timings."""
    bounds = [0, *(found.index for found in series.changes), len(series.points)]
    at = bounds.index(change.index)
    before = series.points[bounds[at - 1]:change.index]
    after = series.points[change.index:bounds[at + 1]]

    def values(points: Sequence[Point]) -> dict[str, float]:
        return phases.medians({key: found.value for key, found in point.values.items()
                               if found.value is not None} for point in points)

    return phases.growth(series.metric, values(after), values(before))


def with_value(point: Point, name: str, value: float) -> Point:
    """`point` (the run being measured) holding `value` as its `name`."""
    return replace(point, values={name: MetricValue(value, None, None, direction(name))})
