"""Load generator against a fake `send`: schedules, caps, lag, cut-off and failures."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

import numpy as np
import pytest

from pytest_llmperf.client.loadgen import run_load
from pytest_llmperf.client.patterns import Concurrency, Ramp, Rate
from pytest_llmperf.records import Request, RequestRecord

# Timing bounds are loose on purpose: CI machines are small and noisy.
LAG_BOUND_S = 0.020


class FakeServer:
    """A send callable that stamps sent_s, tracks how many are in flight and sleeps a little."""

    def __init__(
        self, sleep_s: float | Callable[[int], float] = 0.002, fail: frozenset[int] = frozenset()
    ) -> None:
        self.sleep_s = sleep_s
        self.fail = fail
        self.in_flight = 0
        self.max_in_flight = 0
        self.cancelled = 0

    async def __call__(self, index: int, request: Request, scheduled_s: float) -> RequestRecord:
        sent_s = time.perf_counter()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.sleep_s(index) if callable(self.sleep_s) else self.sleep_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1
        if index in self.fail:
            raise ConnectionError(f"server dropped request {index}")
        now = time.perf_counter()
        return RequestRecord(
            index=index,
            expected_prompt_tokens=request.prompt_tokens,
            expected_output_tokens=request.output_tokens,
            scheduled_s=scheduled_s,
            sent_s=sent_s,
            chunk_times_s=[now],
            chunk_tokens=[request.output_tokens],
            done_s=now,
        )


def make_requests(n: int) -> list[Request]:
    return [Request(prompt=f"p{i}", prompt_tokens=4, output_tokens=1) for i in range(n)]


def run(requests, send, pattern, **kwargs) -> list[RequestRecord]:
    return asyncio.run(run_load(requests, send, pattern, **kwargs))


def lags_s(records: list[RequestRecord]) -> np.ndarray:
    return np.array([r.sent_s - r.scheduled_s for r in records])


# --- schedules (pure, no sleeping) ---------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern",
    [
        Rate(requests_per_s=10),
        Rate(requests_per_s=10, burstiness=0.5),
        Ramp(start_rps=1, end_rps=9, strategy="exponential"),
    ],
)
def test_same_seed_same_schedule_other_seed_differs(pattern):
    a = pattern.arrival_offsets(100, seed=7)
    assert np.array_equal(a, pattern.arrival_offsets(100, seed=7))
    assert not np.array_equal(a, pattern.arrival_offsets(100, seed=8))
    assert a[0] == 0.0 and np.all(np.diff(a) >= 0)


def test_poisson_mean_inter_arrival():
    gaps = np.diff(Rate(requests_per_s=20).arrival_offsets(2000, seed=1))
    # Standard error of the mean is 1/sqrt(1999) ~ 2.2 %; allow 10 %.
    assert gaps.mean() == pytest.approx(1 / 20, rel=0.10)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.10)


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_burstiness_sets_coefficient_of_variation(burstiness):
    gaps = np.diff(Rate(requests_per_s=5, burstiness=burstiness).arrival_offsets(20_000, seed=3))
    assert gaps.mean() == pytest.approx(1 / 5, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(burstiness), rel=0.10)


def test_infinite_burstiness_is_evenly_spaced_and_infinite_rate_is_all_at_once():
    assert np.allclose(Rate(requests_per_s=4, burstiness=math.inf).arrival_offsets(5, 0),
                       [0, 0.25, 0.5, 0.75, 1.0])
    assert np.array_equal(Rate(requests_per_s=math.inf).arrival_offsets(5, 0), np.zeros(5))


def test_concurrency_has_no_schedule():
    assert np.array_equal(Concurrency(max_concurrency=3).arrival_offsets(4, 0), np.zeros(4))
    assert Rate(requests_per_s=1).arrival_offsets(0, 0).shape == (0,)


@pytest.mark.parametrize(
    ("strategy", "midpoint_rps"), [("linear", 55.0), ("exponential", math.sqrt(10 * 100))]
)
def test_ramp_rates_at_start_middle_end(strategy, midpoint_rps):
    rates = Ramp(start_rps=10, end_rps=100, strategy=strategy).rates(101)
    assert rates[0] == pytest.approx(10) and rates[-1] == pytest.approx(100)
    assert rates[50] == pytest.approx(midpoint_rps)


@pytest.mark.parametrize("strategy", ["linear", "exponential"])
def test_ramp_offsets_follow_the_rate(strategy):
    n, segment = 10_000, 1000
    ramp = Ramp(start_rps=10, end_rps=100, strategy=strategy)
    gaps = np.diff(ramp.arrival_offsets(n, seed=5))
    expected = 1 / ramp.rates(n)[1:]
    # Observed mean gap over the first and last tenth matches the ramp's rate there (SE ~3 %).
    assert gaps[:segment].mean() == pytest.approx(expected[:segment].mean(), rel=0.12)
    assert gaps[-segment:].mean() == pytest.approx(expected[-segment:].mean(), rel=0.12)
    assert gaps[:segment].mean() > 5 * gaps[-segment:].mean()


# --- dispatch ------------------------------------------------------------------------------------


def test_concurrency_is_never_exceeded_and_slots_refill_at_once():
    server = FakeServer(sleep_s=0.003)
    records = run(make_requests(40), server, Concurrency(max_concurrency=4))
    assert [r.index for r in records] == list(range(40))
    assert server.max_in_flight == 4
    # Scheduled when the slot freed, so the lag is client overhead only.
    assert lags_s(records).max() < LAG_BOUND_S
    # Closed loop: the (4 + j)-th send follows the j-th completion at once.
    sent = np.sort([r.sent_s for r in records])
    done = np.sort([r.done_s for r in records])
    refill_s = sent[4:] - done[:-4]
    assert refill_s.min() >= 0 and refill_s.max() < LAG_BOUND_S


def test_rate_with_cap_holds_the_cap_and_shows_the_wait_as_lag():
    server = FakeServer(sleep_s=0.005)
    records = run(make_requests(12), server, Rate(requests_per_s=math.inf, max_concurrency=3))
    assert server.max_in_flight == 3
    assert len({r.scheduled_s for r in records}) == 1  # all arrived at the start
    lags = lags_s(records)
    # The last wave waited for three waves of 5 ms: the wait is visible, not hidden.
    assert lags[-1] >= 0.012
    assert lags[:3].max() < LAG_BOUND_S


def test_rate_sends_on_schedule_without_drift():
    requests = make_requests(50)
    records = run(requests, FakeServer(), Rate(requests_per_s=200), seed=11)
    offsets = Rate(requests_per_s=200).arrival_offsets(50, seed=11)
    scheduled = np.array([r.scheduled_s for r in records])
    assert np.allclose(scheduled - scheduled[0], offsets)
    lags = lags_s(records)
    assert lags.min() >= 0
    assert lags.max() < LAG_BOUND_S
    # Absolute targets, so lag does not accumulate (summed sleeps would drift ~1 ms per request).
    assert np.median(lags[-10:]) < np.median(lags[:10]) + LAG_BOUND_S / 2


def test_infinite_rate_sends_everything_at_once():
    server = FakeServer(sleep_s=0.02)
    records = run(make_requests(30), server, Rate(requests_per_s=math.inf))
    sent = [r.sent_s for r in records]
    assert server.max_in_flight == 30
    assert max(sent) - min(sent) < LAG_BOUND_S


def test_records_come_back_in_request_order():
    earlier_finish_last = FakeServer(sleep_s=lambda index: 0.001 * (10 - index))
    records = run(make_requests(10), earlier_finish_last, Rate(requests_per_s=math.inf))
    assert [r.index for r in records] == list(range(10))


def test_duration_cuts_an_open_loop_run():
    even_100_rps = Rate(requests_per_s=100, burstiness=math.inf)  # offsets 0, 10 ms, 20 ms ...
    records = run(make_requests(100), FakeServer(), even_100_rps, duration_s=0.095)
    assert [r.index for r in records] == list(range(10))
    assert [r.index for r in run(make_requests(5), FakeServer(), even_100_rps, duration_s=0)] == [0]


@pytest.mark.parametrize("pattern", [Concurrency(max_concurrency=2),
                                     Rate(requests_per_s=200, burstiness=math.inf),
                                     Rate(requests_per_s=200, burstiness=math.inf,
                                          max_concurrency=2)],
                         ids=["closed", "open", "capped"])
def test_nothing_is_sent_once_stopped(pattern):
    """The stall watchdog's stop: the records are those of the requests sent until then."""
    sent: list[int] = []

    async def send(index: int, request: Request, scheduled_s: float) -> RequestRecord:
        sent.append(index)
        return RequestRecord(index=index, expected_prompt_tokens=4, expected_output_tokens=1,
                             scheduled_s=scheduled_s)

    records = run(make_requests(10), send, pattern, stopped=lambda: len(sent) >= 3)
    assert [r.index for r in records] == sent == [0, 1, 2]


