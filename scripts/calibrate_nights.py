"""Nights of one unchanged CPU test into one results store, then a slower vLLM: the false alarms
and the nights to catch it with this machine's first-run baseline and the trend gate together,
as docs/noise.md reports them ("Nights on a machine without a committed table").

    flock-free: .venv/bin/python scripts/calibrate_nights.py --nights 20 --slowed 3 \\
        --delay-s 0.004 --out .llmperf/nights

One folder for every night, as on a runner whose checkout keeps `.llmperf/` (its first-run
baseline survives; a CI clean step would delete it and leave the trend gate alone), no committed
table (`baselines/` absent), the gate's default tolerance, `--llmperf-trend`, a SQLite store.
From night --nights + 1 on, the folder's conftest.py makes every vLLM model step sleep
--delay-s (tests/integration/slowdown), the engine spec unchanged. Each night holds
/tmp/llmperf-engine.lock while its engine runs (other work on the machine waits for it, and it
for theirs) and prints its outcome and its failure lines; --out gets nights.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SLOWDOWN = REPO / "tests" / "integration" / "slowdown"
LOCK = "/tmp/llmperf-engine.lock"
# The night: one unchanged test, 32 requests at concurrency 4, the default tolerance.
SUITE = '''
import pytest
from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

pytestmark = pytest.mark.engine(TINY_CPU)

def test_night(llmperf):
    llmperf.run(Workload.fixed(input_tokens=64, output_tokens=32, num_requests=32,
                               concurrency=4, warmup_requests=4))
'''
SLOWER = f"""
import os
os.environ["PYTHONPATH"] = os.pathsep.join([{str(SLOWDOWN)!r}, {str(REPO)!r}])
os.environ["LLMPERF_INDUCED_STEP_DELAY_S"] = "{{delay:.6f}}"
"""


def night(folder: Path, number: int) -> dict:
    """One pytest session in `folder`; its outcome, its failure lines and its TPOT p50."""
    began = time.monotonic()
    proc = subprocess.run(
        ["flock", LOCK, sys.executable, "-m", "pytest", "test_night.py", "-q", "-rf",
         "-p", "no:cacheprovider", "--rootdir", str(folder), "--llmperf-trend",
         f"--llmperf-json=night-{number}.json"],
        cwd=folder, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    (folder / f"night-{number}.log").write_text(proc.stdout + proc.stderr)
    run_file = folder / f"night-{number}.json"
    results = json.loads(run_file.read_text())["llmperf"]["results"] if run_file.is_file() else []
    tpot = results[0]["metrics"]["tpot_s.p50"]["value"] if results else None
    failures = [line for line in proc.stdout.splitlines()
                if " regressed: " in line or "changed for the worse" in line]
    return {"night": number, "exit": proc.returncode, "seconds": round(time.monotonic() - began),
            "verdict": results[0]["verdict"] if results else "not measured",
            "tpot_p50_ms": tpot and round(tpot * 1000, 3), "failures": failures}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=20, help="unchanged nights")
    parser.add_argument("--slowed", type=int, default=3, help="nights of the slower vLLM")
    parser.add_argument("--delay-s", type=float, default=0.004, help="sleep per model step")
    parser.add_argument("--out", type=Path, default=REPO / ".llmperf" / "nights")
    parser.add_argument("--start", type=int, default=1,
                        help="the first night's number: go on in --out where a series stopped")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "test_night.py").write_text(SUITE)
    nights = []
    for number in range(args.start, args.nights + args.slowed + 1):
        if number == args.nights + 1:
            (args.out / "conftest.py").write_text(SLOWER.format(delay=args.delay_s))
        found = night(args.out, number)
        nights.append(found)
        print(json.dumps(found), flush=True)
        (args.out / f"nights-from-{args.start}.json").write_text(json.dumps(nights, indent=1))
    unchanged = [n for n in nights if n["night"] <= args.nights]
    alarms = [n["night"] for n in unchanged if n["exit"] != 0]
    caught = [n["night"] - args.nights for n in nights if n["night"] > args.nights
              and n["exit"] != 0]
    print(f"unchanged nights: {len(unchanged)}, failed: {alarms or 'none'}; slower vLLM "
          f"({args.delay_s * 1000:g} ms a step) caught on its night "
          f"{caught[0] if caught else 'never'} of {args.slowed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
