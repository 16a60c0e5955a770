"""One measurement: a workload's requests through the load generator into a streaming client.

This is the only place the load generator meets HTTP. Warm-up requests go first, on their own,
and are not measured: they take the first-request costs (connection setup, lazy kernels) out of
the numbers.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pytest_llmperf.client import ClientOptions, OpenAIStreamClient
from pytest_llmperf.loadgen import Concurrency, run_load
from pytest_llmperf.records import Request, RequestRecord

WARMUP_CONCURRENCY = 4


@dataclass(frozen=True)
class Endpoint:
    """Where requests go: the server's base URL and the model name it serves."""

    base_url: str
    model: str
    options: ClientOptions = ClientOptions()


def measure(target: Endpoint, requests: list[Request], pattern, *, seed: int,
            warmup: list[Request] = (), duration_s: float | None = None) -> list[RequestRecord]:
    """Run the requests against the target; one record per request that was sent."""
    return asyncio.run(_measure(target, requests, pattern, seed, list(warmup), duration_s))


async def _measure(target: Endpoint, requests, pattern, seed, warmup, duration_s):
    async with OpenAIStreamClient(target.base_url, target.model, target.options) as client:
        if warmup:
            await run_load(warmup, client.send, Concurrency(max_concurrency=WARMUP_CONCURRENCY))
        return await run_load(requests, client.send, pattern, seed=seed, duration_s=duration_s)
