"""Llama 3 70B at TP=8 on 8xH200: the H200 guide's expected baselines, each on the precision the
guide's own numbers support (docs/published-numbers.md, H200 guide; docs/gpu-suites.md).

- Latency (TTFT < 100 ms for 512 prompt tokens, TPOT < 20 ms): on BF16, the guide's deployment.
  The guide names no load for them; they are measured at a light one (4 requests in flight).
- Throughput at batch 64: the guide's own BF16 figure is ~12,000 tokens/s, below its target of
  > 15,000, which only its FP8 figure (~22,000, TensorRT-LLM) clears. So BF16 is held to its
  figure (10,000, about a sixth off) and the 15,000 target is asserted on FP8 weights.
  Throughput is output tokens per second, as the guide's benchmark section counts it, with its
  benchmark's shape: 512 prompt tokens, 256 output tokens, 1,000 prompts.
"""

import pytest

from pytest_llmperf import SLO, Workload
from suites.gpu import LLAMA_70B_TP8, LLAMA_70B_TP8_FP8

pytestmark = [pytest.mark.h200, pytest.mark.gpus(8)]

LATENCY_TARGETS = SLO(max={"ttft_s.p50": 0.100, "tpot_s.p50": 0.020})
BF16_THROUGHPUT = SLO(min={"output_throughput_tok_s": 10000})
FP8_THROUGHPUT_TARGET = SLO(min={"output_throughput_tok_s": 15000})


def batch_64() -> Workload:
    """The guide's benchmark (512 in, 256 out, 1,000 prompts) with 64 requests in flight."""
    return Workload.fixed(input_tokens=512, output_tokens=256, num_requests=1000,
                          concurrency=64, warmup_requests=64)


@pytest.mark.engine(LLAMA_70B_TP8)
@pytest.mark.llmperf(slo=LATENCY_TARGETS)
def test_latency_targets_bf16(llmperf):
    llmperf.run(Workload.fixed(input_tokens=512, output_tokens=256, num_requests=64,
                               concurrency=4, warmup_requests=8))


@pytest.mark.engine(LLAMA_70B_TP8)
@pytest.mark.llmperf(slo=BF16_THROUGHPUT)
def test_bf16_throughput_at_batch_64(llmperf):
    llmperf.run(batch_64())


@pytest.mark.engine(LLAMA_70B_TP8_FP8)
@pytest.mark.llmperf(slo=FP8_THROUGHPUT_TARGET)
def test_fp8_throughput_target_at_batch_64(llmperf):
    llmperf.run(batch_64())
