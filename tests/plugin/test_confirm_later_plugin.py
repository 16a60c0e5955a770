"""A/B confirm pairs after the engine's other tests, as users meet them: pytester runs a suite
under --llmperf-ab whose measurements are injected.

conftest replaces the measurement (session.measure) with records whose side B is slower by a
factor chosen per test and per pair, and the engine pool with one that starts nothing and logs
its stops. Everything else (the ABBA order, the deferral, the rerun, the verdicts, the summary)
is the real plugin. The real engine path is tests/integration/test_ab_real.py.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import TINY_LLAMA
from tests.plugin.ab_suite import CONFTEST

SUITE = '''
import pytest
from pytest_llmperf import Engine, Workload

ENGINE = Engine(model=%r, load_format="dummy", served_model_name="first")
WORKLOAD = Workload.fixed(input_tokens=8, output_tokens=3, num_requests=4, concurrency=2)

@pytest.mark.engine(ENGINE)
@pytest.mark.llmperf(gate=["tpot_s.p50"])
class TestFirstEngine:
    def test_slow_stretch(self, llmperf):
        llmperf.run(WORKLOAD)

    def test_as_fast(self, llmperf):
        llmperf.run(WORKLOAD)

    def test_slower(self, llmperf):
        llmperf.run(WORKLOAD)

@pytest.mark.engine(ENGINE.replace(served_model_name="second"))
@pytest.mark.llmperf(gate=["tpot_s.p50"])
def test_other_engine(llmperf):
    llmperf.run(WORKLOAD)
''' % str(TINY_LLAMA)


@pytest.fixture
def suite(pytester: pytest.Pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_a_suspect_test_is_rerun_after_its_engines_other_tests_and_judged_on_all_pairs(suite):
    result = suite.runpytest("-v", "-p", "no:cacheprovider", "--llmperf-summary", "full",
                             "--llmperf-ab", json.dumps({"max_num_seqs": 8}),
                             "--llmperf-json", "run.json")
    result.assert_outcomes(passed=3, failed=1)
    # Each test shows once, with its final outcome: the two suspects after the first engine's
    # other test, before the second engine's.
    result.stdout.re_match_lines([
        r".*::TestFirstEngine::test_as_fast PASSED",
        r".*::TestFirstEngine::test_slow_stretch PASSED",
        r".*::TestFirstEngine::test_slower FAILED",
        r".*::test_other_engine PASSED",
    ], consecutive=False)
    assert result.stdout.str().count("test_slow_stretch PASSED") == 1
    events = json.loads((suite.path / "events.json").read_text())
    # The first engine stays up for the reruns (the stop comes after them; the A/B pool stops
    # side A's spec, named "first").
    assert events == ["measure test_slow_stretch", "measure test_as_fast", "measure test_slower",
                      "measure test_slow_stretch", "measure test_slower", "stop first",
                      "measure test_other_engine", "stop second"]
    result.stdout.fnmatch_lines([
        "*test_slow_stretch: B regressed over 4 ABBA pairs; 4 more measured after the other "
        "tests of its engine, to confirm",
        "*test_slower: B regressed over 4 ABBA pairs; 4 more measured after the other tests of "
        "its engine, to confirm",
    ], consecutive=False)
    result.stdout.re_match_lines([
        r"^tpot_s\.p50 regressed in A/B: B/A median 1\.500 \(93% interval 1\.500-1\.500 over 8 "
        r"ABBA pairs; the 4 confirm pairs alone 1\.500\), allowed <= 1\.100 \(lower is better; "
        r"A/B tolerance 0\.1\)$"])
    run = json.loads((suite.path / "run.json").read_text())["llmperf"]["results"]
    pairs = {entry["test_id"]: entry["ab"]["pairs"] for entry in run if "ab" in entry}
    assert sorted(pairs.values()) == [4, 4, 8, 8]  # one row per side B, the first attempt gone
    assert len(run) == 8


def test_without_confirm_pairs_nothing_is_deferred(suite):
    result = suite.runpytest("-v", "-p", "no:cacheprovider", "--llmperf-ab",
                             json.dumps({"max_num_seqs": 8}), "--llmperf-ab-confirm-pairs", "0")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.re_match_lines([
        r".*::TestFirstEngine::test_slow_stretch FAILED",
        r".*::TestFirstEngine::test_as_fast PASSED",
        r".*::TestFirstEngine::test_slower FAILED",
    ], consecutive=True)


def test_under_xdist_the_confirm_pairs_follow_at_once(suite):
    """pytest-xdist's worker requires each test's reports while that test runs, so there is no
    rerun: a suspect measures its confirm pairs right after its first pairs, and is judged on
    all of them in its own turn."""
    result = suite.runpytest("-v", "-n", "1", "-p", "no:cacheprovider",
                             "--llmperf-ab", json.dumps({"max_num_seqs": 8}))
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.re_match_lines([
        r".* PASSED .*::TestFirstEngine::test_slow_stretch",
        r".* PASSED .*::TestFirstEngine::test_as_fast",
        r".* FAILED .*::TestFirstEngine::test_slower",
        r".* PASSED .*::test_other_engine",
    ], consecutive=False)
    result.stdout.fnmatch_lines(["*test_slow_stretch: B regressed over 4 ABBA pairs; 4 more "
                                 "measured to confirm"])
