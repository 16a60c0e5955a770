"""The streaming client: request bodies, SSE line handling with the chunk shapes vLLM 0.32 sends,
and real HTTP round trips against a tiny canned server on 127.0.0.1 started by the test.

A fake clock that ticks 1.0 per call makes every recorded time exact: sent_s is the first tick,
each `data:` line takes the next one, done_s the last.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pytest_llmperf.client import ERROR_BODY_CHARS, ClientOptions, OpenAIStreamClient
from pytest_llmperf.records import Request, RequestRecord

MODEL = "suites/models/tiny-llama"
TEXT = Request(prompt="Hello world", prompt_tokens=5, output_tokens=8)
IDS = Request(prompt=(11, 12, 13), prompt_tokens=3, output_tokens=4)

# Completions chunks as vLLM 0.32 streams them with return_token_ids.
COMPLETION_CHUNK = ('data: {"choices":[{"index":0,"text":" foo","token_ids":[123],'
                    '"finish_reason":null}],"usage":null}')
EMPTY_TEXT_ONE_ID = 'data: {"choices":[{"index":0,"text":"","token_ids":[5]}],"usage":null}'
TWO_IDS = 'data: {"choices":[{"index":0,"text":" a b","token_ids":[5,6]}],"usage":null}'
USAGE = ('data: {"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":8,'
         '"total_tokens":24}}')
CHAT_ROLE = 'data: {"choices":[{"delta":{"role":"assistant","content":""},"token_ids":null}]}'
CHAT_TOKEN = 'data: {"choices":[{"delta":{"content":" hi"},"token_ids":[42]}]}'
DONE = "data: [DONE]"


def ticking(start: float = 1.0):
    ticks = itertools.count(start)
    return lambda: float(next(ticks))


def client(api: str = "completions", **options) -> OpenAIStreamClient:
    return OpenAIStreamClient("http://127.0.0.1:1/", MODEL, ClientOptions(api=api, **options),
                              clock=ticking())


def fresh() -> RequestRecord:
    return RequestRecord(index=0, expected_prompt_tokens=16, expected_output_tokens=8,
                         scheduled_s=0.0)


def feed(lines: list[str], api: str = "completions") -> tuple[RequestRecord, list[bool]]:
    """Run lines through _on_line as send() does; returns the record and each line's result."""
    c, record = client(api), fresh()
    return record, [c._on_line(line, record) for line in lines]


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


# ------------------------------------------------------------------ SSE lines


def test_completion_chunk_is_one_token_at_its_arrival_time():
    record, finished = feed([COMPLETION_CHUNK])
    assert finished == [False]
    assert (record.chunk_times_s, record.chunk_tokens) == ([1.0], [1])
    assert record.tokens_estimated is False
    assert record.usage_output_tokens is None  # "usage": null is no usage


def test_empty_text_with_a_token_id_still_counts():
    # A token that decodes to nothing (a partial UTF-8 byte) is still a generated token.
    record, _ = feed([EMPTY_TEXT_ONE_ID])
    assert record.chunk_tokens == [1]


def test_two_token_ids_count_two():
    # Speculative decoding or a stream interval puts several tokens in one chunk.
    record, _ = feed([TWO_IDS])
    assert record.chunk_tokens == [2]


def test_usage_chunk_sets_usage_and_is_not_a_token_chunk():
    record, finished = feed([COMPLETION_CHUNK, USAGE])
    assert finished == [False, False]
    assert (record.usage_prompt_tokens, record.usage_output_tokens) == (16, 8)
    assert record.chunk_times_s == [1.0]
    assert record.output_tokens == 8  # usage wins over the chunk sum


def test_chat_role_chunk_counts_nothing():
    # TTFT must start at the first *token*, not at the empty role chunk.
    record, _ = feed([CHAT_ROLE, CHAT_TOKEN], api="chat")
    assert (record.chunk_times_s, record.chunk_tokens) == ([2.0], [1])
    assert record.tokens_estimated is False


def test_without_token_ids_one_token_per_non_empty_text_and_marked_estimated():
    lines = [
        'data: {"choices":[{"index":0,"text":" foo"}]}',
        'data: {"choices":[{"index":0,"text":""}]}',
        'data: {"choices":[{"delta":{"content":" bar"}}]}',
    ]
    record, _ = feed(lines)
    assert (record.chunk_times_s, record.chunk_tokens) == ([1.0, 3.0], [1, 1])
    assert record.tokens_estimated is True


def test_done_ends_the_stream():
    record, finished = feed([COMPLETION_CHUNK, DONE])
    assert finished == [False, True]
    assert record.error is None


def test_data_without_a_space_is_read():
    record, _ = feed(['data:{"choices":[{"index":0,"text":"x","token_ids":[1]}]}', "data:[DONE]"])
    assert record.chunk_tokens == [1]


def test_lines_that_are_not_data_are_skipped_and_not_timed():
    c = client()
    record = fresh()
    for line in ["", ": ping", "event: message", "id: 3"]:
        assert c._on_line(line, record) is False
    c._on_line(COMPLETION_CHUNK, record)
    assert record.chunk_times_s == [1.0]  # the clock was not read for the skipped lines


def test_error_in_the_stream_sets_the_record_error():
    error = ('data: {"error": {"object": "error", "message": "boom", '
             '"type": "InternalServerError", "code": 500}}')
    record, finished = feed([COMPLETION_CHUNK, error])
    assert finished == [False, True]
    assert record.error == (
        'server error in stream: {"object": "error", "message": "boom", '
        '"type": "InternalServerError", "code": 500}'
    )
    assert not record.ok


