"""The streaming client: request bodies, and real HTTP round trips against a tiny canned server
on 127.0.0.1 started by the test. How the stream's bytes become chunks is tested in test_sse.py.

A fake clock that ticks 1.0 per call makes every recorded time a count of clock reads: the
attempt is the first tick, sent_s the second (the request written to its connection), reads take
later ones (the reader stamps a read before parsing it, so every event in one read gets that
read's tick, less the bytes' microseconds of age in the kernel; the C reader reads the clock once
per wake of the loop, the Python one once per read), done_s is the last. How many reads a
response takes is up to the kernel, so the tests assert what follows whatever it is.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import struct
import subprocess
import time
import zlib
from array import array

import pytest

from pytest_llmperf.client import readers
from pytest_llmperf.client.http1 import ConnectionPool
from pytest_llmperf.client.openai import ERROR_BODY_CHARS, ClientOptions, OpenAIStreamClient
from pytest_llmperf.client.readers import SO_TIMESTAMPNS, kernel_stamp
from pytest_llmperf.records import Request, RequestRecord
from tests.unit.canned_server import (
    MODEL,
    TEXT,
    CannedServer,
    Ticking,
    client,
    send,
    send_all,
    serve,
)
from tests.unit.vllm_chunks import (
    CHAT_ROLE,
    CHAT_TOKEN,
    COMPLETION_CHUNK,
    DONE,
    EMPTY_TEXT_ONE_ID,
    TWO_IDS,
    USAGE,
)


@pytest.fixture(autouse=True, params=["C", "Python"])
def reader(request, monkeypatch):
    """Every test runs on both socket readers (readers.py): the C one and its Python twin."""
    if request.param == "Python":
        monkeypatch.setenv("LLMPERF_NO_EXTENSIONS", "1")
    else:
        monkeypatch.delenv("LLMPERF_NO_EXTENSIONS", raising=False)
    if readers.reader_kind() != request.param:
        pytest.skip("the C reader is not built here")
    return request.param
IDS = Request(prompt=(11, 12, 13), prompt_tokens=3, output_tokens=4)


# ------------------------------------------------------------------ request bodies


def test_completions_body_with_text():
    assert client().body(TEXT) == {
        "model": MODEL,
        "max_tokens": 8,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},  # the server's own token counts
        "prompt": "Hello world",
        # Forces exactly max_tokens: ignore_eos alone does not stop every EOS id.
        "min_tokens": 8,
        "ignore_eos": True,
        "return_token_ids": True,
    }


def test_completions_body_with_token_ids_sends_a_json_list():
    body = client().body(IDS)
    assert body["prompt"] == [11, 12, 13]
    assert json.loads(json.dumps(body))["prompt"] == [11, 12, 13]
    assert (body["max_tokens"], body["min_tokens"]) == (4, 4)


def test_chat_body():
    c = client("chat")
    assert c.path == "/v1/chat/completions"
    body = c.body(TEXT)
    assert body["messages"] == [{"role": "user", "content": "Hello world"}]
    assert "prompt" not in body
    assert body["min_tokens"] == 8 and body["return_token_ids"] is True


def test_chat_with_token_ids_is_refused():
    with pytest.raises(ValueError) as excinfo:
        client("chat").body(IDS)
    assert str(excinfo.value) == "chat requests need text prompts, not token ids"


def test_without_vllm_extensions_only_openai_fields():
    # For servers that reject unknown fields (other OpenAI-compatible engines).
    assert client(vllm_extensions=False).body(TEXT) == {
        "model": MODEL, "max_tokens": 8, "temperature": 0.0, "stream": True,
        "stream_options": {"include_usage": True}, "prompt": "Hello world",
    }


def test_extra_body_is_added_last_and_wins():
    body = client(extra_body=(("temperature", 0.7), ("top_p", 0.9))).body(TEXT)
    assert (body["temperature"], body["top_p"]) == (0.7, 0.9)


def test_paths_and_base_url():
    c = OpenAIStreamClient("http://host:8000/", MODEL)
    assert c.base_url == "http://host:8000"
    assert c.path == "/v1/completions"
    assert c.options == ClientOptions()


def test_an_endpoint_that_is_not_an_http_url_is_refused():
    with pytest.raises(ValueError) as excinfo:
        OpenAIStreamClient("localhost:8000", MODEL)
    assert str(excinfo.value) == (
        "endpoint URL must be http(s)://host[:port][/path], got 'localhost:8000'"
    )


# ------------------------------------------------------------------ real HTTP, local server


@pytest.fixture
def tls_server(tmp_path, monkeypatch):
    """The canned server over TLS, with a self-signed certificate the client is told to trust
    (ssl.create_default_context reads $SSL_CERT_FILE)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    canned = CannedServer()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    canned.httpd.socket = context.wrap_socket(canned.httpd.socket, server_side=True)
    canned.url = canned.url.replace("http://127.0.0.1", "https://localhost")
    yield from serve(canned)


