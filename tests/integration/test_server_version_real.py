"""An upgrade A/B on the real CPU engine says which vLLM each side ran.

Side B's `python` is another interpreter: a wrapper around this one whose vLLM reports another
version (tests/integration/other_vllm/sitecustomize.py), as a second vLLM install would. The
plugin asks each running server (GET /version) and each side's interpreter, so the engine line,
the A/B note and the run file name both versions, each the one that side ran. Two engine starts:
the A/B's two sides, both up for the whole test.
"""

from __future__ import annotations

import json
import re
import stat
import sys

import pytest

from pytest_llmperf.machine.hardware import software_versions
from tests.conftest import REPO, leftover_vllm_processes, requires_vllm, vllm_processes

# What runs, not how fast: beside other tests in CI (tests/integration/conftest.py).
# Nightly: its lines are all covered by the tests CI runs (docs/testing.md).
pytestmark = [requires_vllm, pytest.mark.shares_machine, pytest.mark.nightly]

OTHER_VLLM = REPO / "tests" / "integration" / "other_vllm"
FAKE_VERSION = "0.31.0+test"

SUITE = """
import pytest
from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

pytestmark = pytest.mark.engine(TINY_CPU)

def test_upgrade(llmperf):
    llmperf.run(Workload.fixed(input_tokens=32, output_tokens=16, num_requests=8,
                               concurrency=4, warmup_requests=2))
"""


@pytest.fixture
def other_install(tmp_path) -> str:
    """An interpreter whose vLLM is FAKE_VERSION: this one, with other_vllm/ on its path."""
    python = tmp_path / "other-install" / "python"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nPYTHONPATH={OTHER_VLLM}${{PYTHONPATH:+:$PYTHONPATH}} '
                      f'LLMPERF_FAKE_VLLM_VERSION={FAKE_VERSION} exec {sys.executable} "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return str(python)


def test_an_upgrade_ab_names_the_vllm_each_side_ran(pytester: pytest.Pytester, monkeypatch,
                                                    other_install):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    # A shared machine's other load may disturb the measurement: the versions are the point.
    monkeypatch.setenv("LLMPERF_DISTURBANCE", "warn")
    pytester.makepyfile(test_upgrade_suite=SUITE)
    before = set(vllm_processes())  # engines of other sessions on this machine are theirs
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--llmperf-summary", "full",
        "--llmperf-ab", json.dumps({"python": other_install}), "--llmperf-ab-pairs", "2",
        "--llmperf-ab-confirm-pairs", "0",
        # Two engines and a client on 2 cores can trip the self-check; the versions are the
        # point here, and warn mode still records them.
        "--llmperf-client-check", "warn", "--llmperf-json", "run.json", timeout=400)
    assert [found for found in leftover_vllm_processes() if found not in before] == []
    outcomes = result.parseoutcomes()  # B = A but for the name: pass, or a rare false alarm
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 1, outcomes
    ours = software_versions()["vllm"]  # what this interpreter has: side A's vLLM
    sides = rf"A: vLLM {re.escape(ours)} / B: vLLM {re.escape(FAKE_VERSION)}"
    # One label for both sides (it leaves `python` out), so the line names each side's vLLM.
    result.stdout.re_match_lines([rf"^engine tiny-llama = tiny-llama .*; {sides}; healthy after "
                                  r"\d+\.\d s, \d+\.\d s$"])
    result.stdout.re_match_lines([rf".*test_upgrade \(B\): B/A over 2 ABBA pairs .*; {sides}$"])
    results = json.loads((pytester.path / "run.json").read_text())["llmperf"]["results"]
    servers = {entry["key"]: entry["server"] for entry in results}
    # Each side's version is its own server's answer; torch from its interpreter (the same
    # torch here: the wrapper runs this interpreter).
    installed = software_versions()
    assert servers["test_upgrade (A)"] == {"vllm": ours, "source": "GET /version",
                                           "torch": installed["torch"],
                                           "python": installed["python"]}
    assert servers["test_upgrade (B)"] == {**servers["test_upgrade (A)"], "vllm": FAKE_VERSION}
    # The fingerprint still names the client's own packages: the server's are in "server".
    assert json.loads((pytester.path / "run.json").read_text())["llmperf"]["fingerprint"][
        "vllm"] == ours
