"""Measure paired A/B's false-alarm and catch rates on this machine, with the real CPU engine.

Each session runs a short 4-test CPU suite (closed loop, Poisson, random lengths, one stream)
under --llmperf-ab, every test repeated --reps times while the two engines stay up, and restarts
both engines between sessions. The conditions alternate session by session, so the machine's
mood is shared between them:

- same: B is A's engine plus the slowdown hook with no delay, so both run the same code path
  but as two engines. Every failed test is a false alarm.
- slow: B's every model step sleeps --delay seconds (tests/integration/slowdown), sized so TPOT
  rises about 20%. A repetition with no failed test missed the regression.

It prints, per condition, the repetitions with a failure, the failed tests, and each gated
metric's B/A medians (their range over all tests and repetitions) and the per-pair spread (of
the first-round pairs), per metric and per test, and how many tests measured confirm pairs; the
raw run files and logs stay under --out.

    .venv/bin/python scripts/calibrate_ab.py   # the defaults: 4 sessions x 5 repetitions, 4 pairs
                                               # (+4 to confirm a regression)
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import os
import statistics
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SLOWDOWN = REPO / "tests" / "integration" / "slowdown"

SUITE = textwrap.dedent('''
    """The calibration suite: four short load patterns, each repeated, judged by --llmperf-ab."""
    import pytest
    from pytest_llmperf import Workload
    from suites.tiny import CPU_GATED, TINY_CPU

    REPS = int({reps})
    SCALE = int({scale})  # request counts times SCALE: longer measurements, less noise per pair
    RATE = float({rate})  # Poisson arrivals per second: keep it under the engine's capacity
    pytestmark = [pytest.mark.cpu, pytest.mark.engine(TINY_CPU),
                  pytest.mark.llmperf(gate=CPU_GATED),
                  pytest.mark.parametrize("rep", range(REPS))]

    def test_closed_loop(llmperf, rep):
        llmperf.run(Workload.fixed(input_tokens=64, output_tokens=32, num_requests=32 * SCALE,
                                   concurrency=8, warmup_requests={warmup}))

    def test_poisson(llmperf, rep):
        llmperf.run(Workload.fixed(input_tokens=64, output_tokens=32, num_requests=24 * SCALE,
                                   rate=RATE, seed=rep, warmup_requests=2))

    def test_random_lengths(llmperf, rep):
        llmperf.run(Workload.random(input_tokens=128, output_tokens=32, range_ratio=0.5,
                                    num_requests=16 * SCALE, concurrency=4, seed=rep,
                                    warmup_requests=2))

    def test_one_stream(llmperf, rep):
        llmperf.run(Workload.fixed(input_tokens=32, output_tokens=48, num_requests=6 * SCALE,
                                   concurrency=1, warmup_requests=1))
''')


@contextlib.contextmanager
def held(lock: str | None):
    """The machine's heavy-work lock, if one is named: no other benchmark runs beside ours."""
    if lock is None:
        yield
        return
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def overrides(delay: float) -> str:
    return json.dumps({"env": {"PYTHONPATH": str(SLOWDOWN),
                               "LLMPERF_INDUCED_STEP_DELAY_S": f"{delay:g}"}})


def run_session(out: Path, name: str, suite: Path, args: argparse.Namespace,
                delay: float) -> list[dict]:
    """One pytest session; returns one row per test: its id, failed or not, and its ratios."""
    junit, run_json = out / f"{name}.xml", out / f"{name}.json"
    command = [sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider",
               "--rootdir", str(REPO), "--llmperf-ab", overrides(delay),
               "--llmperf-ab-pairs", str(args.pairs), "--llmperf-ab-confirm-pairs",
               str(args.confirm_pairs), "--llmperf-ab-tolerance", str(args.tolerance),
               f"--junitxml={junit}", f"--llmperf-json={run_json}",
               *args.pytest_args.split()]
    began = time.monotonic()
    with held(args.lock):
        proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    (out / f"{name}.log").write_text(proc.stdout + proc.stderr)
    failed = {case.get("name") for case in ET.parse(junit).getroot().iter("testcase")
              if case.find("failure") is not None or case.find("error") is not None}
    results = json.loads(run_json.read_text())["llmperf"]["results"] if run_json.is_file() else []
    rows = []
    for result in results:
        if "ab" not in result:
            continue
        test = result["key"].removesuffix(" (B)")
        medians = {metric: entry["median"] for metric, entry in result["ab"]["metrics"].items()}
        ratios = {metric: [r for r in entry["ratios"] if r] for metric, entry
                  in result["ab"]["metrics"].items()}
        # The spread is of the first-round pairs: every test has them, confirmed or not.
        first = {metric: values[:args.pairs] for metric, values in ratios.items()}
        rows.append({"test": test, "failed": test in failed, "medians": medians, "ratios": first,
                     "confirmed": result["ab"]["pairs"] > args.pairs,
                     "messages": [entry["message"] for entry in result["ab"]["metrics"].values()
                                  if entry["status"] == "regression"],
                     "inconclusive": any(entry["status"] == "inconclusive"
                                         for entry in result["ab"]["metrics"].values()),
                     "client_limited": bool(result.get("client", {}).get("limited"))})
    print(f"{name}: exit {proc.returncode}, {len(failed)} of {len(rows)} tests failed, "
          f"{time.monotonic() - began:.0f} s", flush=True)
    return rows