def test_several_choices_in_one_chunk_each_count():
    line = ('data: {"choices":[{"index":0,"text":"a","token_ids":[1]},'
            '{"index":1,"text":"b","token_ids":[2,3]}]}')
    record, _ = feed([line])
    assert (record.chunk_times_s, record.chunk_tokens) == ([1.0, 1.0], [1, 2])


# ------------------------------------------------------------------ real HTTP, local server


class CannedServer:
    """An HTTP server on 127.0.0.1 that answers every POST with `status` and `body`."""

    def __init__(self) -> None:
        self.status = 200
        self.body = b""
        self.content_type = "text/event-stream"
        self.requests: list[tuple[str, dict]] = []
        canned = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers["Content-Length"])
                canned.requests.append((self.path, json.loads(self.rfile.read(length))))
                self.send_response(canned.status)
                self.send_header("Content-Type", canned.content_type)
                self.send_header("Content-Length", str(len(canned.body)))
                self.end_headers()
                self.wfile.write(canned.body)

            def log_message(self, *args) -> None:  # keep the test output clean
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def sse(self, *lines: str) -> None:
        self.status, self.body = 200, "".join(f"{line}\n\n" for line in lines).encode()


@pytest.fixture
def server(monkeypatch):
    # httpx honours proxy variables; the canned server must be reached directly.
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    canned = CannedServer()
    # A short poll interval: shutdown() waits for one poll, 0.5 s by default, per test.
    thread = threading.Thread(target=canned.httpd.serve_forever, kwargs={"poll_interval": 0.01},
                              daemon=True)
    thread.start()
    yield canned
    canned.httpd.shutdown()
    canned.httpd.server_close()
    thread.join(timeout=5)


def send(url: str, request: Request = TEXT, api: str = "completions", clock=None,
         scheduled_s: float = 0.5) -> RequestRecord:
    async def go() -> RequestRecord:
        options = ClientOptions(api=api)
        async with OpenAIStreamClient(url, MODEL, options, clock=clock or ticking()) as c:
            return await c.send(7, request, scheduled_s)

    return asyncio.run(go())


def test_send_records_chunk_times_tokens_and_usage(server):
    server.sse(COMPLETION_CHUNK, TWO_IDS, EMPTY_TEXT_ONE_ID, USAGE, DONE)
    record = send(server.url)
    assert record == RequestRecord(
        index=7, expected_prompt_tokens=5, expected_output_tokens=8, scheduled_s=0.5,
        sent_s=1.0,  # the first tick, before the request went out
        chunk_times_s=[2.0, 3.0, 4.0], chunk_tokens=[1, 2, 1],
        done_s=7.0,  # usage at 5, [DONE] at 6, then done
        usage_prompt_tokens=16, usage_output_tokens=8,
    )
    assert record.ok
    path, body = server.requests[0]
    assert path == "/v1/completions"
    assert body["prompt"] == "Hello world" and body["min_tokens"] == 8


def test_send_chat_posts_to_the_chat_path(server):
    server.sse(CHAT_ROLE, CHAT_TOKEN, USAGE, DONE)
    record = send(server.url, api="chat")
    assert server.requests[0][0] == "/v1/chat/completions"
    assert server.requests[0][1]["messages"] == [{"role": "user", "content": "Hello world"}]
    assert (record.chunk_times_s, record.chunk_tokens) == ([3.0], [1])


def test_send_with_the_real_clock_orders_times(server):
    server.sse(COMPLETION_CHUNK, COMPLETION_CHUNK, USAGE, DONE)
    record = send(server.url, clock=time.perf_counter)
    assert record.sent_s <= record.chunk_times_s[0] <= record.chunk_times_s[1] <= record.done_s
    assert record.chunk_tokens == [1, 1]


def test_http_error_status_becomes_the_record_error(server):
    server.status, server.body = 404, b'{"detail":"Not Found"}'
    server.content_type = "application/json"
    record = send(server.url)
    assert record.error == 'HTTP 404: {"detail":"Not Found"}'
    assert record.chunk_times_s == []
    assert (record.sent_s, record.done_s) == (1.0, 2.0)
    assert not record.ok


def test_long_error_body_is_cut(server):
    server.status, server.body = 500, b"x" * 1000
    record = send(server.url)
    assert record.error == "HTTP 500: " + "x" * ERROR_BODY_CHARS


def test_stream_without_tokens_is_an_error(server):
    server.sse(CHAT_ROLE, USAGE, DONE)
    record = send(server.url)
    assert record.error == "stream ended without any generated token"
    assert record.usage_output_tokens == 8


def test_error_in_the_stream_over_http(server):
    server.sse(COMPLETION_CHUNK, 'data: {"error": {"message": "engine died", "code": 500}}',
               COMPLETION_CHUNK, DONE)
    record = send(server.url)
    assert record.error == 'server error in stream: {"message": "engine died", "code": 500}'
    assert record.chunk_tokens == [1]  # nothing read after the error


def test_malformed_chunk_becomes_an_error_not_an_exception(server):
    server.sse("data: {not json", DONE)
    record = send(server.url)
    assert record.error.startswith("JSONDecodeError: ")


def test_chat_with_token_ids_fails_the_record_not_the_run(server):
    record = send(server.url, request=IDS, api="chat")
    assert record.error == "ValueError: chat requests need text prompts, not token ids"
    assert server.requests == []  # nothing was sent


def test_connection_refused_becomes_the_record_error():
    # A port that was free a moment ago: nothing listens there.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    record = send(f"http://127.0.0.1:{port}")
    assert record.error.startswith("ConnectError")
    assert not record.ok and record.done_s is not None
