"""What each test can detect (verdict/detectable.py) as a user meets it: the -v summary's
column, the run file's field per gated metric and the note naming a test whose noise hides
the regressions its tolerance allows. Measurements injected as in test_gate_plugin.py."""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import pytest

from tests.plugin.gate_suite import CONFTEST, SUITE
from tests.plugin.lines import assert_lines

# The CPU priors of TTFT p50 and TPOT p50 (verdict/noise.PRIORS), one run a side, at the run's
# false-alarm budget shared by its 18 comparisons and 80% power:
# exp((z(1 - 1/30/18) + z(0.8)) x sqrt(2) x spread) - 1.
Z = NormalDist().inv_cdf(1 - 1 / 30 / 18) + NormalDist().inv_cdf(0.8)
TTFT_P50 = math.expm1(Z * math.sqrt(2) * 0.080)
TPOT_P50 = math.expm1(Z * math.sqrt(2) * 0.090)


@pytest.fixture
def gated(pytester: pytest.Pytester):
    """test_a's baseline of tolerance 1.5 (2.5x), which its noise can see; test_b's and
    test_slo's of the 2% floor, which it cannot."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE.replace(
        "def test_a(llmperf):", "@pytest.mark.llmperf(tolerance=1.5)\ndef test_a(llmperf):"))
    pytester.runpytest("--llmperf-update-baselines").assert_outcomes(passed=3)
    result = pytester.runpytest("-v", "--llmperf-json", "out.json")
    result.assert_outcomes(passed=3)
    return pytester, result


def test_the_run_file_keeps_what_each_gated_metric_can_detect(gated):
    pytester, _ = gated
    results = json.loads((pytester.path / "out.json").read_text())["llmperf"]["results"]
    seen = {result["key"]: result["detectable"] for result in results}
    # TPOT p90 (a CPU prior of 15%: a band of 45%) is too noisy to gate: not judged, not here.
    assert sorted(seen["test_b"]) == ["e2el_s.p50", "output_throughput_tok_s", "tpot_s.p50",
                                      "ttft_s.p50", "ttft_s.p90"]
    found = seen["test_b"]["ttft_s.p50"]
    assert (found["detectable"], found["tolerance"]) == (pytest.approx(TTFT_P50, abs=1e-4), 0.02)
    assert seen["test_a"]["ttft_s.p50"]["tolerance"] == 1.5


def test_the_verbose_summary_shows_the_largest_detectable_change(gated):
    _, result = gated
    assert_lines(result, "test * detects * verdict")
    assert_lines(result, f"test_suite.py::test_b * {TPOT_P50:.0%} tpot_s.p50  pass")


def test_a_test_that_cannot_see_its_tolerance_is_named(gated):
    _, result = gated
    assert_lines(result, "test * detects * verdict")
    assert_lines(result, f"test_suite.py::test_b: this test cannot see the regressions its "
                         f"tolerances allow: e2el_s.p50 2% (it sees *), *ttft_s.p50 2% (it sees "
                         f"{TTFT_P50:.0%}), * at a 0.185% false-alarm rate and 80% power: add "
                         "requests, or write its baseline from more runs "
                         "(--llmperf-from-history N)")
    assert "test_suite.py::test_a: this test cannot see" not in result.stdout.str()