def test_a_failed_send_is_a_client_failure():
    records = run(make_requests(2), FakeServer(fail=frozenset({1})),
                  Concurrency(max_concurrency=1))
    assert [(r.error, r.error_kind) for r in records] == [
        (None, None), ("ConnectionError: server dropped request 1", "client")]


def test_duration_cuts_a_closed_loop_run():
    records = run(make_requests(200), FakeServer(sleep_s=0.01), Concurrency(max_concurrency=2),
                  duration_s=0.05)
    assert 4 <= len(records) < 40
    assert [r.index for r in records] == list(range(len(records)))  # a prefix, nothing skipped


@pytest.mark.parametrize(
    "pattern", [Concurrency(max_concurrency=2), Rate(requests_per_s=math.inf, max_concurrency=2)]
)
def test_a_raising_send_becomes_an_error_record(pattern):
    records = run(make_requests(6), FakeServer(fail=frozenset({3})), pattern)
    assert [r.index for r in records] == list(range(6))
    assert records[3].error == "ConnectionError: server dropped request 3"
    assert not records[3].ok and records[3].expected_prompt_tokens == 4
    assert all(r.ok for i, r in enumerate(records) if i != 3)


@pytest.mark.parametrize(
    "pattern",
    # Closed loop, and open loop cancelled while it sleeps before a third arrival at 100 ms.
    [Concurrency(max_concurrency=2), Rate(requests_per_s=20, burstiness=math.inf)],
)
def test_cancelling_the_run_cancels_requests_in_flight(pattern):
    server = FakeServer(sleep_s=10)

    async def main():
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(run_load(make_requests(5), server, pattern), timeout=0.075)
        await asyncio.sleep(0.01)  # checked before asyncio.run would cancel leftovers itself
        assert server.cancelled == 2 and server.in_flight == 0

    asyncio.run(main())


