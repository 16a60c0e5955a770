"""The socket readers (readers.py): the C one and its Python twin, held to one contract.

Each test is a real socket pair: the test writes a server's bytes, in the pieces it chooses, and
the reader under test reads them on a real event loop and reports to a connection that records
every callback. Both readers run every test, so the Python fallback cannot drift from the C code.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import sys
import time

import pytest

from pytest_llmperf.client import readers
from pytest_llmperf.client.readers import SO_TIMESTAMPNS, CReader, PyReader

KINDS = [pytest.param(CReader, id="C"), pytest.param(PyReader, id="Python")]


@pytest.fixture(params=KINDS)
def kind(request):
    if request.param is CReader and readers._reader is None:
        pytest.skip("the C reader is not built here")
    return request.param


class Recorder:
    """A connection that writes down what the reader tells it and takes every body part."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.body = b""
        self.parts: list[tuple[bytes, list[int], list[float]]] = []
        self.reader = None
        self.fd = -1
        self.ended = asyncio.Event()

    def _take(self) -> None:
        body, ends, stamps = self.reader.take(self.fd)
        if body or ends:
            self.parts.append((body, ends, stamps))
            self.body += body

    def _on_headers(self, status: int, keep_alive: bool) -> None:
        self.events.append(("headers", status, keep_alive))

    def _on_body_pending(self) -> None:
        self.events.append(("pending",))
        self._take()

    def _on_complete(self) -> None:
        self._take()
        self.events.append(("complete",))
        self.ended.set()

    def _on_closed(self, err) -> None:
        self._take()
        self.events.append(("closed", err))
        self.reader.discard(self.fd)
        self.ended.set()

    def _on_malformed(self, reason: str) -> None:
        self.events.append(("malformed", reason))
        self.reader.discard(self.fd)
        self.ended.set()


def exchange(kind, pieces: list[bytes], *, close: bool = False, expect: bool = True,
             gap_s: float = 0.002, **flush) -> Recorder:
    """The server writes `pieces` one by one, `gap_s` apart (so each is its own read), then
    closes if `close`; returns the connection's record once the response ended."""

    async def go() -> Recorder:
        loop = asyncio.get_running_loop()
        client, server = socket.socketpair()
        client.setblocking(False)
        client.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        reader = kind(loop, time.perf_counter, **flush)
        conn = Recorder()
        conn.reader, conn.fd = reader, client.fileno()
        reader.add(client, conn)
        if expect:
            reader.expect(client.fileno(), time.perf_counter())
        try:
            for piece in pieces:
                server.send(piece)
                await asyncio.sleep(gap_s)
            if close:
                server.close()
            await asyncio.wait_for(conn.ended.wait(), 5)
        finally:
            reader.discard(client.fileno())
            reader.close()
            client.close()
            server.close()
        return conn

    return asyncio.run(go())


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
EVENTS = [b"data: {\"n\":%d}\n\n" % i for i in range(5)]


def test_the_c_reader_is_built_wherever_it_can_be():
    # The install builds it on Linux with a C compiler (setup.py, optional there only so an
    # install without one still works). Here, it must have been built.
    if sys.platform != "linux" or not shutil.which("cc"):
        pytest.skip("no C compiler here: the Python reader is the one in use")
    assert readers._reader is not None
    assert readers.reader_kind() == "C"


def test_llmperf_no_extensions_picks_the_python_reader(monkeypatch):
    monkeypatch.setenv("LLMPERF_NO_EXTENSIONS", "1")
    assert readers.reader_kind() == "Python"


def test_a_chunked_stream_one_event_per_read(kind):
    conn = exchange(kind, [HEAD, *(chunked(e)[:-5] for e in EVENTS), b"0\r\n\r\n"])
    assert conn.events == [("headers", 200, True), ("complete",)]
    assert conn.body == b"".join(EVENTS)
    (body, ends, stamps), = conn.parts
    # One entry per read that brought body bytes, in order, each stamped by the kernel.
    assert ends == [sum(map(len, EVENTS[:i + 1])) for i in range(5)]
    assert stamps == sorted(stamps) and len(set(stamps)) == 5
    assert all(stamp <= time.perf_counter() for stamp in stamps)


def test_a_stream_split_at_every_byte(kind):
    raw = HEAD + chunked(*EVENTS)
    conn = exchange(kind, [raw[i:i + 1] for i in range(len(raw))], gap_s=0,
                    flush_reads=10**6, flush_s=60.0)
    assert conn.events == [("headers", 200, True), ("complete",)]
    assert conn.body == b"".join(EVENTS)


def test_the_whole_response_in_one_read(kind):
    conn = exchange(kind, [HEAD + chunked(*EVENTS)])
    assert conn.events == [("headers", 200, True), ("complete",)]
    (body, ends, stamps), = conn.parts
    assert (body, ends, len(stamps)) == (b"".join(EVENTS), [len(body)], 1)


def test_chunk_extensions_and_trailers_are_skipped(kind):
    raw = HEAD + b"5;name=value\r\nhello\r\n0\r\nx-trailer: 1\r\n\r\n"
    conn = exchange(kind, [raw])
    assert conn.events == [("headers", 200, True), ("complete",)]
    assert conn.body == b"hello"


