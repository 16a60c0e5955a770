"""A second real engine: llama.cpp's OpenAI-compatible server (llama-cpp-python's, installed by
scripts/install-cpu) on the tiny Llama as a GGUF file (scripts/tiny_gguf.py: random weights,
nothing downloaded but llama-cpp-python's own source package), measured through the plugin in
endpoint mode as a user would. The summary has the test's row with TTFT and TPOT, the server is
told as llama.cpp's from its answers, and each thing it could not do is one line under the
summary; at concurrency 2 it cuts streams off, and the summary says why.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from pytest_llmperf.engines.server import free_port
from tests.conftest import REPO

# Skipped only where llama-cpp-python is not installed; in CI (CI=true), which runs
# scripts/install-cpu first, a missing one fails loudly instead (as tests/conftest.py does for
# vLLM).
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None and not os.environ.get("CI"),
    reason="llama-cpp-python is not installed (scripts/install-cpu installs its llamacpp extra)")

START_TIMEOUT_S = 120.0
TITLE = "'🦙 llama.cpp Python API'"
SUITE = """
import pytest
from pytest_llmperf import Workload
from suites.tiny import TINY_CPU  # names the tokenizer the prompts are counted with

@pytest.mark.cpu
@pytest.mark.engine(TINY_CPU)
def test_llamacpp(llmperf):
    llmperf.run(Workload.fixed(input_tokens=32, output_tokens=16, num_requests={n},
                               concurrency={concurrency}))
"""


@pytest.fixture(scope="module")
def llamacpp_server(tiny_gguf, tmp_path_factory):
    """`python -m llama_cpp.server` on the tiny GGUF, at its defaults; its base URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("llamacpp-server") / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(tiny_gguf),
             "--host", "127.0.0.1", "--port", str(port)], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n"
                        f"{log.read_text(errors='replace')[-3000:]}")
        try:
            if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    pytest.fail(f"llama_cpp.server not ready in {START_TIMEOUT_S:g} s; log: {log}")


def measure(pytester: pytest.Pytester, monkeypatch, url: str, model: Path, n: int,
            concurrency: int) -> pytest.RunResult:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_suite=SUITE.format(n=n, concurrency=concurrency))
    return pytester.runpytest_subprocess(
        # `--flag=PATH` in one argument: pytest takes a separate argument naming an existing
        # path as a place to find its rootdir, which would be this repository
        "-p", "no:cacheprovider", "--llmperf-endpoint", url, f"--llmperf-model={model}",
        "--llmperf-hardware", "cpu", "--llmperf-summary", "full",
        # the server and the client share 2 cores here: a lagging client warns, not fails
        "--llmperf-client-check", "warn", timeout=300)


def columns(lines: list[str], test: str) -> dict[str, str]:
    """The summary row of `test`, by column header (the dashes under the header mark each
    column's span)."""
    rule = next(i for i, line in enumerate(lines) if line.startswith("----"))
    spans = [match.span() for match in re.finditer(r"-+", lines[rule])]
    row = next(line for line in lines if line.split() and line.split()[0].endswith(test))
    return {lines[rule - 1][a:b].strip(): row[a:b].strip() for a, b in spans}


def test_llamacpp_server_is_measured_and_what_it_cannot_do_is_said(
        pytester, monkeypatch, llamacpp_server, tiny_gguf):
    result = measure(pytester, monkeypatch, llamacpp_server, tiny_gguf, n=6, concurrency=1)
    result.assert_outcomes(passed=1)
    lines = result.stdout.lines
    assert f"rootdir: {pytester.path}" in lines  # its baselines and history stay in there
    row = columns(lines, "test_llamacpp")
    assert (row["ok"], row["fail"]) == ("6", "0"), result.stdout.str()
    assert float(row["TTFT p50"]) > 0 and float(row["TPOT p50"]) > 0, row
    test = "test_suite.py::test_llamacpp"
    assert f"--llmperf-endpoint {llamacpp_server} is llama.cpp's server (GET /openapi.json: " \
           f"title {TITLE})" in lines
    assert (f"{test}: llama.cpp's server takes no token-id prompts: they went as text of the "
            "same length (counted with the test's tokenizer; the server adds its BOS token)"
            ) in lines
    result.stdout.re_match_lines([
        rf"^{test}: output lengths not forced \(llama.cpp's server takes no "
        r"min_tokens/ignore_eos\): (6 of 6 requests reached max_tokens|"
        r"[1-6] of 6 requests ended before max_tokens)$"])
    assert (f"{test}: no usage chunk in 6 of 6 streams (llama.cpp's server ignores "
            "stream_options.include_usage): output tokens are counted as one per streamed "
            "chunk before the finishing one") in lines
    assert f"no server metrics: GET {llamacpp_server}/metrics failed: HTTP 404" in lines


def test_llamacpp_server_cuts_concurrent_streams_and_the_summary_says_why(
        pytester, monkeypatch, llamacpp_server, tiny_gguf):
    result = measure(pytester, monkeypatch, llamacpp_server, tiny_gguf, n=8, concurrency=2)
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([
        r"^test_suite.py::test_llamacpp: [1-8] of 8 streams were cut off with up to 2 requests "
        r"in flight: llama-cpp-python's server ends a stream when another request arrives "
        r"unless started with --interrupt_requests False \(requests then wait their turn\); or "
        r"measure it at concurrency 1$"])
