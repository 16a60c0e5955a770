"""Server-side metrics from a real vLLM on the CPU: prefix-cache hits and forced preemptions."""

from __future__ import annotations

import asyncio
import os
import time

import httpx
import pytest

from pytest_llmperf.client.server_metrics import ServerMetricsSampler
from pytest_llmperf.engines.server import CPU_ENGINE_NICE, VllmServer
from suites.tiny import TINY_CPU
from tests.conftest import ipc_dir_of, requires_vllm

# Nightly: its lines are all covered by the tests CI runs (docs/testing.md).
pytestmark = [requires_vllm, pytest.mark.nightly]

PROMPT_TOKENS = 300  # over two of the CPU's 128-token cache blocks
OUTPUT_TOKENS = 8
REPEATS = 4
# 4 MiB of KV cache is 4,096 tokens (1 KiB/token, 32 blocks of 128): room for about half of the
# 16 requests below at their full length, so the scheduler must preempt (docs/cpu-engine.md,
# Prefix caching and preemption).
SMALL_KV_BYTES = 4 * 1024 * 1024
# Prompts of 2 blocks each fill all 32 blocks at admission; growing to 4 blocks each forces
# preemptions, with ~3k tokens to generate in all.
PREEMPT_REQUESTS, PREEMPT_PROMPT, PREEMPT_OUTPUT = 16, 256, 192
GONE_TIMEOUT_S = 15


def _group_gone(pgid: int, timeout_s: float = GONE_TIMEOUT_S) -> bool:
    """Nothing of one server's process group is left. Checked by group, not with vllm_processes(),
    because other sessions on the machine may run servers of their own. SIGKILLed workers can take
    a moment to be reaped after stop() returns, hence the wait."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


def _serve(engine, log_dir):
    server = VllmServer(engine, log_dir, nice=CPU_ENGINE_NICE).start()
    pgid = server.process.pid  # its own session: the group id is the API server's pid
    rpc_dir = ipc_dir_of(server.log_path)
    assert any(path.is_socket() for path in rpc_dir.iterdir()), "vLLM's ipc sockets are there"
    try:
        yield server
    finally:
        server.stop()
        assert _group_gone(pgid), f"vLLM processes of group {pgid} outlived stop()"
        assert not rpc_dir.exists(), f"{rpc_dir}: vLLM's ipc sockets outlived stop()"


def _body(prompt: list[int], output_tokens: int) -> dict:
    return {"model": TINY_CPU.model_name, "prompt": prompt, "max_tokens": output_tokens,
            "min_tokens": output_tokens, "ignore_eos": True}


async def _repeat_prompt(base_url: str, prompt: list[int]) -> ServerMetricsSampler:
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        async with ServerMetricsSampler(base_url, http) as sampler:
            for _ in range(REPEATS):
                response = await http.post("/v1/completions", json=_body(prompt, OUTPUT_TOKENS))
                assert response.json()["usage"]["completion_tokens"] == OUTPUT_TOKENS
                await asyncio.sleep(0.3)  # let at least one background sample in
    return sampler


async def _sample_once(base_url: str) -> ServerMetricsSampler:
    async with ServerMetricsSampler(base_url) as sampler:
        pass
    return sampler


def test_repeated_prompt_hits_the_prefix_cache(tiny_server):
    server = tiny_server  # the integration tests' shared engine: its counters are read as deltas
    # A token-id sequence no other test sends (vocabulary: 4,096), so the cache starts cold for it.
    prompt = [1000 + (i * 37) % 3000 for i in range(PROMPT_TOKENS)]
    sampler = asyncio.run(_repeat_prompt(server.base_url, prompt))
    summary = sampler.summary()
    assert sampler.warning is None
    assert summary["samples"] >= REPEATS + 2  # entry, polls during the run, exit
    assert summary["generation_tokens"] == REPEATS * OUTPUT_TOKENS
    assert summary["prompt_tokens"] == REPEATS * PROMPT_TOKENS
    assert summary["prefix_cache_queries"] == REPEATS * PROMPT_TOKENS
    # The first request misses; each repeat hits whole blocks only (256 of 300 tokens on CPU).
    assert 0 < summary["prefix_cache_hits"] <= (REPEATS - 1) * PROMPT_TOKENS
    assert summary["prefix_cache_hit_rate"] == pytest.approx(
        summary["prefix_cache_hits"] / summary["prefix_cache_queries"])
    assert summary["prefix_cache_hit_rate"] > 0
    assert summary["preemptions"] == 0
    assert 0 <= summary["kv_cache_usage_max"] < 0.01  # 308 tokens of a 524k-token cache
    print(f"server metrics for a repeated prompt: {summary}")

    # The same server under a wrong base URL: its 404 becomes a warning, not an exception.
    wrong = asyncio.run(_sample_once(server.base_url + "/v1"))
    assert wrong.summary() == {}
    assert wrong.warning == f"no server metrics: GET {server.base_url}/v1/metrics failed: HTTP 404"


@pytest.fixture
def small_kv_server(tmp_path):
    engine = TINY_CPU.replace(kv_cache_memory_bytes=SMALL_KV_BYTES, max_model_len=2048)
    yield from _serve(engine, tmp_path)


def _distinct_prompt(i: int) -> list[int]:
    # Distinct first blocks, so no two requests share cached blocks and each needs its own KV.
    return [(i * PREEMPT_PROMPT + j) % 4000 + 50 for j in range(PREEMPT_PROMPT)]


async def _flood(base_url: str) -> ServerMetricsSampler:
    async with httpx.AsyncClient(base_url=base_url, timeout=120,
                                 limits=httpx.Limits(max_connections=PREEMPT_REQUESTS)) as http:
        async with ServerMetricsSampler(base_url) as sampler:
            responses = await asyncio.gather(*(
                http.post("/v1/completions", json=_body(_distinct_prompt(i), PREEMPT_OUTPUT))
                for i in range(PREEMPT_REQUESTS)))
    assert [r.status_code for r in responses] == [200] * PREEMPT_REQUESTS
    return sampler


def test_a_tiny_kv_cache_under_load_shows_preemptions(small_kv_server):
    sampler = asyncio.run(_flood(small_kv_server.base_url))
    summary = sampler.summary()
    assert sampler.warning is None
    assert summary["preemptions"] > 0, summary
    assert summary["kv_cache_usage_max"] > 0.5, summary
    assert summary["requests_waiting_max"] > 0, summary
    assert summary["generation_tokens"] == PREEMPT_REQUESTS * PREEMPT_OUTPUT
    print(f"server metrics under a 4 MiB KV cache: {summary}")