def assert_ticks(record: RequestRecord, clock: Ticking) -> None:
    """What the ticking clock fixes whatever the number of reads: sent_s is the second tick (the
    first is the attempt, before any wait for a connection), done_s the last, and every chunk
    came with a read in between."""
    assert record.sent_s == 2.0
    assert record.done_s == float(clock.calls)
    reads = clock.calls - 3
    assert all(2.0 < t < record.done_s for t in record.chunk_times_s)
    assert record.chunk_times_s == sorted(record.chunk_times_s)
    assert len(set(record.chunk_times_s)) <= reads


def test_send_records_chunk_times_tokens_and_usage(server):
    server.sse(COMPLETION_CHUNK, TWO_IDS, EMPTY_TEXT_ONE_ID, USAGE, DONE)
    clock = Ticking()
    (record,), c = send_all(server.url, [TEXT], clock=clock)
    assert_ticks(record, clock)
    assert record == RequestRecord(
        index=7, expected_prompt_tokens=5, expected_output_tokens=8, scheduled_s=0.5,
        sent_s=2.0, chunk_times_s=record.chunk_times_s, chunk_tokens=[1, 2, 1],
        done_s=record.done_s, usage_prompt_tokens=16, usage_output_tokens=8,
        output_digest=zlib.crc32(array("i", [123, 5, 6, 5]).tobytes()),  # the ids sent
    )
    assert record.ok
    # Token events that shared a read with the one before are counted as coalesced.
    assert c.coalesced_chunks == 3 - len(set(record.chunk_times_s))
    path, body = server.requests[0]
    assert path == "/v1/completions"
    assert body["prompt"] == "Hello world" and body["min_tokens"] == 8
    assert body == c.body(TEXT)  # what body() builds is what goes out


def test_send_chat_posts_to_the_chat_path(server):
    server.sse(CHAT_ROLE, CHAT_TOKEN, USAGE, DONE)
    clock = Ticking()
    (record,), _ = send_all(server.url, [TEXT], api="chat", clock=clock)
    assert server.requests[0][0] == "/v1/chat/completions"
    assert server.requests[0][1]["messages"] == [{"role": "user", "content": "Hello world"}]
    assert record.chunk_tokens == [1]  # the role chunk counts nothing
    assert_ticks(record, clock)


def test_a_path_in_the_endpoint_url_prefixes_the_api_path(server):
    server.sse(COMPLETION_CHUNK, USAGE, DONE)
    record = send(server.url + "/proxy/")
    assert record.ok
    assert server.requests[0][0] == "/proxy/v1/completions"


def test_send_with_the_real_clock_orders_times(server):
    server.sse(COMPLETION_CHUNK, COMPLETION_CHUNK, USAGE, DONE)
    record = send(server.url, clock=time.perf_counter)
    assert record.sent_s <= record.chunk_times_s[0] <= record.chunk_times_s[1] <= record.done_s
    assert record.chunk_tokens == [1, 1]


