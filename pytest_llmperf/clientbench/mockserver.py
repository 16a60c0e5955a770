"""An OpenAI-compatible streaming server whose timing is known: the truth a client is checked on.

Every stream gets one chunk every `interval_s` (one token each, with its token id, as vLLM sends
with `return_token_ids`), then a usage chunk and `data: [DONE]`; `/v1/completions` and
`/v1/chat/completions` (role chunk first, as vLLM) both work. The first chunk goes on the next
tick of a `tick_s` clock (when it actually went out is what the truth records).

The server must never be what a benchmark measures, so it is built for throughput: plain
non-blocking sockets with httptools' request parser, chunk bytes rendered once per stream, and a
timing wheel of phases: the streams that write on the same tick of every period form one
phase, and a tick writes its phase's middle chunks in one C-level pass (`map(operator.call, ...)`
over the sockets' `send`), so a chunk costs the server its system call and next to no Python;
only a stream's first and last chunks go through Python. A request arrives when the kernel
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
import dataclasses
import json
import os
import pickle
import socket
import sys
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from operator import call
from typing import Any

import httptools
import numpy as np

from pytest_llmperf.client.readers import (
    SO_TIMESTAMPNS,
    TIMESPEC_SPACE,
    kernel_stamp,
    kernel_stamps_on,
)

__all__ = ["MockServer", "serve"]

TICK_S = 0.001
TIMER_S, EARLY_S = 0.001, 0.0005  # the event loop's timer resolution, and half of it
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
# The longest answer on a benchmark's control pipe: well under what one write always delivers.
CONTROL_ANSWER_CHARS = 1000
# An OpenAI-style error: the body of an error status, and the event that ends a broken stream.
_STREAM_ERROR = {"error": {"message": "mock fault mid-stream", "type": "InternalServerError",
                           "code": 500}}


def _error_body(status: int) -> bytes:
    return json.dumps({"error": {"message": f"mock fault {status}", "type": "MockError",
                                 "code": status}}).encode()


def _frame(event: dict[str, Any] | str) -> bytes:
    """One SSE event as one HTTP chunk, the way uvicorn sends vLLM's stream."""
    data = event if isinstance(event, str) else json.dumps(event, separators=(",", ":"))
    return _frame_bytes(data.encode())


def _frame_bytes(payload: bytes) -> bytes:
    payload = b"data: %s\n\n" % payload
    return b"%x\r\n%s\r\n" % (len(payload), payload)


DONE_AND_END = _frame("[DONE]") + END_OF_BODY
_ID = "<stream-id>"  # where a stream's id goes in a template (JSON leaves it as it is)


def _templates(path: bytes, model: Any, token_ids: bool, prompt_tokens: int,
               tokens: int) -> tuple[list[bytes], list[bytes]]:
    """A token event's and the usage event's JSON, split where the stream's id goes."""
    base = {"id": _ID, "created": 1700000000, "model": model}
    ids = {"token_ids": [1234]} if token_ids else {}
    if path == CHAT:
        choice = {"index": 0, "delta": {"content": " tok"}, "logprobs": None,
                  "finish_reason": None, **ids}
        obj = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": " tok", "logprobs": None, "finish_reason": None,
                  "stop_reason": None, **ids}
        obj = "text_completion"
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens,
             "total_tokens": prompt_tokens + tokens}
    events = ({**base, "object": obj, "choices": [choice]},
              {**base, "object": obj, "choices": [], "usage": usage})
    return tuple(json.dumps(event, separators=(",", ":")).encode().split(_ID.encode())
                 for event in events)


def _response(status: int, body: bytes, content_type: bytes = b"application/json") -> bytes:
    reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 429: b"Too Many Requests",
              500: b"Internal Server Error", 503: b"Service Unavailable"}.get(status, b"Error")
    return (b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s"
            % (status, reason, content_type, len(body), body))


@dataclass(eq=False)  # compared and hashed by identity: a key of its phase's dict
class _Stream:
    conn: _Connection
    token_frame: bytes
    tail: bytes  # usage chunk, [DONE] and the end of the chunked body
    tokens: int
    arrived_s: float
    first_s: float = 0.0
    last_tick: int = 0  # the tick of its last token
    cut: bool = False  # close the connection after the last token (a fault)


