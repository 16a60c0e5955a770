"""An OpenAI-compatible streaming server whose timing is known: the truth a client is checked on.

Every stream gets one chunk every `interval_s` (one token each, with its token id, as vLLM sends
with `return_token_ids`), then a usage chunk and `data: [DONE]`; `/v1/completions` and
`/v1/chat/completions` (role chunk first, as vLLM) both work. The first chunk goes on the next
tick of a `tick_s` clock, so the true TTFT is at most one tick.

The server must never be what a benchmark measures, so it is built for throughput: plain
non-blocking sockets with httptools' request parser, chunk bytes rendered once per stream, and a
timing wheel that writes every chunk due on a tick in one pass. A request arrives when the kernel
received it (SO_TIMESTAMPNS), so the true TTFT includes any time it waited for this process. It
stamps each tick with the clock when it actually ran, so it reports the truth as it happened (true
TTFT/TPOT per stream and its own tick lateness), not as it was planned. `GET /mock/stats`
returns that truth; `POST /mock/reset` clears it.

It can also fail on purpose, for the client's fault tests: `POST /mock/faults` with a JSON list
sets what each of the next streamed requests gets, in arrival order (null: a normal stream; see
FAULTS for the rest).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

import httptools
import numpy as np

from pytest_llmperf.readers import SO_TIMESTAMPNS, TIMESPEC_SPACE, kernel_stamp, kernel_stamps_on

__all__ = ["MockServer", "serve"]

TICK_S = 0.001
COMPLETIONS, CHAT = b"/v1/completions", b"/v1/chat/completions"
SSE_HEADERS = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
               b"transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n")
END_OF_BODY = b"0\r\n\r\n"
# What a faulty request gets: an HTTP status instead of a stream, or a stream that goes wrong
# after FAULT_TOKENS tokens.
STATUS_FAULTS = {"429": 429, "503": 503, "400": 400, "500": 500}
STREAM_FAULTS = ("error-mid-stream", "no-usage", "no-done", "cut", "stall")
FAULTS = (*STATUS_FAULTS, *STREAM_FAULTS)
FAULT_TOKENS = 2
# An OpenAI-style error: the body of an error status, and the event that ends a broken stream.
_STREAM_ERROR = {"error": {"message": "mock fault mid-stream", "type": "InternalServerError",
                           "code": 500}}


def _error_body(status: int) -> bytes:
    return json.dumps({"error": {"message": f"mock fault {status}", "type": "MockError",
                                 "code": status}}).encode()


def _frame(event: dict[str, Any] | str) -> bytes:
    """One SSE event as one HTTP chunk, the way uvicorn sends vLLM's stream."""
    data = event if isinstance(event, str) else json.dumps(event, separators=(",", ":"))
    payload = f"data: {data}\n\n".encode()
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _response(status: int, body: bytes, content_type: bytes = b"application/json") -> bytes:
    reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 429: b"Too Many Requests",
              500: b"Internal Server Error", 503: b"Service Unavailable"}.get(status, b"Error")
    return (b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s"
            % (status, reason, content_type, len(body), body))


@dataclass
class _Stream:
    conn: _Connection
    token_frame: bytes
    tail: bytes  # usage chunk, [DONE] and the end of the chunked body
    tokens: int
    arrived_s: float
    remaining: int = 0
    first_s: float = 0.0
    cut: bool = False  # close the connection after the last token (a fault)


