"""One pytest-llmperf run as a JSON document: what `--llmperf-json PATH` and `--llmperf-save NAME`
write, and what `--llmperf-compare NAME` and `llmperf compare` read.

The document is a pytest-benchmark JSON file ("machine_info", "commit_info", "benchmarks",
"datetime", "version"), so tools that already read those work on it unchanged:
`pytest-benchmark compare FILE` and github-action-benchmark's `tool: 'pytest'`. Those tools know
one kind of number, a time per operation where lower is better, so each test contributes

- one benchmark per latency distribution (ttft_s, tpot_s, itl_s, e2el_s), its stats over the
  requests of the representative run (the median-throughput repeat; rounds = requests), and
- one benchmark "<key>::s_per_output_tok", 1 / output_throughput_tok_s per repeat (rounds =
  repeats): lower is better like every pytest-benchmark time, and its `ops` reads as tok/s.

A distribution with no values (e.g. TPOT when every output was one token) gets no benchmark.

Our own complete data sits under the top-level "llmperf" key, which those tools ignore:

    {"format": 2, "fingerprint": {...}, "results": [{"key": "test_fixed[64]", "test_id": ...,
     "engine": {...}, "engine_label": ..., "workload": {...}, "workload_label": ...,
     "metrics": {"ttft_s.p50": {"value": 0.21, "spread": 0.004, "n": 3, "direction": "lower"},
                 ...every name of RunMetrics.flat()},
     "server_metrics": {...}, "status": "regression" (a Status' value; "" never judged),
     "verdict": "REGRESSION" (the verdict column's words, for the eye: a file written before
     "status" has only these), "gate": {"tolerance": 0.75, "metrics": [...]} (what the test
     declared) (a file written before the engine's start was a metric has it here too:
     "engine_start_s": 41.2),
     "server": {"vllm": "0.32.0", "torch": "2.13.0+cpu", "python": "3.11.7",
                "source": "GET /version"} (which vLLM served it; the fingerprint is the client's),
     "failures": {"overloaded": 2, "cut_off": 1} (failed requests per kind, failures.py),
     "cost": {"usd_per_hour": 0.31, "price_usd_per_hour": 2.49, "price_per": "machine",
              "engine_gpus": 1, "machine_gpus": 8, "usd_per_1m_output_tok": 0.46,
              "usd_per_1m_total_tok": 0.23}
     (with --llmperf-cost-per-hour; {} without: usd_per_hour is the engine's share of the price,
     cost.Share),
     "per_gpu": {"gpus": 8, "output_throughput_tok_s_per_gpu": 412.5} (the engine's GPUs, TP x
     PP x DP, and its median output tok/s over them; {} on a CPU machine; metrics/gpus.py),
     "ab": {"tolerance": 0.1, "pairs": 4, "metrics": {"tpot_s.p50": {"ratios": [1.21, ...],
            "median": 1.2, "interval": [1.18, 1.23], "confidence": 0.875, "status": "regression",
            "message": "..."}}} (side B of a paired A/B run only),
     "capacity": {"slo": {"max": {...}, "min": {...}}, "passed": true, "reason": "..."}
     (a capacity search's probe only),
     "prefix_cache": "warm" or "cold" (the cache's state as the measurement began,
     Workload.prefix_cache),
     "structured_outputs": {"kind": "json", "specs": 4, "invalid": 0, "cold": {"requests": 4,
     "ttft_s.p50": ...}, "warm": {...}} (structured outputs only, metrics/structured.py),
     "tool_calls": {"requests": 16, "calls": 16, "invalid": 0, "complete_call_s.p50": ...,
     "complete_call_s.p90": ...} (tool calls only, metrics/tool_calls.py),
     "by_adapter": {"base": {"requests": 8, "failed": 0, "ttft_s.p50": ..., "tpot_s.p50": ...},
     "sql-lora": {...}} (a LoRA split only, metrics/lora.py; its gate names,
     "lora:sql-lora:ttft_s.p50", are under "metrics" too),
     "embeddings": {"batch_size": 8, "requests": 32, "failed": 0,
     "request_throughput_req_s": ..., "input_throughput_inputs_s": ...,
     "input_throughput_tok_s": ..., "latency_s": {"p50": ..., "p90": ..., "p99": ...,
     "mean": ...}} (embeddings only, metrics/embeddings.py),
     "by_turn": {"1": {"requests": 8, "ttft_s.p50": ..., ...}, ...} (a conversation only,
     metrics/turns.py; its gate names, "turn1:ttft_s.p50", are under "metrics" too),
     "rate_over_time": {"bin_s": 1.0, "scheduled": [4, 7, ...], "completed": [2, 6, ...]}
     (a trace replay only: requests due and finished per bin, metrics/timeline.py),
     "roofline": {"fraction": 0.62, "tpot_bound_s": 0.0048, "weight_bytes": ..., ...} on a GPU
     (roofline.Roofline.to_dict; docs/roofline.md), {"none": "why"} where there is none,
     "disturbance": {"disturbed": false, "reasons": [], "cpu": {"other_cores": 0.02,
                     "machine_busy_share": 0.4, "steal_share": 0.0, "cores": 16, "top": "sshd",
                     "top_pid": 812, "top_cores": 0.01}, "gpus": [{"index": "0",
                     "slowdowns": {}, "power_limit_w": 700.0, "held_below_mhz": 1980.0, ...}]}
     (machine/disturbance.py to_dict; null when not watched or --llmperf-disturbance off),
     "gpu_telemetry": [{"index": "0", "sm_clock_mhz_mean": 1755.0, "power_w_mean": 612.4,
                        "energy_j": 16020.5, "reason_shares": {"sw power cap": 0.91}, ...}]
     (each of the engine's cards over the measured requests, GPU runs only;
     docs/gpu-telemetry.md)}]}

"format" is the schema's version: verdict/stored_run.py, the model every reader reads the file
through, says what each format added and which it reads.

`value` and `spread` are the median and robust spread over the repeats (stats.combine_runs), so a
saved run can stand in for a baseline (StoredResult.entries). Non-finite numbers (an empty
distribution is NaN) are written as null: JSON has no NaN, and JavaScript's JSON.parse, which
github-action-benchmark uses, rejects a whole file for one; read_run() reads null as NaN.
"""

