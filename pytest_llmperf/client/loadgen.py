"""Load generator: when each request goes out, over a `send` coroutine it is given.

It knows nothing of HTTP or vLLM. The load pattern (patterns.py: any `Schedule`) says when each
request is due and how many may be in flight; this sends it then. Where we differ from `vllm
bench serve`, on purpose (the schedules' own differences are in patterns.py):
- with a concurrency cap, a request waiting for a slot keeps its arrival time as `scheduled_s`, so
  the wait shows up as `queue_s` instead of being hidden inside the latency
  (https://github.com/vllm-project/vllm/issues/54101).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Protocol

import numpy as np

from pytest_llmperf.client.arrival_timer import ArrivalTimer
from pytest_llmperf.errors import InputError
from pytest_llmperf.failures import CLIENT
from pytest_llmperf.numbers import is_real
from pytest_llmperf.records import Request, RequestRecord

__all__ = ["Schedule", "Send", "run_load"]

# send(index, request, scheduled_s) -> record. `scheduled_s` is the perf_counter time the request
# was meant to go; the callable stamps its own `sent_s`.
Send = Callable[[int, Request, float], Awaitable[RequestRecord]]


class Schedule(Protocol):
    """What the load generator asks of a load pattern (patterns.LoadPattern answers it)."""

    @property
    def open_loop(self) -> bool:
        """Requests go at their arrival offsets; else each goes when a slot frees."""

    @property
    def max_concurrency(self) -> int | None:
        """At most this many in flight; None for no cap."""

    def arrival_offsets(self, n: int, seed: int) -> np.ndarray:
        """n non-decreasing send offsets in seconds from the start; the first is 0."""

# asyncio.sleep wakes up to ~1 ms late (epoll timeouts are whole milliseconds). Where the open loop
# has no arrival timer (arrival_timer.py: Linux, the perf_counter clock), and for the one start of
# a closed loop, we sleep until this long before the time, then yield to the loop until it is due:
# a cooperative spin, which lets streaming reads run meanwhile and costs at most this much CPU.
WAKE_EARLY_S = 0.001


async def _safe_send(send: Send, index: int, request: Request, scheduled_s: float) -> RequestRecord:
    # One failing request must not lose the others' measurements: its error becomes its record.
    try:
        return await send(index, request, scheduled_s)
    except Exception as e:  # noqa: BLE001 - reported in the record, not swallowed
        return RequestRecord(
            index=index,
            expected_prompt_tokens=request.prompt_tokens,
            expected_output_tokens=request.output_tokens,
            scheduled_s=scheduled_s,
            error=f"{type(e).__name__}: {e}",
            error_kind=CLIENT,
        )


async def _closed_loop(
    requests: Sequence[Request],
    send: Send,
    max_concurrency: int,
    start_s: float,
    deadline_s: float,
    clock: Callable[[], float],
    take_next: Callable[[], int] | None,
    stopped: Callable[[], bool],
) -> list[RequestRecord | None]:
    records: list[RequestRecord | None] = [None] * len(requests)
    if take_next is None:
        take_next = itertools.count().__next__

    async def worker() -> None:
        # The first wave is due at the start; each later request is due the moment a slot frees,
        # so its queue lag is the client's own overhead.
        scheduled_s = start_s
        while scheduled_s <= deadline_s and not stopped() and (i := take_next()) < len(requests):
            records[i] = await _safe_send(send, i, requests[i], scheduled_s)
            scheduled_s = clock()

    await _sleep_until(start_s, clock)
    await _gather_all([worker() for _ in range(min(max_concurrency, len(requests)))])
    return records


async def _open_loop(
    requests: Sequence[Request],
    send: Send,
    offsets: np.ndarray,
    cap: int | None,
    start_s: float,
    deadline_s: float,
    clock: Callable[[], float],
    only: Sequence[int] | None,
    stopped: Callable[[], bool],
) -> list[RequestRecord | None]:
    records: list[RequestRecord | None] = [None] * len(requests)
    offsets = offsets.tolist()  # plain floats: numpy scalars are slow in the loop below
    slots = asyncio.Semaphore(cap) if cap is not None else None
    tasks: list[asyncio.Task[None]] = []

    async def one(i: int, scheduled_s: float) -> None:
        try:
            records[i] = await _safe_send(send, i, requests[i], scheduled_s)
        finally:
            if slots is not None:
                slots.release()

    timer = ArrivalTimer.for_clock(clock)
    sleep_until = timer.sleep_until if timer is not None else partial(_sleep_until, clock=clock)
    try:
        for i in range(len(requests)) if only is None else only:
            scheduled_s = start_s + offsets[i]
            if scheduled_s > deadline_s or stopped():
                break
            await sleep_until(scheduled_s)
            if slots is not None:
                # A late request keeps its arrival time as scheduled_s: the wait is visible lag.
                await slots.acquire()
            if stopped():  # while it slept or waited for a slot
                if slots is not None:
                    slots.release()
                break
            tasks.append(asyncio.create_task(one(i, scheduled_s)))
        await _gather_all(tasks)
    finally:
        _cancel_pending(tasks)
        if timer is not None:
            timer.close()
    return records


async def _sleep_until(target_s: float, clock: Callable[[], float]) -> None:
    # An absolute target read from the clock, never a sum of sleeps, so lag cannot accumulate.
    delay = target_s - clock() - WAKE_EARLY_S
    if delay > 0:
        await asyncio.sleep(delay)
    while clock() < target_s:
        await asyncio.sleep(0)


async def _gather_all(aws: Sequence[Awaitable[None]]) -> None:
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.gather(*tasks)
    finally:
        _cancel_pending(tasks)


def _cancel_pending(tasks: Sequence[asyncio.Future[None]]) -> None:
    # On cancellation (e.g. a test timeout) no request may keep running behind the caller's back.
    for task in tasks:
        if not task.done():
            task.cancel()


async def run_load(
    requests: Sequence[Request],
    send: Send,
    pattern: Schedule,
    *,
    seed: int = 0,
    duration_s: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    start_s: float | None = None,
    only: Sequence[int] | None = None,
    take_next: Callable[[], int] | None = None,
    stopped: Callable[[], bool] = lambda: False,
) -> list[RequestRecord]:
    """Send `requests` as `pattern` says; the records of those sent, in request order.

    With `duration_s`, nothing is scheduled later than start + duration_s; requests past that are
    not sent and not in the result. Once `stopped()` is true (the stall watchdog gave up on the
    server), nothing more is sent: the records are those of the requests sent until then.

    Several processes share one schedule (client workers) through the last three: `start_s`, the
    common start instant on the system-wide perf_counter clock; `only`, the indices of an open
    loop's arrivals this process sends (each keeps its offset in the whole schedule); `take_next`,
    a closed loop's shared counter, so a slot freed in any process takes the next request.
    """
    if duration_s is not None and not is_real(duration_s, 0):
        raise InputError(
            f"duration_s must be a number >= 0, or None for no limit, got {duration_s!r}"
        )
    offsets = pattern.arrival_offsets(len(requests), seed)
    start_s = clock() if start_s is None else start_s
    deadline_s = math.inf if duration_s is None else start_s + duration_s
    if not pattern.open_loop:
        records = await _closed_loop(
            requests, send, pattern.max_concurrency, start_s, deadline_s, clock, take_next,
            stopped)
    else:
        records = await _open_loop(
            requests, send, offsets, pattern.max_concurrency, start_s, deadline_s, clock, only,
            stopped)
    return [r for r in records if r is not None]
