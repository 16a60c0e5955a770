"""Measure what the disturbance check sees on this machine: quiet runs against runs beside a
neighbour of known size, on the real CPU engine (the rows behind machine/disturbance.py's limits,
docs/engine-faults.md).

One pytest session, one engine: a small closed-loop workload (32 requests, 128 tokens in, 48 out, 8
in flight) measured --rounds times per condition, the conditions interleaved (quiet, full
neighbour, quarter neighbour, ...) so the machine's mood is shared. A neighbour is a Python busy
loop at nice 0 started outside the test session's process tree (`setsid -f`, as another user's job
would be); "quarter" spins 25% of each 100 ms. With --where, the full neighbour is also placed:
"compute" pinned to the engine's compute core (TINY_CPU computes on core 0), "control" pinned to
the other core (where the engine's API server and engine core run), "both" one loop on each core.
--llmperf-disturbance warn, so every run is measured and recorded; the script prints one row per
run from the run file. With --disturbance fail (the plugin's default) a run a neighbour has
already made DISTURBED is ended early (machine/neighbour_watch.py): its row says after how long.
--requests and --output-tokens make the workload smaller still, for a neighbour on the compute
core (the engine then runs at a few tokens a second).

    .venv/bin/python scripts/calibrate_disturbance.py --rounds 4
    .venv/bin/python scripts/calibrate_disturbance.py --rounds 2 --where --requests 8 \
        --output-tokens 16
    .venv/bin/python scripts/calibrate_disturbance.py --rounds 1 --where --disturbance fail
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SUITE = '''
import os, signal, subprocess, sys, time
import pytest
from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

LOOPS = {{"full": "while True: pass",
          "quarter": "import time\\nwhile True:\\n t = time.monotonic() + 0.025\\n"
                     " while time.monotonic() < t: pass\\n time.sleep(0.075)"}}
CONDITIONS = {conditions!r}
# Where a placed full neighbour may run: the cores named, one loop per entry.
PLACES = {{"compute": ["0"], "control": ["1"], "both": ["0", "1"]}}


def start_one(loop, pidfile, cores=None):
    code = f"import os; open({{pidfile!r}}, 'w').write(str(os.getpid()))\\n" + loop
    pinned = ["taskset", "-c", cores] if cores else []
    subprocess.run(["setsid", "-f", *pinned, sys.executable, "-c", code], check=True)
    for _ in range(100):
        if os.path.exists(pidfile) and open(pidfile).read():
            return int(open(pidfile).read())
        time.sleep(0.05)
    raise RuntimeError("the neighbour did not start")


def start(kind, pidfile):
    if kind in PLACES:
        return [start_one(LOOPS["full"], f"{{pidfile}}{{n}}", cores)
                for n, cores in enumerate(PLACES[kind])]
    return [start_one(LOOPS[kind], pidfile)]


@pytest.mark.engine(TINY_CPU)
@pytest.mark.parametrize("run", range(len(CONDITIONS)))
def test_cal(llmperf, run, tmp_path):
    kind = CONDITIONS[run]
    pids = start(kind, str(tmp_path / "pid")) if kind != "quiet" else []
    try:
        time.sleep(1.0 if pids else 0)
        # Small: beside a full neighbour the nice-19 engine gets a few percent of a core.
        llmperf.run(Workload.fixed(input_tokens=128, output_tokens={output_tokens},
                                   num_requests={requests}, concurrency=8, warmup_requests=2))
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--where", action="store_true",
                        help="the full neighbour on the compute core, the other core, both")
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--output-tokens", type=int, default=48)
    parser.add_argument("--disturbance", choices=("warn", "fail"), default="warn",
                        help="fail: a disturbed run is ended early, as the plugin's default")
    args = parser.parse_args()
    kinds = ["quiet", "full", "compute", "control", "both"] if args.where else \
        ["quiet", "full", "quarter"]
    conditions = kinds * args.rounds
    with tempfile.TemporaryDirectory(prefix="llmperf-cal-") as work:
        suite = Path(work) / "test_cal.py"
        suite.write_text(SUITE.format(conditions=conditions, requests=args.requests,
                                      output_tokens=args.output_tokens))
        out = Path(work) / "run.json"
        subprocess.run([sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider",
                        "--rootdir", str(REPO), "--llmperf-disturbance", args.disturbance,
                        "--llmperf-stall-timeout", "600",
                        "--llmperf-json", str(out), "--llmperf-log-dir", work],
                       cwd=REPO, check=False)
        results = json.loads(out.read_text().replace("NaN", "null"))["llmperf"]["results"]
    print("run  neighbour  other cores  on engine's  busy  steal  TPOT p50 ms  out tok/s  "
          "status      disturbed  busiest")
    for index, result in enumerate(results):
        cpu = (result.get("disturbance") or {}).get("cpu") or {}
        # A run ended early in its warm-up measured nothing: its numbers read nan.
        metrics = {name: {"value": float("nan") if value.get("value") is None
                          else value["value"]} for name, value in result["metrics"].items()}
        print(f"{index:3d}  {conditions[index]:9s}  {cpu.get('other_cores', float('nan')):11.2f}"
              f"  {cpu.get('on_engine_cores', float('nan')):11.2f}"
              f"  {cpu.get('machine_busy_share', float('nan')):4.0%}"
              f"  {cpu.get('steal_share', float('nan')):5.1%}"
              f"  {metrics['tpot_s.p50']['value'] * 1e3:11.2f}"
              f"  {metrics['output_throughput_tok_s']['value']:9.0f}"
              f"  {result.get('status') or '-':10s}"
              f"  {(result.get('disturbance') or {}).get('disturbed')!s:9s}"
              f"  {cpu.get('top')} {cpu.get('top_cores', 0):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
