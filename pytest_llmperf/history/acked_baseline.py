"""A baseline's regression the team acknowledged (`llmperf ack`, acks.py): red until then, then
passed, saying so, while the acknowledgement lasts and the metric stays where it was seen.

The trend gate reads acknowledgements itself (trend.py). The baseline gate judges against a
table that does not move until someone updates it, so without this a night slower than the
committed table stays red after the team has acknowledged it, and the only way to green is to
rewrite the table. `AcknowledgedBaseline` wraps the baseline (any verdict/references.py
`Reference`) and looks again at each REGRESSION it finds: where an active acknowledgement
silences that metric on this runner shape (Ack.silences), the level it accepted is the metric's
value in the series' newest stored run from before the acknowledgement (the red night someone
looked at). A value within the test's tolerance of that level passes, with the baseline's line
and the acknowledgement's (who, when, until, why); a value worse than it is a new regression
and stays red, its line naming the level acknowledged. An expired acknowledgement is named
beside the regression, as the trend gate does.

An accepted change (`llmperf accept`, an Ack of kind ACCEPT, which never expires) goes further:
the metric is judged against the level accepted instead of the table, by the gate's own rule
(verdict/gate.check_metric): the median and spread of the series' stored runs since its last
change point, up to the accept (history/series.py). The same level passes, saying so; a further
slowdown past the accepted level's band is red, its line naming that level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from pytest_llmperf.history.acks import Ack
from pytest_llmperf.history.series import series_of
from pytest_llmperf.history.store import Point
from pytest_llmperf.metrics.registry import direction, formatter
from pytest_llmperf.metrics.stats import combine_repeats
from pytest_llmperf.verdict import gate
from pytest_llmperf.verdict.baseline_entry import BaselineEntry
from pytest_llmperf.verdict.references import Current, Judgement, Reference
from pytest_llmperf.verdict.status import Status

__all__ = ["AcknowledgedBaseline"]


@dataclass(frozen=True)
class AcknowledgedBaseline:
    """`reference` (the baseline) with this test's `acks`, the runner `shape` of the run being
    judged, and the stored `points` of its series, oldest first."""

    reference: Reference
    acks: Sequence[Ack]
    shape: str | None
    points: Sequence[Point]
    clock: datetime | None = None  # now; None: the wall clock

    def compare(self, current: Current, gated: Sequence[str],
                tolerance: float | None) -> Judgement:
        judgement = self.reference.compare(current, gated, tolerance)
        band = gate.DEFAULT_TOLERANCE if tolerance is None else tolerance
        clock = self.clock or datetime.now(timezone.utc)
        verdicts, notes = [], list(judgement.notes)
        for verdict in judgement.report.verdicts:
            if verdict.status != Status.REGRESSION:
                verdicts.append(verdict)
                continue
            seen = [ack for ack in self.acks if ack.silences(verdict.name, self.shape)]
            active = max((ack for ack in seen if ack.active(clock)),
                         key=lambda ack: ack.recorded_at, default=None)
            if active is None:
                expired = max(seen, key=lambda ack: ack.recorded_at, default=None)
                verdicts.append(verdict if expired is None else replace(
                    verdict, message=f"{verdict.message}; expired: {expired.line()}"))
                continue
            if active.accepted:
                accepted = self._accepted(verdict, active, current, band)
                verdicts.append(accepted)
                if accepted.status == Status.PASS:
                    notes.append(accepted.message)
                continue
            level = self._level(verdict.name, active)
            if level is None:  # nothing stored before it: no level to hold the metric to
                verdicts.append(verdict)
                continue
            fmt = formatter(verdict.name, level, verdict.value)
            if _within(verdict.name, verdict.value, level, band):
                line = (f"{verdict.message}; {active.line()} (the level acknowledged: "
                        f"{fmt(level)})")
                verdicts.append(replace(verdict, status=Status.PASS, message=line))
                notes.append(line)
            else:
                verdicts.append(replace(verdict, message=(
                    f"{verdict.message}; worse than the level {active.who} acknowledged on "
                    f"{active.recorded_at.date().isoformat()} ({fmt(level)}, allowed "
                    f"{band * 100:+.1f}%): a new regression")))
        return replace(judgement, report=gate.GateReport(tuple(verdicts)), notes=notes)

    def _accepted(self, verdict: gate.Verdict, accept: Ack, current: Current,
                  band: float) -> gate.Verdict:
        """The metric judged against the level accepted instead of the table: the median and
        spread of the series' runs since its last change, up to the accept (the new normal and
        its noise), by the gate's own band."""
        before = [p for p in self.points
                  if p.started_at is not None and p.started_at <= accept.recorded_at]
        series = series_of(before, verdict.name, band)
        values = series.values[series.level_start():]
        if not values:  # nothing stored before it: the table's verdict stands
            return verdict
        level = combine_repeats(values)
        entry = BaselineEntry(value=level.value, spread=level.spread,
                              direction=direction(verdict.name), tolerance=band, n=level.n)
        judged = gate.check_metric(verdict.name, current.estimates[verdict.name], entry)
        fmt = formatter(verdict.name, level.value, verdict.value)
        where = (f"the level {accept.who} accepted on {accept.recorded_at.date().isoformat()}: "
                 f"{fmt(level.value)} over {level.n} run{'s' if level.n > 1 else ''}")
        if judged.status == Status.REGRESSION:
            return replace(judged, message=f"{judged.message}, {where}; {accept.reason}")
        return replace(verdict, status=Status.PASS,
                       message=f"{verdict.message}; {accept.line()} ({where})")

    def _level(self, metric: str, ack: Ack) -> float | None:
        """The metric in the newest stored run from before the acknowledgement."""
        for point in reversed(self.points):
            found = point.values.get(metric)
            if (point.started_at is not None and point.started_at <= ack.recorded_at
                    and found is not None and found.value is not None):
                return found.value
        return None


def _within(metric: str, value: float, level: float, band: float) -> bool:
    """Is `value` no worse than `level` by more than the factor 1 + band (gate.py's band)?"""
    if direction(metric) == "lower":
        return value <= level * (1 + band)
    return value >= level / (1 + band)
