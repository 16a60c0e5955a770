"""Benchmark the results store at size (docs/history.md, "What it costs"): fill a store with
--runs runs of --tests tests of --metrics metrics each, then time what a session and a user pay:
appending one more run (the end of every session) and `llmperf history TEST` (a new process, as
a user runs it: imports included), for the default last 100 runs and for the last 1,000.

    .venv/bin/python scripts/bench_history.py                     # SQLite, 10,000 x 50
    .venv/bin/python scripts/bench_history.py --url postgresql://user@host/db
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_llmperf.history import location, record
from pytest_llmperf.history.store import HistoryStore

TEST = "suites/test_cpu.py::test_fixed_length_concurrency"


def document(index: int, tests: int, metrics: int) -> dict:
    """A run file document like a CPU-suite session's, with `metrics` metrics per result."""
    names = ["tpot_s.p50", "ttft_s.p50", "e2el_s.p50", "output_throughput_tok_s"]
    names += [f"extra_{i:03d}" for i in range(metrics - len(names))]
    results = [{
        "key": f"test_{t}", "test_id": TEST if t == 0 else f"suites/test_cpu.py::test_{t}",
        "verdict": "pass", "engine": {"model": "suites/models/tiny-llama", "max_num_seqs": 16},
        "engine_label": "tiny-llama", "workload": {"name": "w", "num_requests": 64},
        "workload_label": "w x64", "gate": {"tolerance": 0.1},
        "metrics": {name: {"value": 0.002 * (1 + (index % 7) / 100), "spread": 0.0001, "n": 1,
                           "direction": "lower"} for name in names},
        "failures": {}, "client": {"workers": 1, "limited": False},
    } for t in range(tests)]
    return {"datetime": f"2026-01-01T00:00:{index % 60:02d}+00:00",
            "commit_info": {"id": f"{index:040x}"},
            "llmperf": {"fingerprint": {"hardware_class": "cpu", "device_name": "AMD EPYC",
                                        "cpu_cores": 2, "vllm": "0.32.0", "torch": "2.13.0+cpu",
                                        "python": "3.11.7"}, "results": results}}


def timed(call) -> float:
    began = time.perf_counter()
    call()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="a store URL (default: a new SQLite file)")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--tests", type=int, default=1)
    parser.add_argument("--metrics", type=int, default=50)
    args = parser.parse_args()
    url = args.url or str(Path(tempfile.mkdtemp()) / "history.sqlite")
    store = HistoryStore.open(location.resolve(url, Path.cwd()))
    template = document(0, args.tests, args.metrics)
    fill = timed(lambda: [store.record(record.from_document(
        {**copy.deepcopy(template), "commit_info": {"id": f"{i:040x}"}}, environ={}))
        for i in range(args.runs)])
    print(f"filled {args.runs} runs x {args.tests} tests x {args.metrics} metrics in {fill:.1f} s")
    appends = [timed(lambda i=i: store.record(record.from_document(
        document(i, args.tests, args.metrics), environ={}))) for i in range(50)]
    print(f"append one run: median {statistics.median(appends) * 1e3:.1f} ms, "
          f"max {max(appends) * 1e3:.1f} ms (50 appends)")
    for last in ("100", "1000"):  # the default, and ten times it (the search is O(n^2))
        command = [sys.executable, "-m", "pytest_llmperf.cli", "history", TEST, "--history", url,
                   "--last", last]
        walls = [timed(lambda: subprocess.run(command, capture_output=True, check=True))
                 for _ in range(3)]
        print(f"llmperf history TEST --last {last}: {min(walls):.2f} s wall (best of 3, a new "
              "process each)")


if __name__ == "__main__":
    main()
