"""LlmperfSession.run's bookkeeping around a measurement: here, the client-lag note.

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

pytest.importorskip("tokenizers")

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


@pytest.mark.parametrize("load", [{"rate": 50.0}, {"concurrency": 4}], ids=["rate", "closed"])
def test_a_lagging_client_is_a_note_under_the_table(monkeypatch, load):
    session = session_sending_late(monkeypatch, 0.050)
    session.run("suite.py::test_x", "test_x", ENGINE, fixed(**load), repeat=1)
    assert session.notes == [
        "suite.py::test_x: the client lagged its schedule (queue p99 50.0 ms > 10 ms): the load "
        "generator, not the engine, limited this measurement; offer less load, or give the "
        "client cores the engine does not use"]


def test_a_punctual_client_leaves_no_note(monkeypatch):
    session = session_sending_late(monkeypatch, 0.001)
    session.run("suite.py::test_x", "test_x", ENGINE, fixed(rate=50.0), repeat=1)
    assert session.notes == []


def test_waiting_for_a_concurrency_slot_is_not_client_lag(monkeypatch):
    session = session_sending_late(monkeypatch, 0.050)
    session.run("suite.py::test_x", "test_x", ENGINE, fixed(rate=50.0, concurrency=2), repeat=1)
    assert session.notes == []
