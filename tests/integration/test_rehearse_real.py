"""scripts/rehearse --slower FACTOR on the real CPU engine: is a FACTOR-times slower step what the
client measures? A paired A/B (in one run, ABBA) of TINY_CPU against the same engine started with
the rehearsal's hook: TPOT, a step's time, must come out FACTOR times as long, within what two
shared cores allow (the hook sleeps after the step; the client and the frontend are not slowed,
so the ratio can only fall short of FACTOR by their share)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, requires_vllm

pytestmark = [requires_vllm, pytest.mark.nightly]

SUITE = f"""
import pytest
from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

SLOWER = TINY_CPU.replace(env={{**dict(TINY_CPU.env),
                               "PYTHONPATH": "{REPO / 'tests' / 'integration' / 'slowdown'}",
                               "LLMPERF_INDUCED_STEP_FACTOR": "2"}})


def test_twice_as_slow(llmperf):
    run = llmperf.ab(Workload.fixed(input_tokens=64, output_tokens=32, num_requests=8,
                                    concurrency=4, warmup_requests=1), a=TINY_CPU, b=SLOWER,
                     pairs=2)
    ratio = run.median("tpot_s.p50")
    print(f"\\nrehearsal --slower 2: TPOT p50 B/A {{ratio:.2f}}")
    assert 1.6 <= ratio <= 2.3, ratio
"""


def test_the_rehearsal_makes_each_step_factor_times_as_long(pytester, monkeypatch):
    pytester.makepyfile(test_rehearse_suite=SUITE)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s",
                                           "--llmperf-client-check", "warn", timeout=600)
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines([r"rehearsal --slower 2: TPOT p50 B/A \d\.\d\d"])
