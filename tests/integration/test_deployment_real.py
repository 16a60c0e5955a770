"""A real vLLM deployment behind an API key (`--api-key`, as `vllm serve` takes it), measured
through the plugin as a user would (docs/deployments.md): with the key the session passes and the
summary shows its row; without it the preflight stops the session with one line before any
test; and the key is in no file the sessions leave and in no line they print."""

from __future__ import annotations

import pytest

from pytest_llmperf.engines.server import CPU_ENGINE_NICE, VllmServer
from suites.tiny import TINY_CPU
from tests.conftest import REPO, requires_vllm

# Alone on the machine: a disturbed run writes no baseline, and this test looks for the key
# in the baseline file too.
pytestmark = requires_vllm

KEY = "sk-real-vllm-planted-4242"
SUITE = """
import pytest
from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

@pytest.mark.cpu
@pytest.mark.engine(TINY_CPU)
def test_keyed(llmperf):
    result = llmperf.run(Workload.fixed(input_tokens=32, output_tokens=16, num_requests=12,
                                        concurrency=4))
    assert result.output_tokens == 12 * 16
    assert result.server_metrics["generation_tokens"] == 12 * 16  # /metrics was read
"""


@pytest.fixture(scope="module")
def keyed_vllm(tmp_path_factory):
    """TINY_CPU started as `vllm serve --api-key KEY` would be: /v1 wants the key. Its log (vLLM
    prints its arguments) stays outside the pytester directories checked for the key."""
    engine = TINY_CPU.replace(extra_args={"api-key": KEY})
    server = VllmServer(engine, tmp_path_factory.mktemp("keyed-engine"), nice=CPU_ENGINE_NICE,
                        separate_control=True).start()
    try:
        yield server
    finally:
        server.stop()


def run(pytester: pytest.Pytester, url: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--llmperf-endpoint", url, "--llmperf-hardware", "cpu",
        # the engine and the client share 2 cores here: a lagging client warns, not fails
        "--llmperf-client-check", "warn", "--llmperf-json", "run.json",
        "--llmperf-markdown", "report.md", "--llmperf-update-baselines", timeout=300)


def test_a_keyed_vllm_is_measured_with_its_key_and_refused_without(pytester: pytest.Pytester,
                                                                   monkeypatch, keyed_vllm):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    pytester.makepyfile(test_deployment=SUITE)
    url = keyed_vllm.base_url + "/v1"  # as an OpenAI client's base_url is written

    monkeypatch.setenv("LLMPERF_API_KEY", KEY)
    measured = run(pytester, url)
    measured.assert_outcomes(passed=1)
    assert [line for line in measured.stdout.lines if line.startswith("  test_keyed ")], \
        measured.stdout.str()

    monkeypatch.delenv("LLMPERF_API_KEY")
    refused = run(pytester, url)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in refused.stderr.lines if line.startswith("ERROR: ")] == [
        f"ERROR: pytest-llmperf: --llmperf-endpoint {keyed_vllm.base_url} answered GET /v1/models "
        "with HTTP 401: it wants an API key and none was sent; set LLMPERF_API_KEY or "
        "--llmperf-api-key (OPENAI_API_KEY is read when neither is set)"]

    files = [path for path in sorted(pytester.path.rglob("*")) if path.is_file()]
    assert (pytester.path / "baselines" / "cpu" / "test_deployment.toml") in files
    assert [str(path) for path in files if KEY.encode() in path.read_bytes()] == []
    for result in (measured, refused):
        assert KEY not in result.stdout.str() + result.stderr.str()
