"""The CPU suite, load patterns: real vLLM on the CPU, the project's tiny Llama (random weights).

`pytest -m cpu suites/` runs it anywhere; it is the embedded default and the project's own check
that the whole path (engine, HTTP streaming, load generation, metrics, gate) works. Baselines:
baselines/cpu/test_cpu.toml, with wide bands (this machine's noise; see docs/gate.md).
"""

import math

import pytest

from pytest_llmperf import SLO, Workload
from suites.tiny import CPU_GATED, CPU_TOLERANCE, TINY_CPU

pytestmark = [pytest.mark.cpu, pytest.mark.engine(TINY_CPU),
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE, gate=CPU_GATED)]


def test_fixed_length_concurrency(llmperf):
    """Closed loop: 8 requests in flight, 128 tokens in, 64 out, 4 warm-up requests first."""
    result = llmperf.run(Workload.fixed(input_tokens=128, output_tokens=64, num_requests=64,
                                        concurrency=8, warmup_requests=4))
    assert result.completed == 64
    assert result.output_tokens == 64 * 64
    assert result.ttft_s.p50 < result.e2el_s.p50


def test_poisson_rate(llmperf):
    """Open loop: Poisson arrivals at 8 requests/s, seeded; the client keeps its schedule, by
    the self-check's rule (docs/client.md), whatever the CPU."""
    result = llmperf.run(Workload.fixed(input_tokens=128, output_tokens=64, num_requests=48,
                                        rate=8.0, seed=1, warmup_requests=4),
                         slo=SLO(max={"error_rate": 0.0}))
    assert result.completed == 48
    assert result.client.kept_schedule, f"{result.client.schedule_line()} on {result.machine}"


def test_gamma_bursty_rate(llmperf):
    """Gamma arrivals, burstiness 0.25: the same mean rate, in bursts (vllm bench --burstiness)."""
    result = llmperf.run(Workload.fixed(input_tokens=128, output_tokens=32, num_requests=48,
                                        rate=8.0, burstiness=0.25, seed=2))
    assert result.completed == 48


@pytest.mark.parametrize("strategy", ["linear", "exponential"])
def test_ramp_up(llmperf, strategy):
    """The rate climbs from 2 to 16 requests/s over the run (vllm bench --ramp-up-strategy)."""
    result = llmperf.run(Workload.fixed(input_tokens=64, output_tokens=32, num_requests=48,
                                        ramp=(2.0, 16.0, strategy), seed=3))
    assert result.completed == 48


def test_duration_limit(llmperf):
    """Scheduling stops after 3 s: fewer than the 1000 requests offered at 10/s are sent."""
    result = llmperf.run(Workload.fixed(input_tokens=64, output_tokens=16, num_requests=1000,
                                        rate=10.0, duration_s=3.0, seed=4))
    assert 15 <= result.completed <= 60
    assert not math.isnan(result.ttft_s.p50)
