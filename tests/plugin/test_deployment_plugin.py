"""Endpoint mode against deployments as users meet them (docs/deployments.md): a server behind an
API key, a gateway that wants headers of its own, TLS with a private CA, base URLs written every
way, a model served under another name, and the preflight's one line when the session cannot
measure. The servers are the mock (pytest_llmperf/clientbench/mockserver.py) requiring headers,
behind a real TLS proxy where https is tested (tests/tls.py)."""

from __future__ import annotations

import base64
import re

# Imported here, before any in-process pytester run: httpx imports httpcore on its first request
# and keeps a map of httpcore's exception classes; pytester drops the modules an inner run imported,
# so a later run's fresh httpcore would raise classes that map no longer knows (an INTERNALERROR
# instead of the preflight's line).
import httpcore  # noqa: F401
import pytest

from pytest_llmperf.clientbench.mockprocess import MockProcess
from pytest_llmperf.engines.server import free_port
from tests.conftest import REPO
from tests.plugin.mock_endpoint import CALM, mock_fixture
from tests.tls import TlsProxy, make_certs

ARCH = REPO / "suites" / "models" / "tiny-llama-arch"
SUITE = """
import pytest
from pytest_llmperf import Engine, Workload

@pytest.mark.engine(Engine(model={model!r}))
def test_x(llmperf):
    llmperf.run(Workload.fixed(input_tokens=8, output_tokens=4, num_requests=6, concurrency=2))
"""
KEY = "sk-planted-endpoint-key-789"
GATEWAY_TOKEN = "gw-planted-token-321"
PASSWORD = "pw-planted-654"
# CALM: a busy machine (pytest-xdist workers on 2 cores) must not turn these into client-limited
# failures; one client process keeps the reader this process chose (LLMPERF_NO_EXTENSIONS).
# the summary's row (short or -v): 6 requests ok, 0 failed
ROW = re.compile(r"^ *(test_suite\.py::)?test_x .* 6 +0 ")


# A server behind an API key, as `vllm serve --api-key` is.
keyed = mock_fixture(0.005, require_headers={"Authorization": f"Bearer {KEY}"})


@pytest.fixture(scope="module")
def gated():
    """A gateway that wants a token header of its own and a team header."""
    server = MockProcess(0.005, require_headers={"X-Gateway-Token": GATEWAY_TOKEN,
                                                 "X-Team": "perf"})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def https(keyed, certs):
    """The keyed server behind TLS, its certificate signed by a private CA."""
    with TlsProxy(int(keyed.url.rpartition(":")[2]), certs) as proxy:
        yield proxy


def run(pytester: pytest.Pytester, url: str, *args: str, model: str = "mock"
        ) -> pytest.RunResult:
    """The suite against `url`; the mock serves its model as `mock` (--llmperf-model)."""
    pytester.makepyfile(test_suite=SUITE.format(model=str(ARCH)))
    return pytester.runpytest("-p", "no:cacheprovider", "--llmperf-endpoint", url,
                              "--llmperf-hardware", "cpu", "--llmperf-model", model, *CALM,
                              *args)


