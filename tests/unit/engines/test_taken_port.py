"""A port that another process takes between free_port() and the server's bind: the server is
started again on another port, and a failure that is not a taken port is raised at once. The
server here is a stand-in interpreter that binds its --port as vLLM's API server does, answers
GET /health, and on a taken port exits with the line Python's socket error prints; real vLLM
meets the same race nightly (tests/integration/test_engine_faults.py)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from pytest_llmperf.engines import server as server_mod
from pytest_llmperf.engines.errors import EngineStartError
from pytest_llmperf.engines.server import VllmServer
from suites.tiny import TINY_CPU

STAND_IN = f"""#!{sys.executable}
import http.server, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
if "--fail" in sys.argv:
    sys.exit("ValueError: no such model")

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass

try:
    server = http.server.HTTPServer(("127.0.0.1", port), Health)
except OSError as error:  # as uvicorn's bind fails: "[Errno 98] Address already in use"
    sys.exit(f"OSError: {{error}}")
server.serve_forever()
"""


@pytest.fixture
def stand_in(tmp_path: Path) -> str:
    path = tmp_path / "python"
    path.write_text(STAND_IN)
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def taken_then_free(monkeypatch):
    """free_port() names a taken port once, then a free one."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    first = taken.getsockname()[1]
    ports = iter([first])
    real_free_port = server_mod.free_port
    monkeypatch.setattr(server_mod, "free_port", lambda host: next(ports, None) or
                        real_free_port(host))
    yield first
    taken.close()


def test_a_taken_port_is_tried_again_on_another(tmp_path, stand_in, taken_then_free):
    server = VllmServer(TINY_CPU.replace(python=stand_in), tmp_path)
    try:
        server.start()
        assert server.port != taken_then_free
        first_log = tmp_path / f"vllm-{taken_then_free}.log"
        assert "address already in use" in first_log.read_text().lower()
        assert server.death() is None
    finally:
        server.stop()


def test_another_failure_is_raised_without_a_second_try(tmp_path, stand_in, taken_then_free):
    engine = TINY_CPU.replace(python=stand_in, extra_args={"fail": True})
    server = VllmServer(engine, tmp_path)
    with pytest.raises(EngineStartError, match="exited with code 1"):
        server.start()
    # One log: the taken port's, whose failure was not a taken port's (--fail comes first).
    assert [path.name for path in tmp_path.glob("vllm-*.log")] == [
        f"vllm-{taken_then_free}.log"]
