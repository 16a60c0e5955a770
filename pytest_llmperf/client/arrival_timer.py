"""Waking at an open loop's arrival times to the microsecond, without spinning.

An event loop's timers are only as fine as its poll timeout: epoll takes whole milliseconds, so
`asyncio.sleep` wakes up to ~1 ms late. The load generator used to sleep until 1 ms before each
arrival and then spin on `asyncio.sleep(0)`. That kept arrivals on time, but the spin was a
busy event loop for up to a millisecond per request: at 400 requests/s, a good part of the
client's CPU went to waiting.

A Linux timerfd armed at the absolute CLOCK_MONOTONIC time of the next arrival becomes readable
at that time (hrtimer precision). The loop polls it like any socket, so it costs one syscall to
arm and one wake per arrival, and streaming reads run undisturbed meanwhile. `time.perf_counter`
is CLOCK_MONOTONIC on Linux (`time.get_clock_info`), so arrival times on the client's clock are
timer times as they stand. Where there is no timerfd, or the clock is another one (tests with a
fake clock), `ArrivalTimer.for_clock` returns None and the caller falls back to the spin.

Python 3.13 has `os.timerfd_create`; the project supports 3.11, so this goes through libc.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import math
import os
import sys
import time
from collections.abc import Callable

__all__ = ["ArrivalTimer"]

_CLOCK_MONOTONIC = 1
_TFD_TIMER_ABSTIME = 1
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = getattr(os, "O_CLOEXEC", 0o2000000)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _load_libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.timerfd_create.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.timerfd_settime.argtypes = [ctypes.c_int, ctypes.c_int,
                                         ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _load_libc()


def _monotonic_perf_counter() -> bool:
    return time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"


class ArrivalTimer:
    """One timerfd on the running loop, for one waiter at a time (the open loop's dispatcher)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        fd = _LIBC.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self._fd = fd
        self._loop = loop
        self._waiter: asyncio.Future[None] | None = None
        self._spec = _Itimerspec()
        loop.add_reader(fd, self._fired)

    @classmethod
    def for_clock(cls, clock: Callable[[], float]) -> "ArrivalTimer | None":
        """A timer for `clock`'s times on the running loop, or None where it cannot be one."""
        if _LIBC is None or clock is not time.perf_counter or not _monotonic_perf_counter():
            return None
        try:
            return cls(asyncio.get_running_loop())
        except (OSError, NotImplementedError):  # no fd limit left; a loop without add_reader
            return None

    async def sleep_until(self, target_s: float) -> None:
        """Return at `target_s` on the perf_counter clock (at once if that has passed)."""
        if target_s <= time.perf_counter():
            return
        self._arm(target_s)
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None
            self._arm(None)  # cancelled: nothing may fire for a waiter that is gone

    def close(self) -> None:
        self._loop.remove_reader(self._fd)
        os.close(self._fd)

    def _arm(self, target_s: float | None) -> None:
        value = self._spec.it_value
        if target_s is None:  # all zero disarms
            value.tv_sec, value.tv_nsec = 0, 0
        else:
            fraction, whole = math.modf(target_s)
            value.tv_sec, value.tv_nsec = int(whole), int(fraction * 1e9)
        if _LIBC.timerfd_settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(self._spec), None):
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    def _fired(self) -> None:
        try:
            os.read(self._fd, 8)  # the expiry count; reading it makes the fd unreadable again
        except BlockingIOError:
            return
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