def usage_error(result: pytest.RunResult) -> str:
    """The session's one line, with its `ERROR: ` prefix off; nothing ran."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    errors = [line for line in result.stderr.lines if line.startswith("ERROR: ")]
    assert len(errors) == 1, result.stderr.lines
    return errors[0].removeprefix("ERROR: ")


def leaks(pytester: pytest.Pytester, result: pytest.RunResult, *values: str) -> list[str]:
    """Where a secret value shows: each file under the pytester directory, and the output."""
    found = [str(path) for path in sorted(pytester.path.rglob("*")) if path.is_file()
             and any(value.encode() in path.read_bytes() for value in values)]
    output = result.stdout.str() + result.stderr.str()
    return found + [value for value in values if value in output]


def passed_with_a_row(result: pytest.RunResult) -> None:
    result.assert_outcomes(passed=1)
    assert [line for line in result.stdout.lines if ROW.match(line)], result.stdout.str()


# ------------------------------------------------------------------ the API key

@pytest.mark.parametrize("reader", ["C", "Python"])
def test_the_key_from_the_environment_goes_with_every_request_and_into_no_output(
        pytester: pytest.Pytester, monkeypatch, keyed, reader):
    monkeypatch.setenv("LLMPERF_API_KEY", KEY)
    if reader == "Python":
        monkeypatch.setenv("LLMPERF_NO_EXTENSIONS", "1")
    result = run(pytester, keyed.url, "-v", "--llmperf-json", "run.json",
                 "--llmperf-markdown", "report.md", "--llmperf-save", "saved",
                 "--llmperf-update-baselines")
    passed_with_a_row(result)
    # /metrics was asked with the key too: the mock's page passed its gate and had no vLLM metrics
    # (without the key: "failed: HTTP 401")
    assert (f"no server metrics: GET {keyed.url}/metrics failed: no vLLM metrics in the "
            "response (not a vLLM server?)") in " ".join(result.stdout.str().split())
    assert (pytester.path / "baselines" / "cpu" / "test_suite.toml").exists()
    assert leaks(pytester, result, KEY) == []


def test_openai_api_key_is_read_as_vllm_bench_serve_reads_it(pytester, monkeypatch, keyed):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    passed_with_a_row(run(pytester, keyed.url))


def test_without_a_key_the_session_stops_before_any_test(pytester, monkeypatch, keyed):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert usage_error(run(pytester, keyed.url)) == (
        f"pytest-llmperf: --llmperf-endpoint {keyed.url} answered GET /v1/models with HTTP 401: "
        "it wants an API key and none was sent; set LLMPERF_API_KEY or --llmperf-api-key "
        "(OPENAI_API_KEY is read when neither is set)")


def test_a_wrong_key_is_named_by_where_it_came_from_never_by_its_value(pytester, monkeypatch,
                                                                       keyed):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-000")
    result = run(pytester, keyed.url)
    assert usage_error(result) == (
        f"pytest-llmperf: --llmperf-endpoint {keyed.url} answered GET /v1/models with HTTP 401: "
        "it refused the API key from $OPENAI_API_KEY; set the right one in LLMPERF_API_KEY or "
        "--llmperf-api-key")
    result = run(pytester, keyed.url, "--llmperf-api-key", "sk-wrong-key-000")
    assert usage_error(result) == (
        f"pytest-llmperf: --llmperf-endpoint {keyed.url} answered GET /v1/models with HTTP 401: "
        "it refused the API key from --llmperf-api-key ($LLMPERF_API_KEY, ini llmperf_api_key); "
        "set the right one there")
    assert leaks(pytester, result, "sk-wrong-key-000") == []


def test_help_never_shows_a_key_from_the_environment(pytester, monkeypatch):
    monkeypatch.setenv("LLMPERF_API_KEY", KEY)
    result = pytester.runpytest("--help")
    assert "--llmperf-api-key=KEY" in result.stdout.str()
    assert KEY not in result.stdout.str() + result.stderr.str()


# ------------------------------------------------------------------ headers and URL forms

def test_headers_of_a_gateway_are_sent_and_secret_ones_never_written(pytester, monkeypatch,
                                                                     gated):
    monkeypatch.setenv("LLMPERF_HEADER", f"X-Gateway-Token: {GATEWAY_TOKEN}\nX-Team: perf")
    result = run(pytester, gated.url, "--llmperf-json", "run.json")
    passed_with_a_row(result)
    assert leaks(pytester, result, GATEWAY_TOKEN) == []


def test_repeated_header_flags_all_go(pytester, gated):
    passed_with_a_row(run(pytester, gated.url, "--llmperf-header", "X-Team: perf",
                          "--llmperf-header", f"X-Gateway-Token: {GATEWAY_TOKEN}"))


def test_a_bad_header_is_refused_without_echoing_it(pytester):
    result = pytester.runpytest("--llmperf-endpoint", "http://127.0.0.1:9", "--llmperf-hardware",
                                "cpu", "--llmperf-header", f"Bearer {GATEWAY_TOKEN}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*error: argument --llmperf-header: expected 'Name: value' (a "
                                 "header name, a colon, its value)"])
    assert GATEWAY_TOKEN not in result.stderr.str()


@pytest.mark.parametrize("tail", ["", "/", "/v1", "/v1/"])
def test_a_base_url_with_or_without_v1_works(pytester, monkeypatch, keyed, tail):
    monkeypatch.setenv("LLMPERF_API_KEY", KEY)
    passed_with_a_row(run(pytester, keyed.url + tail))


def test_user_and_password_in_the_url_are_basic_auth(pytester):
    """(That they are not in the Host header: tests/unit/client/test_access.py.)"""
    basic = base64.b64encode(f"perf:{PASSWORD}".encode()).decode()
    server = MockProcess(0.005, require_headers={"Authorization": f"Basic {basic}"})
    try:
        url = server.url.replace("http://", f"http://perf:{PASSWORD}@")
        result = run(pytester, url, "--llmperf-json", "run.json")
        passed_with_a_row(result)
        assert leaks(pytester, result, PASSWORD, basic) == []
    finally:
        server.stop()


# ------------------------------------------------------------------ the model and the preflight

def test_a_model_the_server_does_not_serve_stops_the_session(pytester, monkeypatch, keyed):
    monkeypatch.setenv("LLMPERF_API_KEY", KEY)
    result = run(pytester, keyed.url, model="llama")
    assert usage_error(result) == (
        f"pytest-llmperf: --llmperf-endpoint {keyed.url} does not serve model 'llama' "
        "(--llmperf-model); it serves 'mock': set --llmperf-model to the name it serves")


def test_without_the_override_each_tests_engine_is_checked(pytester, monkeypatch, keyed):
    monkeypatch.setenv("LLMPERF_API_KEY", KEY)
    pytester.makepyfile(test_suite=SUITE.format(model=str(ARCH)))
    result = pytester.runpytest("-p", "no:cacheprovider", "--llmperf-endpoint", keyed.url,
                                "--llmperf-hardware", "cpu")
    assert usage_error(result) == (
        f"pytest-llmperf: --llmperf-endpoint {keyed.url} does not serve model '{ARCH}' (the "
        "Engine of test_suite.py::test_x); it serves 'mock': set --llmperf-model to the name it "
        "serves")


def test_an_unreachable_endpoint_stops_the_session(pytester):
    url = f"http://127.0.0.1:{free_port()}"
    assert usage_error(run(pytester, url)) == (
        f"pytest-llmperf: cannot reach --llmperf-endpoint {url} (GET {url}/v1/models: "
        "ConnectError: [Errno 111] Connection refused); start the server or fix the URL")


def test_a_url_that_is_no_openai_server_stops_the_session(pytester, keyed):
    url = keyed.url + "/other/v1"  # the mock has no /other/v1/models
    assert usage_error(run(pytester, url)) == (
        f"pytest-llmperf: --llmperf-endpoint {keyed.url}/other answered GET "
        f"{keyed.url}/other/v1/models with HTTP 404 ({{\"error\":\"not found\"}}); give the base "
        "URL of an OpenAI-compatible server (http://host:port, with or without /v1)")


# ------------------------------------------------------------------ TLS

def test_https_with_a_private_ca(pytester, monkeypatch, https, certs):
    monkeypatch.setenv("LLMPERF_API_KEY", KEY)
    result = run(pytester, https.url, "--llmperf-ca-bundle", str(certs.ca))
    passed_with_a_row(result)
    assert "TLS certificate checks were off" not in result.stdout.str()


def test_https_with_the_default_context_trusts_the_system_store(pytester, monkeypatch, https,
                                                                certs):
    """The default context is the system's trust: OpenSSL reads SSL_CERT_FILE for it, as for any
    public CA there."""
    monkeypatch.setenv("LLMPERF_API_KEY", KEY)
    monkeypatch.setenv("SSL_CERT_FILE", str(certs.ca))
    passed_with_a_row(run(pytester, https.url))


def test_an_untrusted_certificate_stops_the_session_with_the_fix(pytester, monkeypatch, https):
    monkeypatch.setenv("LLMPERF_API_KEY", KEY)
    line = usage_error(run(pytester, https.url))
    assert re.fullmatch(
        rf"pytest-llmperf: --llmperf-endpoint {re.escape(https.url)}: its TLS certificate is not "
        rf"trusted \(GET {re.escape(https.url)}/v1/models: ConnectError: \[SSL: "
        r"CERTIFICATE_VERIFY_FAILED\] certificate verify failed: unable to get local issuer "
        r"certificate \(_ssl\.c:\d+\)\); give the CA that signed it with --llmperf-ca-bundle "
        r"PATH, or --llmperf-insecure to skip the check", line), line


def test_insecure_measures_and_says_so_in_the_summary(pytester, monkeypatch, https):
    monkeypatch.setenv("LLMPERF_API_KEY", KEY)
    result = run(pytester, https.url, "--llmperf-insecure")
    passed_with_a_row(result)
    assert (f"TLS certificate checks were off for --llmperf-endpoint {https.url} "
            "(--llmperf-insecure): nothing checked which server answered") in \
        " ".join(result.stdout.str().split())
