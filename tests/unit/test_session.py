"""LlmperfSession.run's bookkeeping around a measurement: here, the client's self-check.

The measurement is replaced by records with a chosen client lag (the real path is in
tests/integration); the workload is built with the tiny model's real tokenizer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf import Engine, Workload
from pytest_llmperf import session as session_mod
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.runner import Measurement
from pytest_llmperf.session import LlmperfSession
from pytest_llmperf.settings import resolve

TINY_LLAMA = Path(__file__).resolve().parents[2] / "suites" / "models" / "tiny-llama"
ENGINE = Engine(model=str(TINY_LLAMA), load_format="dummy")


class RunningServer:
    base_url, start_time_s = "http://127.0.0.1:1", 20.0


class OnePool:
    def get(self, engine):
        return RunningServer()


def session_sending_late(monkeypatch, lag_s: float) -> LlmperfSession:
    """A session whose every request goes out `lag_s` after it was scheduled."""
    def measure(endpoint, requests, pattern, **_):
        return Measurement([RequestRecord(
            index=i, expected_prompt_tokens=r.prompt_tokens, expected_output_tokens=2,
            scheduled_s=float(i), sent_s=i + lag_s, chunk_times_s=[i + 0.1, i + 0.2],
            chunk_tokens=[1, 1], usage_prompt_tokens=r.prompt_tokens, usage_output_tokens=2)
            for i, r in enumerate(requests)])

    monkeypatch.setattr(session_mod, "measure", measure)
    settings = resolve(lambda name: None, lambda ini: None, environ={})
    return LlmperfSession(settings, OnePool())


def fixed(**load) -> Workload:
    return Workload.fixed(input_tokens=8, output_tokens=2, num_requests=4, **load)


def test_an_open_loop_sent_behind_schedule_is_client_limited(monkeypatch):
    session = session_sending_late(monkeypatch, 0.050)
    result = session.run("suite.py::test_x", "test_x", ENGINE, fixed(rate=50.0), repeat=1)
    assert result.client.limited
    assert result.client.reasons == [
        "requests sent 50.0 ms behind schedule at p90 (limit 10 ms)"]
    assert session.verdicts == {"suite.py::test_x": "CLIENT LIMITED"}


def test_a_punctual_client_is_not_limited(monkeypatch):
    session = session_sending_late(monkeypatch, 0.001)
    result = session.run("suite.py::test_x", "test_x", ENGINE, fixed(rate=50.0), repeat=1)
    assert not result.client.limited
    assert session.verdicts == {}


@pytest.mark.parametrize("load", [{"concurrency": 4}, {"rate": 50.0, "concurrency": 2}],
                         ids=["closed", "capped"])
def test_waiting_for_a_slot_is_not_schedule_lag(monkeypatch, load):
    session = session_sending_late(monkeypatch, 0.050)
    result = session.run("suite.py::test_x", "test_x", ENGINE, fixed(**load), repeat=1)
    assert result.client.schedule_lag_p90_s is None
    assert not result.client.limited


@pytest.mark.parametrize("hardware, endpoint, cores, expected", [
    ("cpu", None, 2, 1),  # the engine's core is not the client's
    ("cpu", None, 1, 1),
    ("h100", None, 16, 8),  # capped: more only costs start-up
    ("h100", None, 6, 4),  # vLLM's API server and engine core keep two busy
    ("h100", "http://elsewhere:8000", 4, 4),  # a remote server leaves every core to the client
])
def test_auto_client_workers(monkeypatch, hardware, endpoint, cores, expected):
    monkeypatch.setattr(session_mod, "usable_cores", lambda: cores)
    environ = {"LLMPERF_ENDPOINT": endpoint} if endpoint else {}
    session = LlmperfSession(resolve(lambda name: None, lambda ini: None, environ=environ),
                             OnePool(), hardware_class=hardware)
    assert session.client_workers() == expected


def test_client_workers_given_as_a_number(monkeypatch):
    session = LlmperfSession(resolve(lambda name: None, lambda ini: None,
                                     environ={"LLMPERF_CLIENT_WORKERS": "1"}), OnePool())
    assert session.client_workers() == 1


def test_ab_sides_on_gpus_of_their_own_trade_them_halfway(monkeypatch, tmp_path):
    """Four GPUs, two TP=2 sides: A starts first on 0,1 and B on 2,3; after two of four pairs
    both stop and B starts first, so each side measures half its pairs on each pair of cards."""
    from pytest_llmperf.engines.leases import GpuLeases
    from pytest_llmperf.engines.pool import EnginePool
    from tests.unit.test_pool_and_leases import FakeServer

    log = []
    pool = EnginePool(lambda e, env: FakeServer(e, env, log), capacity=1,
                      leases=GpuLeases(["0", "1", "2", "3"], lease_dir=tmp_path, timeout_s=1.0))
    session = session_sending_late(monkeypatch, 0.0)
    session.pool, session.hardware_class, session.gpu_count = pool, "h100", 4
    a = ENGINE.replace(tensor_parallel_size=2)
    b = a.replace(max_num_seqs=8)
    session.run_ab("suite.py::test_x", "test_x", a, b, fixed(concurrency=2), pairs=4)
    assert [entry for entry in log if entry[0] == "start"] == [
        ("start", a.model, "0,1"), ("start", b.model, "2,3"),  # pair 1
        ("start", b.model, "0,1"), ("start", a.model, "2,3"),  # before pair 3
    ]
    assert session.notes == ["suite.py::test_x: A/B sides traded GPUs halfway: A on GPUs 0,1 "
                             "then 2,3; B on GPUs 2,3 then 0,1"]
