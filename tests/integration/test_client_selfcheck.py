"""The self-check as a user meets it: a run the client limited fails its test and writes nothing.

The server is the mock of known timing (real HTTP, its own process). Nothing on this machine
limits a 2-stream run, so the conftest lowers the CPU limit to 0%: every run then counts as
client-limited, which is what this test needs to see handled, end to end. It also lifts the lag
limits, so the failure line names the CPU alone: a stall of the shared machine once added
"event-loop lag p90 4.6 ms (limit 2.0 ms)" to it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.clientbench.bench import MockProcess

TINY_LLAMA = Path(__file__).resolve().parents[2] / "suites" / "models" / "tiny-llama"

TEST_FILE = f"""
import pytest
from pytest_llmperf import Engine, Workload

@pytest.mark.engine(Engine(model={str(TINY_LLAMA)!r}, load_format="dummy"))
def test_x(llmperf):
    llmperf.run(Workload.fixed(input_tokens=8, output_tokens=4, num_requests=4, concurrency=2))
"""


@pytest.fixture(scope="module")
def mock():
    server = MockProcess(0.005)
    yield server
    server.stop()


def run_every_run_limited(pytester, mock, *args: str,
                          test_file: str = TEST_FILE) -> pytest.RunResult:
    """TEST_FILE against the mock, asked to update baselines, with every run client-limited."""
    pytester.makeconftest("import pytest_llmperf.client.selfcheck as s\n"
                          "import pytest_llmperf.metrics.client_check as limits\n"
                          "limits.CPU_LIMIT = 0.0\n"
                          "s.SCHEDULE_LAG_FLOOR_S = float('inf')\n"
                          "s.LOOP_LAG_FLOOR_S = float('inf')\n")
    pytester.makepyfile(test_x=test_file)
    return pytester.runpytest_subprocess(
        "--llmperf-endpoint", mock.url, "--llmperf-hardware", "cpu", "--llmperf-model", "mock",
        "--llmperf-update-baselines", *args)


def test_a_client_limited_run_fails_and_is_never_a_baseline(pytester, mock):
    result = run_every_run_limited(pytester, mock, "--llmperf-client-workers", "1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "client-limited measurement: the load generator, not the engine, set these "
        "numbers (busiest client process at *% of a core (limit 0%); 1 client process(es)); "
        "offer less load, or give the client more processes (--llmperf-client-workers N, up to "
        "* here) or cores the engine does not use; nothing from this run was written as a "
        "baseline",
        "*test_x *CLIENT LIMITED*",  # the summary row
    ])
    assert not (pytester.path / "baselines").exists()


def test_warn_mode_lets_the_test_pass_but_still_writes_no_baseline(pytester, mock):
    result = run_every_run_limited(pytester, mock, "--llmperf-client-check", "warn")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines([
        "*ClientLimitedWarning: client-limited measurement: *",
        "*test_x *CLIENT LIMITED*",  # the summary row
        "test_x.py::test_x: baseline not updated (client-limited run)",
    ])
    assert not (pytester.path / "baselines").exists()


def test_the_marker_warns_for_its_test_alone(pytester, mock):
    """@pytest.mark.llmperf(client_check="warn"): a suite whose engine must share the client's
    cores says so on the test, not on every command line that runs it."""
    marked = f"""
import pytest
from pytest_llmperf import Engine, Workload

pytestmark = pytest.mark.engine(Engine(model={str(TINY_LLAMA)!r}, load_format="dummy"))
LOAD = Workload.fixed(input_tokens=8, output_tokens=4, num_requests=4, concurrency=2)

@pytest.mark.llmperf(client_check="warn")
def test_x(llmperf):
    llmperf.run(LOAD)

def test_y(llmperf):
    llmperf.run(LOAD)
"""
    result = run_every_run_limited(pytester, mock, test_file=marked)
    result.assert_outcomes(passed=1, failed=1, warnings=1)
    result.stdout.fnmatch_lines(["*ClientLimitedWarning: client-limited measurement: *",
                                 "FAILED test_x.py::test_y - *client-limited measurement*"])


def test_bad_client_workers_is_one_line_naming_the_option(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--llmperf-client-workers", "0")
    assert result.ret == 4
    result.stderr.re_match_lines([
        r".*argument --llmperf-client-workers: expected auto, a whole number from 1 to \d+ "
        r"\(the cores this process may use\), or ray\[:N\] \(N workers on the Ray cluster\)$"])