def test_a_busy_client_stamps_bytes_when_the_kernel_received_them(server):
    """The loop is blocked for 0.3 s right after the request goes out; the answer arrives during
    that time and its chunk keeps the kernel's receive time, not the time the loop read it."""
    server.sse(COMPLETION_CHUNK, USAGE, DONE)

    async def go() -> RequestRecord:
        async with OpenAIStreamClient(server.url, MODEL, clock=time.perf_counter) as c:
            await c.send(0, TEXT, 0.0)  # opens the connection the next request reuses
            request = asyncio.ensure_future(c.send(1, TEXT, 0.0))  # its first step writes
            asyncio.get_running_loop().call_soon(time.sleep, 0.3)  # then the loop blocks
            return await request

    record = asyncio.run(go())
    assert record.ok
    assert record.done_s - record.sent_s >= 0.3
    assert record.chunk_times_s[0] - record.sent_s < 0.1


def test_the_set_up_of_a_new_connection_is_not_ttft(server, monkeypatch):
    """TTFT runs from when the request was written: a request that first waits 0.3 s for its
    connection does not count that wait (the mock's truth cannot, and a kept-alive pool rarely
    pays it)."""
    server.sse(COMPLETION_CHUNK, USAGE, DONE)
    connect = ConnectionPool._connect

    async def slow_connect(pool):
        await asyncio.sleep(0.3)
        return await connect(pool)

    monkeypatch.setattr(ConnectionPool, "_connect", slow_connect)
    record = send(server.url, clock=time.perf_counter)
    assert record.ok
    assert record.chunk_times_s[0] - record.sent_s < 0.1
    assert record.done_s - record.sent_s < 0.1


def test_https_streams_through_tls(tls_server):
    tls_server.sse(COMPLETION_CHUNK, COMPLETION_CHUNK, USAGE, DONE)
    records, _ = send_all(tls_server.url, [TEXT, TEXT], clock=time.perf_counter)
    assert [r.ok for r in records] == [True, True]
    assert records[0].chunk_tokens == [1, 1]
    assert records[0].sent_s <= records[0].chunk_times_s[0] <= records[0].done_s
    assert tls_server.connections == 1  # kept alive over TLS too


def test_a_request_larger_than_the_socket_buffer_goes_out_whole(server):
    # 4 MB of prompt: the first send takes part of it, the rest waits for the socket.
    server.sse(COMPLETION_CHUNK, USAGE, DONE)
    big = Request(prompt="x" * 4_000_000, prompt_tokens=5, output_tokens=8)
    records, _ = send_all(server.url, [big, TEXT])
    assert [r.ok for r in records] == [True, True]
    assert len(server.requests[0][1]["prompt"]) == 4_000_000
    assert server.connections == 1  # and the connection is reused afterwards


def test_keep_alive_reuses_one_connection(server):
    server.sse(COMPLETION_CHUNK, USAGE, DONE)
    clock = Ticking()
    records, _ = send_all(server.url, [TEXT, TEXT, IDS], clock=clock)
    assert [r.ok for r in records] == [True, True, True]
    assert [r.index for r in records] == [7, 8, 9]
    assert len(server.requests) == 3
    assert server.connections == 1
    # One clock, one time line: each request starts after the one before ended.
    assert records[0].done_s < records[1].sent_s < records[1].done_s < records[2].sent_s


def test_a_connection_the_server_closes_is_not_reused(server):
    server.sse(COMPLETION_CHUNK, USAGE, DONE)
    server.close = True  # "Connection: close"
    records, _ = send_all(server.url, [TEXT, TEXT])
    assert [r.ok for r in records] == [True, True]
    assert server.connections == 2


