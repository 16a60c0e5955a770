"""Nothing of ours survives a run: not Ctrl-C, not SIGTERM from CI, not a killed pytest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, requires_vllm, vllm_processes

# What runs, not how fast: beside other tests in CI (tests/integration/conftest.py).
pytestmark = [requires_vllm, pytest.mark.shares_machine]

HEALTHY_TIMEOUT_S = 180
GONE_TIMEOUT_S = 40

BUSY_SUITE = textwrap.dedent("""
    import pytest
    from pytest_llmperf import Workload
    from suites.tiny import TINY_CPU

    @pytest.mark.engine(TINY_CPU)
    def test_busy(llmperf):
        llmperf.run(Workload.fixed(input_tokens=64, output_tokens=256, num_requests=100000,
                                   concurrency=4))
""")


def _default_sigint() -> None:
    # A shell without job control starts background commands with SIGINT ignored, and an
    # ignored signal stays ignored across exec: Python then never raises KeyboardInterrupt, so
    # the Ctrl-C test would test how this test run was started, not the plugin.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def busy_pytest(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, Path]]:
    """A pytest run measuring a workload that never ends; killed afterwards if a test failed
    before it stopped, so a failure here cannot leave an engine loading the next tests."""
    (tmp_path / "test_busy.py").write_text(BUSY_SUITE)
    log_dir = tmp_path / "logs"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(tmp_path / "test_busy.py"),
         "--llmperf-log-dir", str(log_dir), "--rootdir", str(tmp_path)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_default_sigint,
    )
    try:
        yield proc, log_dir
    finally:
        if proc.poll() is None:
            proc.kill()  # its engine follows by PR_SET_PDEATHSIG
            proc.communicate()
        _wait_gone()


def _wait_serving(proc: subprocess.Popen, log_dir: Path) -> None:
    """Until the engine answered and the workload is streaming."""
    deadline = time.monotonic() + HEALTHY_TIMEOUT_S
    while time.monotonic() < deadline:
        logs = list(log_dir.glob("vllm-*.log"))
        if logs and "POST /v1/completions" in logs[0].read_text(errors="replace"):
            return
        if proc.poll() is not None:
            pytest.fail(f"pytest exited early: {proc.stdout.read()[-2000:]}")
        time.sleep(0.5)
    proc.kill()
    pytest.fail("engine did not start serving in time")


def _wait_gone() -> list[str]:
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while (left := vllm_processes()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


# Ctrl-C is nightly (docs/testing.md): the plugin turns SIGTERM into the KeyboardInterrupt that
# SIGINT raises (plugin/hooks.py), so from there on both take one path; CI's runners send SIGTERM.
@pytest.mark.parametrize("sig", [pytest.param(signal.SIGINT, marks=pytest.mark.nightly),
                                 signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupted_run_stops_engine_and_reports(busy_pytest, sig):
    proc, log_dir = busy_pytest
    _wait_serving(proc, log_dir)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=GONE_TIMEOUT_S)
    assert _wait_gone() == []
    assert "KeyboardInterrupt" in out, out[-2000:]


def test_killed_pytest_takes_its_engine_along(busy_pytest):
    proc, log_dir = busy_pytest
    _wait_serving(proc, log_dir)
    assert vllm_processes()
    proc.kill()  # SIGKILL: no teardown runs; PR_SET_PDEATHSIG must stop the server
    proc.communicate(timeout=GONE_TIMEOUT_S)
    assert _wait_gone() == []
