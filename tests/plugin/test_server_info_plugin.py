"""Which vLLM each server ran, as users meet it: pytester runs suites whose engines are fake
servers answering GET /version, with the measurement injected (as
tests/plugin/test_confirm_later_plugin.py does), and we read the engine lines, the A/B note, the
run file and the baseline's provenance. The real engine path is
tests/integration/test_server_version_real.py.
"""

from __future__ import annotations

import json
import stat
import threading
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pytest_llmperf.machine.hardware import software_versions
from tests.conftest import TINY_LLAMA

CONFTEST = '''
import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pytest_llmperf.plugin import hooks as plugin
from pytest_llmperf.session import runner as runner_mod
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.client.measure import Measurement


def answering(version):
    """A server whose /version says `version`, as vLLM's does."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            answers = {"/health": {}, "/v1/models": {"data": [{"id": "m"}]},
                       "/version": {"version": version}}
            found = self.path in answers
            body = json.dumps(answers.get(self.path, {"detail": "Not Found"})).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


SERVERS = {"A": answering("0.32.0"), "B": answering("0.31.0")}
URLS = {side: f"http://127.0.0.1:{s.server_address[1]}" for side, s in SERVERS.items()}


class Server:
    start_time_s = 2.0
    log_path = None
    def __init__(self, engine):
        self.base_url = URLS["B" if engine.python else "A"]


class Pool:
    on_death = None
    starts = []
    deaths = Counter()
    def get(self, engine):
        return Server(engine)
    def gpus_of(self, engine):
        return []
    def stop(self, engine):
        pass
    def stop_all(self):
        pass
    def server_pid(self, engine):  # no engine process: none watched
        return None
    def trim(self, keep=None):
        pass
    def room_for(self, engines):
        import contextlib
        return contextlib.nullcontext()

    def start_together(self, engines):
        pass


@pytest.hookimpl(trylast=True)  # after the plugin made its session
def pytest_configure(config):
    config.stash[plugin.SESSION_KEY].runner.target.pool = Pool()


def pytest_unconfigure(config):
    for server in SERVERS.values():
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def _inject(monkeypatch):
    def measure(endpoint, requests, pattern, **_):
        return Measurement([RequestRecord(
            index=i, expected_prompt_tokens=r.prompt_tokens, expected_output_tokens=3,
            scheduled_s=float(i), sent_s=float(i),
            chunk_times_s=[i + 0.1 + 0.01 * n for n in range(3)], chunk_tokens=[1, 1, 1],
            usage_prompt_tokens=r.prompt_tokens, usage_output_tokens=3)
            for i, r in enumerate(requests)])

    monkeypatch.setattr(runner_mod, "measure", measure)
'''

SUITE = '''
import pytest
from pytest_llmperf import Engine, Workload

pytestmark = pytest.mark.engine(Engine(model=%r, load_format="dummy", served_model_name="m"))

def test_run(llmperf):
    llmperf.run(Workload.fixed(input_tokens=8, output_tokens=3, num_requests=4, concurrency=2))
''' % str(TINY_LLAMA)

OURS = software_versions()


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch):
    monkeypatch.setenv("LLMPERF_DISTURBANCE", "off")  # fake servers: no processes to watch
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def other_install(path) -> str:
    """An interpreter that answers both the A/B check (it "has vLLM") and the version probe as
    an install of vLLM 0.31.0 with our torch would."""
    answer = json.dumps({"vllm": "0.31.0", "torch": OURS["torch"], "python": "3.11.7"})
    python = path / "other-python"
    python.write_text(f"#!/bin/sh\necho '{answer}'\n")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return str(python)


@pytest.mark.parametrize("xdist", [[], ["-n", "1"]], ids=["one-process", "xdist"])
def test_the_engine_line_run_file_and_baseline_name_the_servers_vllm(suite, xdist):
    result = suite.runpytest("-p", "no:cacheprovider", *xdist, "--llmperf-update-baselines",
                             "--llmperf-json", "run.json")
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines([r"^engine tiny-llama = tiny-llama .*; vLLM 0\.32\.0(;.*)?$"])
    [entry] = json.loads((suite.path / "run.json").read_text())["llmperf"]["results"]
    # vLLM's version from the server itself; torch and python from the engine's interpreter.
    installed = {k: OURS[k] for k in ("torch", "python") if OURS[k]}
    assert entry["server"] == {"vllm": "0.32.0", "source": "GET /version", **installed}
    baseline = tomllib.loads((suite.path / "baselines/cpu/test_suite.toml").read_text())
    assert baseline["test_run"]["provenance"]["server"] == entry["server"]


def test_an_upgrade_ab_says_which_vllm_each_side_ran(suite, tmp_path):
    result = suite.runpytest("-p", "no:cacheprovider", "--llmperf-summary", "full",
                             "--llmperf-ab", json.dumps({"python": other_install(tmp_path)}),
                             "--llmperf-ab-pairs", "2", "--llmperf-json", "run.json")
    result.assert_outcomes(passed=1)
    # One label for both sides (it leaves `python` out), so the line names each side's.
    result.stdout.re_match_lines([
        r"^engine tiny-llama = tiny-llama .*; A: vLLM 0\.32\.0 / B: vLLM 0\.31\.0(;.*)?$"])
    result.stdout.re_match_lines([r".*test_run \(B\): B/A over 2 ABBA pairs \(tolerance 0\.1\): "
                                  r".*; A: vLLM 0\.32\.0 / B: vLLM 0\.31\.0$"])
    results = json.loads((suite.path / "run.json").read_text())["llmperf"]["results"]
    servers = {entry["key"]: entry["server"] for entry in results}
    assert servers["test_run (A)"]["vllm"] == "0.32.0"
    assert servers["test_run (B)"] == {"vllm": "0.31.0", "source": "GET /version",
                                       "python": "3.11.7",
                                       **({"torch": OURS["torch"]} if OURS["torch"] else {})}


@pytest.fixture
def not_vllm():
    """A server with no /version route (another engine, a gateway), in this process: pytester
    runs the suite in it too. (The measurement is injected: it is never sent a request.)"""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _NotFound(BaseHTTPRequestHandler):
    """OpenAI's model list (the endpoint preflight reads it), and 404 for everything else."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        found = self.path == "/v1/models"
        body = json.dumps({"data": [{"id": "m", "object": "model"}]}).encode() if found else b""
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_an_endpoint_without_version_is_unknown_and_the_run_goes_on(suite, not_vllm):
    result = suite.runpytest("-p", "no:cacheprovider", "--llmperf-endpoint", not_vllm,
                             "--llmperf-hardware", "cpu", "--llmperf-json", "run.json")
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines([r"^engine tiny-llama = tiny-llama .*; server version unknown$"])
    [entry] = json.loads((suite.path / "run.json").read_text())["llmperf"]["results"]
    assert entry["server"] == {"vllm": "unknown", "source": "GET /version: HTTP 404"}
