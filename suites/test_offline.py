"""The CPU suite, offline: vLLM's in-process engine at full speed (as `vllm bench throughput`).

Collected last on purpose: offline mode stops the server engines to have the machine to itself.
"""

import pytest

from pytest_llmperf import OfflineScenario, Workload, judge_offline, offline_workload
from suites.tiny import CPU_GATED, CPU_TOLERANCE, TINY_CPU

pytestmark = [pytest.mark.cpu, pytest.mark.engine(TINY_CPU),
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE, gate=CPU_GATED)]


@pytest.mark.llmperf(client_check="warn")
def test_mlperf_offline_scenario(llmperf):
    """MLPerf's Offline scenario through the server: 459 queries sent at once (the fewest that
    can pass early stopping, the Server scenario's floor too), VALID when all complete; its
    throughput is what the scenario reports. Opening 459 streams at once keeps one client
    process past the self-check's CPU limit on two cores (a CI run failed on it), and the
    scenario judges completion and throughput, not latency: the self-check warns here."""
    scenario = OfflineScenario(min_queries=459)
    base = Workload.fixed(input_tokens=64, output_tokens=16, num_requests=1, rate=1.0, seed=7)
    result = llmperf.run(offline_workload(scenario, base))
    verdict = judge_offline(scenario, result.metrics)
    assert verdict.valid, str(verdict)
    assert verdict.stats["output_throughput_tok_s"] == result.output_throughput_tok_s


# Nightly: the offline engine is one of its own, about 60 s of the main job on an AMD family 25
# (2026-11-29), where the main job must fit 10 minutes on the slowest CPU (docs/testing.md);
# tests/integration/test_offline.py holds offline mode in CI.
@pytest.mark.nightly
def test_offline_throughput(llmperf):
    """256 prompts, 128 in / 64 out, all at once (an MLPerf-style Offline scenario)."""
    workload = Workload.fixed(input_tokens=128, output_tokens=64, num_requests=256,
                              rate=float("inf"))
    result = llmperf.offline(workload)
    assert result.output_tokens == 256 * 64
    assert result.length_mismatches == 0
