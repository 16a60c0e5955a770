"""llama.cpp's server as an engine kind (engines/kinds/llamacpp.py): started and stopped by the
plugin as vLLM is (its own process group, a log file headed by its command, readiness, crash
detection, the log in the failure), on the tiny Llama as a GGUF file (scripts/tiny_gguf.py).

- a test measures it: the summary has its row, the client treats it as llama.cpp's server (text
  prompts, its limits said under the summary), the run file records its kind and
  llama-cpp-python's version, and nothing of it is left running;
- its server killed with SIGKILL mid-test: that test fails with the death line and its log, and
  the next test gets a fresh server (as tests/integration/test_engine_faults.py does for vLLM).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None and not os.environ.get("CI"),
    reason="llama-cpp-python is not installed (scripts/install-cpu installs its llamacpp extra)")

RUN_TIMEOUT_S = 300
GONE_TIMEOUT_S = 20.0
TOKENIZER = REPO / "suites" / "models" / "tiny-llama"

SPEC = """
import os, signal, threading, time
from pathlib import Path

import pytest
from pytest_llmperf import Engine, Workload

LLAMA = Engine(kind="llamacpp", model=GGUF, tokenizer=TOKENIZER, max_model_len=2048,
               extra_args={"n_threads": 1, "n_threads_batch": 1})
pytestmark = [pytest.mark.cpu, pytest.mark.engine(LLAMA)]
"""

MEASURE_SUITE = SPEC + """

def test_llamacpp(llmperf):
    llmperf.run(Workload.fixed(input_tokens=32, output_tokens=16, num_requests=6,
                               concurrency=1))
"""

CRASH_SUITE = SPEC + """

def server_pid():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"llama_cpp.server" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return int(pid)
        except OSError:
            continue


def kill_server_once_serving(log_dir):
    # Once the measured requests stream (the log shows them), as a crash would come.
    while not any("POST /v1/completions" in log.read_text(errors="replace")
                  for log in Path(log_dir).glob("llamacpp-*.log")):
        time.sleep(0.2)
    time.sleep(1.0)
    os.kill(server_pid(), signal.SIGKILL)


def test_crash(llmperf, request):
    log_dir = request.config.getoption("llmperf_log_dir")
    threading.Thread(target=kill_server_once_serving, args=(log_dir,), daemon=True).start()
    llmperf.run(Workload.fixed(input_tokens=32, output_tokens=64, num_requests=2000,
                               concurrency=1))


def test_after_the_crash(llmperf):
    result = llmperf.run(Workload.fixed(input_tokens=32, output_tokens=8, num_requests=8,
                                        concurrency=1))
    assert result.completed == 8
"""

DEATH_LINE = re.compile(
    r"^engine tiny-llama-f32\.gguf died during the test \(the server was killed by SIGKILL\); "
    r"last log lines: .*; log: (?P<log>\S+/llamacpp-\d+\.log)$")


def llamacpp_processes() -> list[str]:
    """Command lines of every llama.cpp server on the machine (there should be none left)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"-m llama_cpp.server" in cmdline:
            found.append(f"{pid} {cmdline.decode(errors='replace')[:160]}")
    return found


def leftover_llamacpp_processes() -> list[str]:
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while (found := llamacpp_processes()) and time.monotonic() < deadline:
        time.sleep(0.25)
    return found


def run(pytester: pytest.Pytester, monkeypatch, suite: str, gguf: Path,
        *args: str) -> pytest.RunResult:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_suite=suite.replace("GGUF", repr(str(gguf)), 1)
                        .replace("TOKENIZER", repr(str(TOKENIZER)), 1))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rfE", "--llmperf-log-dir", str(pytester.path / "logs"),
        "--llmperf-hardware", "cpu", "--llmperf-summary", "full",
        # the server and the client share 2 cores here: a lagging client warns, not fails
        "--llmperf-client-check", "warn", *args, timeout=RUN_TIMEOUT_S)
    assert leftover_llamacpp_processes() == []
    return result


def test_the_plugin_starts_measures_and_stops_llamacpps_server(pytester, monkeypatch,
                                                                tiny_gguf):
    result = run(pytester, monkeypatch, MEASURE_SUITE, tiny_gguf, "--llmperf-json", "run.json")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    # The engine line, however the summary wrapped it: the server's kind and its version.
    assert re.search(r"engine tiny-llama-f32\.gguf = tiny-llama-f32\.gguf llamacpp len=2048 "
                     r"extra_args=n_threads:1,n_threads_batch:1; llama-cpp-python [\d.]+; "
                     r"healthy after [\d.]+ s", " ".join(out.split())), out
    # The client took it for llama.cpp's server: prompts as text, its limits said once each.
    assert ("test_suite.py::test_llamacpp: llama.cpp's server takes no token-id prompts: they "
            "went as text of the same length") in out
    assert "no usage chunk in 6 of 6 streams (llama.cpp's server ignores" in out
    # Its log, headed by the command the kind made from the spec.
    [log] = (pytester.path / "logs").glob("llamacpp-*.log")
    port = log.stem.split("-")[1]
    assert log.read_text().splitlines()[0] == (
        f"$ {sys.executable} -m llama_cpp.server --model {tiny_gguf} --n_ctx 2048 --n_threads 1 "
        f"--n_threads_batch 1 --host 127.0.0.1 --port {port}")
    # Its kind and llama-cpp-python's version in the run file (a baseline records the same
    # engine identity and server: session/provenance.py, verdict/baselines.py).
    version = importlib.metadata.version("llama_cpp_python")
    [entry] = json.loads((pytester.path / "run.json").read_text())["llmperf"]["results"]
    assert entry["engine"] == {"model": str(tiny_gguf), "tokenizer": str(TOKENIZER),
                               "max_model_len": 2048, "extra_args": {
                                   "n_threads": 1, "n_threads_batch": 1}, "kind": "llamacpp"}
    assert entry["server"] == {"kind": "llamacpp", "llamacpp": version,
                               "python": sys.version.split()[0], "source": "package metadata"}


def test_a_killed_server_costs_one_test_and_the_next_gets_a_fresh_one(pytester, monkeypatch,
                                                                       tiny_gguf):
    result = run(pytester, monkeypatch, CRASH_SUITE, tiny_gguf)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "Traceback" not in out and "During handling" not in out
    deaths = [line for line in result.stdout.lines if DEATH_LINE.match(line)]
    assert len(deaths) == 1, out
    assert "FAILED test_suite.py::test_crash" in out
    assert Path(DEATH_LINE.match(deaths[0]).group("log")).is_file()
    assert re.search(r"\btest_crash\b.* ENGINE DIED\n", out), out
    assert "; restarted for the next test (1 of 3 deaths)" in " ".join(out.split())
    assert len(list((pytester.path / "logs").glob("llamacpp-*.log"))) == 2, "a fresh server"
