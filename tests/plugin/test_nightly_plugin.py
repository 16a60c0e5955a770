"""`@pytest.mark.nightly` and `--llmperf-nightly`, as a user meets them: pytester runs a file with
a quick test and a nightly one."""

from __future__ import annotations

import pytest

SUITE = """
import pytest

def test_quick():
    pass

@pytest.mark.nightly
def test_long():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_a_nightly_test_is_skipped_with_its_reason_unless_asked_for(suite):
    quick = suite.runpytest("-p", "no:cacheprovider", "-rs", "--strict-markers",
                            "--llmperf-history", "off")
    quick.assert_outcomes(passed=1, skipped=1)
    quick.stdout.fnmatch_lines(["SKIPPED [1] test_suite.py:6: a nightly test: run it with "
                                "--llmperf-nightly"])
    nightly = suite.runpytest("-p", "no:cacheprovider", "--llmperf-nightly",
                              "--llmperf-history", "off")
    nightly.assert_outcomes(passed=2)


def test_the_environment_asks_for_nightly_tests_too(suite, monkeypatch):
    monkeypatch.setenv("LLMPERF_NIGHTLY", "1")
    suite.runpytest("-p", "no:cacheprovider", "--llmperf-history", "off").assert_outcomes(
        passed=2)
