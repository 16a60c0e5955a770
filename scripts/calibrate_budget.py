"""The CPU main job, unchanged, N times into one store, then with every vLLM step slower: the
false reds a run and what the false-alarm budget held back, for docs/noise.md's table ("A night's
false-alarm budget"). Run by hand, not in CI (about 10 x the main job's ~10 minutes).

    .venv/bin/python scripts/calibrate_budget.py --runs 10 --slowed-from 6 --delay-s 0.004 \\
        --out .llmperf/budget

One folder for every run (--out), as on a runner whose checkout keeps `.llmperf/`: its
`suites` is a link to the repository's, the baselines folder is an empty one (so the first run
records this machine's first-run baselines and the later ones gate against them), one SQLite
store, `--llmperf-trend`. From run --slowed-from on, the folder's conftest.py makes every vLLM
model step sleep --delay-s (tests/integration/slowdown), the engine specs unchanged. Each run
holds /tmp/llmperf-engine.lock while it runs. Per run it prints and keeps (runs.json): the exit
status, the tests that failed, the budget line, the regressions named as unconfirmed, and the
comparisons with their per-comparison false-alarm rate. --dry-run prints the commands only.
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
SLOWER = f"""
import os
os.environ["PYTHONPATH"] = os.pathsep.join([{str(SLOWDOWN)!r}, {str(REPO)!r}])
os.environ["LLMPERF_INDUCED_STEP_DELAY_S"] = "{{delay:.6f}}"
"""


def command(folder: Path, number: int) -> list[str]:
    return ["flock", LOCK, sys.executable, "-m", "pytest", "-m", "cpu", "suites/", "-q", "-rf",
            "-p", "no:cacheprovider", "-c", str(REPO / "pyproject.toml"), "--rootdir",
            str(folder), "--llmperf-baseline-dir", str(folder / "no-tables"), "--llmperf-trend",
            "--llmperf-history", str(folder / "store.sqlite"),
            f"--llmperf-json=run-{number}.json"]


def outcome(folder: Path, number: int, proc: subprocess.CompletedProcess, seconds: float
            ) -> dict:
    """What one run found: its failures, its budget line and the unconfirmed regressions."""
    text = " ".join((proc.stdout or "").replace("\n    ", " ").splitlines())
    lines = (proc.stdout or "").replace("\n    ", " ").splitlines()
    run_file = folder / f"run-{number}.json"
    results = json.loads(run_file.read_text())["llmperf"]["results"] if run_file.is_file() else []
    seen = [found for result in results for found in (result.get("detectable") or {}).values()]
    return {"run": number, "exit": proc.returncode, "seconds": round(seconds),
            "failed": [line for line in lines if line.startswith("FAILED ")],
            "budget": next((line for line in lines if line.startswith("false-alarm budget")), ""),
            "unconfirmed": [line for line in lines if ": unconfirmed, not failed: " in line],
            "comparisons": len(seen),
            "bands_alarm_sum": round(sum(found.get("false_alarm", 0.0) for found in seen), 4),
            "regressed_lines": text.count(" regressed: ")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs in all")
    parser.add_argument("--slowed-from", type=int, default=6,
                        help="the first run of the slower vLLM (past --runs: none)")
    parser.add_argument("--delay-s", type=float, default=0.004, help="sleep per model step")
    parser.add_argument("--out", type=Path, default=REPO / ".llmperf" / "budget")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args()
    if args.dry_run:
        for number in range(1, args.runs + 1):
            slowed = " (slower vLLM)" if number >= args.slowed_from else ""
            print(" ".join(command(args.out, number)) + slowed)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "no-tables").mkdir(exist_ok=True)
    if not (args.out / "suites").exists():
        (args.out / "suites").symlink_to(REPO / "suites")
    runs = []
    for number in range(1, args.runs + 1):
        if number == args.slowed_from:
            (args.out / "conftest.py").write_text(SLOWER.format(delay=args.delay_s))
        began = time.monotonic()
        proc = subprocess.run(command(args.out, number), cwd=args.out, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        (args.out / f"run-{number}.log").write_text(proc.stdout + proc.stderr)
        runs.append(outcome(args.out, number, proc, time.monotonic() - began))
        print(json.dumps(runs[-1]), flush=True)
        (args.out / "runs.json").write_text(json.dumps(runs, indent=1))
    false_reds = [run["run"] for run in runs[1:args.slowed_from - 1] if run["failed"]]
    caught = [run["run"] for run in runs[args.slowed_from - 1:] if run["failed"]]
    print(f"unchanged runs 2-{args.slowed_from - 1}: false reds in {false_reds or 'none'}; "
          f"slower vLLM from run {args.slowed_from}: failed in runs {caught or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