class _Phase:
    """The streams whose middle chunks go out on the same tick of every period, and what one
    pass over them needs: each connection's `send` and each stream's frame, rebuilt only when
    a stream joined or left, or a connection's `send` changed (its socket filled up or drained)."""

    __slots__ = ("streams", "members", "sends", "frames", "lengths", "built")

    def __init__(self) -> None:
        self.streams: dict[_Stream, None] = {}  # insertion-ordered: arrival order
        self.members: list[_Stream] = []
        self.sends: list = []
        self.frames: list[bytes] = []
        self.lengths: list[int] = []
        self.built = -1  # the server's `layout` when sends/frames were built; -1: never

    def add(self, stream: _Stream) -> None:
        self.streams[stream] = None
        self.built = -1

    def remove(self, stream: _Stream) -> None:
        if stream in self.streams:
            del self.streams[stream]
            self.built = -1

    def write(self, layout: int) -> int:
        """Send each stream its token frame; the number of chunks that went out (or were queued
        behind a full socket). A failed send closes that connection; the rest go on."""
        if self.built != layout:
            self.members = list(self.streams)
            self.sends = [stream.conn.send for stream in self.members]
            self.frames = [stream.token_frame for stream in self.members]
            self.lengths = list(map(len, self.frames))
            self.built = layout
        members, frames = self.members, self.frames  # fixed for this pass, whatever closes
        sent: list[int] = []
        passes = map(call, self.sends, frames)
        while True:
            try:
                sent.extend(passes)  # keeps what it appended when a send raises
                break
            except OSError as exc:  # the send that raised is the one after the last appended
                sent.append(members[len(sent)].conn.send_failed(frames[len(sent)], exc))
        if sent != self.lengths:  # a socket took part of its frame: the rest waits for it
            for stream, count, frame in zip(members, sent, frames):
                if 0 < count < len(frame):
                    stream.conn.queue(frame[count:])
        return len(sent) - sent.count(0)


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
        self._phases = [_Phase() for _ in range(self.period)]
        self._starting: dict[int, list[_Stream]] = defaultdict(list)  # tick -> first token due
        self._ending: dict[int, list[_Stream]] = defaultdict(list)  # tick -> last token due
        self.layout = 0  # bumped when a connection's `send` changes; phases then rebuild
        self._tick = 0
        self._origin = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ids = 0
        self._templates: dict[tuple, tuple[list[bytes], list[bytes]]] = {}
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
        conn.write(SSE_HEADERS + (self._role_frame(body) if path == CHAT else b""))
        if fault == "stall":
            return  # headers, then silence: never on the wheel
        chunks = stream.tokens
        if fault is not None:
            chunks = min(stream.tokens, FAULT_TOKENS)
            stream.tail, stream.cut = self._faulty_tail(fault, stream.tail)
        first = self._tick + 1
        stream.last_tick = first + (chunks - 1) * self.period
        conn.stream = stream
        self._starting[first].append(stream)

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
        model, token_ids = body.get("model"), bool(body.get("return_token_ids"))
        key = (path, json.dumps(model), token_ids, prompt_tokens, tokens)
        templates = self._templates.get(key)
        if templates is None:
            templates = self._templates[key] = _templates(path, model, token_ids, prompt_tokens,
                                                          tokens)
        # Each stream its own id, as vLLM gives; the JSON around it is rendered once per shape.
        stream_id = b"cmpl-%d" % self._ids
        token, tail = (_frame_bytes(stream_id.join(parts)) for parts in templates)
        return token, tail + DONE_AND_END, tokens

    def _role_frame(self, body: dict[str, Any]) -> bytes:
        choice = {"index": 0, "delta": {"role": "assistant", "content": ""}}
        return _frame({"id": f"cmpl-{self._ids}", "object": "chat.completion.chunk",
                       "model": body.get("model"), "choices": [choice]})

    def _on_tick(self) -> None:
        now = time.perf_counter()
        # The loop's timers count whole milliseconds (uvloop rounds a delay to the nearest one
        # and runs one under half a millisecond at once), so a tick is taken up to EARLY_S
        # before it is due and the next is asked for no sooner than TIMER_S: the loop never
        # spins waiting for a tick. Every write is stamped when it happened, so the truth holds.
        due = int((now + EARLY_S - self._origin) / self.tick_s)
        # A late tick catches up on every tick it missed, stamped with the time it really wrote.
        written = 0
        while self._tick < due:
            self._tick += 1
            self.truth.tick_late_s.append(now - (self._origin + self._tick * self.tick_s))
            written += self._write_tick(self._tick)
        if written:
            truth = self.truth
            truth.chunks += written
            truth.first_chunk_s = truth.first_chunk_s or now
            truth.last_chunk_s = now
            if self.counter is not None:
                self.counter.value += written
        next_at = self._origin + (self._tick + 1) * self.tick_s
        self._loop.call_later(max(TIMER_S, next_at - time.perf_counter()), self._on_tick)

    def _write_tick(self, tick: int) -> int:
        """Last tokens, then the phase's middle tokens in one pass, then first tokens: the
        first and last go one by one, each stamped when it went out (the truth)."""
        phase = self._phases[tick % self.period]
        written = 0
        for stream in self._ending.pop(tick, ()):
            phase.remove(stream)
            written += self._write_last(stream)
        if phase.streams:
            written += phase.write(self.layout)
        for stream in self._starting.pop(tick, ()):
            if stream.conn.is_closing():
                continue
            stream.conn.write(stream.token_frame)
            if stream.conn.is_closing():
                continue  # the client went away: nothing for the wheel
            stream.first_s = time.perf_counter()  # a busy tick writes long after it began
            written += 1
            if stream.last_tick == tick:
                self._finish(stream)
            else:
                phase.add(stream)
                self._ending[stream.last_tick].append(stream)
        return written

    def _write_last(self, stream: _Stream) -> int:
        if stream.conn.is_closing():
            return 0
        stream.conn.write(stream.token_frame)
        self._finish(stream)
        return 1

    def _finish(self, stream: _Stream) -> None:
        """The stream's last token went out: its tail, and its truth."""
        stream.conn.write(stream.tail)
        stream.conn.stream = None
        if stream.cut:
            stream.conn.close()
        self.truth.ttft_s.append(stream.first_s - stream.arrived_s)
        if stream.tokens > 1:
            self.truth.tpot_s.append((time.perf_counter() - stream.first_s)
                                     / (stream.tokens - 1))

    def drop(self, stream: _Stream) -> None:
        """Its connection closed: no more chunks, no truth."""
        self._phases[stream.last_tick % self.period].remove(stream)
        ending = self._ending.get(stream.last_tick)
        if ending and stream in ending:
            ending.remove(stream)

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
    Writes go straight to the socket; what it cannot take yet waits for it to be writable, and
    while anything waits, `send` queues (the wheel's phases call `send` directly)."""

    def __init__(self, server: MockServer, sock: socket.socket,
                 loop: asyncio.AbstractEventLoop, open_set: set[_Connection]) -> None:
        self.server = server
        self.open_set = open_set
        self.parser = httptools.HttpRequestParser(self)
        self.sock = sock
        self.send = sock.send  # -> bytes taken; `queue` while earlier bytes wait
        self.stream: _Stream | None = None  # the one on the wheel, if any
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
        """Send `data`, the way a phase's pass does: through `send`, which queues while earlier
        bytes wait."""
        if self._closed or self._closing:
            return
        try:
            sent = self.send(data)
        except OSError as exc:
            self.send_failed(data, exc)
            return
        if sent < len(data):
            self.queue(data[sent:])

    def queue(self, data: bytes) -> int:
        """Keep `data` until the socket can take it (after anything kept before)."""
        if not self._unsent:
            self.loop.add_writer(self.sock.fileno(), self._writable)
            self.send = self.queue
            self.server.layout += 1
        self._unsent += data
        return len(data)

    def send_failed(self, data: bytes, exc: OSError) -> int:
        """A send raised: a full socket keeps `data` for later; anything else closes."""
        if isinstance(exc, (BlockingIOError, InterruptedError)):
            return self.queue(data)
        self._close_now()
        return 0

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
            self.send = self.sock.send
            self.server.layout += 1
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
        if self.stream is not None:
            self.server.drop(self.stream)
            self.stream = None

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


async def _serve(server: MockServer, host: str, port: int, ready=None, *, control=None,
                 reuse_port: bool = False) -> None:
    loop = asyncio.get_running_loop()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:  # several server processes on one port: the kernel spreads the connections
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
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
    if control is not None:
        loop.add_reader(control.fileno(), _answer, server, control)
    server.start(loop)
    if ready is not None:
        ready(listener.getsockname()[1])
    try:
        await asyncio.Future()  # until the process is killed
    finally:
        loop.remove_reader(listener.fileno())
        if control is not None:
            loop.remove_reader(control.fileno())
        listener.close()
        for connection in list(connections):
            connection._close_now()


def _answer(server: MockServer, control) -> None:
    """One request on the control pipe of a benchmark that runs this server in a process of
    its own: ("truth", path), this process's raw truth, for merging with its siblings', written
    to `path`; or ("reset", None). The answer is ("ok", None) or ("error", what went wrong).

    The truth goes through a file, not the pipe: at a big load it is megabytes, far more than
    the pipe holds, and this end is non-blocking (the event loop polls it), so a send of it
    fails part-way and leaves half a message the benchmark waits on for ever. Every answer on
    the pipe is short (CONTROL_ANSWER_CHARS at most): one write that the pipe always takes
    whole, so the benchmark's wait for it, bounded, is the whole exchange."""
    try:
        request = control.recv()
    except EOFError:  # the benchmark is gone; the process is about to be killed
        asyncio.get_running_loop().remove_reader(control.fileno())
        return
    try:
        _obey(server, *request)
    except Exception as exc:  # any failure is the answer, in one line
        control.send(("error", f"{type(exc).__name__}: {exc}"[:CONTROL_ANSWER_CHARS]))
    else:
        control.send(("ok", None))


def _obey(server: MockServer, request: str, path: str | None) -> None:
    if request == "truth":
        with open(path, "wb") as file:
            pickle.dump(dataclasses.asdict(server.truth), file, pickle.HIGHEST_PROTOCOL)
    elif request == "reset":
        server.reset()
    else:
        raise ValueError(f"unknown control request {request!r}; known: truth, reset")


def read_truth(path: str) -> dict[str, Any]:
    """A raw truth that `_answer` wrote, taken out of its file."""
    with open(path, "rb") as file:
        truth = pickle.load(file)
    os.unlink(path)
    return truth


def merged_truth(truths: list[dict[str, Any]], interval_s: float) -> dict[str, Any]:
    """The summary of several server processes' raw truths, as if one server had served all."""
    merged = _Truth()
    for truth in truths:
        merged.ttft_s += truth["ttft_s"]
        merged.tpot_s += truth["tpot_s"]
        merged.tick_late_s += truth["tick_late_s"]
        merged.chunks += truth["chunks"]
    firsts = [t["first_chunk_s"] for t in truths if t["first_chunk_s"] is not None]
    lasts = [t["last_chunk_s"] for t in truths if t["last_chunk_s"] is not None]
    merged.first_chunk_s = min(firsts, default=None)  # one clock for all: CLOCK_MONOTONIC
    merged.last_chunk_s = max(lasts, default=None)
    return merged.summary(interval_s)


def serve(interval_s: float, host: str = "127.0.0.1", port: int = 0, *, tick_s: float = TICK_S,
          chunk_counter=None, ready=None, cpu: int | None = None, control=None,
          reuse_port: bool = False) -> None:
    """Run until killed. `ready(port)` is called once listening; `cpu` pins the process;
    `control` is a multiprocessing pipe end to answer "truth" and "reset" on (`_answer`);
    `reuse_port` shares the port with other server processes."""
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    import uvloop

    server = MockServer(interval_s, tick_s, chunk_counter)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_serve(server, host, port, ready, control=control, reuse_port=reuse_port))


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
