"""Server answers that are not success, and a server that stalls, against the mock server: the
real client over real HTTP, each fault a recorded failure of its own kind.

Fast (no engine): the mock serves a chunk every 10 ms and fails the requests it is told to fail
(`POST /mock/faults`, in arrival order; one request at a time keeps arrival order = index).
"""

from __future__ import annotations

import json

import pytest

from pytest_llmperf.client.measure import Endpoint, measure
from pytest_llmperf.client.patterns import Concurrency
from pytest_llmperf.clientbench.bench import MockProcess
from pytest_llmperf.failures import count_kinds
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.records import Request

INTERVAL_S = 0.01
PROMPT = tuple(range(100, 116))
STALL_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def mock():
    server = MockProcess(INTERVAL_S)
    yield server
    server.stop()


def requests(n: int, output_tokens: int = 5) -> list[Request]:
    return [Request(PROMPT, len(PROMPT), output_tokens)] * n


def error_body(status: int) -> str:
    return json.dumps({"error": {"message": f"mock fault {status}", "type": "MockError",
                                 "code": status}})


STREAM_ERROR = ('server error in stream: {"message":"mock fault mid-stream",'
                '"type":"InternalServerError","code":500}')
# fault the mock is told -> (kind, the record's error)
FAULTS = {
    "429": ("overloaded", f"HTTP 429: {error_body(429)}"),
    "503": ("overloaded", f"HTTP 503: {error_body(503)}"),
    "400": ("bad_request", f"HTTP 400: {error_body(400)}"),
    "500": ("server_error", f"HTTP 500: {error_body(500)}"),
    "error-mid-stream": ("stream_error", STREAM_ERROR),
    "no-usage": ("no_usage", "stream ended without a usage chunk (the server's token counts, "
                             "asked for with stream_options.include_usage)"),
    "no-done": ("no_done", "stream ended without data: [DONE]"),
    "cut": ("cut_off", "StreamClosed: the server closed the connection before the response "
                       "ended"),
}


def test_each_fault_is_a_failure_of_its_kind_and_the_others_are_measured(mock):
    schedule = [None, *FAULTS, None]
    mock.set_faults(schedule)
    measured = measure(Endpoint(mock.url, "mock"), requests(len(schedule)),
                       Concurrency(max_concurrency=1), seed=0)
    records = measured.records
    assert [(r.error_kind, r.error) for r in records[1:-1]] == list(FAULTS.values())
    assert records[0].ok and records[-1].ok
    # What a stream sent before it broke is kept on its record (two tokens, as the mock sends).
    assert [len(records[1 + list(FAULTS).index(f)].chunk_times_s)
            for f in ("error-mid-stream", "no-usage", "no-done", "cut")] == [2, 2, 2, 2]
    assert count_kinds(records) == {"overloaded": 2, "bad_request": 1, "server_error": 1,
                                    "stream_error": 1, "cut_off": 1, "no_done": 1, "no_usage": 1}
    metrics = compute_metrics(records)
    assert (metrics.completed, metrics.failed) == (2, 8)
    assert measured.stall is None


def test_a_stream_that_stalls_is_stopped_after_the_stall_timeout(mock):
    mock.set_faults(["stall"])
    measured = measure(Endpoint(mock.url, "mock"), requests(4), Concurrency(max_concurrency=2),
                       seed=0, stall_timeout_s=STALL_TIMEOUT_S)
    # The first two requests go at once: either may arrive first and get the stall.
    stalled = [r for r in measured.records if not r.ok]
    assert len(measured.records) == 4 and len(stalled) == 1, "the others were measured"
    assert (stalled[0].error_kind, stalled[0].error) == (
        "stalled", "Aborted: stopped by the stall watchdog: no chunk on any request in flight "
                   "for 1 s")
    assert measured.stall.startswith("no chunk for 1.")
    assert measured.stall.endswith(" s on the 1 request in flight (stall timeout 1 s, "
                                   "--llmperf-stall-timeout)")


def test_two_client_workers_stop_together_on_a_stall(mock):
    mock.set_faults(["stall", "stall"])
    measured = measure(Endpoint(mock.url, "mock"), requests(6), Concurrency(max_concurrency=2),
                       seed=0, stall_timeout_s=STALL_TIMEOUT_S, workers=2)
    kinds = sorted(r.error_kind or "ok" for r in measured.records)
    assert kinds == ["stalled", "stalled"], "both slots stalled: nothing more was sent"
    assert measured.stall.endswith(" s on any of the 2 requests in flight (stall timeout 1 s, "
                                   "--llmperf-stall-timeout)")
    assert measured.client_error is None
