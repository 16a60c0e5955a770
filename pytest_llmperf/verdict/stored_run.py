"""The run file's model: one class per part of the file, each writing itself (`to_plain`) and
reading itself back (`from_plain`), so the writer (reports/runfile.py) and every reader (saved
runs, `llmperf compare`, the results store, the plots) hold the same typed facts. The layout, a
pytest-benchmark document with our part under "llmperf", is reports/runfile.py's docstring.

`FORMAT` is the schema's version, written as "llmperf.format". Format 2 added what format 1's
hand-written serializers left out: a GPU's held_below_mhz, the machine's cores and the busiest
process's pid. A format-1 file reads as format 2 with those unknown; a newer format is refused
(this version cannot know what it changed). A disturbance's reasons are worked out again from
its facts when read: a format-1 file's then lack the pid and the default clock it did not keep.

A file that cannot be used is a `RunFileError`: one line naming the file, the place in it and
the fix. The metrics and the declared gate settings are checked strictly (they are what a
comparison judges); the rest is descriptive and read as it comes. Here, below the results
store and the reports, so that both read through it (pyproject.toml's layers).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_llmperf.errors import InputError
from pytest_llmperf.machine.disturbance import Disturbance
from pytest_llmperf.machine.gpu_telemetry import GpuTelemetry
from pytest_llmperf.metrics import breakdown, registry, timeline
from pytest_llmperf.metrics.derived import Derived
from pytest_llmperf.metrics.engine_start import ENGINE_START
from pytest_llmperf.metrics.facts import EngineFacts, WorkloadFacts
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.metrics.work import ExecutedWork
from pytest_llmperf.numbers import finite_or_none, is_real, is_whole, number_or_nan
from pytest_llmperf.verdict.ab_judgement import AbJudgement
from pytest_llmperf.verdict.baselines import BaselineEntry
from pytest_llmperf.verdict.gate import DEFAULT_GATED, DEFAULT_TOLERANCE
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from pytest_llmperf.verdict.status import Status

__all__ = ["FORMAT", "READABLE", "WRITE_ONE", "RunFileError", "StoredResult", "StoredRun"]

FORMAT = 2
READABLE = (1, 2)
WRITE_ONE = "write one with --llmperf-json PATH or --llmperf-save NAME"
DIRECTIONS = ("lower", "higher")
# The result entry's keys that the model reads into fields of its own; any other key (one a
# newer minor writer added) is kept as it is under `other` and written back.
_FIELDS = ("key", "test_id", "status", "verdict", "gate", "engine", "engine_label", "workload",
           "workload_label", "prefix_cache", "metrics", "server_metrics", ENGINE_START,
           "server", "failures", "work", "client", "disturbance", "gpu_telemetry", "cost",
           "per_gpu", "roofline", "rate_over_time", "ab", "capacity", "detectable", "extras")


class RunFileError(InputError):
    """A run file that is missing or cannot be read; the message is one line with the fix."""


def bad(path: str, where: str, problem: str) -> RunFileError:
    return RunFileError(f"{path}: {where}: {problem}; write the file again with "
                        "--llmperf-json PATH or --llmperf-save NAME")


def metric_to_plain(estimate: Estimate) -> dict[str, Any]:
    """{"value", "spread", "n", "direction"}; a non-finite number is null (JSON has no NaN)."""
    return {"value": finite_or_none(estimate.value), "spread": finite_or_none(estimate.spread),
            "n": estimate.n, "direction": estimate.direction}


def metric_from_plain(path: str, where: str, entry: Any) -> Estimate:
    """One metric's entry, checked: a comparison judges these numbers."""
    if not isinstance(entry, Mapping) or not {"value", "spread", "n", "direction"} <= set(entry):
        raise bad(path, where, f"expected value, spread, n and direction, got {entry!r}")
    n, direction = entry["n"], entry["direction"]
    if not is_whole(n, 0):
        raise bad(path, f"{where}.n", f"expected an integer >= 0, got {n!r}")
    if direction not in DIRECTIONS:
        raise bad(path, f"{where}.direction", f'expected "lower" or "higher", got {direction!r}')
    for name in ("value", "spread"):
        if entry[name] is not None and not is_real(entry[name], nan_ok=True):
            raise bad(path, f"{where}.{name}", f"expected a number or null, got {entry[name]!r}")
    return Estimate(number_or_nan(entry["value"]), number_or_nan(entry["spread"]), n, direction)


