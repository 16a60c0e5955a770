"""The stall watchdog and the progress state it reads, on fake clients and an injected clock."""

from __future__ import annotations

import math
import multiprocessing
from types import SimpleNamespace

import pytest

from pytest_llmperf.client.progress import IDLE, Board, Snapshot, combine, of_client
from pytest_llmperf.client.watchdog import INTERRUPTED, Interrupt, Watchdog, abort_reason
from pytest_llmperf.failures import count_kinds, describe_counts, kind_of_status
from pytest_llmperf.records import RequestRecord


def record(sent_s: float | None, *chunks: float) -> RequestRecord:
    return RequestRecord(index=0, expected_prompt_tokens=4, expected_output_tokens=8,
                         scheduled_s=0.0, sent_s=sent_s, chunk_times_s=list(chunks),
                         chunk_tokens=[1] * len(chunks))


def client(*in_flight: RequestRecord, finished=0, finished_tokens=0, last_end_s=None):
    return SimpleNamespace(in_flight={id(r): r for r in in_flight}, finished=finished,
                           finished_tokens=finished_tokens, last_end_s=last_end_s)


def test_progress_is_the_last_chunk_end_or_oldest_sending():
    busy = client(record(10.0, 11.0, 12.5), record(12.0), finished=3, finished_tokens=24,
                  last_end_s=12.2)
    assert of_client(busy) == Snapshot(in_flight=2, done=3, tokens=24 + 2, last_progress_s=12.5)
    # Newer arrivals do not hide an old silent request: its sending time is what counts.
    silent = client(record(5.0), record(9.0), record(9.5), last_end_s=4.0)
    assert of_client(silent).last_progress_s == 5.0
    assert of_client(client()) == Snapshot(0, 0, 0, -math.inf)


def test_several_clients_progress_when_any_does():
    a, b = Snapshot(2, 5, 40, 10.0), Snapshot(1, 3, 20, 14.0)
    assert combine([a, b]) == Snapshot(3, 8, 60, 14.0)
    assert combine([]) == IDLE


def test_the_board_sums_what_workers_publish_and_carries_the_stop():
    board = Board(multiprocessing.get_context("spawn"), workers=2)
    assert board.read() == Snapshot(0, 0, 0, -math.inf)
    board.publish(0, Snapshot(2, 5, 40, 10.0))
    board.publish(1, Snapshot(1, 3, 20, 14.0))
    assert board.read() == Snapshot(3, 8, 60, 14.0)
    assert not board.stop_requested()
    board.request_stop()
    assert board.stop_requested() and not board.interrupted()
    board.request_stop(interrupted=True)  # workers then fail their requests as INTERRUPTED
    assert board.stop_requested() and board.interrupted()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_stall_is_requests_in_flight_and_silence_for_the_timeout():
    clock, given_up, seen = Clock(), [], []
    snapshot = Snapshot(in_flight=4, done=0, tokens=0, last_progress_s=100.0)
    dog = Watchdog(lambda: snapshot, 3.0, given_up.append, clock=clock)
    dog.on_tick = seen.append
    clock.now = 102.9
    assert dog.check() is None and not dog.stopped()
    clock.now = 103.25
    stall = dog.check()
    assert str(stall) == ("no chunk for 3.2 s on any of the 4 requests in flight (stall timeout "
                          "3 s, --llmperf-stall-timeout)")
    assert dog.stopped() and given_up == [stall]
    clock.now = 200.0
    assert dog.check() is stall and given_up == [stall], "given up once"
    assert seen == [snapshot, snapshot], "every look feeds the progress line"


def test_silence_with_nothing_in_flight_is_no_stall():
    clock = Clock()
    dog = Watchdog(lambda: Snapshot(0, 10, 80, 0.0), 3.0, pytest.fail, clock=clock)
    assert dog.check() is None


def test_one_silent_request_is_named_as_one():
    clock = Clock()
    dog = Watchdog(lambda: Snapshot(1, 0, 0, 90.0), 10.0, lambda stall: None, clock=clock)
    assert str(dog.check()) == ("no chunk for 10.0 s on the 1 request in flight (stall timeout "
                                "10 s, --llmperf-stall-timeout)")


def test_an_interrupt_set_from_another_thread_ends_the_measurement_once():
    clock, given_up, interrupt = Clock(), [], Interrupt()
    dog = Watchdog(lambda: Snapshot(2, 0, 0, 100.0), 3.0, given_up.append, clock=clock,
                   interrupt=interrupt)
    assert dog.check() is None and not dog.stopped()
    interrupt.set("a neighbour on the engine's cores")
    interrupt.set("a later reason")  # the first one holds
    assert dog.check() is None  # no stall: an interruption
    assert dog.stopped() and dog.interrupted == "a neighbour on the engine's cores"
    assert given_up == [None]
    clock.now = 200.0  # silent long enough to stall: it is stopped already
    assert dog.check() is None and given_up == [None], "given up once"
    assert abort_reason(3.0, interrupted=True) == INTERRUPTED
    assert abort_reason(3.0).startswith("stopped by the stall watchdog")


def test_status_codes_and_counts_by_kind():
    assert [kind_of_status(s) for s in (429, 503, 400, 404, 422, 500, 502)] == [
        "overloaded", "overloaded", "bad_request", "bad_request", "bad_request", "server_error",
        "server_error"]
    failed = [record(1.0), record(1.0), record(1.0), record(1.0, 2.0)]
    failed[0].error, failed[0].error_kind = "HTTP 429: busy", "overloaded"
    failed[1].error, failed[1].error_kind = "stream ended without data: [DONE]", "no_done"
    failed[2].error, failed[2].error_kind = "HTTP 503: busy", "overloaded"
    counts = count_kinds(failed)  # the last one streamed and did not fail
    assert counts == {"overloaded": 2, "no_done": 1}
    assert describe_counts(counts) == "2 overloaded, 1 no_done"
