"""A canned HTTP/1.1 server on 127.0.0.1 and the streaming client that talks to it, for the tests
of the client's real round trips (test_client.py's, and structured outputs')."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pytest_llmperf.client.openai import ClientOptions, OpenAIStreamClient
from pytest_llmperf.records import Request, RequestRecord

MODEL = "suites/models/tiny-llama"
TEXT = Request(prompt="Hello world", prompt_tokens=5, output_tokens=8)


class Ticking:
    """A clock that ticks 1.0 per call, starting at `start`; `calls` counts the reads."""

    def __init__(self, start: float = 1.0) -> None:
        self.start = start
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        return self.start + self.calls - 1


def client(api: str = "completions", **options) -> OpenAIStreamClient:
    return OpenAIStreamClient("http://127.0.0.1:1/", MODEL, ClientOptions(api=api, **options),
                              clock=Ticking())


class CannedServer:
    """An HTTP/1.1 server on 127.0.0.1 that answers every POST with `status` and `body` (one write,
    Content-Length, keep-alive unless `close`), or with `raw`, the exact response bytes, after
    which it closes the connection. `connections` counts the TCP connections it accepted."""

    def __init__(self) -> None:
        self.status = 200
        self.body = b""
        self.content_type = "text/event-stream"
        self.close = False
        self.raw: bytes | None = None
        self.requests: list[tuple[str, dict]] = []
        self.connections = 0
        canned = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn

            def setup(self) -> None:
                super().setup()
                canned.connections += 1  # one handler per accepted connection

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers["Content-Length"])
                canned.requests.append((self.path, json.loads(self.rfile.read(length))))
                if canned.raw is not None:
                    self.wfile.write(canned.raw)
                    self.close_connection = True
                    return
                head = (f"HTTP/1.1 {canned.status} {self.responses[canned.status][0]}\r\n"
                        f"Content-Type: {canned.content_type}\r\n"
                        f"Content-Length: {len(canned.body)}\r\n")
                if canned.close:
                    head += "Connection: close\r\n"
                    self.close_connection = True
                self.wfile.write(head.encode() + b"\r\n" + canned.body)

            def log_message(self, *args) -> None:  # keep the test output clean
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def sse(self, *lines: str) -> None:
        self.status, self.body = 200, "".join(f"{line}\n\n" for line in lines).encode()


def serve(canned: CannedServer):
    # A short poll interval: shutdown() waits for one poll, 0.5 s by default, per test.
    thread = threading.Thread(target=canned.httpd.serve_forever, kwargs={"poll_interval": 0.01},
                              daemon=True)
    thread.start()
    yield canned
    canned.httpd.shutdown()
    canned.httpd.server_close()
    thread.join(timeout=5)


def send_all(url: str, requests: list[Request], api: str = "completions", clock=None,
             scheduled_s: float = 0.5) -> tuple[list[RequestRecord], OpenAIStreamClient]:
    """Send `requests` one after the other on one client; returns the records and the client."""
    async def go() -> tuple[list[RequestRecord], OpenAIStreamClient]:
        options = ClientOptions(api=api)
        async with OpenAIStreamClient(url, MODEL, options, clock=clock or Ticking()) as c:
            return [await c.send(7 + i, r, scheduled_s) for i, r in enumerate(requests)], c

    return asyncio.run(go())


def send(url: str, request: Request = TEXT, api: str = "completions", clock=None,
         scheduled_s: float = 0.5) -> RequestRecord:
    return send_all(url, [request], api, clock, scheduled_s)[0][0]
