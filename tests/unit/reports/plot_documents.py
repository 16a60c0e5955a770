"""Small hand-made run files, as documents, for the plots' tests."""

from __future__ import annotations

FILE = "suites/test_x.py::"
RATE = {"type": "Rate", "requests_per_s": 8.0, "burstiness": 1.0}


def metrics(**values):
    directions = {"output_throughput_tok_s": "higher"}
    return {name: {"value": value, "spread": 0.0, "n": 1,
                   "direction": directions.get(name, "lower")}
            for name, value in values.items()}


def result(key, pattern=None, engine="tiny", **values):
    values = {"output_throughput_tok_s": 100.0, "ttft_s.p50": 0.02, "ttft_s.p99": 0.05,
              "tpot_s.p50": 0.004, "tpot_s.p99": 0.008, **values}
    return {"key": key, "test_id": FILE + key, "engine_label": engine,
            "workload": {"pattern": pattern or {"type": "Concurrency", "max_concurrency": 1}},
            "metrics": metrics(**values), "gate": {}, "verdict": ""}


def document(*results, started="2026-11-20T02:00:00+00:00", benchmarks=(), commit="abc"):
    return {"datetime": started, "commit_info": {"id": commit}, "benchmarks": list(benchmarks),
            "llmperf": {"format": 1, "fingerprint": {"hardware_class": "cpu"},
                        "results": list(results)}}
