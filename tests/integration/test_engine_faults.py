"""Engine faults on the real CPU engine: each costs one test, never the run, and says so in one line.
One pytest run meets a crash and then a stall (an engine start saved: ~30 s of CI). CI runs the
crash (two engine starts); the nightly job the crash and then the stall (three). The stall's
watchdog, its line and the stopped engine's state are held in CI by stand-in servers stopped with
SIGSTOP (tests/unit/engines/test_engine_health.py, test_pool_and_leases.py) and by the mock
server (tests/integration/test_client_faults.py).

- vLLM's EngineCore process killed with SIGKILL mid-test (what the OOM killer does to a GPU
  engine): that test fails with the death line, its measurement is kept, the next test gets a
  fresh engine;
- vLLM's EngineCore process stopped with SIGSTOP mid-test (a hung engine: /health still answers):
  the stall watchdog stops the measurement, that test fails with the stall line within the stall
  timeout + 5 s, the next test gets a fresh engine;
- the port picked for the server taken by someone else before vLLM binds it: started again on
  another port.

A start that never gets healthy is in test_start_failure.py, with the other failed starts.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from pytest_llmperf.engines import server as server_mod
from pytest_llmperf.engines.server import CPU_ENGINE_NICE, VllmServer
from suites.tiny import TINY_CPU
from tests.conftest import REPO, leftover_vllm_processes, requires_vllm

# What runs, not how fast: beside other tests in CI (tests/integration/conftest.py).
pytestmark = [requires_vllm, pytest.mark.shares_machine]

RUN_TIMEOUT_S = 400

CRASH_SUITE = """
    import os, signal, threading, time
    from pathlib import Path

    import pytest
    from pytest_llmperf import Workload
    from suites.tiny import TINY_CPU

    pytestmark = pytest.mark.engine(TINY_CPU)


    def parent_of(pid):
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


    def engine_core_pid():
        # This run's engine core: a grandchild of this process (server, then engine core), not
        # one of another run beside it.
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if (Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"VLLM::EngineCore")
                        and parent_of(parent_of(pid)) == os.getpid()):
                    return int(pid)
            except OSError:
                continue


    def kill_engine_core_once_serving(log_dir):
        # Once the measured requests stream (the log shows them), as a crash would come.
        while not any("POST /v1/completions" in log.read_text(errors="replace")
                      for log in Path(log_dir).glob("vllm-*.log")):
            time.sleep(0.2)
        time.sleep(1.0)
        os.kill(engine_core_pid(), signal.SIGKILL)


    def test_crash(llmperf, request):
        log_dir = request.config.getoption("llmperf_log_dir")
        threading.Thread(target=kill_engine_core_once_serving, args=(log_dir,), daemon=True).start()
        llmperf.run(Workload.fixed(input_tokens=32, output_tokens=64, num_requests=2000,
                                   concurrency=4))


    def test_after_the_crash(llmperf):
        result = llmperf.run(Workload.fixed(input_tokens=32, output_tokens=8, num_requests=8,
                                            concurrency=2))
        assert result.completed == 8


    def stop_engine_core_once_serving(log_dir, stopped):
        # As above, on the fresh engine: its log is the one without our kill's aftermath.
        while not any("POST /v1/completions" in log.read_text(errors="replace")
                      and "EngineDeadError" not in log.read_text(errors="replace")
                      for log in Path(log_dir).glob("vllm-*.log")):
            time.sleep(0.2)
        time.sleep(1.0)
        pid = engine_core_pid()
        os.kill(pid, signal.SIGSTOP)
        stopped.append((pid, time.monotonic()))


    def test_stall(llmperf, request):
        log_dir = request.config.getoption("llmperf_log_dir")
        stopped = []
        threading.Thread(target=stop_engine_core_once_serving, args=(log_dir, stopped),
                         daemon=True).start()
        try:
            llmperf.run(Workload.fixed(input_tokens=32, output_tokens=64, num_requests=2000,
                                       concurrency=4))
        except pytest.fail.Exception:
            Path("reported_after_s").write_text(str(time.monotonic() - stopped[0][1]))
            raise
        finally:
            for pid, _ in stopped:  # the pool kills it; never leave a stopped process behind
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass


    def test_after_the_stall(llmperf):
        result = llmperf.run(Workload.fixed(input_tokens=32, output_tokens=8, num_requests=8,
                                            concurrency=2))
        assert result.completed == 8
