"""A lean HTTP/1.1 client for streamed POSTs: asyncio protocol, httptools' parser, keep-alive pool.

Why not httpx or aiohttp: at hundreds of concurrent streams their per-chunk Python (stream
readers, async iterators, line splitting, header objects) was most of the client's CPU, and a
client that runs out of CPU reports the engine slower than it is. Here a read costs one clock call,
one call into llhttp (httptools, the parser uvicorn uses; it also undoes chunked encoding) and one
call of the body sink. The clock is read in `data_received`, before any parsing, so the bytes are
stamped when they come off the socket.

Control calls (health, /metrics) keep using httpx: they are few and need none of this.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from urllib.parse import urlsplit

import httptools

__all__ = ["BodySink", "ConnectionPool", "StreamClosed"]

# body bytes, the time they were read -> None
BodySink = Callable[[bytes, float], None]


class StreamClosed(ConnectionError):
    """The server closed the connection before the response ended."""


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


class _Connection(asyncio.Protocol):
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._now = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._exchange: _Exchange | None = None
        self._sink: BodySink | None = None
        self._framed = False  # the response has a Content-Length or chunked encoding
        self.transport: asyncio.Transport | None = None
        self.reusable = False

    # -- asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._now = self._clock()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(StreamClosed(f"malformed HTTP response: {exc}"))
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
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
        if not exchange.done.done():
            exchange.done.set_result(None)

    # -- used by the pool
    def start(self, raw: bytes, sink: BodySink) -> _Exchange:
        self.reusable = False
        self._exchange = _Exchange(sink, asyncio.get_running_loop().create_future())
        self._framed = False
        self.transport.write(raw)
        return self._exchange

    def _fail(self, exc: Exception) -> None:
        exchange, self._exchange = self._exchange, None
        if exchange is not None and not exchange.done.done():
            exchange.done.set_exception(exc)


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
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()

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
            connection, reused = await self._acquire(fresh=retried)
            try:
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
            if not connection.transport.is_closing():
                return connection, True
            self._open.discard(connection)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self._clock), self.host, self.port, ssl=self._ssl)
        except TimeoutError:
            raise ConnectionError(f"no connection to {self.host}:{self.port} within "
                                  f"{self._connect_timeout_s:g} s") from None
        self._open.add(connection)
        return connection, False

    def _discard(self, connection: _Connection) -> None:
        connection.transport.abort()
        self._open.discard(connection)

    def _release(self, connection: _Connection) -> None:
        if connection.reusable and not connection.transport.is_closing():
            self._idle.append(connection)
        else:
            connection.transport.close()
            self._open.discard(connection)

    def close(self) -> None:
        for connection in self._open:
            connection.transport.close()
        self._open.clear()
        self._idle.clear()
