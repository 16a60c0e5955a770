"""A CPU engine's measurement stopped as soon as a neighbour has decided its verdict.

machine/watch.py judges a measurement once, from /proc before and after it. A process at nice 0
on a CPU engine's cores slows its steps 80-100 times (docs/engine-faults.md, "Disturbed
measurements"), so a measurement beside one runs for hours only to end DISTURBED. This watch
looks while it runs: once the rule of machine/disturbance.py holds over everything measured so
far (the first MIN_S at least) and still holds over the time since the watch last looked, it
calls `on_disturbed` with the reason, once; the client then ends the measurement
(client/watchdog.py) and the test fails DISTURBED with what was measured kept. The verdict is the
one the measurement had at that moment, reached sooner. A neighbour that has left by the next
look stops nothing: the whole measurement is judged at its end, as before.

Only the neighbour rule of a CPU engine stops a measurement: the hypervisor's steal and a GPU's
condition are judged at the end, as before.

The look is cheap until there is something to see: every SAMPLE_S, the machine's busy time
(/proc/stat's first line) against the CPU time of the session's processes (their /proc/[pid]/stat);
only where other processes used at least OTHER_CORES_LIMIT cores since the last look is every
process read (machine/neighbours.take_snapshot, a few milliseconds in which this thread holds the
interpreter's lock at times, and the client's event loop shares this process), and then at most
every FULL_EVERY_S (MIN_S at first).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pytest_llmperf.machine.disturbance import OTHER_CORES_LIMIT
from pytest_llmperf.machine.neighbours import (
    Snapshot,
    cpu_disturbance,
    read_cpu_line,
    read_proc,
    session_pids,
    take_snapshot,
)

__all__ = ["FULL_EVERY_S", "MIN_S", "SAMPLE_S", "NeighbourWatch", "stop_reason"]

SAMPLE_S = 1.0
# Where other load is on cores the engine does not use, the full look repeats this seldom.
FULL_EVERY_S = 5.0
# The least of a measurement judged before it is stopped: ten looks of the cheap kind, and ten
# times the shortest window a verdict is drawn from (neighbours.MIN_WINDOW_S).
MIN_S = 5.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def stop_reason(first: Snapshot, last: Snapshot, now: Snapshot, root: int, engine_root: int | None,
                min_s: float = MIN_S) -> str | None:
    """Why the measurement that began at `first` should stop at `now`, `last` being the watch's
    previous full look; None: it goes on. It stops where a neighbour on the CPU engine's cores
    already makes all of it DISTURBED and was still there since `last`."""
    elapsed_s = now.wall_s - first.wall_s
    if elapsed_s < min_s:
        return None
    so_far = cpu_disturbance(first, now, root, engine_root)
    lately = cpu_disturbance(last, now, root, engine_root) if last is not first else so_far
    if not (_on_engine(so_far) and _on_engine(lately)):
        return None
    return f"{so_far.reasons[0]}, over the first {elapsed_s:.0f} s of the measurement"


def _on_engine(found) -> bool:
    return (found is not None and bool(found.engine_cores)
            and found.on_engine_cores >= OTHER_CORES_LIMIT)


@dataclass
class _Cheap:
    wall_s: float
    busy_s: float  # every CPU's busy time
    session_s: float  # the session's processes' CPU time


class NeighbourWatch:
    """Looks every `sample_s` while a measurement runs (`running()`), from the snapshot taken
    before it (`first`); calls `on_disturbed(reason)` once if stop_reason says so."""

    def __init__(self, first: Snapshot, root: int, engine_root: int,
                 on_disturbed: Callable[[str], None], *, sample_s: float | None = None,
                 min_s: float | None = None,
                 snapshot: Callable[[], Snapshot | None] = take_snapshot) -> None:
        self.first = first
        self.root = root
        self.engine_root = engine_root
        self._on_disturbed = on_disturbed
        self._sample_s = SAMPLE_S if sample_s is None else sample_s
        self._min_s = MIN_S if min_s is None else min_s
        self._snapshot = snapshot
        self._session = session_pids(first, root)
        self._done = threading.Event()
        self.reason: str | None = None

    @contextmanager
    def running(self) -> Iterator[NeighbourWatch]:
        thread = threading.Thread(target=self._run, name="llmperf-neighbour-watch", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._done.set()
            thread.join()

    def _run(self) -> None:
        last, cheap = self.first, self._cheap()
        while self.reason is None and not self._done.wait(self._sample_s):
            now_cheap = self._cheap()
            busy = cheap is not None and now_cheap is not None and _others(cheap, now_cheap)
            cheap = now_cheap
            due = time.monotonic() - last.wall_s >= min(FULL_EVERY_S, self._min_s)
            if not (busy and due) or (now := self._snapshot()) is None:
                continue
            self._session |= session_pids(now, self.root)  # client workers started since
            self.reason = stop_reason(self.first, last, now, self.root, self.engine_root,
                                      self._min_s)
            last = now
            if self.reason is not None:
                self._on_disturbed(self.reason)

    def _cheap(self) -> _Cheap | None:
        """The machine's busy time and the session's processes' CPU time, now."""
        try:
            busy_ticks = read_cpu_line()[0]
        except (OSError, ValueError, IndexError):
            return None
        session_s = sum(proc.cpu_s for proc in map(read_proc, self._session) if proc is not None)
        return _Cheap(time.monotonic(), busy_ticks / _CLOCK_TICKS, session_s)


def _others(before: _Cheap, after: _Cheap) -> bool:
    """Did processes outside the session use at least OTHER_CORES_LIMIT cores between the two
    looks? (Over-counts a session process that ended between them: the full look decides.)"""
    wall_s = after.wall_s - before.wall_s
    if wall_s <= 0:
        return False
    others_s = (after.busy_s - before.busy_s) - (after.session_s - before.session_s)
    return others_s / wall_s >= OTHER_CORES_LIMIT