"""

DEATH_LINE = re.compile(
    r"^engine tiny-llama died during the test \(VLLM::EngineCore, pid \d+, ended first; then "
    r"the server exited with code 0\); last log lines: .*EngineDeadError: EngineCore "
    r"encountered an issue.*; log: (?P<log>\S+/vllm-\d+\.log)$")


STALL_TIMEOUT_S = 3
REPORTED_WITHIN_S = STALL_TIMEOUT_S + 5  # a stall is reported within 5 s of its timeout
STALL_LINE = re.compile(
    r"^engine tiny-llama stalled during the test \(no chunk for \d+\.\d s on any of the 4 "
    rf"requests in flight \(stall timeout {STALL_TIMEOUT_S} s, --llmperf-stall-timeout\); "
    r"server \w+.*, VLLM::EngineCore pid \d+ stopped \(T\).*; /health answered 200\); "
    r"last log lines: .*; log: (?P<log>\S+/vllm-\d+\.log)$")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rfE", *args,
                                           "--llmperf-log-dir", str(pytester.path / "logs"),
                                           timeout=RUN_TIMEOUT_S)
    assert leftover_vllm_processes() == []
    return result


# (the tests of CRASH_SUITE it runs, whether it meets the stall too)
FAULTS = [
    pytest.param(["test_crash", "test_after_the_crash"], False, id="crash"),
    pytest.param(["test_crash", "test_after_the_crash", "test_stall", "test_after_the_stall"],
                 True, id="crash-then-stall", marks=pytest.mark.nightly),
]


@pytest.mark.parametrize(("selected", "stall"), FAULTS)
def test_a_killed_and_a_stalled_engine_each_cost_one_test_and_the_next_gets_a_fresh_engine(
        pytester: pytest.Pytester, monkeypatch, selected, stall):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_crash_suite=CRASH_SUITE)
    result = run(pytester, *[f"test_crash_suite.py::{name}" for name in selected],
                 "--llmperf-stall-timeout", str(STALL_TIMEOUT_S))
    result.assert_outcomes(passed=1 + stall, failed=1 + stall)
    out = result.stdout.str()
    flat = " ".join(out.split())  # the notes under the table wrap at 120 columns
    assert "Traceback" not in out and "During handling" not in out
    # The crash: one line, the death's.
    deaths = [line for line in result.stdout.lines if DEATH_LINE.match(line)]
    assert len(deaths) == 1, out
    assert "FAILED test_crash_suite.py::test_crash - Failed: engine tiny-llama died" in out
    assert Path(DEATH_LINE.match(deaths[0]).group("log")).is_file()
    # What was measured before it is kept: its row is in the summary.
    assert re.search(r"\btest_crash\b.* ENGINE DIED\n", out), out
    assert "; restarted for the next test (1 of 3 deaths)" in flat  # notes under the table
    starts = 2 + stall
    assert f"restarted {starts - 1} time(s) after dying or stalling" in flat  # the engine line
    assert len(list((pytester.path / "logs").glob("vllm-*.log"))) == starts, "a fresh engine each"
    assert re.search(r"healthy after " + ", ".join([r"[\d.]+ s"] * starts), flat), out
    if not stall:
        return
    # The stall: one line, reported within the stall timeout + 5 s of the SIGSTOP.
    stalls = [line for line in result.stdout.lines if STALL_LINE.match(line)]
    assert len(stalls) == 1, out
    assert "FAILED test_crash_suite.py::test_stall - Failed: engine tiny-llama stalled" in out
    assert Path(STALL_LINE.match(stalls[0]).group("log")).is_file()
    assert float((pytester.path / "reported_after_s").read_text()) <= REPORTED_WITHIN_S
    assert re.search(r"\btest_stall\b.* ENGINE STALLED\n", out), out
    assert "; restarted for the next test (2 of 3 deaths)" in flat


# Nightly (docs/testing.md): two starts of vLLM, one cut short. CI holds the retry to a stand-in
# interpreter that binds its port as vLLM's API server does (tests/unit/engines/test_taken_port.py).
@pytest.mark.nightly
def test_a_taken_port_is_tried_again_on_another(tmp_path, monkeypatch):
    """free_port() names a port another process may take before vLLM binds it."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    ports = iter([taken.getsockname()[1]])
    monkeypatch.setattr(server_mod, "free_port",
                        lambda host: next(ports, None) or _os_free_port(host))
    server = VllmServer(TINY_CPU, tmp_path, nice=CPU_ENGINE_NICE)
    try:
        server.start()
        assert server.port != taken.getsockname()[1]
        first_log = tmp_path / f"vllm-{taken.getsockname()[1]}.log"
        assert "address already in use" in first_log.read_text().lower()
        assert server.death() is None
    finally:
        server.stop()
        taken.close()
    assert leftover_vllm_processes() == []


def _os_free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
