"""A webhook on 127.0.0.1 for the nightly command's tests: it keeps what it is sent (and stands
for GitHub's API in the commit status sender's tests: the path and headers of each post)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver(ThreadingHTTPServer):
    """A webhook on 127.0.0.1 that keeps what it is sent and answers `status` after `delay_s`."""

    def __init__(self, status: int = 200, delay_s: float = 0.0) -> None:
        self.status, self.delay_s, self.bodies = status, delay_s, []
        self.requests: list[tuple[str, dict[str, str]]] = []  # each post's path and headers
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/services/T0/B0/secret"

    def __exit__(self, *exc) -> None:
        self.shutdown()
        super().__exit__(*exc)

    def handle_error(self, request, client_address) -> None:
        """A sender that gave up on a slow answer (the delay tests' timeouts) breaks the pipe of
        the answer's write: expected. socketserver would print its traceback to stderr from
        this thread, into whichever test captures stderr then (it failed an export test's
        exact line in CI)."""


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.bodies.append((self.headers["Content-Type"], json.loads(body)))
        self.server.requests.append((self.path, dict(self.headers)))
        time.sleep(self.server.delay_s)
        self.send_response(self.server.status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args) -> None:  # the test's output is not the place
        pass