def test_a_content_length_body(kind):
    conn = exchange(kind, [b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot", b" found"])
    assert conn.events == [("headers", 404, True), ("complete",)]
    assert conn.body == b"not found"


def test_no_body_after_a_204_or_a_zero_length(kind):
    assert exchange(kind, [b"HTTP/1.1 204 No Content\r\n\r\n"]).events == [
        ("headers", 204, True), ("complete",)]
    assert exchange(kind, [b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]).events == [
        ("headers", 200, True), ("complete",)]


def test_a_body_without_framing_ends_at_the_close(kind):
    conn = exchange(kind, [b"HTTP/1.1 200 OK\r\n\r\n", b"all of it"], close=True)
    assert conn.events == [("headers", 200, False), ("complete",), ("closed", 0)]
    assert conn.body == b"all of it"


def test_connection_close_and_http_1_0_are_not_kept_alive(kind):
    conn = exchange(kind, [b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx"])
    assert conn.events[0] == ("headers", 200, False)
    conn = exchange(kind, [b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx"])
    assert conn.events[0] == ("headers", 200, False)
    conn = exchange(kind, [b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n"
                           b"Content-Length: 1\r\n\r\nx"])
    assert conn.events[0] == ("headers", 200, True)


def test_a_close_mid_stream_keeps_what_came(kind):
    conn = exchange(kind, [HEAD + chunked(EVENTS[0])[:-5]], close=True)
    assert conn.events == [("headers", 200, True), ("closed", 0)]
    assert conn.body == EVENTS[0]


def test_the_body_goes_out_every_flush_reads_reads(kind):
    conn = exchange(kind, [HEAD, *(chunked(e)[:-5] for e in EVENTS), b"0\r\n\r\n"],
                    flush_reads=2, flush_s=60.0)
    assert conn.events == [("headers", 200, True), ("pending",), ("pending",), ("complete",)]
    assert [len(ends) for _, ends, _ in conn.parts] == [2, 2, 1]
    assert conn.body == b"".join(EVENTS)


def test_the_body_goes_out_once_it_waited_flush_s(kind):
    conn = exchange(kind, [HEAD, *(chunked(e)[:-5] for e in EVENTS[:2]), b"0\r\n\r\n"],
                    gap_s=0.03, flush_reads=1000, flush_s=0.02)
    # Each read came more than 20 ms after the last flush (or the request): each goes out.
    assert conn.events == [("headers", 200, True), ("pending",), ("pending",), ("complete",)]


@pytest.mark.parametrize("raw", [
    b"SSH-2.0-OpenSSH_9.6\r\n",
    HEAD + b"zz\r\n",
    HEAD + b"2\r\nabc\r\n",
], ids=["not-http", "chunk-size-not-hex", "chunk-longer-than-its-size"])
def test_malformed_responses_are_reported_not_raised(kind, raw):
    (event, reason), = exchange(kind, [raw]).events[-1:]
    assert event == "malformed" and reason


def test_bytes_with_no_request_outstanding_are_malformed(kind):
    conn = exchange(kind, [b"HTTP/1.1 200 OK\r\n\r\n"], expect=False)
    assert conn.events == [("malformed", "bytes from the server with no request outstanding")]


def test_one_connection_many_responses(kind):
    async def go() -> list[tuple]:
        loop = asyncio.get_running_loop()
        client, server = socket.socketpair()
        client.setblocking(False)
        reader = kind(loop, time.perf_counter)
        conn = Recorder()
        conn.reader, conn.fd = reader, client.fileno()
        reader.add(client, conn)
        for n in range(3):
            conn.ended.clear()
            reader.expect(client.fileno(), time.perf_counter())
            server.send(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n%d" % n)
            await asyncio.wait_for(conn.ended.wait(), 5)
        reader.discard(client.fileno())
        reader.close()
        client.close()
        server.close()
        return conn.events

    assert asyncio.run(go()) == [("headers", 200, True), ("complete",)] * 3


def test_once_kernel_stamps_are_on_a_new_connections_first_bytes_are_stamped_on_arrival():
    """Linux turns receive stamps on from a work queue when the first socket asks and off when
    the last one closes; readers.kernel_stamps_on() keeps them on for the process, so the
    first read of a connection made later is stamped when its bytes arrived, not when read."""
    assert readers.kernel_stamps_on()
    start = time.perf_counter()
    assert readers.kernel_stamps_on()  # the second call only answers
    assert time.perf_counter() - start < 0.001
    with socket.create_server(("127.0.0.1", 0)) as listener:
        with socket.create_connection(listener.getsockname()) as sender:
            receiver, _ = listener.accept()
            with receiver:
                receiver.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                sender.sendall(b"x")
                time.sleep(0.05)
                _, ancillary, _, _ = receiver.recvmsg(64, readers.TIMESPEC_SPACE)
                now = time.perf_counter()
                assert now - readers.kernel_stamp(now, ancillary) > 0.04
