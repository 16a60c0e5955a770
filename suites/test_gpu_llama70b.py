"""Llama 3 70B, TP=8 on 8xH200: the targets of the H200 deployment guide.

TTFT (512 input tokens) < 100 ms and TPOT < 20 ms at low batch; > 15,000 output tok/s at
batch 64 (docs/published-numbers.md, H200 guide).
"""

import pytest

from pytest_llmperf import SLO, Workload
from suites.gpu import LLAMA_70B_TP8

pytestmark = [pytest.mark.h200, pytest.mark.gpus(8), pytest.mark.engine(LLAMA_70B_TP8)]


@pytest.mark.llmperf(slo=SLO(max={"ttft_s.p50": 0.100, "tpot_s.p50": 0.020}))
def test_latency_targets(llmperf):
    llmperf.run(Workload.fixed(input_tokens=512, output_tokens=256, num_requests=64,
                               concurrency=4, warmup_requests=8))


@pytest.mark.llmperf(slo=SLO(min={"output_throughput_tok_s": 15000}))
def test_throughput_at_batch_64(llmperf):
    llmperf.run(Workload.fixed(input_tokens=512, output_tokens=512, num_requests=640,
                               concurrency=64, warmup_requests=64))
