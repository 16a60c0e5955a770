"""DISTURBED as a user meets it: a run beside a busy neighbour fails as DISTURBED (not REGRESSION),
writes no baseline, and says who the neighbour was; warn lets it pass; off does not watch.

The measurement is the real session path with the client's `measure` replaced by fake records, and
the two /proc snapshots around it planted (a neighbour "stress" at 90% of a core on a 95% busy
machine); the real engine beside a real neighbour is scripts/calibrate_disturbance.py's job."""

from __future__ import annotations

import pytest

from tests.conftest import TINY_LLAMA

CONFTEST = '''
import pytest
from pytest_llmperf.machine import neighbours
from pytest_llmperf.client.measurement import Measurement
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.session import runner as runner_mod
from pytest_llmperf.machine import watch

TICKS = neighbours._CLOCK_TICKS


def records():
    out = []
    for i in range(8):
        chunks = [i + 0.1 + k * 0.01 for k in range(10)]
        out.append(RequestRecord(index=i, expected_prompt_tokens=8, expected_output_tokens=10,
                                 scheduled_s=i, sent_s=i, chunk_times_s=chunks,
                                 chunk_tokens=[1] * 10, done_s=chunks[-1],
                                 usage_prompt_tokens=8, usage_output_tokens=10))
    return out


def snapshot(wall_s, busy, stress_s):
    procs = {900: neighbours.Proc(900, 1, "stress", stress_s)}
    total = int((wall_s - 10.0) * 2 * TICKS)
    return neighbours.Snapshot(wall_s, procs, int(total * busy), total, 0, 2)


class Pool:
    """No engine is started: only its URL is read."""
    on_death = None
    starts = []
    deaths = {}
    def get(self, engine):
        from types import SimpleNamespace
        return SimpleNamespace(base_url="http://127.0.0.1:9", start_time_s=1.0)
    def check(self, *args, **kwargs):
        return None
    def stop(self, engine):
        pass
    def stop_all(self):
        pass
    def server_pid(self, engine):  # no engine process: none watched
        return None
    def trim(self, keep=None):
        pass


@pytest.hookimpl(trylast=True)  # after the plugin made its session
def pytest_configure(config):
    from pytest_llmperf.plugin import hooks
    config.stash[hooks.SESSION_KEY].runner.target.pool = Pool()


@pytest.fixture(autouse=True)
def _planted(monkeypatch):
    monkeypatch.setattr(runner_mod, "measure", lambda *a, **k: Measurement(records()))
    shots = iter([snapshot(10.0, 0.0, 0.0), snapshot(20.0, 0.95, 9.0)] * 10)
    monkeypatch.setattr(watch, "take_snapshot", lambda: next(shots))
'''

SUITE = '''
import pytest
from pytest_llmperf import Engine, Workload

@pytest.mark.engine(Engine(model=%r, load_format="dummy"))
def test_x(llmperf):
    llmperf.run(Workload.fixed(input_tokens=8, output_tokens=10, num_requests=8, concurrency=1))
''' % str(TINY_LLAMA)

LINE = ("disturbed measurement: not the engine's numbers (other processes used 0.90 cores while "
        "the machine was 95% busy; the busiest, stress (pid 900), 90% of a core); rerun on a "
        "quiet machine (stop the other load, or give the suite a machine of its own); nothing "
        "from this run was written as a baseline")


@pytest.fixture
def suite(pytester: pytest.Pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_x=SUITE)
    return pytester


def run(suite, *args):
    return suite.runpytest("-p", "no:cacheprovider", "--llmperf-hardware", "cpu",
                           "--llmperf-update-baselines", "--llmperf-json", "r.json", *args)


def test_a_disturbed_run_fails_as_disturbed_and_writes_no_baseline(suite):
    result = run(suite)
    result.assert_outcomes(failed=1)
    joined = " ".join(result.stdout.str().split())
    assert " ".join(LINE.split()) in joined
    assert "DISTURBED" in joined and "REGRESSION" not in joined
    assert not (suite.path / "baselines").exists()
    assert '"disturbed": true' in (suite.path / "r.json").read_text()


def test_warn_lets_it_pass_and_still_writes_no_baseline(suite):
    result = run(suite, "--llmperf-disturbance", "warn")
    result.assert_outcomes(passed=1, warnings=1)
    assert "DisturbedWarning" in result.stdout.str()
    assert "test_x.py::test_x: baseline not updated (disturbed run)" in result.stdout.str()
    assert not (suite.path / "baselines").exists()


def test_off_does_not_watch(suite):
    result = run(suite, "--llmperf-disturbance", "off")
    result.assert_outcomes(passed=1)
    assert (suite.path / "baselines" / "cpu" / "test_x.toml").exists()
    assert '"disturbance": null' in (suite.path / "r.json").read_text()
