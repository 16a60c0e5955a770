"""Measure the CPU gate's false-alarm and catch rates on this machine, with the real engine.

1. `pytest -m cpu suites/ --llmperf-update-baselines` makes fresh baselines (skip: --keep).
2. The suite runs unchanged N times against them: every failed test is a false alarm.
3. The suite runs N times with vLLM made slower (tests/integration/slowdown: every model step
   sleeps --delay seconds, the engine spec unchanged): every run with no failure missed it.
Then it prints the counts, and for each gated metric the largest deviation from its baseline seen
in the unchanged runs (the band must be wider than that).

    .venv/bin/python scripts/calibrate_gate.py --runs 10 --delay 0.005
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tomllib
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SLOWDOWN = REPO / "tests" / "integration" / "slowdown"


def run_suite(out: Path, name: str, extra_env: dict[str, str], *args: str) -> dict:
    """One `pytest -m cpu suites/`; returns its failed tests and its JSON run file."""
    env = {**os.environ, **extra_env}
    junit, run_json = out / f"{name}.xml", out / f"{name}.json"
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "cpu", "suites/", "-q", "-p", "no:cacheprovider",
         f"--junitxml={junit}", f"--llmperf-json={run_json}", *args],
        cwd=REPO, env=env, capture_output=True, text=True)
    (out / f"{name}.log").write_text(proc.stdout + proc.stderr)
    failed = [case.get("name") for case in ET.parse(junit).getroot().iter("testcase")
              if case.find("failure") is not None or case.find("error") is not None]
    document = json.loads(run_json.read_text()) if run_json.is_file() else {}
    print(f"{name}: exit {proc.returncode}, {len(failed)} failed {failed}, "
          f"{time.monotonic() - began:.0f} s", flush=True)
    return {"failed": failed, "document": document}


def deviations(runs: list[dict]) -> dict[str, float]:
    """metric -> the largest |relative change| from its baseline across the runs."""
    worst: dict[str, float] = defaultdict(float)
    for baseline_file in (REPO / "baselines" / "cpu").glob("*.toml"):
        tables = tomllib.loads(baseline_file.read_text())
        for run in runs:
            for result in run["document"].get("llmperf", {}).get("results", []):
                table = tables.get(result["key"]) if result["test_id"].startswith(
                    f"suites/{baseline_file.stem}.py::") else None
                for name, entry in (table or {}).get("metrics", {}).items():
                    value = result["metrics"].get(name, {}).get("value")
                    if value is not None and entry["value"]:
                        change = abs(value - entry["value"]) / abs(entry["value"])
                        worst[name] = max(worst[name], change)
    return dict(sorted(worst.items()))


def rejudge(runs: list[dict], names: tuple[str, ...], tolerance: float) -> list[list[str]]:
    """The tests each run would have failed had the baselines gated `names` at `tolerance`:
    the same measurements through the same gate (gate.check_metric), judged again."""
    from pytest_llmperf.metrics.stats import Estimate
    from pytest_llmperf.verdict.baselines import BaselineEntry
    from pytest_llmperf.verdict.gate import check_metric

    tables = {f"suites/{path.stem}.py::{key}": table
              for path in (REPO / "baselines" / "cpu").glob("*.toml")
              for key, table in tomllib.loads(path.read_text()).items()}
    failed_per_run = []
    for run in runs:
        failed = []
        for result in run["document"].get("llmperf", {}).get("results", []):
            table = tables.get(result["test_id"], {}).get("metrics", {})
            for name in names:
                value = result["metrics"].get(name, {}).get("value")
                if name not in table or value is None:
                    continue
                entry = BaselineEntry(**{**table[name], "tolerance": tolerance})
                if check_metric(name, Estimate(value, 0.0, 1), entry).failed:
                    failed.append(result["key"])
                    break
        failed_per_run.append(failed)
    return failed_per_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--delay", type=float, default=0.005, help="induced s per model step")
    parser.add_argument("--out", type=Path, default=REPO / ".llmperf" / "calibration")
    parser.add_argument("--keep", action="store_true", help="keep the existing baselines")
    parser.add_argument("--rejudge", metavar="METRICS", help="only judge the runs in --out again, "
                        "gating these comma-separated metrics at --tolerance")
    parser.add_argument("--tolerance", type=float, default=0.5)
    args = parser.parse_args()
    if args.rejudge:
        names = tuple(args.rejudge.split(","))
        for kind in ("unchanged", "induced"):
            runs = [{"document": json.loads(p.read_text())}
                    for p in sorted(args.out.glob(f"{kind}-*.json"))]
            failed = rejudge(runs, names, args.tolerance)
            print(f"{kind}: {sum(1 for f in failed if f)} of {len(runs)} runs fail "
                  f"({sum(map(len, failed))} test failures): {failed}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.keep:
        run_suite(args.out, "baseline", {}, "--llmperf-update-baselines")
    unchanged = [run_suite(args.out, f"unchanged-{i}", {}) for i in range(args.runs)]
    slow_env = {"PYTHONPATH": os.pathsep.join([str(SLOWDOWN), str(REPO)]),
                "LLMPERF_INDUCED_STEP_DELAY_S": str(args.delay)}
    induced = [run_suite(args.out, f"induced-{i}", slow_env) for i in range(args.runs)]

    false_runs = sum(1 for run in unchanged if run["failed"])
    false_tests = sum(len(run["failed"]) for run in unchanged)
    caught = sum(1 for run in induced if run["failed"])
    per_test = defaultdict(int)
    for run in induced:
        for test in run["failed"]:
            per_test[test] += 1
    print(f"\nunchanged: {false_runs} of {args.runs} runs had a false failure "
          f"({false_tests} failed tests in all)")
    print(f"induced ({args.delay * 1e3:g} ms/step): {caught} of {args.runs} runs caught it")
    print("tests failing in induced runs: " + ", ".join(f"{t} {n}/{args.runs}"
                                                       for t, n in sorted(per_test.items())))
    print("largest deviation from baseline in unchanged runs:")
    for name, change in deviations(unchanged).items():
        print(f"  {name}: {change:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
