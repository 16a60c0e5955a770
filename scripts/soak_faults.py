"""Soak: 20 engine crashes in one pytest run cost 20 tests, never the run.

Not part of CI (it takes ~20 minutes on the 2-core runner). Run it alone on the machine:

    flock /tmp/llmperf-heavy.lock .venv/bin/python scripts/soak_faults.py

It writes a suite of SPECS engine specs (the tiny CPU engine, one seed each, so each is a spec of
its own) with four tests each: crash, ok, crash, ok. A crash test SIGKILLs the engine's
EngineCore once the measured requests stream, as the kernel's OOM killer would. So each spec dies
twice: under MAX_DEATHS (3), and so restarted both times; 2 x SPECS crashes in all. Then it checks
and prints:
- every crash test failed with the death line, and every other test passed;
- a fresh engine was started after every crash (one log per start, and the restart notes);
- no process of ours is left (ps: vLLM's server, its EngineCore, client workers);
- the JSON run file parses and holds every test, the crash tests with the verdict ENGINE DIED;
- the baselines the passing tests wrote parse, and hold those tests and no crash test.
Exit status 0 when all of that holds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SPECS = 10  # x 2 crashes each = 20 crashes
TIMEOUT_S = 3600

SUITE = '''
import os, signal, time
from pathlib import Path

import pytest
from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

SPECS = [TINY_CPU.replace(seed=seed) for seed in range({specs})]
LONG = Workload.fixed(input_tokens=32, output_tokens=64, num_requests=2000, concurrency=4)
SHORT = Workload.fixed(input_tokens=32, output_tokens=8, num_requests=8, concurrency=2)


def our_engine_core() -> int:
    """The EngineCore whose parent (vLLM's server) is our child: never anyone else's engine."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if not Path(f"/proc/{{pid}}/cmdline").read_bytes().startswith(b"VLLM::EngineCore"):
                continue
            server = int(Path(f"/proc/{{pid}}/stat").read_text().rsplit(")", 1)[1].split()[1])
            parent = int(Path(f"/proc/{{server}}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid():
            return int(pid)
    raise RuntimeError("no EngineCore of ours is running")


def kill_once_streaming(log_dir: str) -> None:
    # Once a log shows a request sent after this test began, this test's measurement streams:
    # the engine it got (a running one, or one it started) serves it. Logs are read from where
    # they ended when the test began, so an earlier test's requests do not count.
    seen = {{log: log.stat().st_size for log in Path(log_dir).glob("vllm-*.log")}}
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if any("POST /v1/completions" in new_text(log, seen.get(log, 0))
               for log in Path(log_dir).glob("vllm-*.log")):
            break
        time.sleep(0.2)
    time.sleep(0.5)
    os.kill(our_engine_core(), signal.SIGKILL)


def new_text(log: Path, offset: int) -> str:
    with open(log, "rb") as fh:
        fh.seek(offset)
        return fh.read().decode(errors="replace")


# The plugin runs each spec's tests together, in this order: crash_a, ok_a, crash_b, ok_b.
@pytest.mark.parametrize("spec", [pytest.param(i, marks=pytest.mark.engine(engine))
                                  for i, engine in enumerate(SPECS)])
@pytest.mark.parametrize("step", ["crash_a", "ok_a", "crash_b", "ok_b"])
def test_soak(llmperf, request, spec, step):
    if step.startswith("crash"):
        import threading

        log_dir = request.config.getoption("llmperf_log_dir")
        threading.Thread(target=kill_once_streaming, args=(log_dir,), daemon=True).start()
        llmperf.run(LONG)
    else:
        assert llmperf.run(SHORT).completed == 8
'''

DEATH_LINE = re.compile(r"^engine tiny-llama died during the test \(VLLM::EngineCore, pid \d+, "
                        r"ended first; .*; log: \S+/vllm-\d+\.log$")
FAILURE_HEADER = re.compile(r"^_{3,} test_soak\[(?P<id>[\w-]+)\] _{3,}$")
OUR_PROCESSES = ("vllm.entrypoints", "VLLM::", "llmperf-client")


def our_processes(root: int) -> list[str]:
    """Every process under `root` (the soak's pytest), by ps, still alive."""
    table = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    rows = [line.split(None, 2) for line in table]
    children: dict[int, list[tuple[int, str]]] = {}
    for pid, ppid, *args in rows:
        children.setdefault(int(ppid), []).append((int(pid), args[0] if args else ""))
    left, todo = [], [root]
    while todo:
        for pid, args in children.get(todo.pop(), []):
            left.append(f"{pid} {args[:100]}")
            todo.append(pid)
    # And anything that escaped its parent (re-parented to init): vLLM's or our client's marks.
    left += [f"{pid} {args[0][:100]}" for pid, ppid, *args in rows
             if args and any(mark in args[0] for mark in OUR_PROCESSES)]
    return sorted(set(left))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--specs", type=int, default=SPECS,
                        help=f"engine specs, two crashes each (default {SPECS}: 20 crashes)")
    specs = parser.parse_args(argv).specs
    return soak(specs)


def run_pytest(command: list[str], work: Path) -> tuple[int | str, list[str], float]:
    """The soak's one pytest run, its output in work/pytest.out: its exit code (or "timeout"),
    the processes of ours it left, and how long it took."""
    began = time.monotonic()
    with open(work / "pytest.out", "w") as out:
        pytest = subprocess.Popen(command, cwd=work, stdout=out, stderr=subprocess.STDOUT,
                                  env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            code: int | str = pytest.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.kill()
            code = "timeout"
        left = our_processes(pytest.pid)
    return code, left, time.monotonic() - began


def soak(specs: int) -> int:
    crashes = 2 * specs
    work = Path(tempfile.mkdtemp(prefix="llmperf-soak-"))
    (work / "test_soak.py").write_text(SUITE.format(specs=specs))
    logs, baselines, run_file = work / "logs", work / "baselines", work / "run.json"
    command = [sys.executable, "-m", "pytest", "test_soak.py", "-p", "no:cacheprovider", "-rfE",
               "--llmperf-log-dir", str(logs),
               "--llmperf-baseline-dir", str(baselines), "--llmperf-update-baselines",
               "--llmperf-json", str(run_file), "--llmperf-summary", "full"]
    code, left, took = run_pytest(command, work)
    text = (work / "pytest.out").read_text()
    lines = text.splitlines()
    outcome = re.search(r"=+ (.*) in [\d.]+s", text)
    passed = int(m.group(1)) if (m := re.search(r"(\d+) passed", text)) else 0
    failed = int(m.group(1)) if (m := re.search(r"(\d+) failed", text)) else 0
    # Each failure's text is the line under its header in the FAILURES section.
    failures = {m.group("id"): lines[i + 1] for i, line in enumerate(lines[:-1])
                if (m := FAILURE_HEADER.match(line))}
    death_failures = sum(test.startswith("crash") and bool(DEATH_LINE.match(text))
                         for test, text in failures.items())
    other_failures = [f"{test}: {text}" for test, text in failures.items()
                      if not (test.startswith("crash") and DEATH_LINE.match(text))]
    restarts = len(re.findall(r"restarted for the next test \(\d of 3 deaths\)",
                              " ".join(text.split())))
    starts = len(list(logs.glob("vllm-*.log")))
    results = json.loads(run_file.read_text())["llmperf"]["results"]
    died_rows = sum(r["verdict"] == "ENGINE DIED" for r in results)
    keys = set()
    for path in baselines.rglob("*.toml"):
        keys |= set(tomllib.loads(path.read_text()))
    crash_keys = {k for k in keys if "crash" in k}

    checks = {
        f"pytest ran to its end ({outcome.group(1) if outcome else code})": code in (0, 1),
        f"{death_failures} tests failed with the death line (want {crashes})":
            death_failures == crashes == failed,
        f"{passed} other tests passed (want {4 * specs - crashes}), "
        f"{len(other_failures)} failed otherwise": passed == 4 * specs - crashes
                                                    and not other_failures,
        f"{starts} engine starts: {specs} first starts + {starts - specs} fresh engines "
        f"(want {crashes}); {restarts} restart notes": starts - specs == crashes == restarts,
        f"{len(left)} processes of ours left": not left,
        f"JSON run file: {len(results)} results, {died_rows} with verdict ENGINE DIED":
            len(results) == 4 * specs and died_rows == crashes,
        f"baselines: {len(keys)} keys written, {len(crash_keys)} of them crash tests":
            len(keys) == 4 * specs - crashes and not crash_keys,
    }
    print(f"soak: {4 * specs} tests ({specs} engine specs x crash, ok, crash, ok), "
          f"{crashes} induced crashes, one pytest run of {took:.0f} s; files in {work}")
    for what, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    for process in left:
        print(f"       left: {process}")
    for line in other_failures[:5]:
        print(f"       {line[:200]}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
