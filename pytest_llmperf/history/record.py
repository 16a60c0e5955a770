"""A run as the store appends it, made from the session's run file document (reports/runfile.py
`run_document`, merged over pytest-xdist workers): the document already holds every result's
metrics with their spreads, its measurement record (verdict, gate settings:
verdict/measurement.py), engine spec (secrets hidden) and workload, the fingerprint and the
commit, so the store records exactly what `--llmperf-json` would write.
"""

from __future__ import annotations

import math
import os
import platform
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pytest_llmperf.history import identity
from pytest_llmperf.verdict.measurement import MeasurementRecord
from pytest_llmperf.verdict.status import Status

__all__ = ["MetricValue", "ResultRecord", "RunRecord", "ci_url", "from_document"]

# What a result entry of the run file holds besides what has a column of its own; the rest of
# the entry (failures, client, cost, roofline, server, disturbance, gpu_telemetry, ...) goes to
# `extra`; energy per token is a metric like any other (docs/gpu-telemetry.md).
_COLUMNS = ("key", "test_id", "status", "verdict", "engine", "engine_label", "workload",
            "workload_label", "gate", "metrics")


@dataclass(frozen=True, slots=True)
class MetricValue:
    value: float | None
    spread: float | None
    n: int | None
    direction: str | None


@dataclass(frozen=True)
class ResultRecord:
    test_id: str
    key: str
    status: Status | None  # the measurement record's (verdict/measurement.py)
    engine: dict[str, Any]
    engine_label: str
    workload: dict[str, Any]
    workload_label: str
    gate: dict[str, Any]
    metrics: dict[str, MetricValue]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """The verdict column's words, as the store keeps them (`llmperf history` shows them and
        history/series.py reads them)."""
        return self.status.summary if self.status else ""


@dataclass(frozen=True)
class RunRecord:
    run_uid: str
    started_at: datetime | None
    commit: str | None
    fingerprint: dict[str, Any]
    results: tuple[ResultRecord, ...]
    clocks: dict[str, Any] = field(default_factory=dict)
    host: str = ""
    ci_url: str | None = None

    @property
    def family(self) -> str:
        return identity.family(self.fingerprint)


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _metric(entry: Mapping[str, Any]) -> MetricValue:
    n = entry.get("n")
    return MetricValue(_number(entry.get("value")), _number(entry.get("spread")),
                       n if isinstance(n, int) else None, entry.get("direction"))


def _metrics(entry: Mapping[str, Any]) -> dict[str, MetricValue]:
    """The entry's metrics, and the engine's start time as the metric engine_start_s (one
    sample: the run file keeps it beside the metrics), so it is a series like any other."""
    metrics = {name: _metric(value) for name, value in (entry.get("metrics") or {}).items()
               if isinstance(value, Mapping)}
    start = _number(entry.get("engine_start_s"))
    if start is not None and "engine_start_s" not in metrics:
        metrics["engine_start_s"] = MetricValue(start, 0.0, 1, "lower")
    return metrics


def _result(entry: Mapping[str, Any]) -> ResultRecord:
    measured = MeasurementRecord.from_plain(entry)
    return ResultRecord(
        test_id=str(entry.get("test_id") or entry.get("key")), key=str(entry.get("key", "")),
        status=measured.status, engine=dict(entry.get("engine") or {}),
        engine_label=str(entry.get("engine_label") or ""),
        workload=dict(entry.get("workload") or {}),
        workload_label=str(entry.get("workload_label") or ""),
        gate=measured.gate.to_plain(),
        metrics=_metrics(entry),
        extra={k: v for k, v in entry.items() if k not in _COLUMNS},
    )


def _started(text: Any) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def ci_url(environ: Mapping[str, str] = os.environ) -> str | None:
    """The page of the CI job that made this run: GitHub Actions' run (its default variables:
    https://docs.github.com/en/actions/reference/variables-reference), GitLab's job
    (CI_JOB_URL: https://docs.gitlab.com/ci/variables/predefined_variables/) or Jenkins' build
    (BUILD_URL: https://www.jenkins.io/doc/book/pipeline/jenkinsfile/#using-environment-variables);
    None elsewhere."""
    parts = [environ.get(name) for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY",
                                             "GITHUB_RUN_ID")]
    if all(parts):
        return f"{parts[0]}/{parts[1]}/actions/runs/{parts[2]}"
    return environ.get("CI_JOB_URL") or environ.get("BUILD_URL") or None


def from_document(document: Mapping[str, Any], *, clocks: Mapping[str, Any] | None = None,
                  run_uid: str | None = None, environ: Mapping[str, str] = os.environ
                  ) -> RunRecord:
    """The run of a run file document (runfile.run_document's layout)."""
    ours = document.get("llmperf") or {}
    return RunRecord(
        run_uid=run_uid or uuid.uuid4().hex,
        started_at=_started(document.get("datetime")),
        commit=(document.get("commit_info") or {}).get("id"),
        fingerprint=dict(ours.get("fingerprint") or {}),
        results=tuple(_result(entry) for entry in ours.get("results") or ()),
        clocks=dict(clocks or {}), host=platform.node(), ci_url=ci_url(environ),
    )
