"""A lean HTTP/1.1 client for streamed POSTs: non-blocking sockets, httptools' parser, keep-alive.

Why not httpx or aiohttp: at hundreds of concurrent streams their per-chunk Python (stream
readers, async iterators, line splitting, header objects) was most of the client's CPU, and a
client that runs out of CPU reports the engine slower than it is. Here a read costs one
`recvmsg`, one call into llhttp (httptools, the parser uvicorn uses; it also undoes chunked
encoding) and one call of the body sink.

Every read is stamped with the time the kernel received its bytes (SO_TIMESTAMPNS), not the time
the event loop got round to reading them. A client with 1,000 streams wakes with hundreds of
sockets ready at once; stamped in the loop, the last of them would carry the time spent on all the
others (measured: TTFT p50 7 ms above the truth at 512 streams on one core). The kernel's stamp
is CLOCK_REALTIME; `kernel_stamp` moves it onto the client's clock by the packet's age, so a step of
the wall clock between two reads cannot shift a stamp by more than that read's age. Over TLS the
bytes the kernel received are not the bytes parsed, so https connections stamp in the loop.

Control calls (health, /metrics) keep using httpx: they are few and need none of this.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import httptools

__all__ = ["Aborted", "BodySink", "ConnectionPool", "StreamClosed"]

# body bytes, the time they were read -> None
BodySink = Callable[[bytes, float], None]

READ_BYTES = 16 * 1024  # under malloc's mmap threshold: a bigger buffer costs an mmap per read
# Linux's SO_TIMESTAMPNS (asm-generic/socket.h; the same on x86, arm64 and ppc64le), which
# Python's socket module does not name. SCM_TIMESTAMPNS, the control message, has the same value.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = socket.CMSG_SPACE(16)  # struct timespec: two 64-bit fields


class StreamClosed(ConnectionError):
    """The server closed the connection before the response ended."""


class Aborted(Exception):
    """The pool's requests were ended from outside (the stall watchdog gave up on the server).
    Not a StreamClosed: an aborted request is never sent again."""


class _Exchange:
    """One request and its response on a connection."""

    __slots__ = ("sink", "status", "error_body", "done")

    def __init__(self, sink: BodySink, done: asyncio.Future) -> None:
        self.sink = sink
        self.status = 0
        self.error_body = bytearray()
        self.done = done

    def keep_error(self, body: bytes, now: float) -> None:
        self.error_body += body


def kernel_stamp(clock_now: float, ancillary: list) -> float:
    """A reading of the client's clock for bytes the kernel received at the SCM_TIMESTAMPNS
    time in `ancillary` (CLOCK_REALTIME): `clock_now`, taken just now, minus the bytes' age.
    Without a kernel time the stamp is `clock_now`."""
    if not ancillary:
        return clock_now
    seconds, nanoseconds = _unpack_timespec(ancillary[0][2])
    age_ns = time.time_ns() - seconds * 1_000_000_000 - nanoseconds
    return clock_now - age_ns * 1e-9 if age_ns > 0 else clock_now


_unpack_timespec = struct.Struct("=qq").unpack_from


class _Connection:
    """One keep-alive connection. Subclasses say how bytes come in and go out."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._now = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._exchange: _Exchange | None = None
        self._sink: BodySink | None = None
        self._framed = False  # the response has a Content-Length or chunked encoding
        self.reusable = False
        self.closed = False

    # -- what a subclass provides
    def write(self, raw: bytes) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    # -- bytes in, stamped with the time `now` they arrived
    def feed(self, data: bytes, now: float) -> None:
        self._now = now
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(StreamClosed(f"malformed HTTP response: {exc}"))
            self.abort()

    def lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self.closed = True
        if exc is None and self._exchange is not None and self._exchange.status \
                and not self._framed:
            self.on_message_complete()  # a body without length or chunks ends at the close
            return
        self._fail(StreamClosed("the server closed the connection before the response ended"
                                + (f" ({exc})" if exc else "")))

    # -- httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length" or (name == b"transfer-encoding"
                                          and b"chunked" in value.lower()):
            self._framed = True

    def on_headers_complete(self) -> None:
        exchange = self._exchange
        exchange.status = self._parser.get_status_code()
        self._sink = exchange.sink if exchange.status == 200 else exchange.keep_error

    def on_body(self, body: bytes) -> None:
        self._sink(body, self._now)

    def on_message_complete(self) -> None:
        exchange, self._exchange = self._exchange, None
        self.reusable = self._parser.should_keep_alive()
        if exchange is not None and not exchange.done.done():
            exchange.done.set_result(None)

    # -- used by the pool
    def start(self, raw: bytes, sink: BodySink) -> _Exchange:
        self.reusable = False
        self._exchange = _Exchange(sink, asyncio.get_running_loop().create_future())
        self._framed = False
        self.write(raw)
        return self._exchange

    def _fail(self, exc: Exception) -> None:
        exchange, self._exchange = self._exchange, None
        if exchange is not None and not exchange.done.done():
            exchange.done.set_exception(exc)


