"""One measurement as every writer reads it: its id, the Result measured (none for metrics that
are not a run's: an SLO capacity, an offline throughput), its verdict, the gate settings its test
declared, and what the run file keeps beside the metrics: side B's A/B judgement, a capacity
probe's SLO and outcome, the run's breakdowns (metrics/breakdown.py: by turn, by adapter, ...).

The session builds one record per measurement (session/ledger.py); the run file, the summary's
rows, JUnit, the history store and saved runs read it. `to_plain` is the record's part of a run
file's result entry (the Result's numbers are reports/runfile.py's); `from_plain` reads that part
back, from files old and new. The verdict is stored as its value ("regression") under "status",
with the verdict column's words beside it under "verdict" for a reader's eye; a file written
before the value was stored has only the words, read through Status.from_summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.metrics import breakdown
from pytest_llmperf.metrics.breakdown import Breakdown
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.numbers import finite_or_none, is_real, number_or_nan
from pytest_llmperf.verdict.ab_judgement import AbJudgement
from pytest_llmperf.verdict.status import Status

__all__ = ["CapacityProbe", "Extras", "GateSettings", "MeasurementRecord", "status_from_plain"]

B = TypeVar("B", bound=Breakdown)

# What a run file keeps with a result beyond its metrics and breakdowns, in the order written.
ANNOTATIONS = ("ab", "capacity", "detectable")


@dataclass(frozen=True)
class CapacityProbe:
    """A capacity search's probe (sweeps.find_capacity): the SLO it was held to, whether it
    held, and why not."""

    slo_max: dict[str, float]
    slo_min: dict[str, float]
    passed: bool
    reason: str = ""

    def to_plain(self) -> dict[str, Any]:
        """{"slo": {"max": {...}, "min": {...}}, "passed": bool, "reason": str}."""
        return {"slo": {"max": dict(self.slo_max), "min": dict(self.slo_min)},
                "passed": self.passed, "reason": self.reason}

    @classmethod
    def from_plain(cls, plain: Mapping[str, Any]) -> CapacityProbe:
        """`to_plain`'s form; a bound that is not a number is not read (descriptive only)."""
        slo = plain.get("slo") if isinstance(plain.get("slo"), Mapping) else {}
        return cls(_numbers(slo.get("max")), _numbers(slo.get("min")),
                   bool(plain.get("passed")), str(plain.get("reason") or ""))


@dataclass(frozen=True)
class GateSettings:
    """What `@pytest.mark.llmperf(tolerance=..., gate=...)` declared (None: left to the
    defaults), so `llmperf compare` and --llmperf-compare judge a saved test as it judged
    itself."""

    tolerance: float | None = None
    metrics: tuple[str, ...] | None = None

    def to_plain(self) -> dict[str, Any]:
        """{"tolerance": 0.75, "metrics": [...]}, each only where declared."""
        plain: dict[str, Any] = {}
        if self.tolerance is not None:
            plain["tolerance"] = self.tolerance
        if self.metrics is not None:
            plain["metrics"] = list(self.metrics)
        return plain

    @classmethod
    def from_plain(cls, plain: Any) -> GateSettings:
        """The settings of `to_plain`'s form; what is not of that form counts as not declared
        (reports/saved_runs.py refuses it with a line of its own first)."""
        if not isinstance(plain, Mapping):
            return cls()
        tolerance, names = plain.get("tolerance"), plain.get("metrics")
        if not is_real(tolerance):
            tolerance = None
        if not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
            names = None
        return cls(None if tolerance is None else float(tolerance),
                   None if names is None else tuple(names))


@dataclass(frozen=True)
class Extras:
    """Metrics that are not a run's (an SLO capacity, an offline throughput) and what they
    are ("5 engine runs")."""

    estimates: dict[str, Estimate]
    detail: str

    def to_plain(self) -> dict[str, Any]:
        return {"detail": self.detail,
                "metrics": {name: {"value": finite_or_none(e.value),
                                   "spread": finite_or_none(e.spread),
                                   "n": e.n} for name, e in self.estimates.items()}}

    @classmethod
    def from_plain(cls, plain: Mapping[str, Any]) -> Extras:
        metrics = plain.get("metrics") or {}
        return cls({name: Estimate(number_or_nan(m.get("value")), number_or_nan(m.get("spread")),
                                   int(m.get("n") or 0)) for name, m in metrics.items()},
                   str(plain.get("detail", "")))