def test_http_error_status_becomes_the_record_error(server):
    server.status, server.body = 404, b'{"detail":"Not Found"}'
    server.content_type = "application/json"
    clock = Ticking()
    (record,), _ = send_all(server.url, [TEXT], clock=clock)
    assert record.error == 'HTTP 404: {"detail":"Not Found"}'
    assert record.chunk_times_s == []
    assert_ticks(record, clock)
    assert record.done_s >= 3.0  # at least one read between sending and done
    assert not record.ok


def test_http_error_with_a_chunked_body(server):
    server.raw = (b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n"
                  b'a\r\n{"error": \r\n'
                  b'e\r\n"engine died"}\r\n'
                  b"0\r\n\r\n")
    record = send(server.url)
    assert record.error == 'HTTP 500: {"error": "engine died"}'  # the chunks, joined
    assert record.chunk_times_s == []


def test_long_error_body_is_cut(server):
    server.status, server.body = 500, b"x" * 1000
    record = send(server.url)
    assert record.error == "HTTP 500: " + "x" * ERROR_BODY_CHARS


def test_a_chunked_stream_is_read(server):
    # uvicorn (vLLM) streams with chunked transfer encoding; chunk edges need not match events.
    body = f"{COMPLETION_CHUNK}\n\n{TWO_IDS}\n\n{USAGE}\n\n{DONE}\n\n".encode()
    pieces = [body[:30], body[30:130], body[130:]]
    server.raw = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n"
                  + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n")
    record = send(server.url)
    assert record.error is None
    assert record.chunk_tokens == [1, 2]


def test_server_closing_the_connection_mid_stream(server):
    # Headers promise a chunked stream; one event comes, then the server hangs up.
    server.raw = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n"
                  b"%x\r\n%s\n\n\r\n" % (len(COMPLETION_CHUNK) + 2, COMPLETION_CHUNK.encode()))
    record = send(server.url)
    assert record.error.startswith(
        "StreamClosed: the server closed the connection before the response ended")
    assert record.chunk_tokens == [1]  # what came before the close is kept
    assert not record.ok and record.done_s is not None


def test_server_closing_before_the_content_length_is_read(server):
    server.raw = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                  b"Content-Length: 1000\r\n\r\n" + f"{COMPLETION_CHUNK}\n\n".encode())
    record = send(server.url)
    assert record.error.startswith(
        "StreamClosed: the server closed the connection before the response ended")


def test_a_response_that_is_not_http(server):
    server.raw = b"SSH-2.0-OpenSSH_9.6\r\n"
    record = send(server.url)
    assert record.error.startswith("StreamClosed: malformed HTTP response: ")


def test_a_response_ended_by_closing_the_connection_is_complete(server):
    # Legal HTTP/1.x: no Content-Length and no chunked encoding, the body ends at the close.
    server.raw = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                  + f"{COMPLETION_CHUNK}\n\n{USAGE}\n\n{DONE}\n\n".encode())
    record = send(server.url)
    assert record.error is None and record.chunk_tokens == [1]


def test_stream_without_tokens_is_an_error(server):
    server.sse(CHAT_ROLE, USAGE, DONE)
    record = send(server.url)
    assert record.error == "stream ended without any generated token"
    assert record.usage_output_tokens == 8


def test_error_in_the_stream_over_http_stops_reading(server):
    server.sse(COMPLETION_CHUNK, 'data: {"error": {"message": "engine died", "code": 500}}',
               COMPLETION_CHUNK, DONE)
    record = send(server.url)
    assert record.error is not None and not record.ok
    assert record.chunk_tokens == [1]  # nothing read after the error


def test_error_in_the_stream_over_http(server):
    server.sse(COMPLETION_CHUNK, 'data: {"error": {"message": "engine died", "code": 500}}',
               COMPLETION_CHUNK, DONE)
    record = send(server.url)
    assert record.error == 'server error in stream: {"message": "engine died", "code": 500}'