@dataclass
class _Truth:
    """What the server actually did, per finished stream and per tick."""

    ttft_s: list[float] = field(default_factory=list)
    tpot_s: list[float] = field(default_factory=list)
    tick_late_s: list[float] = field(default_factory=list)
    chunks: int = 0
    first_chunk_s: float | None = None
    last_chunk_s: float | None = None

    def summary(self, interval_s: float) -> dict[str, Any]:
        def pct(values: list[float], q: float) -> float | None:
            return float(np.percentile(values, q)) if values else None

        span = (self.last_chunk_s or 0.0) - (self.first_chunk_s or 0.0)
        return {
            "interval_s": interval_s, "streams": len(self.ttft_s), "chunks": self.chunks,
            "chunks_per_s": self.chunks / span if span > 0 else 0.0,
            "ttft_s_p50": pct(self.ttft_s, 50), "tpot_s_p50": pct(self.tpot_s, 50),
            "tick_late_s_p50": pct(self.tick_late_s, 50),
            "tick_late_s_p99": pct(self.tick_late_s, 99),
        }


class MockServer:
    """The timing wheel and the streams on it; one per event loop."""

    def __init__(self, interval_s: float, tick_s: float = TICK_S, chunk_counter=None) -> None:
        if not interval_s >= tick_s > 0:
            raise ValueError(f"interval_s ({interval_s}) must be >= tick_s ({tick_s}) > 0")
        self.interval_s, self.tick_s = interval_s, tick_s
        self.period = max(1, round(interval_s / tick_s))  # ticks between two chunks of a stream
        self.truth = _Truth()
        self.counter = chunk_counter  # a multiprocessing.Value a benchmark's sampler reads, or None
        self._wheel: dict[int, list[_Stream]] = defaultdict(list)
        self._tick = 0
        self._origin = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ids = 0
        self.faults: deque[str | None] = deque()  # what the next streamed requests get

    def set_faults(self, faults: list[str | None]) -> None:
        unknown = [f for f in faults if f is not None and f not in FAULTS]
        if unknown:
            raise ValueError(f"unknown mock faults {unknown}; known: {', '.join(FAULTS)}")
        self.faults = deque(faults)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._origin = time.perf_counter()
        loop.call_at(loop.time() + self.tick_s, self._on_tick)

    def add(self, conn: _Connection, path: bytes, body: dict[str, Any],
            arrived_s: float) -> None:
        """A streamed request whose last byte the kernel received at `arrived_s`."""
        self._ids += 1
        fault = self.faults.popleft() if self.faults else None
        if fault in STATUS_FAULTS:
            status = STATUS_FAULTS[fault]
            conn.write(_response(status, _error_body(status)))
            return
        stream = _Stream(conn, *self._frames(path, body), arrived_s=arrived_s)
        stream.remaining = stream.tokens
        conn.write(SSE_HEADERS + (self._role_frame(body) if path == CHAT else b""))
        if fault == "stall":
            return  # headers, then silence: never on the wheel
        if fault is not None:
            stream.remaining = min(stream.tokens, FAULT_TOKENS)
            stream.tail, stream.cut = self._faulty_tail(fault, stream.tail)
        self._wheel[self._tick + 1].append(stream)

    @staticmethod
    def _faulty_tail(fault: str, tail: bytes) -> tuple[bytes, bool]:
        """What follows the last token of a faulty stream, and whether the connection closes."""
        done = _frame("[DONE]")
        usage_frame = tail[:tail.index(done)]  # the normal tail is usage, [DONE], end of body
        if fault == "error-mid-stream":
            return _frame(_STREAM_ERROR) + done + END_OF_BODY, False
        if fault == "no-usage":
            return done + END_OF_BODY, False
        if fault == "no-done":
            return usage_frame + END_OF_BODY, False
        return b"", True  # cut: the connection closes mid-stream

    def _frames(self, path: bytes, body: dict[str, Any]) -> tuple[bytes, bytes, int]:
        tokens = max(1, int(body.get("max_tokens") or 16))
        prompt = body.get("prompt")
        prompt_tokens = len(prompt) if isinstance(prompt, list) else 32
        base = {"id": f"cmpl-{self._ids}", "created": 1700000000, "model": body.get("model")}
        ids = {"token_ids": [1234]} if body.get("return_token_ids") else {}
        if path == CHAT:
            choice = {"index": 0, "delta": {"content": " tok"}, "logprobs": None,
                      "finish_reason": None, **ids}
            obj = "chat.completion.chunk"
        else:
            choice = {"index": 0, "text": " tok", "logprobs": None, "finish_reason": None,
                      "stop_reason": None, **ids}
            obj = "text_completion"
        token = _frame({**base, "object": obj, "choices": [choice]})
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens,
                 "total_tokens": prompt_tokens + tokens}
        tail = _frame({**base, "object": obj, "choices": [], "usage": usage})
        return token, tail + _frame("[DONE]") + END_OF_BODY, tokens

    def _role_frame(self, body: dict[str, Any]) -> bytes:
        choice = {"index": 0, "delta": {"role": "assistant", "content": ""}}
        return _frame({"id": f"cmpl-{self._ids}", "object": "chat.completion.chunk",
                       "model": body.get("model"), "choices": [choice]})

    def _on_tick(self) -> None:
        now = time.perf_counter()
        due = int((now - self._origin) / self.tick_s)
        # A late tick catches up on every tick it missed, stamped with the time it really wrote.
        written = 0
        while self._tick < due:
            self._tick += 1
            self.truth.tick_late_s.append(now - (self._origin + self._tick * self.tick_s))
            written += self._write_due(self._wheel.pop(self._tick, ()))
        if written:
            truth = self.truth
            truth.chunks += written
            truth.first_chunk_s = truth.first_chunk_s or now
            truth.last_chunk_s = now
            if self.counter is not None:
                self.counter.value += written
        next_at = self._origin + (self._tick + 1) * self.tick_s
        self._loop.call_at(self._loop.time() + max(0.0, next_at - time.perf_counter()),
                           self._on_tick)

    def _write_due(self, streams) -> int:
        later = self._wheel[self._tick + self.period]
        written = 0
        for stream in streams:
            if stream.conn.is_closing():
                continue
            stream.conn.write(stream.token_frame)
            written += 1
            stream.remaining -= 1
            if not stream.first_s:  # when it went out: a busy tick writes long after it began
                stream.first_s = time.perf_counter()
            if stream.remaining:
                later.append(stream)
                continue
            stream.conn.write(stream.tail)
            if stream.cut:
                stream.conn.close()
            self.truth.ttft_s.append(stream.first_s - stream.arrived_s)
            if stream.tokens > 1:
                self.truth.tpot_s.append((time.perf_counter() - stream.first_s)
                                         / (stream.tokens - 1))
        return written

    def stats(self) -> bytes:
        return json.dumps(self.truth.summary(self.interval_s)).encode()

    def reset(self) -> None:
        self.truth = _Truth()


