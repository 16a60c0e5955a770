"""Reading streamed HTTP/1.1 responses off many sockets: the C reader, or the same in Python.

A reader watches the client's connected sockets and, for each, undoes the response's framing
into one body buffer, with the end offset and the arrival time of every read that added to it.
The connection (http1.py) hears from it once per response head, end and close, and every
FLUSH_READS reads or FLUSH_S seconds of a stream, when it takes the body gathered so far
(`take`) and hands it to the SSE decoder in one piece. So the per-read work never runs Python:

- `CReader` (`_reader.c` beside this file, built at install): one event-loop wake reads every ready
  socket in C (epoll, one recvmsg each, the kernel's receive time, the chunked framing).
- `PyReader`: the same contract in Python, one loop callback per read and httptools' parser. It
  runs where the C reader is not built (no compiler at install, no epoll) or when
  $LLMPERF_NO_EXTENSIONS is set, as aiohttp's AIOHTTP_NO_EXTENSIONS does; the tests run both.
  `ResponseParser`, its per-connection half, also reads TLS connections (bytes the loop decrypts).

Callbacks a connection provides: `_on_headers(status, keep_alive)`, `_on_body_pending()`,
`_on_complete()`, `_on_closed(err)` (0: the server closed; an errno or an exception: it failed)
and `_on_malformed(reason)`.

Why batch: measured on the mock server, a 2-core VM, 512 streams, the C reads gathered in bulk
cost 6.4-7.2 us of client CPU per chunk against 18.2-18.6 us for a Python callback per read
(docs/client.md).
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import httptools

__all__ = ["FLUSH_READS", "FLUSH_S", "TIMESPEC_SPACE", "PyReader", "ResponseParser", "kernel_stamp",
           "kernel_stamps_on", "open_reader", "reader_kind"]

# A stream's body goes to its decoder at least every FLUSH_READS reads and, once it has waited
# FLUSH_S, with the next read: the progress line and the stall watchdog see tokens at most this
# late, and a long answer never piles up in memory.
FLUSH_READS = 32
FLUSH_S = 0.25
READ_BYTES = 16 * 1024  # under malloc's mmap threshold: a bigger buffer costs an mmap per read
# Linux's SO_TIMESTAMPNS (asm-generic/socket.h; the same on x86, arm64 and ppc64le), which
# Python's socket module does not name. SCM_TIMESTAMPNS, the control message, has the same value.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
# recvmsg's room for SO_TIMESTAMPNS's control message: a struct timespec, two 64-bit fields
TIMESPEC_SPACE = socket.CMSG_SPACE(16)
_unpack_timespec = struct.Struct("=qq").unpack_from

try:
    from pytest_llmperf.client import _reader
except ImportError:  # not built: no compiler at install time, or not Linux
    _reader = None


def reader_kind() -> str:
    """Which reader the client uses here: 'C' or 'Python'."""
    return "C" if _use_c() else "Python"


def _use_c() -> bool:
    return _reader is not None and not os.environ.get("LLMPERF_NO_EXTENSIONS")


def open_reader(loop: asyncio.AbstractEventLoop, clock: Callable[[], float]) -> Any:
    """The reader for one connection pool: C where built, else Python."""
    kernel_stamps_on()
    return CReader(loop, clock) if _use_c() else PyReader(loop, clock)


def kernel_stamp(clock_now: float, ancillary: list) -> float:
    """A reading of the client's clock for bytes the kernel received at the SCM_TIMESTAMPNS
    time in `ancillary` (CLOCK_REALTIME): `clock_now`, taken just now, minus the bytes' age.
    Without a kernel time the stamp is `clock_now`. The age, not the kernel time itself, crosses
    clocks, so a step of the wall clock shifts a stamp by at most that read's age."""
    if not ancillary:
        return clock_now
    seconds, nanoseconds = _unpack_timespec(ancillary[0][2])
    age_ns = time.time_ns() - seconds * 1_000_000_000 - nanoseconds
    return clock_now - age_ns * 1e-9 if age_ns > 0 else clock_now


_kernel_stamps: bool | None = None  # per process: None until kernel_stamps_on() has asked
_stamp_holder: socket.socket | None = None


def kernel_stamps_on(timeout_s: float = 2.0) -> bool:
    """Make sure the kernel stamps TCP bytes when they arrive, from now to the process's end;
    False if it never does. The first call may wait a few ms; later ones return at once.

    Linux stamps received packets only while some socket has asked for it (SO_TIMESTAMPNS), and
    when the first one asks, it turns stamping on later, from a work queue (net_enable_timestamp,
    net/core/dev.c); when the last such socket closes, it turns it off again. So a client's first
    connections, or a server that at once takes requests, would have their first reads stamped
    when read. Here one UDP socket that asks is kept open for the process's life, and a probe
    over loopback waits until a read's stamp is older than the read."""
    global _kernel_stamps, _stamp_holder
    if _kernel_stamps is None:
        _stamp_holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        _stamp_holder.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        _kernel_stamps = _stamped_on_arrival(timeout_s)
    return _kernel_stamps


