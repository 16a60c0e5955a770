"""Per-request serving paths as users meet them, against the mock server behind
--llmperf-endpoint (pytest_llmperf/clientbench/mockserver.py): a cold prefix cache on a server
that offers no reset (one line, before anything is measured), the run file's "prefix_cache", and
structured outputs the server did not deliver (each a failed request, counted and shown). The
real engine's paths are suites/test_cpu_requests.py's."""

from __future__ import annotations

import json

import httpcore  # noqa: F401  (imported before any in-process run: test_deployment_plugin.py)
import pytest

from tests.conftest import REPO
from tests.plugin.mock_endpoint import CALM, mock_fixture

ARCH = REPO / "suites" / "models" / "tiny-llama-arch"
SUITE = """
import pytest
from dataclasses import replace
from pytest_llmperf import Engine, Workload

WARM = Workload.fixed(input_tokens=8, output_tokens=4, num_requests=6, concurrency=2)
pytestmark = pytest.mark.engine(Engine(model={model!r}))

def test_warm(llmperf):
    llmperf.run(WARM)

def test_cold(llmperf):
    llmperf.run(replace(WARM, prefix_cache="cold", name="cold"))

def test_structured(llmperf):
    llmperf.run(Workload.structured("regex", [r"[0-9]+"], num_requests=6, concurrency=2))
"""


mock = mock_fixture(0.005)


def run(pytester: pytest.Pytester, url: str) -> tuple[pytest.RunResult, dict]:
    pytester.makepyfile(test_suite=SUITE.format(model=str(ARCH)))
    result = pytester.runpytest("-p", "no:cacheprovider", "-v", "--llmperf-endpoint", url,
                                "--llmperf-hardware", "cpu", "--llmperf-model", "mock",
                                "--llmperf-json", "run.json", *CALM)
    document = json.loads((pytester.path / "run.json").read_text())
    entries = {entry["key"]: entry for entry in document["llmperf"]["results"]}
    return result, entries


def test_cold_warm_and_structured_outputs_on_a_server_without_those_paths(pytester, mock):
    result, entries = run(pytester, mock.url)
    result.assert_outcomes(passed=1, failed=2)
    output = " ".join(result.stdout.str().split())
    # cold: the server has no reset route; the line names the fix, and nothing was measured
    assert (f"prefix_cache='cold' needs POST /reset_prefix_cache, and {mock.url} does not offer "
            "it (HTTP 404): vLLM serves it only in dev mode; start the server with "
            "VLLM_SERVER_DEV_MODE=1 (engines the plugin starts have it), or leave prefix_cache "
            "at 'warm'") in output
    assert "test_cold" not in entries
    # warm, the default, is said so in the run file
    assert entries["test_warm"]["prefix_cache"] == "warm"
    assert "prefix_cache" not in entries["test_warm"]["workload"]
    # the mock streams no digits: every output fails its regex, a failed request each
    structured = entries["test_structured"]
    assert structured["failures"] == {"invalid_output": 6}
    assert (structured["structured_outputs"]["invalid"],
            structured["structured_outputs"]["requests"]) == (6, 6)
    assert "6 of 6 requests failed: 6 invalid_output" in output
    assert ("structured outputs (regex, 1 specs): TTFT p50 cold - (0 ok) first request of each "
            "spec, warm - (0 ok) later; 6 of 6 outputs failed their check") in output
    assert "does not match regex spec 0's regex" in output