from __future__ import annotations

import json
import os
import platform
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from pytest_llmperf.machine.hardware import Fingerprint
from pytest_llmperf.metrics import compute as metrics_mod
from pytest_llmperf.metrics import cost
from pytest_llmperf.metrics.compute import Summary
from pytest_llmperf.metrics.derived import Derived, derive_all
from pytest_llmperf.metrics.result import Result
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.verdict.atomic_file import atomic_write
from pytest_llmperf.verdict.measurement_record import MeasurementRecord
from pytest_llmperf.verdict.stored_run import FORMAT, WRITE_ONE, StoredResult, StoredRun

__all__ = ["FORMAT", "WRITE_ONE", "run_document", "run_text", "write_run"]

LATENCIES = ("ttft_s", "tpot_s", "itl_s", "e2el_s")
THROUGHPUT_BENCHMARK = "s_per_output_tok"
# Phi^-1(3/4): quartiles of normal data sit this many standard deviations from the median.
_NORMAL_QUARTILE_Z = 0.6745


# ---------------------------------------------------------------- writing


def run_document(
    records: Sequence[MeasurementRecord],
    *,
    fingerprint: Fingerprint,
    commit: str | None,
    started: datetime,
    usd_per_hour: cost.Price | float | None = None,
    root: Path | None = None,
    derived: Sequence[Derived] | None = None,
) -> dict[str, Any]:
    """The run as a pytest-benchmark JSON document with our data under "llmperf": one result
    entry per record that measured a run (verdict/measurement_record.py), written by the run file's
    model (verdict/stored_run.py); the pytest-benchmark entries are worked out here.

    `usd_per_hour` (--llmperf-cost-per-hour's price, cost.for_hardware; a bare number is the
    machine's) adds each result's "cost" at its engine's share (cost.py); `root` (pytest's
    rootdir) is where a relative model path is, for the roofline; `derived` (one per measured
    record, metrics/derived.py): each result's per-GPU, cost and roofline numbers where the
    caller has worked them out already, else they are worked out here.
    """
    measured = [record for record in records if record.result is not None]
    results = [record.result for record in measured]
    derived = derive_all(results, usd_per_hour, root) if derived is None else derived
    written = fingerprint.to_dict()  # flat, as the file keeps it
    return StoredRun(
        results=tuple(StoredResult.of(record, found)
                      for record, found in zip(measured, derived, strict=True)),
        fingerprint=written, commit=commit, started=started.isoformat(),
        machine_info=_machine_info(written),
        benchmarks=tuple(bench for result in results for bench in _benchmarks(result)),
        version=_benchmark_version()).to_plain()


def write_run(path: str | os.PathLike[str], document: Mapping[str, Any]) -> None:
    """Write a run file as JSON, atomically (a reader sees the old file or the new one, never
    half of one), keys sorted.

    NaN is kept as JSON's non-standard NaN token so an empty distribution survives the round
    trip; json.loads reads it back.
    """
    atomic_write(Path(path), run_text(document))


def run_text(document: Mapping[str, Any]) -> str:
    """A run file's text: what write_run writes, and the results store keeps of a saved run."""
    return json.dumps(document, indent=2, sort_keys=True, default=str) + "\n"


