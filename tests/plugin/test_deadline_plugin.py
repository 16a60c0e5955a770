"""`--llmperf-deadline`, as `llmperf nightly --max-minutes` uses it: pytester runs a file whose
second test takes 1.5 s against a deadline 2.5 s away, so the tests after it are left out; and
the JUnit XML pytest writes is what the nightly command reads back (nightly/outcomes.py)."""

from __future__ import annotations

import time

import pytest

from pytest_llmperf.nightly.outcomes import read_junit

SUITE = """
import time
import pytest

def test_fails():
    pytest.fail("tpot_s.p50 missed its target: 52.3 ms, target <= 40.0 ms\\n"
                "e2el_s.p50 missed its target: 900 ms, target <= 800 ms", pytrace=False)

def test_asserts():
    assert 48 == 64

def test_takes_its_time():
    time.sleep(1.5)

def test_b():
    pass

def test_c():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_tests_that_would_overrun_are_left_out_and_junit_says_so(suite):
    junit = suite.path / "junit.xml"
    # The longest test so far (1.5 s) no longer fits in what is left of 2.5 s after it.
    deadline = time.time() + 2.5
    result = suite.runpytest("-p", "no:cacheprovider", "-rs", "--llmperf-history", "off",
                             "--llmperf-deadline", str(deadline), "--junitxml", str(junit))
    result.assert_outcomes(failed=2, passed=1, skipped=2)
    result.stdout.re_match_lines([
        r"SKIPPED \[2\] .*: left out: the deadline \d\d:\d\d:\d\d UTC \(--llmperf-deadline\) "
        r"would be overrun: [01] s left, and the longest test so far took [12] s"])
    found = read_junit(junit, suite.path)
    assert found.failed == [
        ("test_suite.py::test_fails", "tpot_s.p50 missed its target: 52.3 ms, target <= 40.0 ms"
                                      "\ne2el_s.p50 missed its target: 900 ms, target <= 800 ms"),
        ("test_suite.py::test_asserts", "assert 48 == 64")]
    assert (found.passed, found.left_out, found.skipped) == (
        1, ["test_suite.py::test_b", "test_suite.py::test_c"], 0)


def test_a_deadline_already_past_leaves_every_test_out_and_a_bad_one_is_refused(suite,
                                                                                 monkeypatch):
    monkeypatch.setenv("LLMPERF_DEADLINE", str(time.time() - 60))
    late = suite.runpytest("-p", "no:cacheprovider", "-rs", "--llmperf-history", "off")
    late.assert_outcomes(skipped=5)
    late.stdout.re_match_lines([r"SKIPPED \[5\] .*: left out: the deadline \d\d:\d\d:\d\d UTC "
                                r"\(--llmperf-deadline\) passed 6\d s ago"])
    bad = suite.runpytest("-p", "no:cacheprovider", "--llmperf-deadline", "soon")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*argument --llmperf-deadline: expected a number of seconds "
                              "above 0"])