@dataclass
class MeasurementRecord:
    """Everything the session knows of one measurement, filled in as it is measured and
    judged (session/ledger.py)."""

    id: MeasurementId
    result: Result | None = None  # None: read back from a file, or metrics that are no run's
    status: Status | None = None  # None: never judged (a sweep's or a search's point)
    gate: GateSettings = field(default_factory=GateSettings)
    ab: AbJudgement | None = None  # side B's paired judgement (verdict/ab_judgement.py)
    capacity: CapacityProbe | None = None  # a capacity probe's SLO and outcome
    # per gated metric, the smallest change for the worse its noise lets the gate see and the
    # change its tolerance allows, relative (verdict/detectable.of_report)
    detectable: dict[str, dict[str, float]] | None = None
    extras: Extras | None = None
    # the run's breakdowns by name: by turn, by adapter, tool calls, ... (metrics/breakdown.py)
    breakdowns: dict[str, Breakdown] = field(default_factory=dict)

    @classmethod
    def of(cls, result: Result, status: Status | None = None, **fields: Any
           ) -> MeasurementRecord:
        """The record of a Result made elsewhere (a test's, a tool's), named by its test id."""
        return cls(MeasurementId.parse(result.test_id), result, status, **fields)

    def breakdown(self, kind: type[B]) -> B | None:
        """The run's breakdown of `kind` (ByTurn, ToolCalls, ...); None where it has none."""
        found = self.breakdowns.get(kind.name)
        return found if isinstance(found, kind) else None

    @property
    def test_id(self) -> str:
        """The measurement's id as the reports show it: the Result's own where there is one."""
        return self.result.test_id if self.result is not None else self.id.format()

    @property
    def key(self) -> str:
        return self.result.key if self.result is not None else self.id.key

    def to_plain(self) -> dict[str, Any]:
        """The record's part of a run file's result entry (plain data, JSON-able)."""
        plain: dict[str, Any] = {
            "key": self.key, "test_id": self.test_id,
            "status": self.status.value if self.status else "",
            "verdict": self.status.summary if self.status else "",  # for the eye only
            "gate": self.gate.to_plain(),
        }
        if self.ab is not None:
            plain["ab"] = self.ab.to_plain()
        if self.capacity is not None:
            plain["capacity"] = self.capacity.to_plain()
        if self.detectable is not None:
            plain["detectable"] = {name: dict(seen) for name, seen in self.detectable.items()}
        for name, found in self.breakdowns.items():
            plain[name] = found.to_plain()
        if self.extras is not None:
            plain["extras"] = self.extras.to_plain()
        return plain

    @classmethod
    def from_plain(cls, plain: Mapping[str, Any]) -> MeasurementRecord:
        """The record of a run file's result entry (`to_plain`'s form, or an older file's)."""
        test_id = str(plain.get("test_id") or plain.get("key") or "")
        ab, capacity, extras = plain.get("ab"), plain.get("capacity"), plain.get("extras")
        return cls(MeasurementId.parse(test_id), None, status_from_plain(plain),
                   GateSettings.from_plain(plain.get("gate")),
                   ab=AbJudgement.from_plain(ab) if isinstance(ab, Mapping) else None,
                   capacity=CapacityProbe.from_plain(capacity)
                   if isinstance(capacity, Mapping) else None,
                   detectable=_detectable(plain.get("detectable")),
                   extras=Extras.from_plain(extras) if isinstance(extras, Mapping) else None,
                   breakdowns=breakdown.read(plain))


def _detectable(plain: Any) -> dict[str, dict[str, float]] | None:
    """The run file's "detectable" (verdict/detectable.of_report's form), its numbers only."""
    if not isinstance(plain, Mapping):
        return None
    return {str(name): _numbers(seen) for name, seen in plain.items() if isinstance(seen, Mapping)}


def _numbers(plain: Any) -> dict[str, float]:
    """A file's object of numbers by name, the numbers only ({} for no object): descriptive
    parts of a result entry never fail a file."""
    if not isinstance(plain, Mapping):
        return {}
    return {str(name): float(value) for name, value in plain.items() if is_real(value)}


def status_from_plain(plain: Mapping[str, Any]) -> Status | None:
    """A result entry's verdict: its "status" value, else (a file written before values were
    stored) the verdict column's words under "verdict"; None for neither."""
    value = plain.get("status")
    if isinstance(value, str) and value:
        try:
            return Status(value)
        except ValueError:
            pass  # a status this version does not know: the words may still say it
    words = plain.get("verdict")
    return Status.from_summary(words) if isinstance(words, str) else None
