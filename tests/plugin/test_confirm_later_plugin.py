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

from tests.unit.test_session import TINY_LLAMA

CONFTEST = '''
import os
import pytest
from collections import Counter
from pytest_llmperf.plugin import hooks as plugin
from pytest_llmperf.session import ab_run, runner as runner_mod
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.client.measure import Measurement

# Side B's TPOT over side A's, per test, pair by pair.
B_FACTORS = {
    "test_slow_stretch": [1.3] * 4 + [0.8] * 4,  # the machine, not B: cleared by the rerun
    "test_as_fast": [1.0] * 4,
    "test_slower": [1.5] * 8,  # B: confirmed by the rerun
    "test_other_engine": [1.0] * 4,
}
EVENTS = []  # what happened, in order: "measure test_x", "stop <max_num_seqs>"


class Server:
    start_time_s = 1.0
    def __init__(self, engine):
        self.base_url = "http://b" if engine.max_num_seqs == 8 else "http://a"


class Pool:
    on_death = None
    starts = []
    deaths = Counter()
    def get(self, engine):
        return Server(engine)
    def stop(self, engine):
        EVENTS.append(f"stop {engine.served_model_name}")
    def stop_all(self):
        pass
    def trim(self, keep=None):
        pass
    def room_for(self, engines):
        import contextlib
        return contextlib.nullcontext()

    def start_together(self, engines):
        pass


@pytest.hookimpl(trylast=True)  # after the plugin made its session
def pytest_configure(config):
    config.stash[plugin.SESSION_KEY].runner.target.pool = Pool()


RUNS = Counter()  # measurements per test, over its first attempt and its rerun
ab_run.OTHER_SIDE_SETTLE_S = 0  # no engine of these spins after its measurement


@pytest.fixture(autouse=True)
def _inject(monkeypatch):
    def measure(endpoint, requests, pattern, **_):
        test = os.environ["PYTEST_CURRENT_TEST"].split("::")[-1].split(" ")[0]
        side = "B" if endpoint.base_url == "http://b" else "A"
        if RUNS[test] % 8 == 0:
            EVENTS.append(f"measure {test}")
        pair = RUNS[test] // 2
        RUNS[test] += 1
        gap = 0.010 * (B_FACTORS[test][pair] if side == "B" else 1.0)
        return Measurement([RequestRecord(
            index=i, expected_prompt_tokens=r.prompt_tokens, expected_output_tokens=3,
            scheduled_s=float(i), sent_s=float(i),
            chunk_times_s=[i + 0.1 + gap * n for n in range(3)], chunk_tokens=[1, 1, 1],
            usage_prompt_tokens=r.prompt_tokens, usage_output_tokens=3)
            for i, r in enumerate(requests)])

    monkeypatch.setattr(runner_mod, "measure", measure)


def pytest_unconfigure(config):
    with open("events.json", "w") as f:
        import json
        json.dump(EVENTS, f)
'''

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
