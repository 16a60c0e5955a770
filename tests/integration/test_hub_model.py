"""The README's first test, with its model named by a Hugging Face Hub id, on the real CPU engine:
the prompts' tokenizer and vLLM both find `acme/tiny-llama` in an offline Hugging Face cache
(tests/hub_cache.py), and nothing is downloaded. One engine start."""

from __future__ import annotations

import pytest

from tests.conftest import leftover_vllm_processes, requires_vllm
from tests.hub_cache import tiny_llama_hub

# What runs, not how fast: beside other tests (tests/integration/conftest.py). CI's real-engine
# test of a Hub id since 2026-11-29: the upgrade gate's early-stop A/B, which names its model by
# the same id, is nightly (two engine starts against this one: docs/testing.md).
pytestmark = [requires_vllm, pytest.mark.shares_machine]

# suites/tiny.py's TINY_CPU settings, spelled out: only the model's name differs.
SUITE = """
import pytest
from pytest_llmperf import SLO, Engine, Workload
from suites.tiny import KV_CACHE_BYTES

TINY = Engine(model="acme/tiny-llama", load_format="dummy", max_model_len=2048,
              kv_cache_memory_bytes=KV_CACHE_BYTES, enforce_eager=True,
              env={"VLLM_CPU_OMP_THREADS_BIND": "0"})

@pytest.mark.engine(TINY)
@pytest.mark.llmperf(slo=SLO(max={"ttft_s.p90": 30.0}, min={"output_throughput_tok_s": 1}))
def test_tiny_chat(llmperf):
    result = llmperf.run(Workload.fixed(input_tokens=32, output_tokens=8, num_requests=8,
                                        concurrency=2))
    assert result.completed == 8
"""


def test_a_hub_id_in_the_cache_is_served_and_measured(pytester: pytest.Pytester, monkeypatch):
    # HF_HOME and HF_HUB_OFFLINE=1 in os.environ, which the engine's processes inherit.
    tiny_llama_hub(pytester.path / "hf-home", monkeypatch)
    pytester.makepyfile(test_suite=SUITE)
    logs = pytester.path / "logs"
    result = pytester.runpytest("-p", "no:cacheprovider", "--llmperf-log-dir", str(logs),
                                "--llmperf-client-check", "warn")
    result.assert_outcomes(passed=1)
    [log] = logs.glob("vllm-*.log")
    text = log.read_text(errors="replace")
    assert text.startswith("$ ") and "--model acme/tiny-llama " in text.splitlines()[0]
    assert "POST /v1/completions" in text
    assert leftover_vllm_processes() == []
