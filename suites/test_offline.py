"""The CPU suite, offline: vLLM's in-process engine at full speed (as `vllm bench throughput`).

Collected last on purpose: offline mode stops the server engines to have the machine to itself.
"""

import pytest

from pytest_llmperf import Workload
from suites.tiny import CPU_GATED, CPU_TOLERANCE, TINY_CPU

pytestmark = [pytest.mark.cpu, pytest.mark.engine(TINY_CPU),
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE, gate=CPU_GATED)]


def test_offline_throughput(llmperf):
    """256 prompts, 128 in / 64 out, all at once (an MLPerf-style Offline scenario)."""
    workload = Workload.fixed(input_tokens=128, output_tokens=64, num_requests=256,
                              rate=float("inf"))
    result = llmperf.offline(workload)
    assert result.output_tokens == 256 * 64
    assert result.length_mismatches == 0
