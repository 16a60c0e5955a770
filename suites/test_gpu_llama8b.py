"""Llama 3.1 8B on one H100 or H200: the Azure study's profiles and MLPerf's interactive limits.

`pytest -m h100 suites/` (or h200) nightly; baselines in baselines/<h100|h200>/.
"""

import pytest

from pytest_llmperf import SLO, ServerScenario, Workload, judge_server, server_workload
from suites.gpu import LLAMA_8B, LLAMA_8B_FP8

pytestmark = [pytest.mark.h100, pytest.mark.h200]

# MLPerf Inference llama3_1-8b-interactive (docs/published-numbers.md, MLPerf), p99.
INTERACTIVE = SLO(max={"ttft_s.p99": 0.5, "tpot_s.p99": 0.03, "error_rate": 0.0})


@pytest.mark.engine(LLAMA_8B)
@pytest.mark.parametrize("profile", ["chat", "classification", "code-generation"])
def test_profiles(llmperf, profile):
    result = llmperf.run(Workload.profile(profile, num_requests=300, rate=16.0,
                                          warmup_requests=16))
    assert result.completed == 300


@pytest.mark.engine(LLAMA_8B)
@pytest.mark.llmperf(slo=INTERACTIVE)
def test_interactive_limits_at_concurrency_16(llmperf):
    llmperf.run(Workload.fixed(input_tokens=1024, output_tokens=128, num_requests=320,
                               concurrency=16, warmup_requests=16))


@pytest.mark.engine(LLAMA_8B)
def test_mlperf_server_scenario(llmperf):
    scenario = ServerScenario.for_model("llama3_1-8b-interactive", 8.0, min_duration_s=60.0)
    base = Workload.fixed(input_tokens=1024, output_tokens=128, num_requests=1, rate=1.0,
                          warmup_requests=16)
    result = llmperf.run(server_workload(scenario, base))
    verdict = judge_server(scenario, result.metrics, records=result.records)
    assert verdict.valid, str(verdict)


@pytest.mark.engine(LLAMA_8B_FP8)
def test_fp8_code_generation(llmperf):
    """FP8 weights and KV cache (the Azure study saw ~38% more code-generation throughput)."""
    result = llmperf.run(Workload.profile("code-generation", num_requests=300, rate=16.0,
                                          warmup_requests=16))
    assert result.completed == 300


@pytest.mark.engine(LLAMA_8B)
def test_offline_throughput(llmperf):
    """Lambda's shape (docs/published-numbers.md, Lambda: 1xH100 8B-FP8 3,400 output tok/s over
    320 prompts)."""
    result = llmperf.offline(Workload.fixed(input_tokens=1024, output_tokens=1024,
                                            num_requests=320, rate=float("inf")))
    assert result.length_mismatches == 0
