"""Llama 3.1 8B on one A100, 80 GB and 40 GB: the Azure study's A100 runs.

`pytest -m a100 suites/` nightly on either card; each test runs on the size it names (the marker
`a100(memory_gb=...)`), baselines in baselines/<a100-80gb|a100-40gb>/. The engine is the study's
A100 setting, max_num_batched_tokens 2048 (suites/gpu.py); the profiles run at
inference-benchmarker's 128 virtual users. docs/gpu-suites.md says what is asserted and why.
"""

import pytest

from pytest_llmperf import Workload
from suites.gpu import LLAMA_8B_A100

pytestmark = pytest.mark.engine(LLAMA_8B_A100)

MEMORY = [pytest.param(80, marks=pytest.mark.a100(memory_gb=80), id="80gb"),
          pytest.param(40, marks=pytest.mark.a100(memory_gb=40), id="40gb")]

# Workload profiles: inference-benchmarker's 128 virtual users, a closed loop.
VIRTUAL_USERS = 128

# Azure study, one GPU: classification's prefix-cache hit rate was ~97% on the 80 GB A100, and
# ~5% on the 40 GB one, whose KV cache could not keep the documents (~116 requests waiting).
# The profile's eight shared documents make ~96% of prompt tokens cacheable: asserted on 80 GB
# with a fifth off; on 40 GB the rate is measured and gated against the baseline only.
HIT_RATE_FLOOR = {(80, "classification"): 0.8}


@pytest.mark.parametrize("memory_gb", MEMORY)
@pytest.mark.parametrize("profile", ["chat", "classification", "code-generation"])
def test_profiles(llmperf, memory_gb, profile):
    result = llmperf.run(Workload.profile(profile, num_requests=256, concurrency=VIRTUAL_USERS,
                                          warmup_requests=16))
    assert result.completed == 256
    floor = HIT_RATE_FLOOR.get((memory_gb, profile))
    if floor is not None:
        assert result.server_metrics["prefix_cache_hit_rate"] > floor
