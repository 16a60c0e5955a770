"""The live progress line of a measurement: which test, requests done of total, tok/s so far,
elapsed. Fed by the watchdog's snapshots (progress.py), so it costs the client nothing more.

On a terminal the line goes below pytest's current line (the file's name and its dots), is
rewritten in place at most every TTY_EVERY_S, and is erased when the measurement ends, the cursor
going back to where pytest left it. In a CI log (no TTY) a rewritten line would be a new line per
update, so there it is one line every CI_EVERY_S at most, and none for a measurement shorter
than that.

The plugin says where to write for the test being run (`showing`); outside a test (the client
benchmark, a script) there is no line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from pytest_llmperf.client.progress import Snapshot

__all__ = ["Display", "ProgressLine", "for_measurement", "render", "showing"]

TTY_EVERY_S = 0.5
CI_EVERY_S = 10.0
WIDTH = 120  # the terminal summary's width (reports/terminal.py): the line never wraps


# ANSI (ECMA-48) controls, on a terminal only: erase to the end of the line, cursor up one line,
# cursor right N columns.
ERASE_LINE, UP, RIGHT = "\x1b[K", "\x1b[1A", "\x1b[{}C"


@dataclass(frozen=True)
class Display:
    test_id: str
    write: Callable[[str], None]  # writes text as is: no newline added
    tty: bool
    column: Callable[[], int] = lambda: 0  # where pytest's own line ends, to return to


_current: ContextVar[Display | None] = ContextVar("pytest_llmperf_progress", default=None)


@contextmanager
def showing(display: Display | None) -> Iterator[None]:
    """Measurements inside the block show their progress on `display` (None: nowhere)."""
    token = _current.set(display)
    try:
        yield
    finally:
        _current.reset(token)


def render(test_id: str, snapshot: Snapshot, total: int, elapsed_s: float,
           width: int = WIDTH) -> str:
    """`suites/test_cpu.py::test_x  120/400 requests  1,234 tok/s  12 s`, the test id cut at
    its start when the whole would not fit."""
    rate = snapshot.tokens / elapsed_s if elapsed_s > 0 else 0.0
    tail = f"  {snapshot.done}/{total} requests  {rate:,.0f} tok/s  {elapsed_s:.0f} s"
    room = width - len(tail)
    if len(test_id) > room:
        test_id = "..." + test_id[len(test_id) - room + 3:]
    return test_id + tail


class ProgressLine:
    """One measurement's line on one display."""

    def __init__(self, display: Display, total: int, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._display = display
        self._total = total
        self._clock = clock
        self._start_s = clock()
        self._shown_s = self._start_s  # the first line waits one interval too
        self._shown = ""

    def update(self, snapshot: Snapshot) -> None:
        now = self._clock()
        every = TTY_EVERY_S if self._display.tty else CI_EVERY_S
        if now - self._shown_s < every:
            return
        self._shown_s = now
        text = render(self._display.test_id, snapshot, self._total, now - self._start_s)
        if self._display.tty:
            self._display.write(("\r" if self._shown else "\n") + text + ERASE_LINE)
        else:  # a line of its own, not glued to pytest's dots
            fresh = not self._shown and self._display.column() > 0
            self._display.write(("\n" if fresh else "") + text + "\n")
        self._shown = text

    def close(self) -> None:
        """On a terminal: erase the line and put the cursor back at the end of pytest's line, so
        the test's result mark goes where it would have gone."""
        if self._display.tty and self._shown:
            column = self._display.column()
            self._display.write("\r" + ERASE_LINE + UP + (RIGHT.format(column) if column else ""))
            self._shown = ""


def for_measurement(total: int) -> ProgressLine | None:
    """The line for a measurement of `total` requests in the current test, if it has a display."""
    display = _current.get()
    return None if display is None else ProgressLine(display, total)
