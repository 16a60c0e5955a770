"""The mock server's streams (mockserver.py): the timing wheel of phases that writes them, the
truth of what actually went out, and `MockServer`, which holds both."""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from operator import call
from typing import Any, Protocol

import numpy as np

from pytest_llmperf.clientbench.mockwire import (
    _STREAM_ERROR,
    CHAT,
    DONE_AND_END,
    EARLY_S,
    END_OF_BODY,
    FAULT_TOKENS,
    FAULTS,
    SSE_HEADERS,
    STATUS_FAULTS,
    TICK_S,
    TIMER_S,
    _error_body,
    _frame,
    _frame_bytes,
    _response,
    _templates,
)

__all__ = ["MockServer"]


class _Connection(Protocol):
    """What a stream needs of its client connection (mockserver._Connection)."""

    stream: Any
    queue: Any

    def send(self, data: bytes) -> int: ...
    def write(self, data: bytes) -> None: ...
    def send_failed(self, data: bytes, exc: OSError) -> int: ...
    def is_closing(self) -> bool: ...
    def close(self) -> None: ...


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
        # (lower-case name, value) pairs a request under /v1 or of /metrics must carry, or 401:
        # a deployment behind an API key (mockserver.serve's require_headers)
        self.required_headers: tuple[tuple[bytes, bytes], ...] = ()

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
