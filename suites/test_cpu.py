"""The CPU suite: real vLLM on the CPU, the project's tiny Llama with random weights.

`pytest -m cpu suites/` runs it anywhere; it is the embedded default and the project's own check
that the whole path (engine, HTTP streaming, load generation, metrics) works.
"""

import pytest

from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

pytestmark = [pytest.mark.cpu, pytest.mark.engine(TINY_CPU)]


def test_fixed_length_concurrency(llmperf):
    """Closed loop: 8 requests in flight, 128 tokens in, 64 out."""
    result = llmperf.run(Workload.fixed(
        input_tokens=128, output_tokens=64, num_requests=64, concurrency=8, warmup_requests=4,
    ))
    assert result.completed == 64
    assert result.output_tokens == 64 * 64
    assert result.ttft_s.p50 < result.e2el_s.p50


def test_poisson_rate(llmperf):
    """Open loop: Poisson arrivals at 8 requests/s, seeded."""
    result = llmperf.run(Workload.fixed(
        input_tokens=128, output_tokens=64, num_requests=48, rate=8.0, seed=1, warmup_requests=4,
    ))
    assert result.completed == 48
    # The client must never be what limits the measurement.
    assert result.queue_s.p99 < 0.05