def test_malformed_chunk_becomes_an_error_not_an_exception(server):
    server.sse("data: {not json", DONE)
    record = send(server.url)
    assert record.error == (
        "malformed stream event (JSON is malformed: object keys must be strings (byte 2)): "
        "b'data: {not json'"
    )


def test_chat_with_token_ids_fails_the_record_not_the_run(server):
    record = send(server.url, request=IDS, api="chat")
    assert record.error == "ValueError: chat requests need text prompts, not token ids"
    assert server.requests == []  # nothing was sent


def test_a_failed_request_does_not_break_the_next_one(server):
    server.sse(COMPLETION_CHUNK, USAGE, DONE)
    records, _ = send_all(server.url, [IDS, TEXT], api="chat")
    assert records[0].error == "ValueError: chat requests need text prompts, not token ids"
    assert records[1].ok


def test_connection_refused_becomes_the_record_error():
    # A port that was free a moment ago: nothing listens there.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    record = send(f"http://127.0.0.1:{port}")
    assert record.error.startswith("ConnectionRefusedError: ")
    assert not record.ok and record.done_s is not None


# ------------------------------------------------------------------ kernel receive times


def timespec(ns: int) -> list:
    """The ancillary data recvmsg returns for SO_TIMESTAMPNS, for a receive at `ns`."""
    return [(socket.SOL_SOCKET, SO_TIMESTAMPNS,
             struct.pack("=qq", ns // 1_000_000_000, ns % 1_000_000_000))]


def test_a_read_is_stamped_by_its_age_on_the_kernel_clock(monkeypatch):
    # The wall clock held still: on a loaded machine the real one moved more than 1 ms between
    # the timespec and kernel_stamp's own reading, and the test failed on the machine's noise.
    now = time.time_ns()
    monkeypatch.setattr(readers.time, "time_ns", lambda: now)
    stamp = kernel_stamp(100.0, timespec(now - 5_000_000))
    assert 100.0 - 0.006 < stamp <= 100.0 - 0.005


def test_without_a_kernel_time_the_read_is_stamped_now():
    assert kernel_stamp(100.0, []) == 100.0


def test_a_kernel_time_ahead_of_the_wall_clock_is_stamped_now():
    # The wall clock stepped back between the receive and the read: the age is unknown.
    assert kernel_stamp(100.0, timespec(time.time_ns() + 10**9)) == 100.0


# ------------------------------------------------------------------ body parts, outside the reads


def test_body_parts_are_decoded_in_order_a_few_exchanges_per_loop_callback():
    """The reader only queues parts (http1.ConnectionPool._queue): decoding waits for a loop
    callback of its own, DELIVER_AT_ONCE exchanges each, so a thousand streams reaching their
    flush point in one wake never hold up the next poll of the sockets."""
    from pytest_llmperf.client import http1
    async def go() -> tuple[list, list]:
        loop = asyncio.get_running_loop()
        pool = http1.ConnectionPool("http://127.0.0.1:1", clock=time.perf_counter,
                                    connect_timeout_s=1)
        got: list[tuple[int, bytes]] = []
        exchanges = []
        for n in range(http1.DELIVER_AT_ONCE + 1):
            sink = (lambda n: lambda body, ends, stamps: got.append((n, body)))(n)
            exchange = http1._Exchange(sink, loop.create_future(), 0.0)
            exchange.parts.extend([(b"a", [1], [1.0]), (b"b", [1], [2.0])])
            exchanges.append(exchange)
            pool._queue(exchange)
        assert got == []  # nothing decoded inside the reader's callback
        await asyncio.sleep(0)  # one loop callback: the first DELIVER_AT_ONCE exchanges
        first = list(got)
        await asyncio.sleep(0)
        return first, got

    first, got = asyncio.run(go())
    assert first == [(n, part) for n in range(http1.DELIVER_AT_ONCE) for part in (b"a", b"b")]
    assert got[-2:] == [(http1.DELIVER_AT_ONCE, b"a"), (http1.DELIVER_AT_ONCE, b"b")]
