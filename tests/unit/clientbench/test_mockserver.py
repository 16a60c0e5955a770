"""The benchmark's mock server (clientbench/mockserver.py): the truth it reports.

The server runs in this test's event loop; the test talks to it over a real socket.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

from pytest_llmperf.clientbench import mockserver, mockstreams


def test_a_request_arrives_when_the_kernel_received_it_not_when_the_server_read_it():
    """The request lands while the server's loop is blocked for 0.2 s: the true TTFT counts that
    wait, as any client sees it (in a closed loop's wave, requests wait for the server just so)."""

    async def go() -> dict:
        server = mockserver.MockServer(interval_s=0.01)
        serving, port = await _started(server)
        client = socket.create_connection(("127.0.0.1", port))
        client.sendall(_stream_request(2))
        time.sleep(0.2)  # the server cannot read it before this returns
        await _read_to_end(client)
        client.close()
        truth = server.truth.summary(server.interval_s)
        serving.cancel()
        return truth

    truth = asyncio.run(go())
    assert truth["streams"] == 1
    assert 0.2 <= truth["ttft_s_p50"] < 0.3
    assert 0.005 < truth["tpot_s_p50"] < 0.02


async def _started(server: mockserver.MockServer) -> tuple[asyncio.Task, int]:
    port: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    serving = asyncio.ensure_future(mockserver._serve(server, "127.0.0.1", 0, port.set_result))
    return serving, await port


def _stream_request(tokens: int) -> bytes:
    body = json.dumps({"model": "m", "prompt": [1, 2], "max_tokens": tokens,
                       "return_token_ids": True}).encode()
    return (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body))


async def _read_to_end(sock: socket.socket) -> bytes:
    sock.setblocking(False)
    received = b""
    while not received.endswith(b"0\r\n\r\n"):
        try:
            data = sock.recv(1 << 20)
        except BlockingIOError:
            await asyncio.sleep(0.002)
            continue
        assert data, f"closed after {len(received)} bytes"
        received += data
    return received


def _token_events(body: bytes) -> int:
    return body.count(b'"token_ids":[1234]')


def test_a_client_that_stops_reading_gets_every_chunk_in_order_once_it_reads_again():
    """The server's socket fills while the client does not read (a small send buffer, so it
    fills in a few dozen chunks): the phase's one-pass send takes part of a frame or none, the
    rest waits for the socket, and later chunks queue behind it. Read again, each stream is
    whole: every token, the usage, [DONE] and the chunked body's end, in that order."""
    tokens = 300

    async def go() -> tuple[list[bytes], dict]:
        loop = asyncio.get_running_loop()
        server = mockserver.MockServer(interval_s=0.001)
        server.start(loop)
        listener = socket.create_server(("127.0.0.1", 0))
        clients = []
        for _ in range(3):
            client = socket.create_connection(listener.getsockname())
            accepted, _ = listener.accept()
            accepted.setblocking(False)
            accepted.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            mockserver._Connection(server, accepted, loop, set())
            client.sendall(_stream_request(tokens))
            clients.append(client)
        await asyncio.sleep(0.2)  # 200 chunks each are due, 40 kB: more than the sockets take
        queued = server.layout  # bumped each time a socket filled (and again when it drained)
        bodies = [await _read_to_end(c) for c in clients]
        for sock in (*clients, listener):
            sock.close()
        return bodies, {"queued": queued, **server.truth.summary(server.interval_s)}

    bodies, truth = asyncio.run(go())
    assert truth["queued"] >= 3, "no socket filled: the test did not reach the queue"
    assert truth["streams"] == 3
    for body in bodies:
        head, _, chunked = body.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        events = chunked.split(b"\r\n")[1::2]  # size line, chunk, size line, chunk ...
        assert len(events) == tokens + 3  # the tokens, the usage, [DONE], the empty last chunk
        assert all(b'"token_ids":[1234]' in e for e in events[:tokens])
        assert b'"completion_tokens":%d' % tokens in events[tokens]
        assert events[tokens + 1:] == [b"data: [DONE]\n\n", b""]


class _FakeConnection:
    """What a phase calls on a connection; `takes` is what each send returns or raises."""

    def __init__(self, *takes: int | OSError) -> None:
        self.takes = list(takes)
        self.queued: list[bytes] = []
        self.closed = False

    def send(self, data: bytes) -> int:
        take = self.takes.pop(0)
        if isinstance(take, OSError):
            raise take
        return take

    def queue(self, data: bytes) -> int:
        self.queued.append(data)
        return len(data)

    def send_failed(self, data: bytes, exc: OSError) -> int:
        if isinstance(exc, BlockingIOError):
            return self.queue(data)
        self.closed = True
        return 0


