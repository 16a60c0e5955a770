"""A LoRA traffic split as users meet it, against the mock server behind --llmperf-endpoint
(pytest_llmperf/clientbench/mockserver.py, which serves any model name): each request names its
adapter, each adapter and the base model get a row of their own in the -v summary and in the run
file's "by_adapter", and their numbers are gate names of the run. The real engine's path is
suites/test_cpu_lora.py's."""

from __future__ import annotations

import json

import httpcore  # noqa: F401  (imported before any in-process run: test_deployment_plugin.py)

from tests.conftest import REPO
from tests.plugin.mock_endpoint import mock_fixture

ARCH = REPO / "suites" / "models" / "tiny-llama-arch"
SUITE = """
import pytest
from pytest_llmperf import Engine, Workload

pytestmark = pytest.mark.engine(Engine(model={model!r}))

def test_split(llmperf):
    result = llmperf.run(Workload.lora({{"sql": 2, "chat": 1}}, base=1, input_tokens=8,
                                       output_tokens=4, num_requests=8, concurrency=2))
    assert result.value("lora:sql:ttft_s.p50") == result.by_adapter["sql"]["ttft_s.p50"] > 0
"""


mock = mock_fixture(0.005)


def test_each_adapter_and_the_base_model_are_rows_of_their_own(pytester, mock):
    pytester.makepyfile(test_suite=SUITE.format(model=str(ARCH)))
    result = pytester.runpytest("-p", "no:cacheprovider", "-v", "--llmperf-endpoint", mock.url,
                                "--llmperf-hardware", "cpu", "--llmperf-model", "mock",
                                "--llmperf-json", "run.json", "--llmperf-client-check", "warn",
                                "--llmperf-client-workers", "1")
    result.assert_outcomes(passed=1)
    document = json.loads((pytester.path / "run.json").read_text())
    (entry,) = document["llmperf"]["results"]
    rows = entry["by_adapter"]
    assert {name: (row["requests"], row["failed"]) for name, row in rows.items()} == {
        "base": (2, 0), "chat": (2, 0), "sql": (4, 0)}
    assert set(rows["sql"]) == {"requests", "failed", "ttft_s.p50", "ttft_s.mean",
                                "tpot_s.p50", "tpot_s.mean"}
    assert entry["metrics"]["lora:chat:tpot_s.p50"]["value"] == rows["chat"]["tpot_s.p50"]
    output = " ".join(result.stdout.str().split())
    assert "LoRA base: 2 requests, 0 failed; TTFT p50 " in output
    assert "LoRA sql: 4 requests, 0 failed; TTFT p50 " in output
    assert "x base), TPOT p50 " in output
