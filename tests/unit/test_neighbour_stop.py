"""A measurement on a CPU engine with a busy neighbour on its cores ends early, DISTURBED, with
what it measured kept: real processes throughout (the mock server in the engine's place, pinned
to one core, the real client, a real busy loop outside the session); no vLLM."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest

from pytest_llmperf import Engine, Workload
from pytest_llmperf.client.watchdog import INTERRUPTED
from pytest_llmperf.clientbench.mockprocess import MockProcess
from pytest_llmperf.errors import Disturbed
from pytest_llmperf.ids import MeasurementId
from pytest_llmperf.machine import neighbour_watch
from pytest_llmperf.machine.neighbours import session_root
from pytest_llmperf.plugin import configs
from pytest_llmperf.session.session import LlmperfSession
from pytest_llmperf.session.settings import resolve
from pytest_llmperf.verdict.status import Status
from tests.busy_neighbour import busy_neighbour
from tests.conftest import TINY_LLAMA
from tests.unit.fingerprints import fingerprint_of

ENGINE = Engine(model=str(TINY_LLAMA), load_format="dummy")
# 20 requests of 100 chunks 20 ms apart, one at a time: 40 s whole.
LONG = Workload.fixed(input_tokens=8, output_tokens=100, num_requests=20, concurrency=1)


class MockEngines:
    """The pool of one "CPU engine": the mock server, whose process is the engine's."""

    def __init__(self, mock: MockProcess) -> None:
        self.mock = mock

    def get(self, engine):
        return SimpleNamespace(base_url=self.mock.url, start_time_s=1.0)

    def server_pid(self, engine):
        return self.mock.processes[0].pid

    def check(self, engine, when=None, stall=None):
        return None  # alive


@pytest.fixture
def mock_engine():
    process = MockProcess(0.02, cpus=[sorted(os.sched_getaffinity(0))[0]])
    yield MockEngines(process)
    process.stop()


def session_of(pool, **environ) -> LlmperfSession:
    """As the plugin starts one: this pytest run's processes (the other pytest-xdist worker
    too) are the session's, not neighbours."""
    settings = resolve(lambda name: None, lambda ini: None, environ=environ)
    return LlmperfSession.start(
        configs.session_config(settings), pool, fingerprint=fingerprint_of({"hardware_class": "cpu", "device_count": 0}),
        process_root=session_root("PYTEST_XDIST_WORKER" in os.environ))


def test_a_busy_neighbour_ends_the_measurement_early_as_disturbed(monkeypatch, mock_engine):
    monkeypatch.setattr(neighbour_watch, "MIN_S", 1.0)
    session = session_of(mock_engine)
    with busy_neighbour(20.0) as neighbour:
        began = time.monotonic()
        with pytest.raises(Disturbed) as raised:
            session.runner.run(MeasurementId("suite.py::test_x"), ENGINE, LONG, repeat=3)
        took_s = time.monotonic() - began
    line = str(raised.value)
    assert line.startswith("disturbed measurement, ended early: not the engine's numbers "
                           "(other processes used "), line
    assert f"(pid {neighbour})" in line and "over the first" in line
    assert line.endswith("what was measured before the end is in the run file, and nothing "
                         "of it was written as a baseline")
    assert took_s < 20.0  # of 40 s; the first of three repeats, and no other
    [record] = session.ledger.records
    assert record.status == Status.DISTURBED
    records = record.result.records
    assert 0 < len(records) < 20 and len(record.result.runs) == 1
    # the request in flight at the end
    assert records[-1].error == f"Aborted: {INTERRUPTED}", [r.error for r in records]
    assert records[-1].error_kind == "ended_early"  # not the engine's stall


def test_under_disturbance_warn_the_measurement_runs_whole(monkeypatch, mock_engine):
    """warn measures everything and says so; only fail (the default) ends it early."""
    monkeypatch.setattr(neighbour_watch, "MIN_S", 1.0)
    session = session_of(mock_engine, LLMPERF_DISTURBANCE="warn")
    short = Workload.fixed(input_tokens=8, output_tokens=100, num_requests=3, concurrency=1)
    with busy_neighbour(20.0):
        record = session.runner.run(MeasurementId("suite.py::test_x"), ENGINE, short, repeat=1)
    assert record.result.completed == 3 and not record.result.failed
