"""A night as records of the PyTorch OSS benchmark database, the format vLLM's dashboards read
(https://github.com/pytorch/pytorch/wiki/PyTorch-OSS-benchmark-infra, "Benchmark results
format": benchmark {name (required), mode, dtype, extra_info}, model {name (required), ...};
https://github.com/pytorch/pytorch/wiki/How-to-integrate-with-PyTorch-OSS-benchmark-database;
vLLM writes it in benchmarks/benchmark_utils.py, convert_to_pytorch_benchmark_format,
https://github.com/vllm-project/vllm/blob/main/benchmarks/benchmark_utils.py).

One record a metric of a result, as vLLM writes them: benchmark {name, extra_info} (and mode
"inference"), model {name}, metric {name, benchmark_values: [value], extra_info}. What the
database has no field for (test, runner shape, host, hardware, commit, CI job, spread) goes to
the extra_info objects.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_llmperf.reports.exports.night import Night, Result

__all__ = ["BENCHMARK", "records", "text"]

BENCHMARK = "pytest-llmperf"


def _benchmark(night: Night, result: Result) -> dict[str, Any]:
    point = result.point
    started = night.started_at
    return {"name": BENCHMARK, "mode": "inference", "extra_info": {
        "test_id": result.test_id, "run": night.run_id, "series": point.series,
        "date": started.isoformat() if started else None, "commit": point.commit,
        "hardware": point.hardware_class, "shape": point.family, "host": point.host,
        "engine": point.engine_label, "workload": point.workload_label,
        "verdict": point.verdict, "ci_url": point.ci_url or None,
        "vllm": point.fingerprint.get("vllm"), "args": point.engine}}


def _model(result: Result) -> dict[str, Any]:
    return {"name": str(result.point.engine.get("model") or result.point.engine_label)}


def records(night: Night) -> list[dict[str, Any]]:
    out = []
    for result in night.results:
        for name, entry in sorted(result.point.values.items()):
            if entry.value is None:
                continue
            out.append({"benchmark": _benchmark(night, result), "model": _model(result),
                        "metric": {"name": name, "benchmark_values": [entry.value],
                                   "extra_info": {"spread": entry.spread, "n": entry.n,
                                                  "direction": entry.direction}}})
    return out


def text(night: Night) -> str:
    return json.dumps(records(night), indent=1) + "\n"