def summarize(condition: str, rows: list[dict]) -> None:
    by_rep: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_rep[row["session"] + row["test"].rpartition("[")[2]].append(row)
    reps_failed = sum(any(r["failed"] for r in group) for group in by_rep.values())
    tests_failed = sum(r["failed"] for r in rows)
    print(f"\n{condition}: {reps_failed} of {len(by_rep)} repetitions had a failed test; "
          f"{tests_failed} of {len(rows)} tests failed; "
          f"{sum(r['client_limited'] for r in rows)} side-B rows client-limited")
    print(f"  {sum(r['inconclusive'] for r in rows)} tests inconclusive (too noisy to decide)")
    confirmed = [r for r in rows if r["confirmed"]]
    print(f"  {len(confirmed)} tests regressed over the first pairs and measured confirm pairs; "
          f"{sum(r['failed'] for r in confirmed)} of them failed on all the pairs")
    metrics = sorted({m for r in rows for m in r["medians"]})
    for metric in metrics:
        values = [r["medians"][metric] for r in rows if r["medians"].get(metric) is not None]
        logs = [math.log(r) for row in rows for r in row["ratios"].get(metric, ())]
        if values:
            spread = f", per-pair log sd {statistics.stdev(logs):.3f}" if len(logs) > 1 else ""
            print(f"  {metric:26} B/A median of medians {statistics.median(values):.3f}, "
                  f"range {min(values):.3f}-{max(values):.3f} over {len(values)} tests{spread}")
    per_test: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        for metric, ratios in row["ratios"].items():
            per_test[row["test"].partition("[")[0]][metric] += [math.log(r) for r in ratios]
    for test, by_metric in per_test.items():
        spreads = ", ".join(f"{metric} {statistics.stdev(logs):.3f}"
                            for metric, logs in sorted(by_metric.items()) if len(logs) > 1)
        print(f"  per-pair log sd, {test}: {spreads}")
    for row in rows:
        for message in row["messages"] if row["failed"] else ():
            print(f"  {row['session']} {row['test']}: {message}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=4, help="sessions per condition")
    parser.add_argument("--reps", type=int, default=5, help="suite repetitions per session")
    parser.add_argument("--pairs", type=int, default=4, help="ABBA pairs (the plugin's default)")
    parser.add_argument("--scale", type=int, default=1,
                        help="multiply every workload's request count (longer measurements)")
    parser.add_argument("--rate", type=float, default=6.0,
                        help="the Poisson test's requests/s. Over the engine's capacity the queue "
                             "grows all run and its latencies swing with the machine (16 req/s "
                             "on an AVX2 VM: per-pair log sd of TPOT 0.29-0.35, the other tests "
                             "0.07-0.14)")
    parser.add_argument("--warmup", type=int, default=2,
                        help="the closed-loop test's warm-up requests (0: the Workload default)")
    parser.add_argument("--confirm-pairs", type=int, default=4,
                        help="pairs measured more when a test regresses (the plugin's default)")
    parser.add_argument("--tolerance", type=float, default=0.10)
    parser.add_argument("--delay", type=float, default=0.0009,
                        help="seconds each model step of side B sleeps in the slow condition "
                             "(0.9 ms: TPOT +21.5%% over 20 runs on an AVX2 VM, docs/ab.md)")
    parser.add_argument("--conditions", default="same,slow")
    parser.add_argument("--lock", default=None, help="a file to flock around each session")
    parser.add_argument("--pytest-args", default="",
                        help="more pytest options for every session, e.g. --llmperf-engine-nice 0")
    parser.add_argument("--out", type=Path, default=REPO / ".llmperf" / "calibrate-ab")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    suite = args.out / "test_calibration_ab.py"
    suite.write_text(SUITE.format(reps=args.reps, scale=args.scale, rate=args.rate,
                                  warmup=args.warmup))
    conditions = args.conditions.split(",")
    rows: dict[str, list[dict]] = {c: [] for c in conditions}
    for session in range(args.sessions):
        for condition in conditions:  # alternated: both see the same stretch of the machine
            delay = args.delay if condition == "slow" else 0.0
            name = f"{condition}-{session + 1}"
            for row in run_session(args.out, name, suite, args, delay):
                rows[condition].append({**row, "session": name})
    for condition in conditions:
        summarize(condition, rows[condition])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
