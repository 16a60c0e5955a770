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

With `require_headers` it stands for a deployment behind an API key: a request under /v1 or of
/metrics without those headers gets 401 (vLLM's --api-key guards /v1 only).

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
from typing import Any

import httptools

from pytest_llmperf.client.readers import (
    SO_TIMESTAMPNS,
    TIMESPEC_SPACE,
    kernel_stamp,
    kernel_stamps_on,
)
from pytest_llmperf.clientbench.mockstreams import MockServer, _Stream, _Truth
from pytest_llmperf.clientbench.mockwire import (
    CHAT,
    COMPLETIONS,
    CONTROL_ANSWER_CHARS,
    TICK_S,
    _response,
)

__all__ = ["MockServer", "merged_truth", "read_truth", "serve"]


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
        self.headers: list[tuple[bytes, bytes]] = []
        if server.required_headers:  # httptools looks its callbacks up once, here
            self.on_header = self._on_header
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

    def _on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def _refused(self, url: bytes) -> bool:
        """A guarded path asked for without every required header."""
        required, headers, self.headers = self.server.required_headers, self.headers, []
        guarded = url.startswith(b"/v1/") or url == b"/metrics"
        return bool(required) and guarded and not set(required) <= set(headers)

    def on_message_complete(self) -> None:
        url, raw = self.url.split(b"?")[0], b"".join(self.body)
        self.url, self.body = b"", []
        method = self.parser.get_method()
        if self._refused(url):
            self.write(_response(401, b'{"error":"Unauthorized"}'))
        elif method == b"POST" and url in (COMPLETIONS, CHAT):
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
            # owned_by as vLLM writes it: the mock streams vLLM's format, and endpoint mode
            # tells a server's kind by it (client/server_kind.py)
            self.write(_response(200, b'{"object":"list","data":[{"id":"mock",'
                                      b'"owned_by":"vllm"}]}'))
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
          reuse_port: bool = False, require_headers: dict[str, str] | None = None) -> None:
    """Run until killed. `ready(port)` is called once listening; `cpu` pins the process;
    `control` is a multiprocessing pipe end to answer "truth" and "reset" on (`_answer`);
    `reuse_port` shares the port with other server processes; `require_headers`: what every
    request under /v1 and of /metrics must carry (e.g. {"Authorization": "Bearer KEY"})."""
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    import uvloop

    server = MockServer(interval_s, tick_s, chunk_counter)
    server.required_headers = tuple((name.lower().encode(), value.encode())
                                    for name, value in (require_headers or {}).items())
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
