"""The live progress line as the plugin wires it: in a CI log (no TTY, as pytester's output is)
a measurement shorter than progressline.CI_EVERY_S prints none, and a longer one prints whole
lines of their own."""

from __future__ import annotations

import re

import pytest

from pytest_llmperf.client import progressline
from tests.conftest import REPO
from tests.plugin.mock_endpoint import mock_fixture

ARCH = REPO / "suites" / "models" / "tiny-llama-arch"
SUITE = """
import pytest
from pytest_llmperf import Engine, Workload

@pytest.mark.engine(Engine(model={model!r}))
def test_x(llmperf):
    llmperf.run(Workload.fixed(input_tokens=8, output_tokens=10, num_requests=12, concurrency=1))
"""
# A busy machine (pytest-xdist workers on 2 cores) must not turn these into client-limited failures.
CALM = ("--llmperf-client-check", "warn")
# 12 requests of 10 chunks 10 ms apart, one at a time: ~1.2 s of measuring.
PROGRESS = re.compile(r"test_suite\.py::test_x  \d+/12 requests  [\d,]+ tok/s  \d+ s")


mock = mock_fixture(0.01)


def run(pytester: pytest.Pytester, url: str) -> list[str]:
    pytester.makepyfile(test_suite=SUITE.format(model=str(ARCH)))
    result = pytester.runpytest("-p", "no:cacheprovider", "--llmperf-endpoint", url,
                                "--llmperf-hardware", "cpu", "--llmperf-model", "mock",
                                *CALM)
    result.assert_outcomes(passed=1)
    return result.stdout.lines


def test_a_short_measurement_prints_no_progress_in_a_ci_log(pytester: pytest.Pytester, mock):
    lines = run(pytester, mock.url)
    assert not [line for line in lines if PROGRESS.search(line)]


def test_progress_lines_in_a_ci_log_are_lines_of_their_own(pytester: pytest.Pytester, mock,
                                                           monkeypatch):
    monkeypatch.setattr(progressline, "CI_EVERY_S", 0.4)  # as if the measurement were longer
    shown = [line for line in run(pytester, mock.url) if PROGRESS.search(line)]
    assert 1 <= len(shown) <= 4, shown
    assert all(PROGRESS.fullmatch(line) for line in shown), shown
