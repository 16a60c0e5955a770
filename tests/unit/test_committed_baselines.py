"""Every committed baseline table (baselines/*/*.toml) is the one its test would write now:
`pytest --llmperf-check-baselines suites/` over the real suites, every hardware class's tests
included. No engine starts; it takes about a second. A stale table fails here with its line
(plugin/check_baselines.py): re-record it on its hardware, or delete it if its test is gone."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

CHECK_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def check() -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--llmperf-check-baselines", "suites/", "-rs",
         "-p", "no:cacheprovider"],
        cwd=REPO, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)


def test_no_committed_baseline_is_stale(check):
    stale = [line for line in check.stdout.splitlines()
             if ": stale: " in line or ": cannot be read (" in line]
    assert stale == [], check.stdout[-4000:]
    assert check.returncode == 0, check.stdout[-4000:]


def test_the_h200_tables_are_checked(check):
    """test_profiles' three parameters and test_interactive_limits_at_concurrency_16 match
    their tables in baselines/h200/ (run on no H200: the markers are bypassed)."""
    checked = "baseline workload and engine as recorded in baselines/h200/test_gpu_llama8b.toml"
    found = re.findall(rf"^SKIPPED \[(\d)\] suites/test_gpu_llama8b\.py:\d+: {re.escape(checked)}$",
                       check.stdout, flags=re.MULTILINE)
    assert sorted(found) == ["1", "3"], check.stdout[-4000:]
