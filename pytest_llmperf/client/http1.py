"""A lean HTTP/1.1 client for streamed POSTs: non-blocking sockets, keep-alive, reads in bulk.

Why not httpx or aiohttp: at hundreds of concurrent streams their per-chunk Python (stream
readers, async iterators, line splitting, header objects) was most of the client's CPU, and a
client that runs out of CPU reports the engine slower than it is. Here the reads themselves are
done by a reader (readers.py: in C where built), which stamps each read with the time the kernel
received its bytes (SO_TIMESTAMPNS), undoes the HTTP framing and gathers the body; a connection
hears from it once per response head and end, and every few dozen reads, when it passes the
gathered body with each read's end offset and time to the body sink (sse.py's decoder).

Stamped in the loop instead of by the kernel, the last of hundreds of sockets ready at once would
carry the time spent on all the others (measured: TTFT p50 7 ms above the truth at 512 streams on
one core). Over TLS the bytes the kernel received are not the bytes parsed, so https connections
stamp when the loop decrypts them.

Control calls (health, /metrics) keep using httpx: they are few and need none of this.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections import deque
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from pytest_llmperf.client.readers import SO_TIMESTAMPNS, ResponseParser, open_reader

__all__ = ["Aborted", "BodySink", "ConnectionPool", "StreamClosed"]

# (body bytes, the end offset in them of each read, each read's time) -> None; called with
# every part of a response's body, in order, the last before the response's end is reported.
BodySink = Callable[[bytes, list[int], list[float]], None]


# Exchanges whose queued body parts one loop callback decodes (about 30 us each, for a part of
# 25 events); then the loop polls its sockets again.
DELIVER_AT_ONCE = 16


class StreamClosed(ConnectionError):
    """The server closed the connection before the response ended."""


class Aborted(Exception):
    """The pool's requests were ended from outside (the stall watchdog gave up on the server,
    or the measurement was ended early). Not a StreamClosed: an aborted request is never sent
    again. `kind`: the failure kind its requests are counted under (failures.py)."""

    def __init__(self, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.kind = kind


class _Exchange:
    """One request and its response on a connection. The reader's callbacks only queue the body's
    parts here (`parts`); `deliver` hands them to the sink, outside the reader's drain (see
    ConnectionPool._queue), so no decoding ever holds up the reads of other sockets."""

    __slots__ = ("sink", "consumer", "status", "error_body", "done", "sent_s", "parts")

    def __init__(self, sink: BodySink, done: asyncio.Future, sent_s: float) -> None:
        self.sink = sink
        self.consumer: BodySink = sink  # the sink for a 200, keep_error for any other status
        self.sent_s = sent_s  # when the request was written to the socket
        self.status = 0
        self.error_body = bytearray()
        self.done = done
        self.parts: deque[tuple[bytes, list[int], list[float]]] = deque()

    def keep_error(self, body: bytes, ends: list[int], stamps: list[float]) -> None:
        self.error_body += body

    def deliver(self) -> None:
        """Hand the parts queued so far to the sink, in order."""
        parts, consumer = self.parts, self.consumer
        while parts:
            consumer(*parts.popleft())


class _Connection:
    """One keep-alive connection. Subclasses say how bytes come in and go out; the reader's
    callbacks (readers.py) end up here, and `queue` is told of every exchange with new parts."""

    def __init__(self, clock: Callable[[], float], queue: Callable[[_Exchange], None]) -> None:
        self._clock = clock
        self._queue = queue
        self._exchange: _Exchange | None = None
        self._keep_alive = False
        self.reusable = False
        self.closed = False

    # -- what a subclass provides
    def write(self, raw: bytes) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def _expect(self, now: float) -> None:
        """Get the reader ready for the response to the request about to go out."""
        raise NotImplementedError

    def _take(self) -> tuple[bytes, list[int], list[float]]:
        raise NotImplementedError

    # -- the reader's callbacks
    def _on_headers(self, status: int, keep_alive: bool) -> None:
        exchange = self._exchange
        if exchange is None:
            return
        exchange.status = status
        self._keep_alive = keep_alive
        if status != 200:
            exchange.consumer = exchange.keep_error

    def _on_body_pending(self) -> None:
        part = self._take()
        exchange = self._exchange
        if exchange is not None and part[0]:
            exchange.parts.append(part)
            self._queue(exchange)

    def _on_complete(self) -> None:
        self._on_body_pending()
        exchange, self._exchange = self._exchange, None
        self.reusable = self._keep_alive
        if exchange is not None and not exchange.done.done():
            exchange.done.set_result(None)

    def _on_closed(self, err: int | BaseException) -> None:
        if self._exchange is not None:
            self._on_body_pending()  # what came before the close is kept
        self.abort()
        exc = (None if not err else err if isinstance(err, BaseException)
               else OSError(err, os.strerror(err)))
        self._fail(StreamClosed("the server closed the connection before the response ended"
                                + (f" ({exc})" if exc else "")))

    def _on_malformed(self, reason: str) -> None:
        self._fail(StreamClosed(f"malformed HTTP response: {reason}"))
        self.abort()

    # -- used by the pool
    def start(self, raw: bytes, sink: BodySink) -> _Exchange:
        self.reusable = False
        now = self._clock()
        self._exchange = _Exchange(sink, asyncio.get_running_loop().create_future(), now)
        self._expect(now)
        self.write(raw)
        return self._exchange

    def _fail(self, exc: Exception) -> None:
        exchange, self._exchange = self._exchange, None
        if exchange is not None and not exchange.done.done():
            exchange.done.set_exception(exc)


class _SocketConnection(_Connection):
    """Plain TCP: the pool's reader reads the socket; writes go straight to it."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop, reader: Any,
                 clock: Callable[[], float], queue: Callable[[_Exchange], None]) -> None:
        super().__init__(clock, queue)
        self._sock = sock
        self._fd = sock.fileno()
        self._loop = loop
        self._reader = reader
        self._unsent = b""
        self._writing = False  # the loop calls _send when the socket can take more
        reader.add(sock, self)

    def _expect(self, now: float) -> None:
        self._reader.expect(self._fd, now)

    def _take(self) -> tuple[bytes, list[int], list[float]]:
        return self._reader.take(self._fd)

    def write(self, raw: bytes) -> None:
        # A request is small: the first send almost always takes all of it, and only what is
        # left waits for the socket to become writable.
        self._unsent = raw
        self._send()
        if self._unsent and not self.closed:
            self._loop.add_writer(self._fd, self._send)
            self._writing = True

    def _send(self) -> None:
        try:
            sent = self._sock.send(self._unsent)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._on_closed(exc)
            return
        self._unsent = self._unsent[sent:]
        if self._writing and not self._unsent:
            self._loop.remove_writer(self._fd)
            self._writing = False

    def abort(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.reusable = False
        self._reader.discard(self._fd)
        if self._writing:
            self._loop.remove_writer(self._fd)
        self._sock.close()


class _TlsConnection(_Connection, asyncio.Protocol):
    """TLS through asyncio's transport: the bytes are stamped when the loop decrypts them."""

    transport: asyncio.Transport

    def __init__(self, clock: Callable[[], float], queue: Callable[[_Exchange], None]) -> None:
        super().__init__(clock, queue)
        self._parser = ResponseParser(self)

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._parser.feed(data, self._clock())

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self._parser.closed(exc or 0)

    def _expect(self, now: float) -> None:
        self._parser.expect(now)

    def _take(self) -> tuple[bytes, list[int], list[float]]:
        return self._parser.take()

    def write(self, raw: bytes) -> None:
        self.transport.write(raw)

    def abort(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.reusable = False
        self.transport.abort()


class ConnectionPool:
    """Keep-alive connections to one server, opened on demand and never capped: the load
    generator decides how many requests are in flight, never the pool."""

    def __init__(self, base_url: str, *, clock: Callable[[], float],
                 connect_timeout_s: float, headers: bytes = b"",
                 ssl_context: ssl.SSLContext | None = None) -> None:
        """`headers`: more header lines for every request (access.Access.header_lines);
        `ssl_context`: the TLS trust for an https URL (default: the system's)."""
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"endpoint URL must be http(s)://host[:port][/path], got {base_url!r}")
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.prefix = url.path.rstrip("/")
        self._ssl = (ssl_context or ssl.create_default_context()) if url.scheme == "https" \
            else None
        self._host_header = url.netloc.rpartition("@")[2].encode()  # never a user:pass@
        self._headers = headers
        self._clock = clock
        self._connect_timeout_s = connect_timeout_s
        self._address: tuple | None = None  # resolved once, on the first connect
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._aborted: Aborted | None = None
        self._reader: Any = None  # readers.py's, made with the first plain-TCP connection
        self._undelivered: deque[_Exchange] = deque()  # exchanges with parts to decode
        self._delivering = False

    def request_bytes(self, path: str, body: bytes) -> bytes:
        head = (b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                b"Accept: text/event-stream\r\n%sContent-Length: %d\r\n\r\n"
                % ((self.prefix + path).encode(), self._host_header, self._headers, len(body)))
        return head + body

    async def post(self, raw: bytes, sink: BodySink) -> tuple[int, bytes, float]:
        """Send a request made by `request_bytes`; the body of a 200 goes to `sink` as it
        arrives. Returns the status, for any other status the body, and when the request was
        written: after any wait for a connection, so a new connection's set-up is not TTFT."""
        if self._reader is not None:
            # A burst of sends (a closed loop's wave: hundreds of requests end together and
            # hundreds go out) keeps the loop from polling sockets for tens of ms; reading the
            # ready ones between sends keeps every chunk in a read of its own.
            self._reader.poll()
        retried = False
        while True:
            if self._aborted is not None:
                raise self._aborted
            connection, reused = await self._acquire(fresh=retried)
            try:
                if self._aborted is not None:  # given up on while this one connected
                    raise self._aborted
                exchange = connection.start(raw, sink)
                try:
                    await exchange.done
                finally:
                    exchange.deliver()  # what came is kept, whatever ended the exchange
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
            return exchange.status, bytes(exchange.error_body), exchange.sent_s

    def _queue(self, exchange: _Exchange) -> None:
        """The reader queued parts of `exchange`'s body. They are decoded a few exchanges at a
        time, each few a callback of its own: the loop polls its sockets between two, and a
        thousand streams that reach their flush point in one wake do not stall the reads."""
        self._undelivered.append(exchange)
        if not self._delivering:
            self._delivering = True
            asyncio.get_running_loop().call_soon(self._deliver_some)

    def _deliver_some(self) -> None:
        undelivered = self._undelivered
        for _ in range(DELIVER_AT_ONCE):
            if not undelivered:
                break
            undelivered.popleft().deliver()
        if undelivered:
            asyncio.get_running_loop().call_soon(self._deliver_some)
        else:
            self._delivering = False

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
                lambda: _TlsConnection(self._clock, self._queue), self.host, self.port,
                ssl=self._ssl)
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
        if self._reader is None:
            self._reader = open_reader(loop, self._clock)
        return _SocketConnection(sock, loop, self._reader, self._clock, self._queue)

    def _discard(self, connection: _Connection) -> None:
        connection.abort()
        self._open.discard(connection)

    def _release(self, connection: _Connection) -> None:
        if connection.reusable and not connection.closed:
            self._idle.append(connection)
        else:
            self._discard(connection)

    def abort_all(self, reason: str, kind: str) -> None:
        """End every request in flight with `Aborted(reason, kind)`, and every later one at once:
        the caller has given up on this server. What a request received before is kept by its
        sink."""
        self._aborted = Aborted(reason, kind)
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
        if self._reader is not None:
            self._reader.close()
            self._reader = None