class _SocketConnection(_Connection):
    """Plain TCP: the loop says when the socket is readable and `recvmsg` takes the bytes with
    the kernel's receive time."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop,
                 clock: Callable[[], float]) -> None:
        super().__init__(clock)
        self._sock = sock
        self._loop = loop
        self._recvmsg = sock.recvmsg
        self._unsent = b""
        self._writing = False  # the loop calls _send when the socket can take more
        loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            data, ancillary, _, _ = self._recvmsg(READ_BYTES, _TIMESPEC)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._end(exc)
            return
        if not data:
            self._end(None)
            return
        self.feed(data, kernel_stamp(self._clock(), ancillary))

    def write(self, raw: bytes) -> None:
        # A request is small: the first send almost always takes all of it, and only what is
        # left waits for the socket to become writable.
        self._unsent = raw
        self._send()
        if self._unsent and not self.closed:
            self._loop.add_writer(self._sock.fileno(), self._send)
            self._writing = True

    def _send(self) -> None:
        try:
            sent = self._sock.send(self._unsent)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._end(exc)
            return
        self._unsent = self._unsent[sent:]
        if self._writing and not self._unsent:
            self._loop.remove_writer(self._sock.fileno())
            self._writing = False

    def _end(self, exc: Exception | None) -> None:
        """The socket failed (`exc`) or the server closed it (None)."""
        self._close()
        self.lost(exc)

    def abort(self) -> None:
        self._close()

    def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.reusable = False
        fd = self._sock.fileno()
        self._loop.remove_reader(fd)
        if self._writing:
            self._loop.remove_writer(fd)
        self._sock.close()


class _TlsConnection(_Connection, asyncio.Protocol):
    """TLS through asyncio's transport: the bytes are stamped when the loop decrypts them."""

    transport: asyncio.Transport

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.feed(data, self._clock())

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost(exc)

    def write(self, raw: bytes) -> None:
        self.transport.write(raw)

    def abort(self) -> None:
        self.closed = True
        self.transport.abort()


class ConnectionPool:
    """Keep-alive connections to one server, opened on demand and never capped: the load
    generator decides how many requests are in flight, never the pool."""

    def __init__(self, base_url: str, *, clock: Callable[[], float],
                 connect_timeout_s: float) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"endpoint URL must be http(s)://host[:port][/path], got {base_url!r}")
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.prefix = url.path.rstrip("/")
        self._ssl = ssl.create_default_context() if url.scheme == "https" else None
        self._host_header = url.netloc.encode()
        self._clock = clock
        self._connect_timeout_s = connect_timeout_s
        self._address: tuple | None = None  # resolved once, on the first connect
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._aborted: Aborted | None = None

    def request_bytes(self, path: str, body: bytes) -> bytes:
        head = (b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                b"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n"
                % ((self.prefix + path).encode(), self._host_header, len(body)))
        return head + body

    async def post(self, raw: bytes, sink: BodySink) -> tuple[int, bytes]:
        """Send a request made by `request_bytes`; the body of a 200 goes to `sink` as it
        arrives. Returns the status and, for any other status, the body."""
        retried = False
        while True:
            if self._aborted is not None:
                raise self._aborted
            connection, reused = await self._acquire(fresh=retried)
            try:
                if self._aborted is not None:  # given up on while this one connected
                    raise self._aborted
                exchange = connection.start(raw, sink)
                await exchange.done
            except StreamClosed:
                self._discard(connection)
                # A kept-alive connection the server closed while it sat idle (uvicorn closes
                # them after 5 s) fails before any answer: that request never reached the
                # server, so it goes once more on a new connection, as httpcore does.
                if reused and not exchange.status and not retried:
                    retried = True
                    continue
                raise
            except BaseException:
                self._discard(connection)  # mid-response: the connection cannot be reused
                raise
            self._release(connection)
            return exchange.status, bytes(exchange.error_body)

    async def _acquire(self, fresh: bool = False) -> tuple[_Connection, bool]:
        while self._idle and not fresh:
            connection = self._idle.pop()
            if not connection.closed:
                return connection, True
            self._open.discard(connection)
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                connection = await self._connect()
        except TimeoutError:
            raise ConnectionError(f"no connection to {self.host}:{self.port} within "
                                  f"{self._connect_timeout_s:g} s") from None
        self._open.add(connection)
        return connection, False

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        if self._ssl is not None:
            _, connection = await loop.create_connection(
                lambda: _TlsConnection(self._clock), self.host, self.port, ssl=self._ssl)
            return connection
        if self._address is None:
            family, kind, proto, _, address = (await loop.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM))[0]
            self._address = (family, kind, proto, address)
        family, kind, proto, address = self._address
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            await loop.sock_connect(sock, address)
        except BaseException:
            sock.close()
            raise
        return _SocketConnection(sock, loop, self._clock)

    def _discard(self, connection: _Connection) -> None:
        connection.abort()
        self._open.discard(connection)

    def _release(self, connection: _Connection) -> None:
        if connection.reusable and not connection.closed:
            self._idle.append(connection)
        else:
            self._discard(connection)

    def abort_all(self, reason: str) -> None:
        """End every request in flight with `Aborted(reason)`, and every later one at once: the
        caller has given up on this server. What a request received before is kept by its sink."""
        self._aborted = Aborted(reason)
        for connection in list(self._open):
            connection._fail(self._aborted)
            connection.abort()
        self._open.clear()
        self._idle.clear()

    def close(self) -> None:
        for connection in self._open:
            connection.abort()
        self._open.clear()
        self._idle.clear()
