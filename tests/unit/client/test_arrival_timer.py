"""The open loop's arrival timer: never early, at once for a past time, disarmed when cancelled,
and not used for a clock it cannot serve."""

import asyncio
import sys
import time

import pytest

from pytest_llmperf.client.arrival_timer import ArrivalTimer

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux's")


def test_it_never_wakes_before_the_target_and_serves_one_waiter_after_another():
    async def main() -> list[float]:
        timer = ArrivalTimer.for_clock(time.perf_counter)
        assert timer is not None
        early = []
        try:
            for gap_s in (0.0004, 0.0021, 0.0137):  # under, around and over epoll's 1 ms
                target = time.perf_counter() + gap_s
                await timer.sleep_until(target)
                early.append(target - time.perf_counter())
        finally:
            timer.close()
        return early

    assert all(seconds <= 0 for seconds in asyncio.run(main()))


def test_a_past_target_returns_at_once_without_waiting_for_the_loop():
    async def main() -> None:
        timer = ArrivalTimer.for_clock(time.perf_counter)
        try:
            await asyncio.wait_for(timer.sleep_until(time.perf_counter() - 1.0), timeout=0.5)
        finally:
            timer.close()

    asyncio.run(main())


def test_an_expiry_of_a_cancelled_wait_does_not_wake_the_next_one():
    async def main() -> float:
        timer = ArrivalTimer.for_clock(time.perf_counter)
        try:
            waiting = asyncio.ensure_future(timer.sleep_until(time.perf_counter() + 0.002))
            await asyncio.sleep(0)  # armed
            time.sleep(0.005)  # it expires while the loop is busy: the fd is readable, unread
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            began = time.perf_counter()
            await timer.sleep_until(began + 0.02)
            return time.perf_counter() - began
        finally:
            timer.close()

    assert asyncio.run(main()) >= 0.02


def test_a_clock_other_than_perf_counter_gets_no_timer():
    async def main() -> object:
        return ArrivalTimer.for_clock(time.monotonic_ns)

    assert asyncio.run(main()) is None