def test_no_requests_no_records():
    assert run([], FakeServer(), Rate(requests_per_s=5)) == []


# --- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Concurrency(max_concurrency=0),
         "Concurrency.max_concurrency must be an int >= 1, got 0"),
        (lambda: Concurrency(max_concurrency=2.5),
         "Concurrency.max_concurrency must be an int >= 1, got 2.5"),
        (lambda: Rate(requests_per_s=0),
         "Rate.requests_per_s must be a number > 0 (math.inf sends everything at once), got 0"),
        (lambda: Rate(requests_per_s=math.nan),
         "Rate.requests_per_s must be a number > 0 (math.inf sends everything at once), got nan"),
        (lambda: Rate(requests_per_s=1, burstiness=0),
         "Rate.burstiness must be a number > 0 (1.0 is Poisson, lower is burstier), got 0"),
        (lambda: Rate(requests_per_s=1, max_concurrency=0),
         "Rate.max_concurrency must be an int >= 1 or None for no cap, got 0"),
        (lambda: Ramp(start_rps=math.inf, end_rps=2),
         "Ramp.start_rps must be a finite number > 0, got inf"),
        (lambda: Ramp(start_rps=1, end_rps=-2),
         "Ramp.end_rps must be a finite number > 0, got -2"),
        (lambda: Ramp(start_rps=1, end_rps=2, strategy="log"),
         "Ramp.strategy must be 'linear' or 'exponential', got 'log'"),
        (lambda: Ramp(start_rps=1, end_rps=2, max_concurrency=True),
         "Ramp.max_concurrency must be an int >= 1 or None for no cap, got True"),
    ],
)
def test_validation_messages(build, message):
    with pytest.raises(ValueError) as excinfo:
        build()
    assert str(excinfo.value) == message


def test_duration_validation_message():
    with pytest.raises(ValueError) as excinfo:
        run(make_requests(1), FakeServer(), Rate(requests_per_s=1), duration_s=-1)
    assert str(excinfo.value) == "duration_s must be a number >= 0, or None for no limit, got -1"


def test_patterns_are_keyword_only_and_frozen():
    with pytest.raises(TypeError):
        Rate(5)
    with pytest.raises(AttributeError):
        Concurrency(max_concurrency=1).max_concurrency = 2