def _machine_info(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    # pytest-benchmark's own keys (from `platform` and py-cpuinfo's "brand_raw"), then the
    # fingerprint, so a reader of machine_info alone still sees the GPU and the vLLM version.
    return {
        "node": platform.node(),
        "machine": platform.machine(),
        "system": platform.system(),
        "release": platform.release(),
        "python_implementation": platform.python_implementation(),
        "python_version": platform.python_version(),
        "cpu": {"brand_raw": fingerprint.get("cpu_model"), "count": fingerprint.get("cpu_cores")},
        **fingerprint,
    }


def _benchmark_version() -> str:
    # pytest-benchmark writes its own version here; we follow the layout of the installed one.
    try:
        return metadata.version("pytest-benchmark")
    except metadata.PackageNotFoundError:
        return "unknown"


# ---------------------------------------------------------------- pytest-benchmark entries


def _benchmarks(result: Result) -> list[dict[str, Any]]:
    values = _request_values(result.records)
    out = []
    for name in LATENCIES:
        summary = getattr(result.metrics, name)
        if summary.n == 0:
            continue
        raw = values[name] if Summary.of(values[name]) == summary else None
        extra = {"metric": name, "unit": "s", "rounds": "requests of the representative run"}
        out.append(_benchmark(result, name, _stats(summary, raw), extra))
    runs = result.runs or (result.metrics,)
    inverse = [1 / run.output_throughput_tok_s for run in runs if run.output_throughput_tok_s > 0]
    if inverse:
        extra = {
            "metric": "output_throughput_tok_s",
            "unit": "s/token",
            "rounds": "repeats",
            "note": "1 / output_throughput_tok_s, so lower is better; ops is the throughput",
        }
        stats = _stats(Summary.of(inverse), inverse)
        out.append(_benchmark(result, THROUGHPUT_BENCHMARK, stats, extra))
    return out


def _benchmark(
    result: Result, name: str, stats: dict[str, Any], extra: dict[str, Any]
) -> dict[str, Any]:
    param = re.search(r"\[(.*)\]", result.key)
    return {
        "group": result.test_id,
        "name": f"{result.key}::{name}",
        "fullname": f"{result.test_id}::{name}",
        "params": None,
        "param": param.group(1) if param else None,
        "extra_info": {**extra, "engine": result.engine_label, "workload": result.workload_label},
        "options": {},
        "stats": stats,
    }


def _request_values(records: Iterable[RequestRecord]) -> dict[str, list[float]]:
    """Per-request values of each latency, for quartiles and outlier counts.

    TPOT and ITL use metrics/compute.py's own per-request functions; the caller only uses these
    values when they reproduce the run's Summary exactly, so a definition that drifts cannot slip
    in.
    """
    done = [r for r in records if r.ok]
    return {
        "ttft_s": [r.ttft_s for r in done],
        "tpot_s": [metrics_mod.request_tpot(r) for r in done if r.output_tokens > 1],
        "itl_s": [x for r in done for x in metrics_mod.request_itls(r)],
        "e2el_s": [r.e2el_s for r in done],
    }


def _stats(summary: Summary, values: Sequence[float] | None) -> dict[str, Any]:
    """pytest-benchmark's "stats" from a Summary; `values` (if known) give quartiles exactly.

    stddev is the Summary's population std (what we report everywhere; pytest-benchmark's is
    the sample std). Quartiles use numpy's linear interpolation like every percentile we report.
    """
    mean, n = summary.mean, summary.n
    if values:
        data = np.asarray(values, dtype=float)
        q1, q3 = (float(q) for q in np.percentile(data, [25, 75]))
    else:
        # Without per-request values (a Result built by hand): median -/+ 0.6745 std, exact for
        # normal data, kept within [min, max]; outlier counts are then unknown and shown as 0.
        data = np.asarray([], dtype=float)
        q1 = max(summary.min, summary.p50 - _NORMAL_QUARTILE_Z * summary.std)
        q3 = min(summary.max, summary.p50 + _NORMAL_QUARTILE_Z * summary.std)
    low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    inside = data[(data >= low) & (data <= high)]
    iqr_outliers = int(data.size - inside.size)
    stddev_outliers = int((np.abs(data - mean) > summary.std).sum())
    return {
        "min": summary.min, "max": summary.max, "mean": mean, "stddev": summary.std,
        "median": summary.p50, "rounds": n, "iterations": 1, "total": mean * n,
        # ops must be finite: JSON has no Infinity (a zero mean only comes from a broken clock).
        "ops": 1 / mean if mean > 0 else 0.0,
        "q1": q1, "q3": q3, "iqr": q3 - q1,
        # Tukey's fences as pytest-benchmark defines them: lowest/highest datum within 1.5 IQR.
        "ld15iqr": float(inside.min()) if inside.size else max(summary.min, low),
        "hd15iqr": float(inside.max()) if inside.size else min(summary.max, high),
        "iqr_outliers": iqr_outliers,
        "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}",
    }  # fmt: skip