class _Connection:
    """One client connection on a plain non-blocking socket: parse requests, answer control
    calls, hand streams to the wheel.

    It reads with recvmsg and SO_TIMESTAMPNS, as the client does, so a request's arrival is
    when the kernel received it, not when this process got round to reading it: in a closed
    loop's wave hundreds of requests land at once, and the time they wait here is part of the
    TTFT a client sees (stamped in the loop, the truth left out ~20 ms of it at 512 streams).
    Writes go straight to the socket; what it cannot take yet waits for it to be writable."""

    def __init__(self, server: MockServer, sock: socket.socket,
                 loop: asyncio.AbstractEventLoop, open_set: set[_Connection]) -> None:
        self.server = server
        self.open_set = open_set
        self.parser = httptools.HttpRequestParser(self)
        self.sock = sock
        self.loop = loop
        self.url = b""
        self.body: list[bytes] = []
        self.arrived_s = 0.0
        self._unsent = bytearray()
        self._closing = False
        self._closed = False
        open_set.add(self)
        loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(65536, TIMESPEC_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close_now()
            return
        self.arrived_s = kernel_stamp(time.perf_counter(), ancillary)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.write(_response(400, b'{"error":"malformed HTTP"}'))
            self.close()

    # -- what the wheel uses
    def write(self, data: bytes) -> None:
        if self._closed or self._closing:
            return
        if not self._unsent:
            try:
                sent = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self._close_now()
                return
            if sent == len(data):
                return
            data = data[sent:]
            self.loop.add_writer(self.sock.fileno(), self._writable)
        self._unsent += data

    def _writable(self) -> None:
        try:
            sent = self.sock.send(self._unsent)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close_now()
            return
        del self._unsent[:sent]
        if not self._unsent:
            self.loop.remove_writer(self.sock.fileno())
            if self._closing:
                self._close_now()

    def is_closing(self) -> bool:
        return self._closing or self._closed

    def close(self) -> None:
        """Close once what was written has gone out."""
        self._closing = True
        if not self._unsent:
            self._close_now()

    def _close_now(self) -> None:
        if self._closed:
            return
        self._closed = True
        fd = self.sock.fileno()
        self.loop.remove_reader(fd)
        if self._unsent:
            self.loop.remove_writer(fd)
        self.sock.close()
        self.open_set.discard(self)

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        url, raw = self.url.split(b"?")[0], b"".join(self.body)
        self.url, self.body = b"", []
        method = self.parser.get_method()
        if method == b"POST" and url in (COMPLETIONS, CHAT):
            self.server.add(self, url, json.loads(raw or b"{}"), self.arrived_s)
        elif url == b"/mock/stats":
            self.write(_response(200, self.server.stats()))
        elif url == b"/mock/faults":
            try:
                self.server.set_faults(json.loads(raw or b"[]"))
            except (ValueError, TypeError) as exc:
                self.write(_response(400, json.dumps({"error": str(exc)}).encode()))
            else:
                self.write(_response(200, b"{}"))
        elif url == b"/mock/reset":
            self.server.reset()
            self.write(_response(200, b"{}"))
        elif url in (b"/health", b"/ping"):
            self.write(_response(200, b""))
        elif url == b"/v1/models":
            self.write(_response(200, b'{"object":"list","data":[{"id":"mock"}]}'))
        elif url == b"/metrics":
            self.write(_response(200, b"", b"text/plain"))
        else:
            self.write(_response(404, b'{"error":"not found"}'))


async def _serve(server: MockServer, host: str, port: int, ready=None) -> None:
    loop = asyncio.get_running_loop()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # On the listener, so that a request that lands before its connection is accepted is
    # stamped too (accepted sockets inherit it).
    listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    if not kernel_stamps_on():
        print("mock server: this kernel does not stamp received bytes; the true TTFT leaves out "
              "the time a request waits to be read", file=sys.stderr)
    listener.bind((host, port))
    listener.listen(4096)
    listener.setblocking(False)
    connections: set[_Connection] = set()

    def accept() -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _Connection(server, sock, loop, connections)

    loop.add_reader(listener.fileno(), accept)
    server.start(loop)
    if ready is not None:
        ready(listener.getsockname()[1])
    try:
        await asyncio.Future()  # until the process is killed
    finally:
        loop.remove_reader(listener.fileno())
        listener.close()
        for connection in list(connections):
            connection._close_now()


def serve(interval_s: float, host: str = "127.0.0.1", port: int = 0, *, tick_s: float = TICK_S,
          chunk_counter=None, ready=None, cpu: int | None = None) -> None:
    """Run until killed. `ready(port)` is called once listening; `cpu` pins the process."""
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    import uvloop

    server = MockServer(interval_s, tick_s, chunk_counter)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_serve(server, host, port, ready))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pytest_llmperf.clientbench.mockserver",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any)")
    parser.add_argument("--interval-ms", type=float, default=10.0,
                        help="time between two chunks of a stream (default 10)")
    args = parser.parse_args(argv)
    serve(args.interval_ms / 1e3, port=args.port,
          ready=lambda port: print(f"mock server on http://127.0.0.1:{port}", flush=True))


if __name__ == "__main__":
    sys.exit(main())