def test_one_pass_over_a_phase_queues_what_a_socket_did_not_take_and_goes_on_past_a_failure():
    frame = b"0123456789"
    whole, part, full, broken, after = (
        _FakeConnection(10), _FakeConnection(4), _FakeConnection(BlockingIOError()),
        _FakeConnection(BrokenPipeError()), _FakeConnection(10))
    phase = mockstreams._Phase()
    for conn in (whole, part, full, broken, after):
        phase.add(mockstreams._Stream(conn, frame, b"", tokens=3, arrived_s=0.0))

    assert phase.write(layout=0) == 4  # every chunk but the broken connection's
    assert (whole.queued, part.queued, full.queued, after.queued) == ([], [b"456789"],
                                                                      [frame], [])
    assert broken.closed and not after.closed


def test_while_a_connection_holds_unsent_bytes_its_send_queues_behind_them():
    """The phases call `conn.send` directly, so once a socket is full `send` must queue (else a
    later chunk would overtake the held bytes); drained, it sends again. The server's `layout`
    moves each time, so the phases rebuild their list of sends."""

    async def go() -> tuple[bool, bool, int, int, bytes, bytes]:
        loop = asyncio.get_running_loop()
        server = mockserver.MockServer(interval_s=0.01)
        listener = socket.create_server(("127.0.0.1", 0))
        client = socket.create_connection(listener.getsockname())
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        accepted, _ = listener.accept()
        accepted.setblocking(False)
        accepted.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        conn = mockserver._Connection(server, accepted, loop, set())
        written = b"".join(b"%06d " % i for i in range(6000))  # 42 kB: more than the sockets hold
        for i in range(0, len(written), 700):
            conn.write(written[i:i + 700])  # through `conn.send`, as a phase's pass
        queuing, full_layout = conn.send == conn.queue, server.layout
        received = await _read_exactly(client, len(written))
        await asyncio.sleep(0.01)  # the loop sees the socket writable again and drains
        sending = conn.send == accepted.send
        for sock in (client, listener):
            sock.close()
        return queuing, sending, full_layout, server.layout, received, written

    queuing, sending, full_layout, drained_layout, received, written = asyncio.run(go())
    assert queuing and full_layout == 1
    assert received == written
    assert sending and drained_layout == 2


async def _read_exactly(sock: socket.socket, size: int) -> bytes:
    sock.setblocking(False)
    received = b""
    while len(received) < size:
        try:
            received += sock.recv(1 << 20)
        except BlockingIOError:
            await asyncio.sleep(0.001)
    return received


def test_a_client_that_leaves_mid_stream_is_dropped_and_the_others_are_served():
    """Its connection closes: its stream leaves the wheel at once (no more sends to a closed
    socket), has no truth, and the other stream runs to its end."""
    async def go() -> tuple[bytes, dict, int]:
        server = mockserver.MockServer(interval_s=0.002)
        serving, port = await _started(server)
        leaving, staying = (socket.create_connection(("127.0.0.1", port)) for _ in range(2))
        leaving.sendall(_stream_request(1000))  # 2 s of chunks: it leaves long before its end
        staying.sendall(_stream_request(50))
        await asyncio.sleep(0.02)  # a few chunks each
        leaving.close()
        body = await _read_to_end(staying)
        staying.close()
        on_the_wheel = sum(len(phase.streams) for phase in server._phases)
        serving.cancel()
        return body, server.truth.summary(server.interval_s), on_the_wheel

    body, truth, on_the_wheel = asyncio.run(go())
    assert body.count(b'"token_ids":[1234]') == 50
    assert truth["streams"] == 1  # the stream that left has no truth: it never ended
    assert on_the_wheel == 0


def test_the_truths_of_several_server_processes_merge_as_if_one_server_served_all():
    first = {"ttft_s": [0.001, 0.003], "tpot_s": [0.010, 0.010], "tick_late_s": [0.0],
             "chunks": 200, "first_chunk_s": 10.0, "last_chunk_s": 12.0}
    second = {"ttft_s": [0.002], "tpot_s": [0.011], "tick_late_s": [0.001],
              "chunks": 100, "first_chunk_s": 11.0, "last_chunk_s": 13.0}
    idle = {"ttft_s": [], "tpot_s": [], "tick_late_s": [], "chunks": 0,
            "first_chunk_s": None, "last_chunk_s": None}

    truth = mockserver.merged_truth([first, second, idle], interval_s=0.01)

    assert truth["streams"] == 3 and truth["chunks"] == 300
    assert truth["chunks_per_s"] == 100.0  # 300 chunks from t=10 s to t=13 s
    assert truth["ttft_s_p50"] == 0.002 and truth["tpot_s_p50"] == 0.010
