"""`--llmperf-client-workers ray[:N]` as a user meets it: with no RAY_ADDRESS the session starts a
local Ray head (engines/ray.py, the one Ray engines use), the load goes out from an actor on it,
the result is the one-process run's, the summary names the worker, and the head is gone after
the session; a RAY_ADDRESS where nothing answers is one line before anything is measured. Against
the mock server behind --llmperf-endpoint (pytest_llmperf/clientbench/mockserver.py).

Two nodes, the split and the self-check naming a busy node's worker are
tests/integration/test_ray_client.py's."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import time
from pathlib import Path

import httpcore  # noqa: F401  (imported before any in-process run: test_deployment_plugin.py)
import pytest

from tests.conftest import REPO
from tests.plugin.mock_endpoint import against, mock_fixture

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None and not os.environ.get("CI"),
    reason="ray is not installed (the ray extra; scripts/install-cpu installs it)")

# Ray's processes: the `ray start` command, its GCS, raylet and agents, and its workers.
RAY_MARKERS = (b"ray.scripts.scripts", b"/ray/core/src/ray/", b"site-packages/ray/", b"ray::")
GONE_TIMEOUT_S = 30.0
RUN_TIMEOUT_S = 300

SUITE = """
import pytest
from pytest_llmperf import Engine, Workload

pytestmark = pytest.mark.engine(Engine(model={model!r}))

def test_fixed(llmperf):
    result = llmperf.run(Workload.fixed(input_tokens=8, output_tokens=4, num_requests=12,
                                        concurrency=3))
    assert result.completed == 12
"""
ARCH = REPO / "suites" / "models" / "tiny-llama-arch"

mock = mock_fixture(0.002)


def ray_pids() -> set[int]:
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if any(marker in cmdline for marker in RAY_MARKERS):
            found.add(int(pid))
    return found


def new_ray_pids_left(before: set[int]) -> set[int]:
    """Ray processes that were not there before and are still there after GONE_TIMEOUT_S (another
    test's Ray beside this one is not this test's to count)."""
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while (left := ray_pids() - before) and time.monotonic() < deadline:
        time.sleep(0.25)
    return left


def test_a_local_head_takes_the_load_and_is_gone_after_the_session(pytester, monkeypatch, mock):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    pytester.makepyfile(test_suite=SUITE.format(model=str(ARCH)))
    before = ray_pids()
    logs = pytester.path / "logs"
    result = pytester.runpytest_subprocess(
        *against(mock.url), "--llmperf-client-workers", "ray:1", "--llmperf-log-dir", str(logs),
        "--llmperf-client-check", "warn", "--llmperf-json", "run.json", "--llmperf-history",
        "off", timeout=RUN_TIMEOUT_S)
    assert new_ray_pids_left(before) == set()
    result.assert_outcomes(passed=1)
    [head_log] = logs.glob("ray-head-*.log")
    assert "Ray runtime started" in head_log.read_text()
    [entry] = json.loads((pytester.path / "run.json").read_text())["llmperf"]["results"]
    assert entry["client"]["workers"] == 1
    [worker] = entry["client"]["processes"]
    assert re.fullmatch(r"client worker 0 on node \S+ \([0-9a-f]{8}\)", worker), worker


def test_a_ray_address_where_nothing_answers_is_one_line_before_anything_runs(pytester,
                                                                               monkeypatch, mock):
    with socket.socket() as closed:  # a port nothing listens on once this block ends
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    pytester.makepyfile(test_suite=SUITE.format(model=str(ARCH)))
    result = pytester.runpytest_subprocess(*against(mock.url), "--llmperf-client-workers", "ray",
                                           timeout=RUN_TIMEOUT_S)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.stderr.lines if line.startswith("ERROR: ")] == [
        f"ERROR: pytest-llmperf: --llmperf-client-workers ray: nothing answers at the Ray address "
        f"127.0.0.1:{port} (RAY_ADDRESS): start it (ray start --head) or correct RAY_ADDRESS, "
        f"or unset RAY_ADDRESS for a local head"]
    assert "test_fixed" not in result.stdout.str()
