"""Paired A/B (--llmperf-ab) on the real CPU engine: overrides a side B cannot take fail before any
engine starts; nightly, this machine's noise on B = A and a B 2 ms a step slower. A weaker B
failing on its paired ratios is test_ab_weaker_real.py's (nightly too since 2026-11-29)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, leftover_vllm_processes, requires_vllm

pytestmark = requires_vllm


def test_bad_overrides_fail_before_any_engine_starts(ab_suite):
    result = ab_suite.runpytest_subprocess("-p", "no:cacheprovider", "--llmperf-ab",
                                        '{"max_seqs": 1}', timeout=60)
    assert result.ret != 0
    result.stderr.fnmatch_lines([
        "*--llmperf-ab*unknown Engine field 'max_seqs' (did you mean 'max_num_seqs'?); fields: *"])
    assert not (ab_suite.path / ".llmperf/logs").exists()


# The one-test A/B as a new user first ran it on the 2-core CI VM, with every A/B default (4 pairs,
# 4 confirm pairs, tolerance 0.1): each measurement lasts well under a second there, and before
# the sides waited out each other's spin (docs/ab.md, "A/B on this machine") B = A failed 3 runs
# in 5 and a B 2 ms/step slower passed once.
SHORT = """
import pytest
from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

pytestmark = pytest.mark.engine(TINY_CPU)

def test_short(llmperf):
    llmperf.run(Workload.fixed(input_tokens=64, output_tokens=32, num_requests=32,
                               concurrency=8))
"""
SLOWDOWN = REPO / "tests" / "integration" / "slowdown"


def _short_ab(pytester: pytest.Pytester, side_b: dict) -> pytest.RunResult:
    pytester.makepyfile(test_short_suite=SHORT)
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rfE", "--llmperf-summary", "full", "--llmperf-history",
        "off", "--llmperf-ab", json.dumps(side_b), "--llmperf-json", "run.json", timeout=400)


@pytest.mark.nightly  # what it proves of this machine's noise: docs/testing.md
def test_b_equal_to_a_is_never_a_regression_on_this_machine(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    result = _short_ab(pytester, {"env": {"UNREAD_VAR": "B"}})
    assert leftover_vllm_processes() == []
    result.assert_outcomes(passed=1)
    assert "regressed in A/B" not in result.stdout.str()
    # Within the band, or too noisy to say: both are honest, neither is a failure.
    result.stdout.re_match_lines([r".*test_short \(B\).*(pass|INCONCLUSIVE)$"])


@pytest.mark.nightly  # what it proves of this machine's noise: docs/testing.md
def test_b_slower_by_2_ms_a_step_is_caught(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    result = _short_ab(pytester, {"env": {"PYTHONPATH": f"{SLOWDOWN}:{REPO}",
                                          "LLMPERF_INDUCED_STEP_DELAY_S": "0.002"}})
    assert leftover_vllm_processes() == []
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([r"^tpot_s\.p50 regressed in A/B: B/A median \d+\.\d{3} .*"])
    result.stdout.re_match_lines([r".*test_short \(B\).*REGRESSION$"])
