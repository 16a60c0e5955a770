"""Under --llmperf-ab only `llmperf.run` is paired with the candidate (side B). A test's own
`llmperf.ab`, `sweep` and `capacity` measure without side B and gate nothing in an upgrade; the
summary says so in one line per test and call, rather than stay silent (plugin/measurers.py,
UNPAIRED). Measurements injected as in the other A/B plugin tests (ab_suite.py)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import TINY_LLAMA
from tests.plugin.ab_suite import with_factors

FACTORS = '''B_FACTORS = {
    "test_own_ab": [1.0, 1.0],
    "test_a_sweep": [1.0, 1.0],
    "test_a_capacity": [1.0] * 8,
    "test_paired_run": [1.0] * 8,
}
'''
SUITE = f"""
from pytest_llmperf import SLO, Engine, Workload

A = Engine(model={str(TINY_LLAMA)!r}, load_format="dummy", served_model_name="first")
B = A.replace(max_num_seqs=8)
WORKLOAD = Workload.fixed(input_tokens=8, output_tokens=3, num_requests=4, concurrency=2)
PROBE = Workload.fixed(input_tokens=8, output_tokens=3, num_requests=4, rate=1.0)

@pytest.mark.engine(A)
def test_own_ab(llmperf):
    llmperf.ab(WORKLOAD, a=A, b=B, pairs=2)

@pytest.mark.engine(A)
def test_a_sweep(llmperf):
    llmperf.sweep(WORKLOAD, concurrencies=[1, 2])

@pytest.mark.engine(A)
def test_a_capacity(llmperf):
    llmperf.capacity(PROBE, SLO(max={{"tpot_s.p50": 1.0}}), low=1.0, high=2.0, max_runs=2)

@pytest.mark.engine(A)
@pytest.mark.llmperf(gate=["tpot_s.p50"])
def test_paired_run(llmperf):
    llmperf.run(WORKLOAD)
"""
LINE = ("llmperf.{call} measured the test's {what} and was not judged: --llmperf-ab pairs "
        "llmperf.run only")


def test_each_unpaired_call_says_so_in_one_line(pytester: pytest.Pytester):
    pytester.makeconftest(with_factors(FACTORS))
    pytester.makepyfile(test_suite="import pytest\n" + SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", "--llmperf-ab",
                                json.dumps({"max_num_seqs": 8}))
    result.assert_outcomes(passed=4)
    alone = "engine alone, without --llmperf-ab's side B"
    flat = " ".join(result.stdout.str().split())  # the summary's notes wrap
    for test, call, what in (("test_own_ab", "ab",
                              "own engines a and b, without --llmperf-ab's side B"),
                             ("test_a_sweep", "sweep", alone),
                             ("test_a_capacity", "capacity", alone)):
        line = f"test_suite.py::{test}: " + LINE.format(call=call, what=what)
        assert flat.count(line) == 1, line
    assert "test_paired_run: llmperf." not in flat
