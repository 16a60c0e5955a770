"""Two engines at once under pytest-xdist, and suites run against a server started elsewhere."""

from __future__ import annotations

import json
import re

import pytest

from pytest_llmperf.machine.hardware import software_versions
from tests.conftest import REPO, leftover_vllm_processes, requires_vllm

pytestmark = requires_vllm

TWO_ENGINES = """
import pytest
from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

A = TINY_CPU
B = TINY_CPU.replace(max_num_seqs=8)
W = Workload.fixed(input_tokens=32, output_tokens=16, num_requests=16, concurrency=4)

@pytest.mark.engine(A)
def test_a1(llmperf): llmperf.run(W)

@pytest.mark.engine(B)
def test_b1(llmperf): llmperf.run(W)

@pytest.mark.engine(A)
def test_a2(llmperf): llmperf.run(W)

@pytest.mark.engine(B)
def test_b2(llmperf): llmperf.run(W)
"""


# Nightly (docs/testing.md): two engine starts, 88 s of CI's second step on the family-23 VM.
# Which core each worker's engines compute on is held in CI by
# tests/plugin/test_xdist_cores_plugin.py; the group distribution by the plugin tests that run -n.
@pytest.mark.nightly
def test_two_workers_two_engines_distinct_ports_and_cores(pytester: pytest.Pytester,
                                                          monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_two=TWO_ENGINES)
    logs = pytester.path / "logs"
    # Two engines and two clients on this 2-core machine: the clients do lag (event-loop lag p90
    # 4.9 ms was seen in CI), and this test is about distribution, not measurement, so warn.
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-v",
                                           "-p", "no:cacheprovider", "--llmperf-client-check",
                                           "warn",
                                           "--llmperf-log-dir", str(logs),
                                           "--llmperf-json", "run.json", timeout=600)
    result.assert_outcomes(passed=4)
    assert leftover_vllm_processes() == []

    # The controller shows one table and writes one file with every worker's results.
    assert sorted(row.split()[0] for row in summary_table_rows(result.stdout.lines)) == [
        "test_two.py::test_a1", "test_two.py::test_a2", "test_two.py::test_b1",
        "test_two.py::test_b2"]
    assert len([line for line in result.stdout.lines if line.startswith("engine tiny-llama")]) == 2
    document = json.loads((pytester.path / "run.json").read_text())
    assert sorted(r["key"] for r in document["llmperf"]["results"]) == [
        "test_a1", "test_a2", "test_b1", "test_b2"]

    headers = [path.read_text().splitlines()[:2] for path in sorted(logs.glob("vllm-*.log"))]
    assert len(headers) == 2, "each engine started exactly once"
    ports = {re.search(r"--port (\d+)", command).group(1) for command, _ in headers}
    cores = {re.search(r"VLLM_CPU_OMP_THREADS_BIND=(\d+)", env).group(1) for _, env in headers}
    assert len(ports) == 2 and cores == {"0", "1"}

    # Tests sharing an engine ran on one worker: [gwN] PASSED test_two.py::test_a1@llmperf-...
    worker_of = {m.group(2): m.group(1) for m in
                 re.finditer(r"\[(gw\d)\] .*PASSED test_two\.py::(test_\w+)", result.stdout.str())}
    assert worker_of["test_a1"] == worker_of["test_a2"] != worker_of["test_b1"] == \
        worker_of["test_b2"], worker_of


def summary_table_rows(lines: list[str]) -> list[str]:
    """The llmperf table's rows: between its header and its units line. Not the notes below it,
    nor pytest -v's progress lines (under --dist loadgroup those read test_a1@llmperf-<group>)."""
    start = next(i for i, line in enumerate(lines) if line.startswith("test ") and "verdict" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("latencies in ms"))
    return lines[start + 2:end]  # + 2: the header and its rule


@pytest.fixture
def outside_server(tiny_server):
    """A vLLM server the plugin did not start (as a Ray cluster or trtllm-serve would be)."""
    return tiny_server