def _check_gate(path: str, where: str, entry: Any) -> None:
    """A result's declared gate settings, if any (files written before they were recorded have
    none), must be of MeasurementRecord's form: a comparison judges by them."""
    if entry is None:
        return
    if not isinstance(entry, Mapping):
        raise bad(path, where, f"expected an object, got {entry!r}")
    tolerance, names = entry.get("tolerance"), entry.get("metrics")
    if tolerance is not None and not is_real(tolerance, nan_ok=True):
        raise bad(path, f"{where}.tolerance", f"expected a number or null, got {tolerance!r}")
    if names is not None and not (isinstance(names, list)
                                  and all(isinstance(name, str) for name in names)):
        raise bad(path, f"{where}.metrics", f"expected a list of metric names, got {names!r}")


def _object(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}  # descriptive only: never fatal


def _client(check: Any, error: str | None) -> dict[str, Any]:
    """The load generator's own effort and self-check verdict (metrics/client_check.py), beside
    what it measured; {} where it was not checked."""
    if check is None:
        return {}
    return {
        "workers": check.workers,
        "busiest_cpu_share": finite_or_none(check.cpu_share),
        "loop_lag_p90_s": finite_or_none(check.loop_lag_p90_s),
        "loop_lag_limit_s": finite_or_none(check.loop_lag_limit_s),
        "schedule_lag_p90_s": finite_or_none(check.schedule_lag_p90_s),
        "schedule_lag_limit_s": finite_or_none(check.schedule_lag_limit_s),
        "limited": check.limited,
        "reasons": check.reasons,
        **({"processes": list(check.processes)} if check.processes else {}),
        **({"error": error} if error else {}),
    }


