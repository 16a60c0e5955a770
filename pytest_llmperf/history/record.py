"""A run as the store appends it, made from the session's run file document (reports/runfile.py
`run_document`, merged over pytest-xdist workers) read through the run file's model
(verdict/stored_run.py): the document already holds every result's metrics with their spreads,
its measurement record (verdict, gate settings: verdict/measurement_record.py), engine spec (secrets
hidden) and workload, the fingerprint and the commit, so the store records exactly what
`--llmperf-json` would write.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pytest_llmperf.history import identity
from pytest_llmperf.machine.hardware import host_name
from pytest_llmperf.metrics import cost
from pytest_llmperf.metrics.stats import Estimate
from pytest_llmperf.numbers import finite_or_none
from pytest_llmperf.verdict.status import Status
from pytest_llmperf.verdict.stored_run import StoredResult, StoredRun

__all__ = ["MetricValue", "ResultRecord", "RunRecord", "ci_url", "from_document"]

# What a result entry of the run file holds besides what has a column of its own; the rest of
# the entry (failures, client, cost, roofline, server, disturbance, gpu_telemetry, ...) goes to
# `extra`; energy per token is a metric like any other (docs/gpu-telemetry.md).
_COLUMNS = ("key", "test_id", "status", "verdict", "engine", "engine_label", "workload",
            "workload_label", "gate", "metrics")

# A stored metric is the one estimate type (metrics/stats.py), its direction set; the store
# keeps None where it has no number (a non-finite value, a spread or n never recorded), which
# its columns write as NULL.
MetricValue = Estimate


@dataclass(frozen=True)
class ResultRecord:
    test_id: str
    key: str
    status: Status | None  # the measurement record's (verdict/measurement_record.py)
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


def _stored(estimate: Estimate) -> MetricValue:
    return MetricValue(finite_or_none(estimate.value), finite_or_none(estimate.spread),
                       estimate.n, estimate.direction)


def _metrics(stored: StoredResult) -> dict[str, MetricValue]:
    """The entry's metrics, and where the run had a price (--llmperf-cost-per-hour) its dollars
    per million output and total tokens (metrics/cost.py), which the run file keeps beside them,
    as metrics of one sample: each a series like any other (the history page charts them)."""
    metrics = {name: _stored(estimate) for name, estimate in stored.metrics.items()}
    priced = stored.derived.get("cost") or {}
    for name in cost.NAMES:
        value = finite_or_none(priced.get(name))
        if value is not None and name not in metrics:
            metrics[name] = MetricValue(value, 0.0, 1, "lower")
    return metrics


def _result(stored: StoredResult) -> ResultRecord:
    plain = stored.to_plain()
    return ResultRecord(
        test_id=stored.test_id, key=stored.key, status=stored.status,
        engine=stored.engine.to_dict(), engine_label=stored.engine_label,
        workload=stored.workload.to_dict(), workload_label=stored.workload_label,
        gate=stored.record.gate.to_plain(), metrics=_metrics(stored),
        extra={k: v for k, v in plain.items() if k not in _COLUMNS},
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
    """The run of a run file document (runfile.run_document's layout, read through
    verdict/stored_run.py)."""
    run = StoredRun.from_plain(document)
    return RunRecord(
        run_uid=run_uid or uuid.uuid4().hex,
        started_at=_started(run.started),
        commit=run.commit,
        fingerprint=dict(run.fingerprint),
        results=tuple(_result(stored) for stored in run.results),
        clocks=dict(clocks or {}), host=host_name(environ) or "",
        ci_url=ci_url(environ),
    )
