"""A night in the Bencher Metric Format (BMF, https://bencher.dev/docs/reference/bencher-metric-format/),
for `bencher run --adapter json`: {benchmark: {measure: {value, lower_value, upper_value}}}.

The benchmark is the test id (with its engine and workload where one night holds several results
of one test); the measure is our metric name as a slug (ttft_s.p50 -> ttft-s-p50); lower and
upper are the value less and plus its spread (the repeats' robust sigma, metrics/stats.py)
where one was measured. Bencher's testbed says the runner shape: `bencher run --testbed`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from pytest_llmperf.history.record import MetricValue
from pytest_llmperf.reports.exports.night import Night, Result

__all__ = ["document", "measure_slug", "text"]


def measure_slug(name: str) -> str:
    """Our metric name as a Bencher measure slug: lower case, words joined by '-'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _metric(entry: MetricValue) -> dict[str, float]:
    out = {"value": float(entry.value)}
    if entry.spread:
        out |= {"lower_value": entry.value - entry.spread,
                "upper_value": entry.value + entry.spread}
    return out


def _benchmark(result: Result, repeated: bool) -> str:
    if not repeated:
        return result.test_id
    point = result.point
    return f"{result.test_id} [{point.engine_label} / {point.workload_label}]"


def document(night: Night) -> dict[str, Any]:
    tests = Counter(result.test_id for result in night.results)
    out: dict[str, Any] = {}
    for result in night.results:
        measures = {measure_slug(name): _metric(entry)
                    for name, entry in sorted(result.point.values.items())
                    if entry.value is not None}
        if measures:
            out[_benchmark(result, tests[result.test_id] > 1)] = measures
    return out


def text(night: Night) -> str:
    return json.dumps(document(night), indent=1) + "\n"