@dataclass(frozen=True)
class StoredResult:
    """One result entry of a run file: a measured Result's facts and numbers, and its
    measurement record (verdict, declared gate settings, annotations:
    verdict/measurement_record.py). `metrics` are the medians over the repeats with their
    spread, n and direction; the other numbers are the representative run's."""

    key: str
    test_id: str
    record: MeasurementRecord
    engine: EngineFacts = field(default_factory=lambda: EngineFacts({}))
    engine_label: str = ""
    workload: WorkloadFacts = field(default_factory=lambda: WorkloadFacts({}))
    workload_label: str = ""
    metrics: dict[str, Estimate] = field(default_factory=dict)
    server_metrics: dict[str, float] = field(default_factory=dict)  # scraped once: no spread
    server: dict[str, str] = field(default_factory=dict)  # which server said it served it
    failures: dict[str, int] = field(default_factory=dict)  # failed requests per kind
    work: ExecutedWork | None = None  # None: written before the run file recorded it
    client: dict[str, Any] = field(default_factory=dict)  # the load generator's self-check
    disturbance: Disturbance | None = None  # None: not judged
    gpu_telemetry: tuple[GpuTelemetry, ...] = ()
    derived: dict[str, Any] = field(default_factory=dict)  # "cost", "per_gpu", "roofline"
    rate_over_time: dict[str, Any] | None = None  # a trace replay's (metrics/timeline.py)
    other: dict[str, Any] = field(default_factory=dict)  # keys this version does not know
    path: str = field(default="", compare=False)  # the file it was read from, for messages

    @property
    def status(self) -> Status | None:
        return self.record.status

    @property
    def verdict(self) -> str:
        """The verdict column's words (references.SavedRun reads them)."""
        return self.status.summary if self.status else ""

    @property
    def tolerance(self) -> float | None:
        """The tolerance the test declared (None: it left it to the default)."""
        return self.record.gate.tolerance

    @property
    def gated(self) -> tuple[str, ...] | None:
        """The metrics the test declared with gate= (None: it left them to the defaults)."""
        return self.record.gate.metrics

    @property
    def ab(self) -> AbJudgement | None:
        """Side B of a paired run: its judgement (verdict/ab_judgement.py); None for any other
        result."""
        return self.record.ab

    @property
    def estimates(self) -> dict[str, Estimate]:
        """Each metric's median over the repeats, spread, n and direction."""
        return self.metrics

    @property
    def directions(self) -> dict[str, str]:
        return {name: str(estimate.direction) for name, estimate in self.metrics.items()}

    def entries(self, names: Iterable[str] | None = DEFAULT_GATED,
                tolerance: float = DEFAULT_TOLERANCE) -> dict[str, BaselineEntry]:
        """Baseline entries for `names` (None: every metric) that this run measured, so a
        saved run can stand in for a baseline. A metric saved as NaN/null is left out: there is
        no value to compare against."""
        wanted = self.metrics if names is None else [n for n in names if n in self.metrics]
        return {name: BaselineEntry.of(self.metrics[name], tolerance) for name in sorted(wanted)
                if math.isfinite(self.metrics[name].value)}

    @classmethod
    def of(cls, record: MeasurementRecord, derived: Derived) -> StoredResult:
        """The entry of a measured record (its Result), with its `derived` numbers."""
        result = record.result
        if result is None:
            raise ValueError(f"{record.test_id}: no Result: its metrics are no run's to store")
        estimates = registry.combine([run.flat() for run in result.runs or (result.metrics,)])
        trace = result.workload.pattern.type == "Trace"
        return cls(
            key=result.key, test_id=result.test_id, record=record, engine=result.engine,
            engine_label=result.engine_label, workload=result.workload,
            workload_label=result.workload_label,
            metrics={name: replace(estimate, direction=registry.direction(name))
                     for name, estimate in estimates.items()},
            server_metrics=dict(result.server_metrics),
            server=dict(result.server), failures=result.failure_kinds(), work=result.work,
            client=_client(result.client, result.client_error),
            disturbance=result.disturbance if result.disturbance
            and result.disturbance.judged else None,
            gpu_telemetry=tuple(result.gpu_telemetry), derived=derived.to_dict(),
            rate_over_time=(timeline.rate_timeline(result.records) or None) if trace else None)

    def to_plain(self) -> dict[str, Any]:
        """The result entry, JSON-able (non-finite numbers as null)."""
        plain = {
            **self.other, **self.record.to_plain(), "key": self.key, "test_id": self.test_id,
            "engine": self.engine.to_dict(), "engine_label": self.engine_label,
            "workload": self.workload.to_dict(), "workload_label": self.workload_label,
            "prefix_cache": self.workload.prefix_cache,
            "metrics": {name: metric_to_plain(e) for name, e in self.metrics.items()},
            "server_metrics": {name: finite_or_none(value)
                               for name, value in sorted(self.server_metrics.items())},
            "server": dict(self.server), "failures": dict(self.failures),
            "client": dict(self.client),
            "disturbance": None if self.disturbance is None else self.disturbance.to_dict(),
            **self.derived,
        }
        if self.work is not None:
            plain["work"] = self.work.to_dict()
        if self.gpu_telemetry:
            plain["gpu_telemetry"] = [card.to_dict() for card in self.gpu_telemetry]
        if self.rate_over_time is not None:
            plain["rate_over_time"] = dict(self.rate_over_time)
        return plain

    @classmethod
    def from_plain(cls, item: Any, path: str = "", index: int = 0) -> StoredResult:
        """A result entry of a file of any READABLE format; RunFileError where the key, the
        metrics or the gate settings are not of the form a comparison needs."""
        where = f"llmperf.results[{index}]"
        if not isinstance(item, Mapping):
            raise bad(path, where, f"expected an object, got {item!r}")
        key, metrics = item.get("key"), item.get("metrics")
        if not isinstance(key, str) or not key:
            raise bad(path, f"{where}.key", f"expected the test's key, got {key!r}")
        if not isinstance(metrics, Mapping):
            raise bad(path, f"{where}.metrics", f"expected an object, got {metrics!r}")
        _check_gate(path, f"{where}.gate", item.get("gate"))
        telemetry = tuple(GpuTelemetry.from_dict(card) for card in item.get("gpu_telemetry") or ())
        return cls(
            key=key, test_id=str(item.get("test_id") or key),
            record=MeasurementRecord.from_plain(item),
            engine=EngineFacts.from_dict(item.get("engine")),
            engine_label=str(item.get("engine_label") or ""),
            workload=WorkloadFacts.from_dict(item.get("workload")),
            workload_label=str(item.get("workload_label") or ""),
            metrics=_with_engine_start(item, {
                name: metric_from_plain(path, f"{where}.metrics.{name}", entry)
                for name, entry in metrics.items()}),
            server_metrics={str(name): number_or_nan(value)
                            for name, value in _object(item.get("server_metrics")).items()},
            server=_object(item.get("server")), failures=_object(item.get("failures")),
            work=_work(path, f"{where}.work", item.get("work")),
            client=_object(item.get("client")),
            disturbance=Disturbance.from_dict(item.get("disturbance"), telemetry),
            gpu_telemetry=telemetry,
            derived={name: item[name] for name in ("cost", "per_gpu", "roofline") if name in item},
            rate_over_time=_object(item["rate_over_time"]) if "rate_over_time" in item else None,
            other=_others(item),
            path=path)