def _stamped_on_arrival(timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        with socket.create_connection(listener.getsockname()) as sender:
            receiver, _ = listener.accept()
            with receiver:
                while True:
                    sender.sendall(b"x")
                    time.sleep(0.002)
                    _, ancillary, _, _ = receiver.recvmsg(64, TIMESPEC_SPACE)
                    now = time.perf_counter()
                    if now - kernel_stamp(now, ancillary) > 0.001:  # its age: stamped on arrival
                        return True
                    if time.monotonic() > deadline:
                        return False


class CReader:
    """The C reader on an event loop: the loop watches its epoll fd and drains it when ready."""

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Callable[[], float], *,
                 flush_reads: int = FLUSH_READS, flush_s: float = FLUSH_S) -> None:
        self._loop = loop
        self._clock = clock
        self._reader = _reader.Reader(flush_reads, flush_s)
        self.expect = self._reader.expect
        self.take = self._reader.take
        self.discard = self._reader.discard
        self._fd = self._reader.fileno()
        loop.add_reader(self._fd, self._drain)

    def add(self, sock: socket.socket, conn: Any) -> None:
        self._reader.add(sock.fileno(), conn)

    def _drain(self) -> None:
        self._reader.drain(self._clock())

    poll = _drain  # read what is ready now, between other work (http1.ConnectionPool.post)

    def close(self) -> None:
        self._loop.remove_reader(self._fd)


class PyReader:
    """The reader's contract in Python: one loop callback and one `recvmsg` per read."""

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Callable[[], float], *,
                 flush_reads: int = FLUSH_READS, flush_s: float = FLUSH_S) -> None:
        self._loop = loop
        self._clock = clock
        self._flush = (flush_reads, flush_s)
        self._parsers: dict[int, ResponseParser] = {}

    def add(self, sock: socket.socket, conn: Any) -> None:
        fd = sock.fileno()
        if fd in self._parsers:
            raise ValueError(f"fd {fd} is already watched")
        parser = self._parsers[fd] = ResponseParser(conn, *self._flush)
        self._loop.add_reader(fd, self._readable, sock.recvmsg, parser)

    def expect(self, fd: int, now: float) -> None:
        self._parsers[fd].expect(now)

    def take(self, fd: int) -> tuple[bytes, list[int], list[float]]:
        return self._parsers[fd].take()

    def discard(self, fd: int) -> None:
        if self._parsers.pop(fd, None) is not None:
            self._loop.remove_reader(fd)

    def poll(self) -> None:
        """Nothing: the loop calls this reader once per read anyway."""

    def close(self) -> None:
        for fd in list(self._parsers):
            self.discard(fd)

    def _readable(self, recvmsg: Callable, parser: ResponseParser) -> None:
        try:
            data, ancillary, _, _ = recvmsg(READ_BYTES, TIMESPEC_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            parser.closed(exc.errno or -1)
            return
        if not data:
            parser.closed(0)
            return
        parser.feed(data, kernel_stamp(self._clock(), ancillary))


class ResponseParser:
    """One connection's responses, read by httptools: the Python twin of a C reader's stream."""

    def __init__(self, conn: Any, flush_reads: int = FLUSH_READS,
                 flush_s: float = FLUSH_S) -> None:
        self._conn = conn
        self._flush_reads = flush_reads
        self._flush_s = flush_s
        self._parser: httptools.HttpResponseParser | None = None  # None: no request outstanding
        self._framed = False  # the response has a Content-Length or chunked encoding
        self._headers_seen = False
        self._complete = False
        self._flushed_at = 0.0
        self._body: list[bytes] = []
        self._size = 0
        self._ends: list[int] = []
        self._stamps: list[float] = []

    def expect(self, now: float) -> None:
        """A request went out: what comes next is its response."""
        self._parser = httptools.HttpResponseParser(self)
        self._framed = self._headers_seen = self._complete = False
        self._flushed_at = now
        self._body, self._size, self._ends, self._stamps = [], 0, [], []

    def take(self) -> tuple[bytes, list[int], list[float]]:
        body, ends, stamps = b"".join(self._body), self._ends, self._stamps
        self._body, self._size, self._ends, self._stamps = [], 0, [], []
        return body, ends, stamps

    def feed(self, data: bytes, stamp: float) -> None:
        """Bytes of one read, with its time."""
        if self._parser is None:
            self._conn._on_malformed("bytes from the server with no request outstanding")
            return
        size = self._size
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._parser = None
            self._conn._on_malformed(str(exc))
            return
        if self._size > size:
            self._ends.append(self._size)
            self._stamps.append(stamp)
        if self._complete:
            self._parser = None
            self._conn._on_complete()
        elif self._stamps and (len(self._stamps) >= self._flush_reads
                               or stamp - self._flushed_at >= self._flush_s):
            self._flushed_at = stamp
            self._conn._on_body_pending()

    def closed(self, err: int | BaseException) -> None:
        """The server closed the connection (err 0) or it failed."""
        if not err and self._parser is not None and self._headers_seen and not self._framed:
            self._parser = None
            self._conn._on_complete()  # a body without length or chunks ends at the close
        self._parser = None
        self._conn._on_closed(err)

    # -- httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length" or (name == b"transfer-encoding"
                                          and b"chunked" in value.lower()):
            self._framed = True

    def on_headers_complete(self) -> None:
        self._headers_seen = True
        self._conn._on_headers(self._parser.get_status_code(), self._parser.should_keep_alive())

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._size += len(body)

    def on_message_complete(self) -> None:
        self._complete = True
