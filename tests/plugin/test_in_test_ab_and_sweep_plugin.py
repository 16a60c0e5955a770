"""`llmperf.ab(a=..., b=...)` and `llmperf.sweep(concurrencies=...)` as a suite calls them,
with injected measurements (test_confirm_later_plugin's conftest: side B's TPOT is side A's
times the factor of its pair): the paired B/A ratios a test asserts on, both sides as rows of
the summary and the run file, nothing gated; one row per load of a sweep. The real engine runs
the same calls in the CPU suites (suites/test_cpu_ab.py, suites/test_cpu_capacity.py, the main
job) and nightly in tests/integration/test_engine_configs_real.py."""

from __future__ import annotations

import json

import pytest

from tests.conftest import TINY_LLAMA
from tests.plugin.ab_suite import with_factors

FACTORS = '''B_FACTORS = {
    "test_b_slower": [1.5, 1.5, 1.5],
    "test_b_as_fast": [1.0, 1.0, 1.0],
    "test_b_asserted_faster": [1.0, 1.0, 1.0],
    "test_concurrency_sweep": [1.0, 1.0],
}
'''

SUITE = f"""
from pytest_llmperf import Engine, Workload

A = Engine(model={str(TINY_LLAMA)!r}, load_format="dummy", served_model_name="first")
B = A.replace(max_num_seqs=8)  # the conftest's stand-in server answers as side B for it
WORKLOAD = Workload.fixed(input_tokens=8, output_tokens=3, num_requests=4, concurrency=2)

def test_b_slower(llmperf):
    run = llmperf.ab(WORKLOAD, a=A, b=B, pairs=3)
    assert run.median("tpot_s.p50") == pytest.approx(1.5)
    assert run.median("tpot_s.p50") > 1.2, "B is slower"

def test_b_as_fast(llmperf):
    run = llmperf.ab(WORKLOAD, a=A, b=B, pairs=3)
    assert run.median("tpot_s.p50") == pytest.approx(1.0)

def test_b_asserted_faster(llmperf):  # B is as fast: the test's own claim fails, with its ratio
    run = llmperf.ab(WORKLOAD, a=A, b=B, pairs=3)
    assert run.median("tpot_s.p50") < 0.8

def test_concurrency_sweep(llmperf):
    sweep = llmperf.sweep(WORKLOAD, concurrencies=[1, 2], engine=A)
    assert [point.load for point in sweep.points] == [1, 2]
"""


@pytest.fixture
def suite(pytester: pytest.Pytester):
    pytester.makeconftest(with_factors(FACTORS))
    pytester.makepyfile(test_suite="import pytest\n" + SUITE)
    return pytester


def test_in_test_ab_ratios_and_a_sweeps_rows(suite):
    result = suite.runpytest("-p", "no:cacheprovider", "--llmperf-summary", "full",
                             "--llmperf-json", "run.json")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*assert 1.0 < 0.8*"])
    result.stdout.re_match_lines([
        r"test_suite.py::test_b_slower \(A\) +tiny-llama#1 .* 10\.00 +10\.00 .* A/B side A$",
        r"test_suite.py::test_b_slower \(B\) +tiny-llama#2 .* 15\.00 +15\.00 .* A/B side B$",
        r"test_suite.py::test_concurrency_sweep@fixed-8in-3out-c1 .* @ concurrency 1 ",
        r"test_suite.py::test_concurrency_sweep@fixed-8in-3out-c2 .* @ concurrency 2 ",
        r"engine tiny-llama#2 = tiny-llama load=dummy seqs=8; .*"])
    results = {r["key"]: r for r in
               json.loads((suite.path / "run.json").read_text())["llmperf"]["results"]}
    assert list(results) == [
        "test_b_slower (A)", "test_b_slower (B)", "test_b_as_fast (A)", "test_b_as_fast (B)",
        "test_b_asserted_faster (A)", "test_b_asserted_faster (B)",
        "test_concurrency_sweep@fixed-8in-3out-c1", "test_concurrency_sweep@fixed-8in-3out-c2"]
    ratios = results["test_b_slower (B)"]["ab"]["metrics"]["tpot_s.p50"]["ratios"]
    assert ratios == pytest.approx([1.5, 1.5, 1.5])
    assert results["test_b_slower (A)"]["engine"] != results["test_b_slower (B)"]["engine"]
