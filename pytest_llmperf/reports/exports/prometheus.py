"""A night in Prometheus' text exposition format, for a Pushgateway (pushgateway.py) and any
Grafana reading that Prometheus (deploy/grafana/).

Names follow Prometheus' naming conventions (https://prometheus.io/docs/practices/naming/): one
`llmperf_` prefix, base units spelled out as a suffix (ttft_s -> llmperf_ttft_seconds,
output_throughput_tok_s -> llmperf_output_throughput_tokens_per_second), a distribution's
statistic as the `stat` label (ttft_s.p50 -> stat="p50"), and what a sample is of as labels:
test, series, hardware, shape (the runner shape), host, engine, workload. Every value is a gauge
(a night's number, not a counter). No sample carries a timestamp, which a Pushgateway refuses;
llmperf_run_timestamp_seconds says when the night ran.
"""

from __future__ import annotations

import re

from pytest_llmperf.history.store import Point
from pytest_llmperf.metrics.registry import lookup
from pytest_llmperf.reports.exports.night import Night, Result

__all__ = ["PREFIX", "RUN_TIMESTAMP", "RESULT_INFO", "group_labels", "metric_name", "text"]

PREFIX = "llmperf_"
RUN_TIMESTAMP = "llmperf_run_timestamp_seconds"
RESULT_INFO = "llmperf_result_info"
UNKNOWN = "unknown"

# Our names' unit suffixes, longest first, and the base unit Prometheus' conventions spell.
_UNITS = (("_tok_s_per_gpu", "_tokens_per_second_per_gpu"), ("_tok_s", "_tokens_per_second"),
          ("_req_s", "_requests_per_second"), ("_s", "_seconds"), ("_j", "_joules"),
          ("_tok", "_tokens"))


def metric_name(name: str) -> tuple[str, str]:
    """Our metric name as a Prometheus metric name and its statistic ("" for a scalar):
    "ttft_s.p50" -> ("llmperf_ttft_seconds", "p50")."""
    base, _, stat = name.partition(".")
    base = re.sub(r"[^a-zA-Z0-9_]", "_", base).lower().replace("_1m_", "_million_")
    for ours, theirs in _UNITS:
        if base.endswith(ours):
            base = base[: -len(ours)] + theirs
            break
    return PREFIX + base, stat


def group_labels(point: Point) -> dict[str, str]:
    """The labels a Pushgateway groups one night's push by (pushgateway.py): its runner shape
    and host, so two hosts' nights never replace each other."""
    return {"shape": point.family or UNKNOWN, "host": point.host or UNKNOWN}


def _labels(result: Result) -> dict[str, str]:
    point = result.point
    return {"test": result.test_id, "series": point.series,
            "hardware": point.hardware_class or UNKNOWN, **group_labels(point),
            "engine": point.engine_label or UNKNOWN, "workload": point.workload_label or UNKNOWN}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _sample(name: str, labels: dict[str, str], value: float) -> str:
    inside = ",".join(f'{key}="{_escape(text)}"' for key, text in labels.items())
    return f"{name}{{{inside}}} {float(value)!r}"


def _help(name: str) -> str:
    metric = lookup(name)
    meaning = metric.meaning if metric is not None and metric.meaning else ""
    about = meaning or f"pytest-llmperf's {name.partition('.')[0]}"
    return about.replace("\\", "\\\\").replace("\n", "\\n")  # HELP escapes these two


def _families(night: Night) -> dict[str, tuple[str, dict[tuple, str]]]:
    """Prometheus name -> (help, samples keyed by their labels: one sample a label set)."""
    families: dict[str, tuple[str, dict[tuple, str]]] = {}
    for result in night.results:
        labels = _labels(result)
        info = {**labels, "verdict": result.point.verdict, "commit": result.point.commit or ""}
        families.setdefault(RESULT_INFO, ("a stored result; its verdict and commit", {}))[1][
            tuple(info.items())] = _sample(RESULT_INFO, info, 1)
        for ours, entry in sorted(result.point.values.items()):
            if entry.value is None:
                continue
            name, stat = metric_name(ours)
            full = {**labels, "stat": stat} if stat else labels
            families.setdefault(name, (_help(ours), {}))[1][tuple(full.items())] = \
                _sample(name, full, entry.value)
    started = night.started_at
    if started is not None:
        labels = group_labels(night.first)
        families[RUN_TIMESTAMP] = ("when the night started, in seconds since the epoch",
                                   {(): _sample(RUN_TIMESTAMP, labels, started.timestamp())})
    return families


def text(night: Night) -> str:
    """The night in the text exposition format (version 0.0.4), one gauge family a metric."""
    lines: list[str] = []
    for name, (about, samples) in sorted(_families(night).items()):
        lines += [f"# HELP {name} {about}", f"# TYPE {name} gauge", *samples.values()]
    return "\n".join(lines) + "\n"
