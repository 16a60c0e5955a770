"""A night's false-alarm budget (verdict/budget.py) as a user meets it: the summary's first line
states it and what it cost; a regression past its band that its measured noise does not confirm
within the budget is named, not failed; a large one still fails. Measurements injected as in
test_gate_plugin.py (three tests, their baselines of the CPU priors: 18 planned comparisons)."""

from __future__ import annotations

import pytest

from tests.plugin.gate_suite import CONFTEST, SUITE
from tests.plugin.lines import assert_lines


def unwrapped(result: pytest.RunResult) -> str:
    """The output with the summary's wrapped lines joined again (terminal.wrap)."""
    return result.stdout.str().replace("\n    ", " ")


@pytest.fixture
def suite(pytester: pytest.Pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    pytester.runpytest("--llmperf-update-baselines").assert_outcomes(passed=3)
    return pytester


def test_an_unchanged_run_states_the_budget_first(suite):
    result = suite.runpytest()
    result.assert_outcomes(passed=3)
    assert_lines(result, "=* llmperf =*", "", "false-alarm budget: *")
    assert ("false-alarm budget: one false red in 30 runs, shared by the run's 18 planned "
            "comparisons (15 judged with measured noise): a regression fails at p <= 0.185% "
            "(Bonferroni); the bands alone would alarm 0.42 times a run (one in 2 runs); cost: "
            "no regression held back") in unwrapped(result)


def test_a_regression_the_noise_does_not_confirm_is_named_not_failed(suite, monkeypatch):
    # TTFT +27%: past the bands of p50 (3 x 8% = 24%) and p90 (19.5%), but p = 1.7% and 0.5%
    # by their noise, over the 0.185% a comparison the budget allows.
    monkeypatch.setenv("FAKE_b", "0.127,0.01")
    result = suite.runpytest("--llmperf-markdown", "run.md")
    result.assert_outcomes(passed=3)
    assert "cost: 2 regression(s) named below as unconfirmed, not failed" in unwrapped(result)
    # The reviewer's page says the same under its headline (a CI job's step summary).
    page = (suite.path / "run.md").read_text().splitlines()
    assert page[2].startswith("false-alarm budget: one false red in 30 runs, shared by the "
                              "run's 18 planned comparisons") and page[2].endswith(
        "cost: 2 regression(s) named below as unconfirmed, not failed"), page[:4]
    text = unwrapped(result)
    assert ("test_suite.py::test_b: unconfirmed, not failed: ttft_s.p50 regressed: 127.0 ms vs "
            "baseline 100.0 ms (+27.0%, allowed +24.0% by 3 x run-to-run spread 8.0% (prior), "
            "lower is better)") in text
    assert ("(p = 1.73% by its measured noise, over the 0.185% a comparison that the run's "
            "false-alarm budget allows)") in text
    assert "test_suite.py::test_b: unconfirmed, not failed: ttft_s.p90 regressed" in text


def test_a_large_regression_still_fails(suite, monkeypatch):
    monkeypatch.setenv("FAKE_b", "0.2,0.01")  # TTFT doubles: p ~ 1e-9
    result = suite.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    assert "cost: no regression held back" in unwrapped(result)
    assert_lines(result, "FAILED test_suite.py::test_b*")
