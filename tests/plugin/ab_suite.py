"""The conftest of the A/B plugin tests: the measurement (session.measure) replaced by records
whose side B is slower by a factor chosen per test and per pair (B_FACTORS), and the engine pool
by one that starts nothing and logs its stops (events.json, written at the session's end)."""

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
    def server_pid(self, engine):  # no engine process: none watched
        return None
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


def with_factors(factors: str) -> str:
    """CONFTEST with its B_FACTORS table replaced by `factors` (the text of another
    `B_FACTORS = {...}` table, one entry per test of the suite that uses it)."""
    start = CONFTEST.index("B_FACTORS = {")
    end = CONFTEST.index("}\n", start) + 2
    return CONFTEST[:start] + factors + CONFTEST[end:]