def _others(item: Mapping[str, Any]) -> dict[str, Any]:
    """The keys this version reads into no field of its own (a newer minor writer's, or a
    breakdown no module here registered), kept as they are and written back."""
    known = {*_FIELDS, *breakdown.kinds()}
    return {name: value for name, value in item.items() if name not in known}


def _with_engine_start(item: Mapping[str, Any], metrics: dict[str, Estimate]
                       ) -> dict[str, Estimate]:
    """A file written before the engine's start was a metric of each run kept it beside the
    metrics ("engine_start_s": 41.2): read as the metric of one sample it is now."""
    start = item.get(ENGINE_START)
    if ENGINE_START not in metrics and is_real(start):
        metrics[ENGINE_START] = Estimate(float(start), 0.0, 1, "lower")
    return metrics


def _work(path: str, where: str, entry: Any) -> ExecutedWork | None:
    if entry is None:
        return None
    try:
        return ExecutedWork.from_dict(entry)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise bad(path, where, f"not an executed-work record ({exc})") from None


@dataclass(frozen=True)
class StoredRun:
    """A run file: pytest-benchmark's header and entries (machine_info, commit, start time,
    benchmarks, its version) and ours, the fingerprint (Fingerprint.to_dict's flat form) and one
    StoredResult per measured result."""

    results: tuple[StoredResult, ...]
    fingerprint: dict[str, Any] = field(default_factory=dict)
    commit: str | None = None
    started: str | None = None  # ISO 8601, as written
    machine_info: dict[str, Any] = field(default_factory=dict)
    benchmarks: tuple[dict[str, Any], ...] = ()
    version: str = "unknown"  # pytest-benchmark's layout followed (reports/runfile.py)
    format: int = FORMAT  # the format it was read from; written as FORMAT
    path: str = field(default="", compare=False)

    def to_plain(self) -> dict[str, Any]:
        return {
            "machine_info": dict(self.machine_info),
            "commit_info": {"id": self.commit} if self.commit else {},
            "benchmarks": [dict(bench) for bench in self.benchmarks],
            "datetime": self.started,
            "version": self.version,
            "llmperf": {"format": FORMAT, "fingerprint": dict(self.fingerprint),
                        "results": [result.to_plain() for result in self.results]},
        }

    @classmethod
    def from_plain(cls, document: Any, path: str = "") -> StoredRun:
        """A run file's document (json.loads of it); RunFileError (one line: file, problem, fix)
        when it is not one of ours or not of a READABLE format."""
        section = document.get("llmperf") if isinstance(document, Mapping) else None
        if not isinstance(section, Mapping):
            raise RunFileError(f'{path}: not a pytest-llmperf run file (no "llmperf" key); '
                               f"{WRITE_ONE}")
        if section.get("format") not in READABLE:
            raise RunFileError(
                f"{path}: run file format {section.get('format')!r} is not supported (this "
                f"pytest-llmperf reads formats {', '.join(map(str, READABLE))}); {WRITE_ONE}")
        items = section.get("results")
        if not isinstance(items, list):
            raise bad(path, "llmperf.results", f"expected a list, got {items!r}")
        commit = _object(document.get("commit_info")).get("id")
        started = document.get("datetime")
        return cls(
            tuple(StoredResult.from_plain(item, path, index) for index, item in enumerate(items)),
            _object(section.get("fingerprint")), commit,
            None if started is None else str(started), _object(document.get("machine_info")),
            tuple(dict(bench) for bench in document.get("benchmarks") or ()
                  if isinstance(bench, Mapping)),
            str(document.get("version", "unknown")), section["format"], path)
