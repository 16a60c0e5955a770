"""The stall watchdog: requests in flight and no chunk for `--llmperf-stall-timeout` seconds, and
the measurement stops instead of waiting out the client's 600 s per-request limit.

A stalled engine (a hung GPU, a deadlocked scheduler, a process stopped by a debugger or the
kernel) answers /health and keeps its sockets open, so only the silence on the streams shows it.
The watchdog reads the client's progress (progress.py) every WATCH_INTERVAL_S; on a stall it
calls `give_up` once (the client ends every request in flight as a `stalled` failure, the load
generator sends nothing more) and the measurement returns what it had measured.

It ends a measurement the same way when told to from another thread (`Interrupt`): a neighbour
on a CPU engine's cores has already made it DISTURBED (machine/neighbour_watch.py), and measuring
on would only take hours longer.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from pytest_llmperf.client.progress import Snapshot

__all__ = ["DEFAULT_STALL_TIMEOUT_S", "INTERRUPTED", "Interrupt", "Stall", "Watchdog",
           "abort_reason"]

# The longest silence a healthy GPU engine under load shows is one long prefill with nothing else
# streaming: a 128k-token prompt on Llama 3.1 8B is ~6.5e15 FLOPs (2 x parameters x tokens, plus
# causal attention), about 13 s on one H100 at half its 989 TFLOP/s dense BF16; with other
# requests in flight, vLLM's chunked prefill keeps their tokens coming meanwhile. 120 s is ~9x that,
# and still 5x sooner than the client's per-request limit (client.REQUEST_TIMEOUT_S, 600 s).
DEFAULT_STALL_TIMEOUT_S = 120.0
WATCH_INTERVAL_S = 0.5
# The error of each request an Interrupt ended; the test's line says what disturbed it.
INTERRUPTED = "stopped early: the measurement was already disturbed by a neighbour"


@dataclass(frozen=True)
class Stall:
    in_flight: int
    quiet_s: float  # since the last sign of life
    timeout_s: float

    def __str__(self) -> str:
        which = ("the 1 request" if self.in_flight == 1
                 else f"any of the {self.in_flight} requests")
        return (f"no chunk for {self.quiet_s:.1f} s on {which} in flight (stall timeout "
                f"{self.timeout_s:g} s, --llmperf-stall-timeout)")


def abort_reason(timeout_s: float, *, interrupted: bool = False) -> str:
    """The error of each request the watchdog ended (client worker processes write it too): a
    stall's, or INTERRUPTED where an Interrupt ended it."""
    if interrupted:
        return INTERRUPTED
    return f"stopped by the stall watchdog: no chunk on any request in flight for {timeout_s:g} s"


class Interrupt:
    """A reason to end a measurement, set from another thread; the first one set holds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reason: str | None = None

    def set(self, reason: str) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason


class Watchdog:
    """Watches one measurement's progress (`read`, a progress.Snapshot); `on_tick` sees every
    snapshot it takes (the progress line). `give_up(stall)` ends the measurement: with the
    Stall, or None where `interrupt` was set (its reason is then `interrupted`)."""

    def __init__(self, read: Callable[[], Snapshot], timeout_s: float,
                 give_up: Callable[[Stall | None], None], *,
                 clock: Callable[[], float] = time.perf_counter,
                 interval_s: float = WATCH_INTERVAL_S,
                 interrupt: Interrupt | None = None) -> None:
        self._read = read
        self.timeout_s = timeout_s
        self._give_up = give_up
        self._clock = clock
        self._interval_s = interval_s
        self._interrupt = interrupt
        self.stall: Stall | None = None
        self.interrupted: str | None = None
        self.on_tick: Callable[[Snapshot], None] | None = None

    def stopped(self) -> bool:
        return self.stall is not None or self.interrupted is not None

    def check(self) -> Stall | None:
        """One look: the stall, once there is one (give_up is called the first time only)."""
        if self.stopped():
            return self.stall
        if self._interrupt is not None and self._interrupt.reason is not None:
            self.interrupted = self._interrupt.reason
            self._give_up(None)
            return None
        snapshot = self._read()
        if self.on_tick is not None:
            self.on_tick(snapshot)
        quiet_s = self._clock() - snapshot.last_progress_s
        if snapshot.in_flight and quiet_s >= self.timeout_s:
            self.stall = Stall(snapshot.in_flight, quiet_s, self.timeout_s)
            self._give_up(self.stall)
        return self.stall

    async def _run(self) -> None:
        while not self.stopped():
            self.check()
            await asyncio.sleep(self._interval_s)

    @asynccontextmanager
    async def running(self) -> AsyncIterator["Watchdog"]:
        """Watch while the block runs."""
        task = asyncio.ensure_future(self._run())
        try:
            yield self
        finally:
            task.cancel()