def test_endpoint_mode_measures_a_server_it_did_not_start(pytester: pytest.Pytester,
                                                          monkeypatch, outside_server):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_endpoint="""
        import pytest
        from pytest_llmperf import Workload
        from suites.tiny import TINY_CPU

        @pytest.mark.cpu
        @pytest.mark.engine(TINY_CPU)
        def test_against_endpoint(llmperf):
            result = llmperf.run(Workload.fixed(input_tokens=32, output_tokens=16,
                                                num_requests=12, concurrency=4))
            assert result.output_tokens == 12 * 16
            assert result.server_metrics["generation_tokens"] == 12 * 16
    """)
    logs = pytester.path / "logs"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--llmperf-endpoint", outside_server.base_url,
        "--llmperf-hardware", "cpu", "--llmperf-log-dir", str(logs),
        "--llmperf-json", "run.json", timeout=300)
    result.assert_outcomes(passed=1)
    assert not logs.exists() or not list(logs.glob("vllm-*.log")), "no engine was started"
    document = json.loads((pytester.path / "run.json").read_text())
    assert document["llmperf"]["results"][0]["key"] == "test_against_endpoint"
    # Which vLLM the server runs, as it says itself (GET /version); its interpreter is not ours.
    version = software_versions()["vllm"]
    assert document["llmperf"]["results"][0]["server"] == {"vllm": version,
                                                           "source": "GET /version"}
    result.stdout.re_match_lines([rf"^engine tiny-llama = .*; vLLM {re.escape(version)}$"])
    assert outside_server.running, "the plugin leaves a server it did not start alone"


WINDOWS = """
import json
import os
from pathlib import Path

import pytest
from pytest_llmperf import Engine, Workload

A = Engine(model={model!r})
B = A.replace(max_num_seqs=8)
W = Workload.fixed(input_tokens=8, output_tokens=20, num_requests=24, concurrency=4)


def window(name, result):
    '''When this measurement's requests went out and ended (perf_counter: one clock for every
    process on the machine), and which worker measured it.'''
    span = [min(r.sent_s for r in result.records), max(r.done_s for r in result.records),
            os.environ["PYTEST_XDIST_WORKER"]]
    (Path(__file__).parent / f"window-{{name}}.json").write_text(json.dumps(span))


@pytest.mark.engine(A)
def test_a1(llmperf): window("a1", llmperf.run(W))

@pytest.mark.engine(B)
def test_b1(llmperf): window("b1", llmperf.run(W))

@pytest.mark.engine(A)
def test_a2(llmperf): window("a2", llmperf.run(W))

@pytest.mark.engine(B)
def test_b2(llmperf): window("b2", llmperf.run(W))
"""


@pytest.fixture
def mock_server():
    from pytest_llmperf.clientbench.mockprocess import MockProcess

    server = MockProcess(0.01)
    yield server
    server.stop()


def test_two_workers_never_measure_one_endpoint_at_once(pytester: pytest.Pytester, monkeypatch,
                                                        mock_server):
    """Two engine groups on two pytest-xdist workers, one endpoint: each measurement holds the
    endpoint's lock (session/deployment.py), so the four measurement windows follow each other."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_windows=WINDOWS.format(
        model=str(REPO / "suites" / "models" / "tiny-llama-arch")))
    result = pytester.runpytest_subprocess(
        "-n", "2", "-p", "no:cacheprovider", "--llmperf-endpoint", mock_server.url,
        "--llmperf-hardware", "cpu", "--llmperf-model", "mock", "--llmperf-client-workers", "1",
        "--llmperf-client-check", "warn", timeout=300)
    result.assert_outcomes(passed=4)
    windows = sorted(json.loads(path.read_text())
                     for path in pytester.path.glob("window-*.json"))
    assert len(windows) == 4
    assert len({worker for _, _, worker in windows}) == 2, "both workers measured"
    for (_, end, _), (start, _, _) in zip(windows, windows[1:]):
        assert end <= start, windows  # each measurement ended before the next one began
